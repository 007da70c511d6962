"""`make stability ARCHIVES=…`'s second half on runs with a known answer: which run pairs lie beyond their joint
interval (per interval family), which claims can flip and how often they did, a run that reused a stage's data and
a server whose build changed between runs."""

import numpy as np
import polars as pl
import pytest

from pglab.report import calibration as cal


def _run(folder, ratios: list[float], width: float = 0.02, method: str = "fast mode: …, n=10", skipped=False):
    folder.mkdir(parents=True)
    n = len(ratios)
    pl.DataFrame(
        {
            "server": ["pg17"] * n,
            "query": [f"q{i}" for i in range(n)],
            "ratio": ratios,
            "low": [r * (1 - width) for r in ratios],
            "high": [r * (1 + width) for r in ratios],
            "coverage": [0.95] * n,
            "method": [method] * n,
        }
    ).write_csv(folder / "x_paired.csv")
    pl.DataFrame({"server": ["pg17"], "skipped": [skipped]}).write_csv(folder / "ssb_load.csv")
    return folder


def test_pairs_beyond_their_joint_interval_per_family(tmp_path):
    # ±2 % intervals (se ≈ 1 % each, joint ≈ 1.4 %): 1 % apart is within, 5 % apart is beyond
    a = _run(tmp_path / "a", [1.0, 1.0, 1.0, 1.0])
    b = _run(tmp_path / "b", [1.01, 0.99, 1.05, 1.0])
    c = _run(tmp_path / "c", [1.0, 1.0, 1.0, 1.0], method="min–max, n=5", skipped=True)
    got = cal.calibration({"a": a, "b": b}).rows(named=True)
    assert got == [{"family": "fast mode, 10 rounds", "pairs": 4, "beyond": 1, "share": 0.25}]
    # another family on one side: each pair counts under the first run's method
    assert cal.calibration({"a": a, "c": c})["beyond"].to_list() == [0]
    assert cal.reused(a) == [] and cal.reused(c) == ["SSB load reused on pg17 (the clusters already held the data)"]
    assert cal.family("95 % bootstrap over rounds, n=15") == "paired bootstrap, 15 rounds"


def test_flip_probability_counts_only_claims_that_can_flip():
    def found(v1: str, v2: str, v3: str) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "study": ["S1", "S1", "S9"],
                "finding": ["jit", "answers", "big"],
                "server": ["pg17"] * 3,
                "verdict": [v1, v2, v3],
                "our_low": [0.8, 1.0, None],
                "our_high": [0.9, 1.0, None],
            }
        )

    runs = {
        "a": found("supported", "supported", "not testable here"),
        "b": found("contradicted", "supported", "not testable here"),
        "c": found("supported", "supported", "not testable here"),
    }
    t = cal.flip_table(runs).sort("finding")
    assert t.select("finding", "flippable", "flips", "severe").rows() == [
        ("answers", False, 0, 0),
        ("big", False, 0, 0),
        ("jit", True, 2, 2),
    ]  # an exact check, never tested, flips
    assert t.filter(finding="jit")["flip_probability"][0] == 2 / 3
    text = cal.summary_text(runs, {})
    assert "flippable claims: 1 of 3" in text and "1 of 3 the same (33.3%)" in text and "severe flips" in text


def test_agreement_is_printed_per_pair_with_each_runs_host(tmp_path):
    """Issue 30's mark is per pair, so each pair's agreement over the claims that can flip is printed, with whether
    the two runs shared a boot (the machine's start time each run recorded) and each run's clock read cost."""

    def found(v1: str, v2: str) -> pl.DataFrame:
        return pl.DataFrame(
            {"study": ["S4"] * 2, "finding": ["avg", "count"], "server": ["pg15"] * 2, "verdict": [v1, v2]}
        )

    runs = {"a": found("undetermined", "contradicted"), "b": found("contradicted", "contradicted")}
    runs["c"] = found("undetermined", "contradicted")
    folders = {}
    for name, ns, booted in (
        ("a", 30.4, "2026-11-27 01:00 UTC"),
        ("b", 21.2, None),
        ("c", 29.8, "2026-11-27 01:00 UTC"),
    ):
        d = tmp_path / name
        d.mkdir()
        pl.DataFrame({"server": ["pg15", "pg18"], "per_loop_ns": [ns, ns + 1.0]}).write_csv(
            d / "environment_timing.csv"
        )
        keys = ["cpu_model"] + (["booted_utc"] if booted else [])
        pl.DataFrame({"key": keys, "value": ["AMD EPYC"] + ([booted] if booted else [])}).write_csv(
            d / "environment_machine.csv"
        )
        folders[name] = d
    t = cal.pair_agreement(runs)
    assert t.rows() == [("a", "b", 1, 2), ("a", "c", 2, 2), ("b", "c", 1, 2)]
    assert cal.host(folders["a"]) == {"clock_ns": 30.9, "booted_utc": "2026-11-27 01:00 UTC"}
    text = cal.summary_text(runs, folders)
    assert "  a: clock read 31 ns, booted 2026-11-27 01:00 UTC" in text
    assert "  b: clock read 22 ns, booted when: not recorded" in text
    assert "  a vs b: 1 of 2 (50.0%); boots not recorded" in text
    assert "  a vs c: 2 of 2 (100.0%); one boot" in text


def test_the_machine_record_says_when_it_last_started():
    """The run's machine row carries the boot time (/proc/stat's btime), before the run began."""
    from pglab.pgtools import environment

    m = environment.machine()
    assert m["booted_utc"] is not None and m["booted_utc"].endswith(" UTC")
    assert m["booted_utc"] <= m["captured_utc"]


def test_a_server_built_otherwise_between_runs_is_named(tmp_path):
    """The same name on another build (a new Debian upload of 18 between runs) is named with what differed; a
    server whose version, toolchain and source repeat is not."""
    runs = {}
    for run, version in (("a", "18.6"), ("b", "18.6"), ("c", "18.7")):
        d = tmp_path / run
        d.mkdir()
        pl.DataFrame(
            {
                "server": ["pg15", "pg18llvm", "pg18llvm_c2"],
                "version": ["15.18", version, version],
                "build": ["gcc 12.2, -O2, LLVM 14"] * 3,
                "built_from": [
                    None,
                    f"Debian source postgresql-18 {version}-1",
                    f"Debian source postgresql-18 {version}-1",
                ],
                "cluster_dir": [f"/x/{run}/1", f"/x/{run}/2", f"/x/{run}/3"],  # differs every run: not the build
            }
        ).write_csv(d / "environment_servers.csv")
        runs[run] = d
    got = cal.builds_differ(runs)
    assert [g.split(" ")[0] for g in got] == ["pg18llvm", "pg18llvm_c2"]
    assert "a, b: 18.6 / gcc 12.2, -O2, LLVM 14 / Debian source postgresql-18 18.6-1" in got[0]
    assert "c: 18.7 / " in got[0]
    assert cal.builds_differ({"a": runs["a"], "b": runs["b"]}) == []
    assert "pg18llvm was built otherwise between runs" in cal.summary_text({}, runs)


def test_priors_are_the_root_mean_variance_of_the_runs_own_estimates(tmp_path):
    """make stability prints core.cluster_priors' literal: per table and server the root mean of the runs' own
    between-cluster variances (cluster_sd_run, else cluster_sd), pgbench's shared one per experiment as "*"."""
    folders = {}
    for run, (a, b, shared) in {"r1": (0.0, 0.02, 0.01), "r2": (0.06, 0.02, 0.03)}.items():
        f = tmp_path / run
        f.mkdir()
        pl.DataFrame({"server": ["pg15", "pg15", "pg16"], "cluster_sd": [a, a, b]}).write_csv(f / "ssb_paired.csv")
        t = pl.DataFrame({"what": ["load time"], "server": ["pg12"], "cluster_sd": [0.5], "cluster_sd_run": [shared]})
        t.write_csv(f / "pgbench_paired.csv")
        # auto_explain's quantities: the run's own sd, not the one its prior moderated
        own = {"r1": "9.0 % (df 4: this run's 0.0 % with the prior 10.4 % of 3 archived runs)", "r2": "12.0 % (df 1)"}
        ev = f"Our 30 ns per row [17–51] (pooled: between-cluster sd of the quantities {own[run]})"
        pl.DataFrame({"finding": ["analyze_count"], "server": ["pg15"], "evidence": [ev]}).write_csv(
            f / "auto_explain_findings.csv"
        )
        folders[run] = f
    got = {(r["table"], r["server"]): r["prior"] for r in cal.priors(folders).iter_rows(named=True)}
    assert got == {
        ("pgbench_paired:load time", "*"): pytest.approx((0.01**2 / 2 + 0.03**2 / 2) ** 0.5),
        ("ssb_paired", "pg15"): pytest.approx((0.06**2 / 2) ** 0.5),
        ("ssb_paired", "pg16"): pytest.approx(0.02),
        ("auto_explain_quantities", "pg15"): pytest.approx((0.12**2 / 2) ** 0.5),
    }
    assert '("ssb_paired", "pg15"): 0.0424,  # 0.0%, 6.0%' in cal.priors_text(folders)


def test_spreads_are_how_far_each_pooled_figure_moved_between_the_runs(tmp_path):
    """make stability prints core.cluster_priors.SPREADS: per table the pooled variance of each comparison's log
    ratio across the runs that hold it (every server; a comparison two runs hold counts with 1 df, one that a
    single run holds not at all); rows of one cluster (an external server) and A/A copies are left out; auto_explain's
    quantities are its findings' own figures, whatever their unit ("1.40×" too)."""
    folders = {}
    ratios = {"r1": (1.0, 2.0, 5.0, 1.5), "r2": (1.1, 2.0, 9.0, 1.8), "r3": (1.2, 2.2, None, None)}
    for run, (a, b, c, d) in ratios.items():
        f = tmp_path / run
        f.mkdir()
        rows = {
            "server": ["pg15", "pg16", "lab", "pg17", "pg15", "pg18"],
            "mode": ["parallel", "parallel", "parallel", "parallel", "parallel_aa", "parallel"],
            "ratio": [a, b, c or 3.0, d or 1.0, {"r1": 0.5, "r2": 2.0, "r3": 1.0}[run], 1.3],
            "n_clusters": [2, 2, 1, 2 if d else 1, 2, 2 if run == "r1" else 1],
        }
        pl.DataFrame(rows).write_csv(f / "ssb_paired.csv")
        evidence = "Our {} [0.4–4.6] (min–max, n=5; pooled: between-cluster sd of the quantities 9.0 % (df 4))"
        pl.DataFrame(
            {
                "finding": ["analyze_serial_vs_parallel", "analyze_count", "logging_analyze"],
                "server": ["pg15", "pg15", "pg15"],
                "evidence": [evidence.format(f"{a * 1.4:.2f}×"), evidence.format(f"{b * 30:g} ns per row"), "Our 0.9×"],
                "our_value": [a * 1.4, None, 0.9],  # a quantity's own figure only in its evidence
            }
        ).write_csv(f / "auto_explain_findings.csv")
        folders[run] = f
    got = {r["table"]: r for r in cal.spreads(folders).iter_rows(named=True)}
    va = np.var(np.log([1.0, 1.1, 1.2]), ddof=1)
    vb = np.var(np.log([2.0, 2.0, 2.2]), ddof=1)
    vd = np.var(np.log([1.5, 1.8]), ddof=1)  # pg17: two runs, one df
    expect = ((2 * va + 2 * vb + vd) / 5) ** 0.5
    assert got["ssb_paired"] == {"table": "ssb_paired", "spread": pytest.approx(expect), "df": 5}
    quantities = ((2 * va + 2 * vb) / 4) ** 0.5  # log(1.4 a) and log(30 b) move as log a and log b
    assert got["auto_explain_quantities"]["spread"] == pytest.approx(quantities)
    assert got["auto_explain_quantities"]["df"] == 4
    assert '"ssb_paired": (' in cal.spreads_text(folders)

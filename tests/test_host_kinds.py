"""Priors and re-run floors per host kind (methodology rule 15, `pglab.core.stats.hosts`, `core.cluster_priors.KINDS`):
a spread measured on one kind never widens a run's interval on another; a kind with no archived run gets the
declared prior, no floor, and says so."""

import math

import polars as pl
import pytest

from pglab.core.stats import between_runs, cluster_priors, hosts
from pglab.report import calibration as cal

XEON, EPYC = "Intel(R) Xeon(R) Processor", "AMD EPYC"


def test_a_kind_is_the_cpu_the_clock_source_and_a_clock_read_within_twelve_percent():
    xeon, epyc = hosts.host(XEON, "tsc", 21.3), hosts.host(EPYC, "tsc", 32.1)
    assert xeon.label == "Intel(R) Xeon(R) Processor · tsc · 21 ns"
    assert epyc.same_kind(hosts.host(EPYC, "tsc", 32.6)) and epyc.same_kind(hosts.host(EPYC, "tsc", 30.3))
    assert not epyc.same_kind(hosts.host(EPYC, "tsc", 26.0))  # the third kind: 26 ns
    assert not xeon.same_kind(hosts.host(EPYC, "tsc", 21.3)) and not xeon.same_kind(hosts.host(XEON, "hpet", 21.3))
    assert hosts.host(EPYC, "tsc", None) is None and hosts.host(None, "tsc", 21.0) is None


def _run(folder, cpu: str, clock_ns: float, ratios: list[float]):
    folder.mkdir(parents=True)
    pl.DataFrame({"key": ["cpu_model", "clocksource"], "value": [cpu, "tsc"]}).write_csv(
        folder / "environment_machine.csv"
    )
    pl.DataFrame({"server": ["pg15", "pg15_c2"], "per_loop_ns": [clock_ns, clock_ns + 0.2]}).write_csv(
        folder / "environment_timing.csv"
    )
    n = len(ratios)
    pl.DataFrame(
        {"server": ["pg17"] * n, "query": [f"q{i}" for i in range(n)], "ratio": ratios, "n_clusters": [2] * n}
    ).write_csv(folder / "ssb_paired.csv")
    return folder


def test_spreads_are_estimated_per_kind_from_a_synthetic_archive_set_of_two_kinds(tmp_path):
    # on each kind the figures move ~1 % between runs; between the kinds they sit 10 % apart
    runs = {
        "x1": _run(tmp_path / "x1", XEON, 21.0, [1.00, 2.00]),
        "x2": _run(tmp_path / "x2", XEON, 20.6, [1.01, 2.02]),
        "x3": _run(tmp_path / "x3", XEON, 21.4, [0.99, 1.98]),
        "e1": _run(tmp_path / "e1", EPYC, 31.0, [1.10, 2.20]),
        "e2": _run(tmp_path / "e2", EPYC, 32.5, [1.11, 2.22]),
    }
    kinds = cal.by_kind(runs)
    assert {k: list(v) for k, v in kinds.items()} == {
        "Intel(R) Xeon(R) Processor · tsc · 21 ns": ["x1", "x2", "x3"],
        "AMD EPYC · tsc · 32 ns": ["e1", "e2"],
    }
    pooled = cal.spreads(runs)["spread"][0]
    per_kind = {k: cal.spreads(v)["spread"][0] for k, v in kinds.items()}
    assert pooled > 0.04  # across kinds the host difference reads as a spread
    assert all(s < 0.015 for s in per_kind.values())  # within a kind, the runs' own
    text = cal.kinds_text(runs)
    assert "host=hosts.Host('AMD EPYC', 'tsc', 31.9)" in text and "runs=('e1', 'e2')" in text


def _paired_with_clusters() -> pl.DataFrame:
    """One comparison measured on two clusters of pg17 (ratio, a ±1 % within-run interval each)."""
    rows = {
        "server": ["pg17", "pg17_c2"],
        "query": ["q1", "q1"],
        "n_rounds": [5, 5],
        "ratio": [0.90, 0.91],
        "low": [0.89, 0.90],
        "high": [0.91, 0.92],
        "coverage": [0.89, 0.89],
        "method": ["fast mode: 10 % quantile of every execution, 89 % bootstrap over rounds, n=5"] * 2,
    }
    return pl.DataFrame(rows)


def test_the_floor_is_the_measuring_kinds_and_another_kind_says_it_has_none(monkeypatch):
    quiet_host, noisy_host = hosts.host(XEON, "tsc", 21.0), hosts.host(EPYC, "tsc", 32.0)
    quiet = cluster_priors.HostKind(quiet_host, ("x1", "x2", "x3"), {("t", "pg17"): 0.01}, {"t": (0.01, 8)})
    noisy = cluster_priors.HostKind(noisy_host, ("e1", "e2", "e3"), {("t", "pg17"): 0.01}, {"t": (0.08, 8)})
    monkeypatch.setattr(cluster_priors, "KINDS", [quiet, noisy])
    monkeypatch.setitem(cluster_priors.PRIORS, ("t", "pg17"), 0.05)

    def pooled(kind):
        with hosts.using(kind):
            prior = cluster_priors.priors("t")
        row = between_runs.pool_clusters(_paired_with_clusters(), ["query"], priors=prior).row(0, named=True)
        return prior["pg17"], row

    own = hosts.host(EPYC, "tsc", 26.0)  # a user's machine: a kind no archived run was made on
    (pq, q), (pn, n), (po, o) = (
        pooled(hosts.host(XEON, "tsc", 21.4)),
        pooled(hosts.host(EPYC, "tsc", 31.5)),
        pooled(own),
    )
    assert (pq.spread, pn.spread, po.spread) == (0.01, 0.08, 0.0)
    assert math.log(n["high"] / n["low"]) > 2 * math.log(q["high"] / q["low"])  # the other kind never widens
    assert "spread over 3 archived runs (sd 1.0 %)" in q["method"]
    assert po.sd == pytest.approx(0.05) and "no archived run of this host kind" in o["method"]
    assert hosts.current() is None  # every `using` restored the outer kind


def test_a_quantity_of_another_design_takes_no_prior_or_floor_of_the_archived_one(monkeypatch):
    """Rule 15, per quantity: the archived runs measured S1's default JIT at SF 10 ("ssb_paired:jit"); the forced JIT
    block at SF 1 ("ssb_paired:jit_forced") has no archived run, so it is shrunk toward the kind's SF-1 parallel
    rows pooled (like quantities), with no re-run floor, and says so; the parallel rows keep their own."""
    host = hosts.host(EPYC, "tsc", 32.0)
    kind = cluster_priors.HostKind(
        host,
        ("e1", "e2", "e3"),
        {("ssb_paired", "pg16"): 0.03, ("ssb_paired", "pg17"): 0.04, ("ssb_paired:jit", "pg15"): 0.20},
        {"ssb_paired": (0.02, 60), "ssb_paired:jit": (0.09, 60)},
    )
    monkeypatch.setattr(cluster_priors, "KINDS", [kind])
    assert cluster_priors.quantity("ssb_paired", "parallel_jit_forced_net") == "ssb_paired:jit_forced"
    assert cluster_priors.quantity("ssb_paired", "parallel_jit") == "ssb_paired:jit"
    assert cluster_priors.quantity("ssb_paired", "parallel") == "ssb_paired"
    with hosts.using(host):
        forced, parallel = cluster_priors.priors("ssb_paired:jit_forced"), cluster_priors.priors("ssb_paired")
    assert not forced and forced.default is not None  # no server has an entry of this design: the default
    d = forced.default
    assert d.sd == pytest.approx(0.05 / math.sqrt(2)) and d.runs == 3 and d.spread == 0.0
    assert parallel["pg16"].spread == 0.02 and "pg15" not in parallel and parallel.default is None
    with hosts.using(host):  # S1's default JIT: pg15's own entry, and the like default for a server without one
        jit = cluster_priors.priors("ssb_paired:jit")
    assert jit["pg15"].sd == 0.20 and jit["pg15"].spread == 0.09 and jit.default.sd == pytest.approx(d.sd)
    row = between_runs.pool_clusters(
        _paired_with_clusters().with_columns(server=pl.Series(["pg15", "pg15_c2"])), ["query"], priors=forced
    ).row(0, named=True)
    assert "no archived run of this design" in row["method"] and row["floor_sd"] is None
    assert row["cluster_sd"] < 0.05  # shrunk toward the like quantity's 3.5 %, not the SF-10 block's 20 %


def test_calibration_keys_a_split_tables_rows_by_quantity_and_reads_an_empty_pooled_column(tmp_path):
    """A derived ssb_paired whose JIT rows and parallel rows are two quantities; its run_sd column empty in this
    run (read as text): the figures still count, each under its quantity's name."""
    folder = tmp_path / "r"
    folder.mkdir()
    pl.DataFrame(
        {
            "server": ["pg15", "pg15", "pg17"],
            "query": ["q1.1", "q1.1", "q1.1"],
            "mode": ["parallel_jit_forced", "parallel_jit_forced_net", "parallel"],
            "ratio": [0.8, 0.79, 0.6],
            "n_clusters": [2, 2, 2],
            "cluster_sd_run": [0.02, 0.02, 0.01],
            "run_sd": [None, None, None],
        },
        schema_overrides={"run_sd": pl.String},
    ).write_csv(folder / "ssb_paired.csv")
    figures = cal.pooled_figures(folder)
    assert figures["table"].to_list() == ["ssb_paired:jit_forced", "ssb_paired:jit_forced", "ssb_paired"]
    sds = cal.cluster_sds(folder)
    assert set(zip(sds["table"], sds["server"], strict=True)) == {
        ("ssb_paired:jit_forced", "pg15"),
        ("ssb_paired", "pg17"),
    }


def test_s2s_interleaved_design_gets_its_declared_prior_not_the_separate_runs_ones(monkeypatch, tmp_path):
    """S2's ratios measured interleaved (one pgbench run for every condition) are a design no archived run has
    measured: on a kind whose archived runs measured each condition in a run of its own, the interleaved rows get
    the declared prior (no re-run floor, said so), the separate-run rows keep the kind's; calibration keys a
    folder's quantities by the design its ratio table names."""
    host = hosts.host(EPYC, "tsc", 32.0)
    kind = cluster_priors.HostKind(
        host,
        ("e1", "e2", "e3"),
        {("auto_explain_ratios", "pg15"): 0.12, ("auto_explain_quantities", "pg15"): 0.14},
        {"auto_explain_ratios": (0.07, 64)},
    )
    monkeypatch.setattr(cluster_priors, "KINDS", [kind])
    assert cluster_priors.quantity("auto_explain_ratios", "interleaved") == "auto_explain_ratios:interleaved"
    assert cluster_priors.quantity("auto_explain_ratios", "separate runs") == "auto_explain_ratios"
    with hosts.using(host):
        old, new = (
            cluster_priors.priors("auto_explain_ratios"),
            cluster_priors.priors("auto_explain_ratios:interleaved"),
        )
        quantities = cluster_priors.priors("auto_explain_quantities:interleaved")
    assert old["pg15"].sd == 0.12 and old["pg15"].spread == 0.07
    assert not new and new.default.sd == cluster_priors.DECLARED["auto_explain_ratios:interleaved"] < 0.12
    assert new.default.spread == 0.0 and "declared prior" in new.default.note
    assert quantities.default.sd == cluster_priors.DECLARED["auto_explain_quantities:interleaved"]
    row = between_runs.pool_clusters(
        _paired_with_clusters().with_columns(server=pl.Series(["pg15", "pg15_c2"])), ["query"], priors=new
    ).row(0, named=True)
    assert "declared prior" in row["method"] and row["floor_sd"] is None
    folder = tmp_path / "run"
    folder.mkdir()
    pl.DataFrame({"server": ["pg15"], "design": ["interleaved"]}).write_csv(folder / "auto_explain_ratios.csv")
    assert cal._ae_quantities(folder) == "auto_explain_quantities:interleaved"
    pl.DataFrame({"server": ["pg15"], "design": ["separate runs"]}).write_csv(folder / "auto_explain_ratios.csv")
    assert cal._ae_quantities(folder) == "auto_explain_quantities"


def test_a_later_designs_own_runs_replace_its_declared_prior_on_their_kind_only(monkeypatch):
    """Once archived runs of S2's interleaved design exist on a kind, its rows there take their prior and re-run
    floor, weighed by those runs (not by the kind's older runs of other quantities); another kind keeps the declared
    prior."""
    xeon, epyc = hosts.host(XEON, "tsc", 21.0), hosts.host(EPYC, "tsc", 32.0)
    seeded = cluster_priors.HostKind(
        xeon,
        ("x1", "x2", "x3", "x4", "x5"),
        {("auto_explain_ratios", "pg15"): 0.12, ("auto_explain_ratios:interleaved", "pg15"): 0.004},
        {"auto_explain_ratios": (0.07, 64), "auto_explain_ratios:interleaved": (0.015, 24)},
        runs_of={"auto_explain_ratios:interleaved": ("n1", "n2")},
    )
    other = cluster_priors.HostKind(epyc, ("e1", "e2", "e3"), {("auto_explain_ratios", "pg15"): 0.12}, {})
    monkeypatch.setattr(cluster_priors, "KINDS", [seeded, other])
    with hosts.using(xeon):
        new, old = (
            cluster_priors.priors("auto_explain_ratios:interleaved"),
            cluster_priors.priors("auto_explain_ratios"),
        )
    assert new["pg15"].sd == 0.004 and new["pg15"].spread == 0.015 and new["pg15"].runs == 2
    assert old["pg15"].runs == 5 and new.default is None
    with hosts.using(epyc):
        declared = cluster_priors.priors("auto_explain_ratios:interleaved")
    assert not declared and declared.default.sd == cluster_priors.DECLARED["auto_explain_ratios:interleaved"]
    row = between_runs.pool_clusters(
        _paired_with_clusters().with_columns(server=pl.Series(["pg15", "pg15_c2"])), ["query"], priors=new
    ).row(0, named=True)
    assert "declared" not in row["method"] and row["floor_sd"] == pytest.approx(0.015)


def _ssb_rows(rng_seed: int = 1) -> pl.DataFrame:
    """pg17 on two clusters, parallel over serial: ten queries whose clusters disagree by ±6 % each way, and their
    suite, whose clusters agree within 0.5 % (the queries' shifts cancel in the sum)."""
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    rows = []
    for i in range(10):
        shift = 0.06 * (1 if i % 2 else -1)
        for server, s in (("pg17", shift), ("pg17_c2", -shift)):
            r = 0.57 * math.exp(s + rng.normal(0, 0.002))
            rows.append((server, f"q{i}", r))
    rows += [("pg17", "all", 0.570), ("pg17_c2", "all", 0.573)]
    return pl.DataFrame(
        {
            "server": [r[0] for r in rows],
            "query": [r[1] for r in rows],
            "mode": ["parallel"] * len(rows),
            "baseline": ["serial"] * len(rows),
            "n_rounds": [5] * len(rows),
            "ratio": [r[2] for r in rows],
            "low": [r[2] * 0.99 for r in rows],
            "high": [r[2] * 1.01 for r in rows],
            "coverage": [0.89] * len(rows),
            "method": ["fast mode: 10 % quantile of every execution, 89 % bootstrap over rounds, n=5"] * len(rows),
        }
    )


def test_the_ssb_suite_is_a_quantity_of_its_own_where_its_kind_has_archived_suite_figures(monkeypatch):
    """Rule 15 for sums: the suite (every query's time summed) takes its own between-cluster variance, prior and
    re-run floor where its host kind's archived runs give them; on a kind without, it is pooled with its queries
    as before (their variance, prior and floor). q1.x (three queries) stays with the queries."""
    from pglab.studies.ssb import paired_tables as pt

    assert cluster_priors.quantity("ssb_paired", "parallel", "all") == "ssb_paired:suite"
    assert cluster_priors.quantity("ssb_paired", "parallel_jit_forced_net", "all") == "ssb_paired:jit_forced:suite"
    assert cluster_priors.quantity("ssb_paired", "parallel", "q1.x") == "ssb_paired"
    host = hosts.host(XEON, "tsc", 21.0)
    queries_only = cluster_priors.HostKind(
        host, ("x1", "x2", "x3"), {("ssb_paired", "pg17"): 0.06}, {"ssb_paired": (0.025, 60)}
    )
    with_suite = cluster_priors.HostKind(
        host,
        ("x1", "x2", "x3"),
        {("ssb_paired", "pg17"): 0.06, ("ssb_paired:suite", "pg17"): 0.005},
        {"ssb_paired": (0.025, 60), "ssb_paired:suite": (0.008, 12)},
    )

    def suite_row(kind):
        monkeypatch.setattr(cluster_priors, "KINDS", [kind])
        with hosts.using(host):
            assert cluster_priors.own_quantity("ssb_paired:suite") == (
                "ssb_paired:suite" if kind is with_suite else "ssb_paired"
            )
            t = pt.pooled(_ssb_rows(), ["query", "mode", "baseline"], "ssb_paired")
        return t.filter(pl.col("query") == "all").row(0, named=True), t.filter(pl.col("query") == "q3").row(
            0, named=True
        )

    (old, old_q), (new, new_q) = suite_row(queries_only), suite_row(with_suite)
    assert new_q["low"] == pytest.approx(old_q["low"]) and new_q["high"] == pytest.approx(old_q["high"])
    assert old["cluster_sd"] > 0.04 and "sd 2.5 %" in old["method"]  # the queries' shifts and floor
    assert new["cluster_sd"] < 0.01 and "sd 0.8 %" in new["method"]  # its own: the sum's clusters agree
    assert math.log(new["high"] / new["low"]) < 0.5 * math.log(old["high"] / old["low"])


def test_a_kinds_band_spans_its_runs_so_one_boots_runs_are_never_split(monkeypatch):
    """The runs of one boot read the clock at 18.4, 18.6 and 18.8 ns; a band of ×/÷ 1.12 around a kind centred at
    20.8 ns ends at 18.6 and split them (two judged with no kind, one with the Xeon kind's floors). A kind's band
    reaches ×/÷ 1.12 beyond the lowest and highest read of its runs."""
    centre = hosts.host(XEON, "tsc", 20.8)
    alone = cluster_priors.HostKind(centre, ("x1", "x2"), {}, {})
    spanned = cluster_priors.HostKind(centre, ("x1", "x2"), {}, {}, clocks=(18.435, 21.22))
    boot = [hosts.host(XEON, "tsc", ns) for ns in (18.435, 18.56, 18.765)]
    assert [alone.covers(h) for h in boot] == [False, False, True]  # the split the band made
    assert all(spanned.covers(h) for h in boot)
    assert not spanned.covers(hosts.host(XEON, "tsc", 16.0)) and not spanned.covers(hosts.host(XEON, "tsc", 24.0))
    assert not spanned.covers(hosts.host(EPYC, "tsc", 18.5)) and not spanned.covers(hosts.host(XEON, "hpet", 18.5))
    monkeypatch.setattr(cluster_priors, "KINDS", [spanned])
    assert {cluster_priors.kind_of(h) is spanned for h in boot} == {True}

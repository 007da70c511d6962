"""`make compare`: two synthetic derived datasets, shaped like the real tables, with one known change of
each kind (a median 20 % higher, a verdict, a plan fingerprint, a setting) and nothing else."""

import json
import os

import polars as pl
import pytest

from pglab.core import derived, paths
from pglab.report import compare, compare_sources
from pglab.report.html_export import external_references

SERVERS, QUERIES = ("pg15", "pg18"), ("q1.1", "q4.3")


def _summary(changed: bool) -> pl.DataFrame:
    rows = []
    for server in SERVERS:
        for query in QUERIES:
            m = 1.2 if changed and (server, query) == ("pg18", "q4.3") else 1.0
            rows.append(
                {
                    "server": server,
                    "mode": "parallel",
                    "query": query,
                    "n": 5,
                    "n_missing": 0,
                    "median": m,
                    "mean": m,
                    "min": 0.9 * m,
                    "max": 1.1 * m,
                    "stddev": 0.02,
                    "ci_low": 0.95 * m,
                    "ci_high": 1.05 * m,
                }
            )
    return pl.from_dicts(rows)


def _jit_summary(metric: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "server": ["pg15"],
            "metric": [metric],
            "condition": ["on"],
            "operator": ["sum"],
            "n": [10],
            "n_missing": [0],
            "median": [0.2],
            "mean": [0.2],
            "min": [0.1],
            "max": [0.3],
            "stddev": [0.01],
            "ci_low": [0.15],
            "ci_high": [0.25],
            "label": ["sum"],
        }
    )


def _plans(changed: bool) -> pl.DataFrame:
    fp = {("pg18", "q4.3"): "bbbbbbbbbbbbbbbb" if changed else "aaaaaaaaaaaaaaaa"}
    return pl.from_dicts(
        [
            {
                "server": s,
                "mode": "parallel",
                "query": q,
                "allowed_workers": 2,
                "fingerprint": fp.get((s, q), "a" * 16),
                "planning_ms": 0.1 if changed else 0.2,
                "execution_ms": 500.0,
                "workers_planned": 2,
                "workers_launched": 2,
                "leftmost_relation": "public.lineorder",
            }
            for s in SERVERS
            for q in QUERIES
        ]
    )


def _findings(changed: bool) -> pl.DataFrame:
    verdict = "contradicted" if changed else "supported"
    return pl.DataFrame(
        {
            "study": ["S4", "S4"],
            "finding": ["all_operators"] * 2,
            "claim": ["JIT helps"] * 2,
            "server": list(SERVERS),
            "verdict": ["supported", verdict],
            "evidence": ["x", "y"],
        }
    )


def _environment(changed: bool) -> dict[str, pl.DataFrame]:
    return {
        "environment_machine": pl.DataFrame(
            {
                "key": ["cpu_cores", "os", "captured_utc"],
                "value": ["2", "Debian 12", f"2026-11-2{int(changed)} 05:00 UTC"],
            }
        ),
        "environment_servers": pl.DataFrame(
            {
                "server": list(SERVERS),
                "version": ["15.18", "18.6"],
                "jit": [True, False],
                "bin_dir": [f"/clone{int(changed)}/bin", "/usr/lib/postgresql/15"],
            }
        ),
        "environment_settings": pl.DataFrame(
            {
                "server": ["pg15", "pg15", "pg18", "pg18"],
                "name": ["work_mem", "port"] * 2,
                "setting": ["64MB" if not changed else "128MB", "5432" if changed else "5433", "64MB", "5434"],
                "unit": ["", "", "", ""],
                "source": ["configuration file"] * 4,
            }
        ),
    }


def _write(root, profile, changed, run_id=None, monkeypatch=None, jit_metric="wall"):
    if monkeypatch and run_id:
        monkeypatch.setenv(derived.RUN_ID_ENV, run_id)
    tables = {
        "ssb_summary": _summary(changed),
        "ssb_plans": _plans(changed),
        "jit_operators_findings": _findings(changed),
        "jit_operators_summary": _jit_summary(jit_metric),
        **_environment(changed),
    }
    for name, df in tables.items():
        derived.write_table(df, name, profile, root=root)
    return root / profile


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PGLAB_DERIVED_DIR", raising=False)
    root = tmp_path / "data" / "derived"
    _write(root, "before", changed=False, run_id="before-1", monkeypatch=monkeypatch)
    _write(root, "after", changed=True, run_id="after-1", monkeypatch=monkeypatch)
    return root


def test_finds_exactly_the_known_changes(data):
    a, b = compare.resolve("before"), compare.resolve("after")
    assert compare.check_comparable(a, b) == ["jit_operators", "ssb"]

    r = compare.ratios(a, b)
    assert r.height == len(SERVERS) * len(QUERIES) + 1  # every median both hold, the jit one too
    moved = r.filter(pl.col("change").is_in(compare.BEYOND))
    assert moved.select("metric", "server", "item", "change").to_dicts() == [
        {"metric": "ssb", "server": "pg18", "item": "parallel · q4.3", "change": "B higher"}
    ]
    assert moved["ratio"][0] == pytest.approx(1.2)
    # ratio of bounds: low_B / high_A … high_B / low_A
    assert (moved["ratio_low"][0], moved["ratio_high"][0]) == pytest.approx((1.14 / 1.05, 1.26 / 0.95))
    largest = compare.largest_changes(r)
    assert largest["ratio"].to_list() == pytest.approx([1.2])
    assert largest.select("a_median", "b_median", "outcome").row(0) == ("1.0 s", "1.2 s", "B worse")  # a time

    v = compare.verdict_changes(a, b)
    assert v.select("study", "finding", "server", "verdict_a", "verdict_b").rows() == [
        ("jit_operators", "all_operators", "pg18", "supported", "contradicted")
    ]
    p = compare.plan_changes(a, b)  # planning_ms is a time, not the plan's shape
    assert p.select("server", "item", "column", "a", "b").rows() == [
        ("pg18", "parallel · q4.3", "fingerprint", "a" * 16, "b" * 16)
    ]
    env = compare.environment_differences(a, b)  # the port the kit picked is no difference
    assert env.rows() == [("setting", "pg15", "work_mem", "64MB", "128MB")]
    summary = dict(compare.what_changed(env, v, p, r).rows())
    assert list(summary.values()) == [0, 0, 1, 1, 1, 5, 1, 0, 1]


def test_run_ids_resolve_to_the_tables_that_run_wrote(data, tmp_path, monkeypatch):
    assert compare.resolve("after-1").path == data / "after"
    assert compare.resolve("after-1").kind == "run"
    # a run not yet published: its working copy, only the tables it has written so far
    work = tmp_path / "data" / "raw" / "running-1" / "derived-work"
    derived.stage("after", work, data)
    monkeypatch.setenv(derived.RUN_ID_ENV, "running-1")
    derived.write_table(_summary(True), "ssb_summary", "after", root=work)
    running = compare.resolve("running-1")
    assert (running.kind, running.path, running.tables) == ("run", work / "after", ("ssb_summary",))
    assert compare.resolve(str(data / "before")).kind == "folder"
    assert "running-1" in compare.available()[1]


def test_refuses_runs_sharing_no_study(data, tmp_path, monkeypatch, capsys):
    only_pgbench = tmp_path / "other" / "pgbench_only"
    derived.write_table(
        pl.DataFrame({"server": ["pg15"], "scale": [1], "n": [3], "median": [1.0], "ci_low": [0.9], "ci_high": [1.1]}),
        "pgbench_init_summary",
        "pgbench_only",
        root=tmp_path / "other",
    )
    assert compare.main(["--a", "before", "--b", str(only_pgbench)]) == 2
    err = capsys.readouterr().err
    assert "share no study" in err and "before" in err and "pgbench_only" in err


def test_refuses_different_metrics_and_unknown_names(data, tmp_path, capsys):
    _write(data, "cpu", changed=False, jit_metric="cpu")
    assert compare.main(["--a", "before", "--b", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "different metrics" in err and "jit_operators_summary" in err and "'cpu'" in err
    assert compare.main(["--a", "before", "--b", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "'nowhere'" in err and "after, before, cpu" in err and "after-1, before-1" in err


def test_refuses_a_dataset_of_an_older_format(data, capsys):
    """Tables an older pglab derived (a manifest entry without the format number) are not compared: the
    refusal says how to derive them again."""
    m = derived.manifest(data / "after")
    del m["ssb_summary.csv"]["format"]
    (data / "after" / derived.MANIFEST).write_text(json.dumps(m))
    assert compare.main(["--a", "before", "--b", "after"]) == 2
    err = capsys.readouterr().err
    assert (
        "data/derived/after was derived by an older pglab (format 0); re-derive it: make derive RUN_ID=after-1" in err
    ), err


def test_notebook_runs_through_papermill_and_writes_a_self_contained_html(data, tmp_path):
    out = tmp_path / "out"
    assert compare.main(["--a", str(data / "before"), "--b", str(data / "after"), "--out", str(out)]) == 0
    html = (out / "compare.html").read_text()
    assert (out / "compare.ipynb").exists()
    assert external_references(html) == []
    assert (
        "B higher" in html and "contradicted" in html and "128MB" in html and "data:image/svg+xml" in html
    )  # the chart, inline


def _run_params(tmp_path, run_id: str, sf: float, work_mem: str) -> None:
    import json

    raw = tmp_path / "data" / "raw" / run_id
    raw.mkdir(parents=True)
    (raw / "params.json").write_text(
        json.dumps(
            {"file": "p.yaml", "profile": "x", "settings": {"work_mem": work_mem}, "ssb": {"sf": sf, "repetitions": 15}}
        )
    )


def test_refuses_runs_of_other_workloads_unless_forced_and_lists_params_first(data, tmp_path, capsys):
    """default vs quick: SSB at SF 1 against SF 0.05 measures another workload: refused, naming the key; FORCE=1
    compares anyway. A setting that differs is what a comparison is for: listed, not refused."""
    _run_params(tmp_path, "before-1", 1.0, "64MB")
    _run_params(tmp_path, "after-1", 0.05, "128MB")
    assert compare.main(["--a", "before", "--b", "after"]) == 2
    err = capsys.readouterr().err
    assert "measured other workloads (1 params differ):\n  ssb.sf: 1.0 in A, 0.05 in B" in err and "FORCE=1" in err
    a, b = compare.resolve("before"), compare.resolve("after")
    assert compare.check_comparable(a, b, force=True) == ["jit_operators", "ssb"]
    diff = compare.params_differences(a, b)
    assert diff.rows() == [
        ("workload", "ssb.sf", "1.0", "0.05"),
        ("settings", "settings.work_mem", '"64MB"', '"128MB"'),
    ]
    summary = compare.what_changed(
        compare.environment_differences(a, b),
        compare.verdict_changes(a, b),
        compare.plan_changes(a, b),
        compare.ratios(a, b),
        diff,
    )
    assert summary.head(2)["count"].to_list() == [1, 1]


def test_the_chart_is_symmetric_about_one_and_coloured_by_better_or_worse(data):
    r = compare.ratios(compare.resolve("before"), compare.resolve("after"))
    spec = compare.ratio_chart(r).to_dict()
    low, high = spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
    # the largest ratio (1.2) sets the reach, not the widest interval (JIT's 0.6-1.67, clipped): ±5-50 % changes
    # fill the axis
    assert low == pytest.approx(1 / high) and high == pytest.approx(1.2 * 1.25)
    colours = spec["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(colours["domain"], colours["range"], strict=True))["B worse"] == "#d73027"


# -- two real runs of the reference's design: the committed one and an earlier one, only in data/raw-archive/ ------

ROOT = paths.ROOT


def _reference_run() -> str:
    runs = {e.get("run_id") for e in derived.manifest(ROOT / "data" / "derived" / "default").values()}
    return runs.pop()


EARLIER = "default-20261207-115750"  # of the reference's design, not the latest: no profile folder holds its tables


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A data folder of the test's own: the reference run derived as profile `default` (its latest run, by this
    pglab: the committed tables may predate a column), and both runs' archives; A = the earlier run by id (derived
    on the fly, once, into the test's build folder), B = the profile."""
    import shutil
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("compare-runs")
    data = home / "data"
    (data / "raw-archive").mkdir(parents=True)
    for run in (EARLIER, _reference_run()):
        shutil.copy(ROOT / "data" / "raw-archive" / f"{run}.tar.xz", data / "raw-archive")
    derive = [sys.executable, "-m", "pglab", "derive", "--run-id", _reference_run(), "--unpack-into", str(home / "u")]
    env = os.environ | {"PGLAB_DATA_DIR": str(data), "PGLAB_DERIVED_DIR": ""}
    subprocess.run([*derive, "--out", str(data / "derived" / "default")], env=env, check=True, capture_output=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PGLAB_DATA_DIR", str(data))
        mp.delenv("PGLAB_DERIVED_DIR", raising=False)
        mp.setenv(compare_sources.DERIVED_RUNS_ENV, str(home / "build" / "derived-runs"))
        a, b = compare.resolve(EARLIER), compare.resolve("default")
        yield home, a, b
    assert not (data / "raw").exists()  # the archive was unpacked elsewhere, not into data/raw/


def test_an_earlier_run_is_found_by_id_and_derived_from_its_archive(two_runs, capsys):
    home, a, b = two_runs
    assert a.kind == "run" and a.path == home / "build" / "derived-runs" / EARLIER
    assert {e.get("run_id") for e in derived.manifest(a.path).values()} == {EARLIER}
    assert b.kind == "profile" and compare.check_comparable(a, b) == b.studies
    assert EARLIER in compare.available()[1]
    # the second time the derived tables are read as they are: no derive (it would print)
    capsys.readouterr()
    assert compare.resolve(EARLIER).path == a.path and "deriving" not in capsys.readouterr().err


def test_each_effect_is_judged_held_or_not_from_its_intervals_in_both_runs(two_runs):
    """Every effect of the *_paired tables both runs hold, A/A controls left out, judged by its two intervals:
    checked here row by row against the intervals themselves, and the headline states them in words."""
    _, a, b = two_runs
    e = compare.effects(a, b)
    assert e.height > 50 and set(e["study"]) >= {"ssb", "pgbench", "jit_operators"}
    assert not e["effect"].str.contains("_aa").any()

    def side(lo, hi):
        return -1 if hi < 1 else 1 if lo > 1 else 0

    for r in e.iter_rows(named=True):
        sa, sb = side(r["a_low"], r["a_high"]), side(r["b_low"], r["b_high"])
        overlap = r["a_low"] <= r["b_high"] and r["b_low"] <= r["a_high"]
        want = (
            "no effect in either"
            if sa == sb == 0
            else "appeared"
            if sa == 0
            else "not reproduced"
            if sb == 0
            else "reversed"
            if sa != sb
            else "held"
            if overlap
            else "held, other size"
        )
        assert r["held"] == want, r
        assert r["headline"].startswith(f"the effect of {r['effect']}")
        assert f"{r['a_ratio']:.2f}× [{r['a_low']:.2f}–{r['a_high']:.2f}] in A" in r["headline"]
        assert r["headline"].endswith(f"in B: {r['held']}")
    assert (e["held"] == "held").sum() > 10  # the design's big effects (parallel against serial) hold
    counts = compare.effects_held(e)
    assert counts["effects"].sum() == e.height
    text = compare.effects_markdown(e)
    assert text.startswith(f"**Of {e.height} effects both runs measured: ")


def test_make_compare_by_two_run_ids_headlines_the_effects(two_runs, monkeypatch):
    home, a, _ = two_runs
    monkeypatch.setenv("PGLAB_DATA_DIR", str(home / "data"))
    monkeypatch.setenv(compare_sources.DERIVED_RUNS_ENV, str(home / "build" / "derived-runs"))
    out = home / "out"
    assert compare.main(["--a", EARLIER, "--b", _reference_run(), "--out", str(out)]) == 0
    html = (out / "compare.html").read_text()
    assert "Did each effect hold?" in html and "effects both runs measured: " in html
    assert "in A and " in html and " in B: not reproduced" in html  # the news, in words with both intervals

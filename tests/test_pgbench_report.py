"""The report's pgbench section (S3, S4's client scaling) on the committed default data, read from a copy so
that nothing can write to data/derived/default: every claim of the studies present with a verdict from the
vocabulary, every ratio with its interval, verdicts that follow from the derived numbers, charts that
serialise, a method that names every server, and the same output twice."""

import json
import re

import polars as pl
import pytest

from pglab import derived, pgbench_findings, pgbench_report
from pglab import findings as fs


@pytest.fixture(scope="module")
def root(committed_copy):
    return committed_copy


@pytest.fixture(scope="module")
def found(root):
    return pgbench_report.findings("default", root)


def _tables(root):
    return {n: derived.read_table(n, "default", root) for n in pgbench_report.TABLES}


def test_every_claim_has_a_row_with_a_verdict_from_the_vocabulary(root, found):
    t = _tables(root)
    scales = sorted(set(t["pgbench_init"]["scale"]))
    series_scales = sorted(set(t["pgbench_series"]["scale"]))
    modes = sorted(set(t["pgbench_scaling"]["mode"]))
    keys = set(found["finding"])
    want = {f"select_only_scale_{s}" for s in pgbench_findings.STUDY_SCALES}
    want |= {f"load_time_scale_{s}" for s in scales} | {f"scaleup_{m}" for m in modes}
    want |= {f"no_vacuum_tps_scale_{s}" for s in series_scales} | {"no_vacuum_before_hot"}
    want |= {f"cluster_growth_scale_{s}" for s in series_scales}
    assert keys == want
    assert set(found["verdict"]) <= set(fs.VERDICTS)
    assert set(found["study"]) == {"S3", "S4"}
    assert set(found.filter(pl.col("finding").str.starts_with("scaleup"))["study"]) == {"S4"}
    assert found.columns == list(fs.SCHEMA | fs.NUMBERS)
    # a study scale this profile did not run is said to be not run, not guessed
    ran = set(t["pgbench_select_only"]["scale"])
    for s in pgbench_findings.STUDY_SCALES:
        rows = found.filter(pl.col("finding") == f"select_only_scale_{s}")
        assert (set(rows["verdict"]) == {fs.NOT_RUN}) == (s not in ran), s


def test_every_ratio_carries_its_interval(found):
    """Or says why it has none."""
    for r in found.iter_rows(named=True):
        for m in re.finditer(r"\d\.\d\d×", r["evidence"]):
            rest = r["evidence"][m.end():]
            assert re.match(r" \[\d+\.\d\d–\d+\.\d\d\]| \(too few repetitions", rest), (r["finding"], r["evidence"])


def test_no_vacuum_verdicts_follow_the_trend_table(root, found):
    """'No degradation' is supported only when the interval excludes a loss of more than 10 %."""
    trend = derived.read_table("pgbench_series_trend", "default", root)
    for r in trend.iter_rows(named=True):
        key = f"no_vacuum_tps_scale_{r['scale']}"
        row = found.filter((pl.col("finding") == key) & (pl.col("server") == r["server"]))
        assert row.height == 1
        if r["verdict"] == "lower":
            want = fs.NOT_SUPPORTED
        elif r["ci_low"] is not None and r["ci_low"] >= 1 - pgbench_findings.DROP:
            want = fs.SUPPORTED
        else:
            want = fs.UNDETERMINED
        assert row["verdict"][0] == want, row.to_dicts()
        assert f"{r['ratio_last_first']:.2f}× [{r['ci_low']:.2f}–{r['ci_high']:.2f}]" in row["evidence"][0]


def test_version_comparisons_follow_the_versions_table(root, found):
    v = derived.read_table("pgbench_versions", "default", root)
    load = v.filter(pl.col("what") == "load time")
    assert load.height > 0
    for r in load.iter_rows(named=True):
        scale = r["group"].removeprefix("scale=")
        row = found.filter((pl.col("finding") == f"load_time_scale_{scale}") & (pl.col("server") == r["server"]))
        want = {"lower": fs.SUPPORTED, "higher": fs.NOT_SUPPORTED}.get(r["verdict"], fs.UNDETERMINED)
        assert row["verdict"].to_list() == [want]
    for r in v.filter(pl.col("what") == "select-only tps").iter_rows(named=True):
        scale = int(r["group"].removeprefix("scale="))
        row = found.filter((pl.col("finding") == f"select_only_scale_{scale}") & (pl.col("server") == r["server"]))
        if r["verdict"] == "no detectable difference":
            assert row["verdict"].to_list() == [fs.UNDETERMINED]  # never a win, never a tie


def test_one_server_gives_no_comparison_and_a_pre_hot_server_is_tested_as_such(root):
    t = _tables(root)
    keep = sorted(set(t["pgbench_init"]["server"]))[-1]
    alone = {n: (df.filter(pl.col("server") == keep) if "server" in df.columns else df) for n, df in t.items()}
    alone["pgbench_versions"] = alone["pgbench_versions"].clear()
    f = pgbench_findings.findings(alone)
    compared = f.filter(pl.col("finding").str.contains("^(load_time|select_only|scaleup)"))
    assert set(compared["verdict"]) == {fs.NOT_RUN} and set(compared["server"]) == {"all"}
    assert f.filter(pl.col("finding").str.starts_with("no_vacuum_tps"))["server"].unique().to_list() == [keep]

    old = pgbench_findings.findings(t, {keep: "PostgreSQL 8.2.23 on i686-pc-linux-gnu"})
    pre = old.filter(pl.col("finding").str.starts_with("no_vacuum_before_hot"))
    assert set(pre["server"]) == {keep} and pre.height == t["pgbench_series_trend"].filter(server=keep).height
    assert keep not in set(old.filter(pl.col("finding").str.starts_with("no_vacuum_tps"))["server"])


def test_method_names_every_server_its_version_and_the_commands(root):
    text = pgbench_report.method("default", root)
    env = derived.read_table("environment_servers", "default", root)
    for r in env.iter_rows(named=True):
        assert r["server"] in text and r["version_string"].split(" on ")[0] in text
    runs = derived.read_table("pgbench_runs", "default", root)
    for exp in ("pgbench_init", "pgbench_select_only", "pgbench_scaling", "pgbench_series"):
        cmds = set(runs.filter(pl.col("experiment") == exp)["command"])
        assert any(f"`{c}`" in text for c in cmds), exp
    assert "shared_buffers = 2 GB" in text  # 262144 × 8kB as the server reported it


def test_charts_serialise_with_tooltips_and_the_output_is_deterministic(root):
    charts = pgbench_report.charts("default", root)
    assert 1 <= len(charts) <= 4
    specs = [json.dumps(c.to_dict(), sort_keys=True) for c in charts]
    assert all('"tooltip"' in s for s in specs)
    assert specs == [json.dumps(c.to_dict(), sort_keys=True) for c in pgbench_report.charts("default", root)]
    assert pgbench_report.method("default", root) == pgbench_report.method("default", root)
    assert pgbench_report.findings("default", root).equals(pgbench_report.findings("default", root))

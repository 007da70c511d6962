"""The report's auto_explain section (S2) on the committed default data, read from a copy so that nothing
can write to data/derived/default: every finding of the study per server in the findings schema, with the
study's numbers in the claim and an interval beside every ratio of ours; the findings recomputed from the
derived tables (what notebook 40 does) keep their intervals and say "not run" for a condition the matrix
lacks; charts that serialise, a method that names every server, and the same output twice."""

import json
import re

import polars as pl
import pytest

from pglab import auto_explain_report, derived
from pglab import auto_explain_results as aer
from pglab import findings as fs
from pglab.auto_explain_study import AutoExplainParams

_STUDY_PART = re.compile(r"\(study: [^)]*\)|the study's \d+\.\d\d×")


@pytest.fixture(scope="module")
def root(committed_copy):
    return committed_copy


def _read(name, root):
    return derived.read_table(name, "default", root)


def _ratios_have_intervals(evidence: str) -> list[str]:
    """Our ratios (N.NN×) not followed by their [low–high]; the study's own figures are left out."""
    text = _STUDY_PART.sub("", evidence)
    return [m.group() for m in re.finditer(r"\d\.\d\d×", text) if not re.match(r" \[\d", text[m.end():])]


def test_every_finding_of_the_study_for_every_server(root):
    f = auto_explain_report.findings("default", root)
    servers = sorted(set(_read("auto_explain_servers", root)["server"]))
    assert f.columns == list(fs.SCHEMA | fs.NUMBERS)
    assert sorted(zip(f["finding"], f["server"], strict=True)) == sorted(
        (k, s) for k, _ in aer.FINDINGS for s in servers)  # fmt: skip
    assert set(f["study"]) == {"S2"} and set(f["verdict"]) <= set(fs.VERDICTS)
    claims = dict(aer.FINDINGS)
    assert all(c == claims[k] for k, c in zip(f["finding"], f["claim"], strict=True))
    # the claims carry the study's figures
    assert "0.110 ms" in claims["loading"] and "1.70×" in claims["analyze"] and "0.146 ms" in claims["logging"]
    for r in f.iter_rows(named=True):
        assert _ratios_have_intervals(r["evidence"]) == [], (r["finding"], r["server"], r["evidence"])


def test_stored_verdicts_are_those_of_the_stage(root):
    stored = _read("auto_explain_findings", root).sort("finding", "server")
    f = auto_explain_report.findings("default", root).sort("finding", "server")
    assert f.select("finding", "server", "verdict", "evidence").equals(
        stored.select("finding", "server", "verdict", "evidence"))  # fmt: skip


def test_findings_recomputed_from_the_derived_tables(root):
    """What notebook 40 computes: every derived figure with its interval, "not run" without the conditions."""
    p = AutoExplainParams()  # params/default.yaml spells out exactly these (test_auto_explain_study checks it)
    runs = _read("auto_explain_latencies", root).rename({"latency_ms": "value"})
    ratios, timer, checks = (_read(n, root) for n in ("auto_explain_ratios", "auto_explain_timer",
                                                       "auto_explain_log_checks"))  # fmt: skip
    f = aer.findings(ratios, timer, checks, p, runs)
    assert set(f["verdict"]) <= {fs.SUPPORTED, fs.NOT_SUPPORTED, fs.UNDETERMINED}
    for r in f.iter_rows(named=True):
        assert _ratios_have_intervals(r["evidence"]) == [], r["evidence"]
        if r["finding"] == "timing":
            assert re.search(r"\d+ % \[-?\d+–\d+ %\] of the overhead removed", r["evidence"]), r["evidence"]
        if r["finding"] == "clock":
            assert re.search(r"ms per query .* = \d+ \[\d+–\d+\] ns per read", r["evidence"]), r["evidence"]
        if r["finding"] == "analyze":
            assert re.search(r"ns \[\d+–\d+\] extra per row", r["evidence"]), r["evidence"]
    # the clock verdict follows its interval: explained only when it lies within a factor 2 of pg_test_timing
    for r in f.filter(pl.col("finding") == "clock").iter_rows(named=True):
        within = []
        for t in timer.filter((pl.col("server") == r["server"]) & pl.col("item").is_in(["count", "count_serial"]))\
                .iter_rows(named=True):  # fmt: skip
            _, (a, n) = aer.boot_medians(aer.measured(runs), r["server"], [("analyze", t["item"]),
                                                                           ("analyze_no_timing", t["item"])])
            low, high = aer.interval((a - n) * t["parallelism"] * 1e6 / t["clock_reads"])
            within.append(t["per_loop_ns"] / 2 <= low and high <= t["per_loop_ns"] * 2)
        assert within and (r["verdict"] == fs.SUPPORTED) == all(within), r["evidence"]
    # without the log_timing = off conditions the timing finding cannot be tested: not run, not undetermined
    cut = ["analyze_no_timing", "analyze_no_timing_logged"]
    g = aer.findings(ratios.filter(~pl.col("condition").is_in(cut)), timer.clear(), checks, p,
                     runs.filter(~pl.col("condition").is_in(cut)))  # fmt: skip
    assert set(g.filter(pl.col("finding").is_in(["timing", "clock"]))["verdict"]) == {fs.NOT_RUN}


def test_method_names_servers_conditions_and_the_command(root):
    text = auto_explain_report.method("default", root)
    env = _read("environment_servers", root)
    for s in set(_read("auto_explain_servers", root)["server"]):
        version = env.filter(server=s)["version_string"][0].split(" on ")[0]
        assert f"{s} = {version}" in text
    for label in set(_read("auto_explain_summary", root)["label"]):
        assert f"*{label}*" in text
    lat = _read("auto_explain_latencies", root)
    assert all(f"`{c}`" in text for c in set(lat["command"]))
    n = _read("auto_explain_summary", root)["n"]
    assert f"{n.min()} run(s) per server" in text or f"{n.min()}-{n.max()} run(s) per server" in text


def test_charts_serialise_with_tooltips_and_the_output_is_deterministic(root):
    charts = auto_explain_report.charts("default", root)
    assert len(charts) == 2
    specs = [json.dumps(c.to_dict(), sort_keys=True) for c in charts]
    assert all('"tooltip"' in s for s in specs) and '"study_ratio"' in specs[0]
    assert specs == [json.dumps(c.to_dict(), sort_keys=True) for c in auto_explain_report.charts("default", root)]
    assert auto_explain_report.method("default", root) == auto_explain_report.method("default", root)
    assert auto_explain_report.findings("default", root).equals(auto_explain_report.findings("default", root))

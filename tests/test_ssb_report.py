"""The SSB report section (S1, with S4's SSB tests) on the committed default data: every claim present for
every server, verdicts in the vocabulary, numbers that agree with the tables the experiment notebook derived
on its own, charts that serialise, the same output twice. data/derived/default is only read; the variants
(one repetition, a wrong answer, one server) are written to a temporary directory."""

import json
import math
import re
import shutil

import polars as pl
import pytest
from conftest import ROOT

from pglab.core import derived
from pglab.core.derived import Tables
from pglab.core.stats.findings import NOT_RUN, NOT_TESTABLE, UNDETERMINED, VERDICTS
from pglab.core.stats.stats import ratio_with_interval
from pglab.studies.ssb import paired_tables as pt
from pglab.studies.ssb import report as ssb_report
from pglab.studies.ssb import verdicts as ssb_verdicts

COMMITTED = ROOT / "data" / "derived"
PROFILE = "default"
JIT = {f"{f}{suffix}" for f in ("jit_q1", "jit_q3.1", "jit_q4.3", "jit_per_query") for suffix in ("", "_forced")}
PER_SERVER = {"parallel_speedup", "parallel_a", "q4.3_workers", "parallel_b", "parallel_b_q4.3", "answers_right"} | JIT
ALL = PER_SERVER | {"newer_version_parallel", "newer_version_serial", "results_agree"}


def _table(name, root=COMMITTED, profile=PROFILE):
    return derived.read_table(name, profile, root=root)


def _mtimes():
    return {p.name: p.stat().st_mtime_ns for p in derived.profile_dir(PROFILE, COMMITTED).iterdir()}


@pytest.fixture(scope="module")
def section():
    before = _mtimes()
    out = {
        "findings": ssb_report.findings(Tables(PROFILE, COMMITTED)),
        "method": ssb_report.method(Tables(PROFILE, COMMITTED)),
        "charts": ssb_report.charts(Tables(PROFILE, COMMITTED)),
    }
    assert _mtimes() == before, "the section wrote into data/derived/default"
    assert derived.verify(PROFILE, COMMITTED) == []
    return out


@pytest.fixture(scope="module")
def servers():
    names = {n for n in _table("ssb_executions")["server"] if "_c" not in n}  # findings are per base server
    return _table("environment_servers").filter(pl.col("server").is_in(names)).sort("server")


def _evidence(f, finding, server):
    rows = f.filter(pl.col("finding") == finding, pl.col("server") == server)
    assert rows.height == 1, (finding, server, rows)
    return rows.row(0, named=True)


def _ours(r):
    """The evidence's own figure for a paired-table row: ratio [low–high], as `verdicts.Evidence.text` writes it."""
    return f"Our {ratio_with_interval(r['ratio'], r['low'], r['high'])}"


def _floor(server):
    nz = _table("ssb_noise")
    r = nz.filter(pl.col("server") == server)
    r = r if r.height else nz.filter(pl.col("server") == "all")
    return r["floor"][0] if r.height else None


def _forced() -> bool:
    """Whether the run scores forced JIT as findings of their own (`_forced`): only where the JIT claims take S1's
    thresholds as timed (`jit_mode`: no JIT counts) and the forced mode ran beside them. The default profile's
    claims take the forced mode itself, net of each execution's compile."""
    p = _table("ssb_paired")
    return pt.jit_mode(p) == "parallel_jit" and "parallel_jit_forced" in set(p["mode"])


def test_every_claim_for_every_server(section, servers):
    f = section["findings"]
    unforced = {x for x in ALL if not x.endswith("_forced")}
    assert set(f["finding"]) == (ALL if _forced() else unforced)
    assert set(f["verdict"]) <= set(VERDICTS)
    for finding in PER_SERVER if _forced() else PER_SERVER & unforced:
        assert sorted(f.filter(pl.col("finding") == finding)["server"]) == sorted(servers["server"]), finding
    vp = _table("ssb_versions_paired")
    for mode in ("parallel", "serial"):
        pairs = vp.filter(pl.col("mode") == mode).select(pl.format("{} vs {}", "server", "baseline")).unique()
        assert f.filter(pl.col("finding") == f"newer_version_{mode}")["server"].to_list() == pairs.to_series().to_list()
    assert f.filter(pl.col("claim").str.len_chars() < 40).is_empty()
    assert f.filter(pl.col("evidence").str.len_chars() < 40, pl.col("verdict") != NOT_RUN).is_empty()
    # what cannot be tested here says what it would need
    assert f.filter(pl.col("verdict") == NOT_TESTABLE, ~pl.col("evidence").str.contains("needs")).is_empty()


def test_jit_findings_not_run_exactly_where_the_server_has_no_jit(section, servers):
    f = section["findings"]
    paired = _table("ssb_paired")
    mode = pt.jit_mode(paired)  # the claims' mode: the default's forced JIT net of compile
    for srv in servers.iter_rows(named=True):
        for finding, item in (("jit_q1", "q1.x"), ("jit_q3.1", "q3.1"), ("jit_q4.3", "q4.3"), ("jit_per_query", "all")):
            row = _evidence(f, finding, srv["server"])
            cmp = paired.filter(
                pl.col("server") == srv["server"],
                pl.col("query") == item,
                pl.col("mode") == mode,
                pl.col("baseline") == "parallel",
            )
            if srv["jit_available"]:
                assert cmp.height == 1, (finding, srv["server"])
                assert row["verdict"] != NOT_RUN, row
                assert _ours(cmp.row(0, named=True)) in row["evidence"], (cmp, row["evidence"])
                assert f"JIT ({ssb_verdicts.JIT_LABELS[mode]}) over parallel" in row["evidence"]
            else:
                assert cmp.is_empty()
                assert row["verdict"] == NOT_RUN and "JIT" in row["evidence"], row
            if not _forced():
                continue
            forced = _evidence(f, finding + "_forced", srv["server"])
            has = paired.filter(
                pl.col("server") == srv["server"], pl.col("query") == item, pl.col("mode") == "parallel_jit_forced"
            ).height
            assert (forced["verdict"] != NOT_RUN) == bool(has), forced
    assert servers["jit_available"].any() and not servers["jit_available"].all(), "both kinds of server expected"


def test_q43_sentence_names_the_planned_and_allowed_counts(section, servers):
    scaled = _table("ssb_plans_scaled").filter(pl.col("query") == "q4.3")
    # every server of the ssb.sf group (a server added for its JIT only runs at jit_sf, without this plan)
    scaled = scaled.filter(~pl.col("server").str.contains(r"_c\d+$"))  # the finding reads each base server's plan
    assert scaled.height and set(scaled["server"]) <= set(servers["server"])
    for r in scaled.iter_rows(named=True):
        row = _evidence(section["findings"], "q4.3_workers", r["server"])
        ev = row["evidence"]
        assert f"q4.3 plans {r['workers_planned']} of {r['allowed_workers']}, driven by {r['leftmost_relation']}" in ev
        assert f"{r['min_parallel_table_scan_kb']} kB" in ev
        # exact plan counts: the claim (q4.3 plans fewer workers than allowed) stands or falls with them
        fewer = r["workers_planned"] < r["allowed_workers"]
        assert (row["verdict"] in ("supported", "direction only")) == fewer, row
    study = _table("ssb_plans_study_workers").filter(pl.col("query") == "q4.2", ~pl.col("server").str.contains("_c"))
    for r in study.iter_rows(named=True):
        ev = _evidence(section["findings"], "q4.3_workers", r["server"])["evidence"]
        assert f"q4.2 plans {r['workers_planned']} of {r['allowed_workers']} (driven by {r['leftmost_relation']})" in ev


def test_version_ratios_agree_with_the_notebooks_own_table(section):
    """ssb_versions_paired (time of the newer / time of the older over the same rounds, written by notebook 20)."""
    versions = _table("ssb_versions_paired")
    f = section["findings"]
    for mode in ("parallel", "serial"):
        vr = versions.filter(pl.col("mode") == mode)
        assert vr.height
        suite = vr.filter(pl.col("query") == "all").row(0, named=True)
        row = _evidence(f, f"newer_version_{mode}", f"{suite['server']} vs {suite['baseline']}")
        # the serial sentence is S1's own noise, not testable here: our figure is still given, and kept as a number
        within = "noise floor" in row["evidence"] and row["verdict"] == UNDETERMINED  # says the floor instead
        assert within or _ours(suite).lower() in row["evidence"].lower(), (suite, row["evidence"])
        assert row["our_value"] == pytest.approx(suite["ratio"])
        assert (row["verdict"] == NOT_TESTABLE) == (mode == "serial"), row
        for r in vr.filter(pl.col("query") != "all").iter_rows(named=True):
            assert f"{r['query']} {r['ratio']:.2f}×" in row["evidence"], (r, row["evidence"])
        floor = max(_floor(suite["server"]) or 0, _floor(suite["baseline"]) or 0)
        below = abs(math.log(suite["ratio"])) < math.log1p(floor)
        if mode == "parallel" and below:  # below the A/A floor nothing can be supported (serial: not scored)
            assert row["verdict"] in (UNDETERMINED, "contradicted"), row
            assert "noise floor" in row["evidence"]


def test_parallel_speedups_agree_with_the_speedup_table(section, servers):
    sp = _table("ssb_paired").filter(pl.col("mode") == "parallel", pl.col("baseline") == "serial")
    cores = int(_table("environment_machine").filter(pl.col("key") == "cpu_cores")["value"][0])
    tested = 0
    for srv in servers["server"]:
        mine = sp.filter(pl.col("server") == srv)
        a, s1 = (_evidence(section["findings"], k, srv) for k in ("parallel_a", "parallel_speedup"))
        if mine.is_empty():
            assert a["verdict"] == NOT_RUN and s1["verdict"] == NOT_RUN, (a, s1)
            continue
        tested += 1
        suite = mine.filter(pl.col("query") == "all").row(0, named=True)
        assert a["evidence"].startswith(_ours(suite)) and f"speed-up {1 / suite['ratio']:.2f}×" in a["evidence"]
        for r in mine.filter(~pl.col("query").is_in(["all", "q1.x"])).iter_rows(named=True):
            assert f"{r['query']} {1 / r['ratio']:.2f}×" in a["evidence"], (r, a["evidence"])
        procs = (
            int(
                _table("ssb_plans")
                .filter(pl.col("server") == srv, pl.col("mode") == "parallel")["workers_planned"]
                .max()
            )
            + 1
        )
        assert f"ceiling min({procs} processes, {cores} cores)" in a["evidence"]
        # S1's 5× needs six processes at once; fewer cores or workers make it untestable, not contradicted
        assert (s1["verdict"] == NOT_TESTABLE) == (min(procs, cores) < 6), s1
    assert tested


def test_results_agreement_counts_every_execution(section):
    ck = _table("ssb_checksums")
    row = _evidence(section["findings"], "results_agree", "all")
    assert f"{int(ck['executions'].sum()):,} executions" in row["evidence"]
    assert row["verdict"] == ("supported" if ck["agree"].all() else "contradicted")


def test_method_names_servers_versions_scale_and_repetitions(section, servers):
    m = section["method"]
    for srv in servers.iter_rows(named=True):
        assert srv["server"] in m and f"{srv['major']}.{srv['minor']}" in m, srv
    load = _table("ssb_load")
    assert f"scale factor {load['sf'][0]:g}" in m
    timed = _table("ssb_executions").filter(~pl.col("warmup")).group_by("server", "mode", "query").len()
    assert f"{timed['len'].max()} timed" in m
    assert re.search(r"\d+ workers per Gather", m)


def test_charts_serialise(section):
    charts = section["charts"]
    assert 1 <= len(charts) <= 5
    for c in charts:
        spec = c.to_dict()
        assert "tooltip" in json.dumps(spec)


def test_deterministic(section):
    assert ssb_report.findings(Tables(PROFILE, COMMITTED)).equals(section["findings"])
    assert ssb_report.method(Tables(PROFILE, COMMITTED)) == section["method"]
    again = [json.dumps(c.to_dict(), sort_keys=True) for c in ssb_report.charts(Tables(PROFILE, COMMITTED))]
    assert again == [json.dumps(c.to_dict(), sort_keys=True) for c in section["charts"]]


# -- variants of the committed data, in a temporary directory ---------------------------------------------------


def _copy(tmp_path):
    root = tmp_path / "derived"
    shutil.copytree(derived.profile_dir(PROFILE, COMMITTED), root / "t")
    return root


def test_one_repetition_leaves_the_ratios_undetermined(tmp_path):
    root = _copy(tmp_path)
    execs = _table("ssb_executions")
    # each server's first timed round (the scales' groups number their rounds apart)
    first = pl.col("round").filter(~pl.col("warmup")).min().over("server")
    execs = execs.filter(pl.col("warmup") | (pl.col("round") == first))
    env = _table("environment_servers")
    facts = {"servers": {r["server"]: {"major": r["major"]} for r in env.iter_rows(named=True)}}
    derived.write_table(execs, "ssb_executions", "t", root=root)
    derived.write_table(pt.mode_comparisons(execs), "ssb_paired", "t", root=root)
    derived.write_table(pt.version_comparisons(execs, facts), "ssb_versions_paired", "t", root=root)
    f = ssb_report.findings(Tables("t", root))
    for finding in ("parallel_a", "jit_q1", "jit_per_query", "newer_version_parallel"):
        assert set(f.filter(pl.col("finding") == finding)["verdict"]) <= {UNDETERMINED, NOT_RUN}, finding
    assert set(f.filter(pl.col("finding") == "parallel_a")["verdict"]) == {UNDETERMINED, NOT_RUN}


def _wrong_q22(root, profile):
    ck = _table("ssb_checksums").with_columns(
        agree=pl.when(pl.col("query") == "q2.2").then(False).otherwise(pl.col("agree"))
    )
    derived.write_table(ck, "ssb_checksums", profile, root=root)
    return _evidence(ssb_report.findings(Tables(profile, root)), "results_agree", "all")


def test_a_wrong_answer_is_reported(tmp_path):
    row = _wrong_q22(_copy(tmp_path), "t")
    assert row["verdict"] == "contradicted" and "q2.2" in row["evidence"]


def test_one_server_has_no_version_comparison(tmp_path):
    root = _copy(tmp_path)
    keep = sorted(set(_table("ssb_executions")["server"]))[0]
    for path in sorted(derived.profile_dir("t", root).glob("*.csv")):
        df = _table(path.stem)
        if "server" in df.columns:
            derived.write_table(df.filter(pl.col("server").is_in([keep, "all"])), path.stem, "t", root=root)
    vp = _table("ssb_versions_paired", root, "t")
    assert vp.is_empty() or vp.filter(pl.col("server") == keep).is_empty()
    derived.write_table(vp.clear(), "ssb_versions_paired", "t", root=root)
    f = ssb_report.findings(Tables("t", root))
    for mode in ("parallel", "serial"):
        row = _evidence(f, f"newer_version_{mode}", "all")
        assert row["verdict"] == NOT_TESTABLE and "16" in row["evidence"] and "17" in row["evidence"], row
    assert set(f.filter(pl.col("finding").is_in(PER_SERVER))["server"]) == {keep}
    assert keep in ssb_report.method(Tables("t", root))


def test_the_comparison_method_is_named_as_the_tables_made_it(section, tmp_path):
    """The committed run compares in the fast mode (params ssb.estimate, default fast): the evidence and the method
    text say so; the same executions compared round by round (estimate: round) say 'paired by round'."""
    from pglab.core.stats import paired

    def compared(f):
        return f.filter(pl.col("evidence").str.contains("over parallel, |parallel over serial, |over pg16"))

    assert paired.is_fast(_table("ssb_paired")["method"])
    fast = compared(section["findings"])
    assert fast.height
    assert fast.filter(~pl.col("evidence").str.contains("in the fast mode (rounds resampled)", literal=True)).is_empty()
    assert "is made in the fast mode: the 10 % quantile" in section["method"]
    root = _copy(tmp_path)
    execs = _table("ssb_executions")
    env = _table("environment_servers")
    facts = {"servers": {r["server"]: {"major": r["major"]} for r in env.iter_rows(named=True)}}
    derived.write_table(pt.mode_comparisons(execs, pt.ROUND), "ssb_paired", "t", root=root)
    derived.write_table(pt.version_comparisons(execs, facts, pt.ROUND), "ssb_versions_paired", "t", root=root)
    by_round = compared(ssb_report.findings(Tables("t", root)))
    assert by_round.height == fast.height
    assert by_round.filter(~pl.col("evidence").str.contains("paired by round", literal=True)).is_empty()
    assert "is made within the schedule's rounds" in ssb_report.method(Tables("t", root))

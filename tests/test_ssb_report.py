"""The SSB report section (S1, with S4's SSB tests) on the committed default data: every claim present for
every server, verdicts in the vocabulary, numbers that agree with the tables the experiment notebook derived
on its own, charts that serialise, the same output twice. data/derived/default is only read; the variants
(one repetition, a wrong answer, one server) are written to a temporary directory."""

import json
import re
import shutil

import polars as pl
import pytest
from conftest import ROOT

from pglab import derived, ssb_report
from pglab.findings import NOT_RUN, UNDETERMINED, VERDICTS
from pglab.ssb import experiment as ex

COMMITTED = ROOT / "data" / "derived"
PROFILE = "default"
PER_SERVER = {"parallel_speedup", "jit_q1", "q4.3_workers", "parallel_a", "jit_per_query", "parallel_b",
              "parallel_b_q4.3"}  # fmt: skip
ALL = PER_SERVER | {"newer_version_parallel", "newer_version_serial", "results_agree"}


def _table(name, root=COMMITTED, profile=PROFILE):
    return derived.read_table(name, profile, root=root)


def _mtimes():
    return {p.name: p.stat().st_mtime_ns for p in derived.profile_dir(PROFILE, COMMITTED).iterdir()}


@pytest.fixture(scope="module")
def section():
    before = _mtimes()
    out = {"findings": ssb_report.findings(PROFILE, COMMITTED), "method": ssb_report.method(PROFILE, COMMITTED),
           "charts": ssb_report.charts(PROFILE, COMMITTED)}  # fmt: skip
    assert _mtimes() == before, "the section wrote into data/derived/default"
    assert derived.verify(PROFILE, COMMITTED) == []
    return out


@pytest.fixture(scope="module")
def servers():
    names = set(_table("ssb_executions")["server"])
    return _table("environment_servers").filter(pl.col("server").is_in(names)).sort("server")


def _evidence(f, finding, server):
    rows = f.filter(pl.col("finding") == finding, pl.col("server") == server)
    assert rows.height == 1, (finding, server, rows)
    return rows.row(0, named=True)


def test_every_claim_for_every_server(section, servers):
    f = section["findings"]
    assert set(f["finding"]) == ALL
    assert set(f["verdict"]) <= set(VERDICTS)
    for finding in PER_SERVER:
        assert sorted(f.filter(pl.col("finding") == finding)["server"]) == sorted(servers["server"]), finding
    assert f.filter(pl.col("claim").str.len_chars() < 40).is_empty()
    assert f.filter(pl.col("evidence").str.len_chars() < 40).is_empty()


def test_jit_findings_not_run_exactly_where_the_server_has_no_jit(section, servers):
    f = section["findings"]
    for srv in servers.iter_rows(named=True):
        for finding in ("jit_q1", "jit_per_query"):
            row = _evidence(f, finding, srv["server"])
            if srv["jit_available"]:
                assert row["verdict"] != NOT_RUN, row
                assert "q1.1" in row["evidence"]
            else:
                assert row["verdict"] == NOT_RUN and "JIT" in row["evidence"], row


def test_q43_sentence_names_the_planned_and_allowed_counts(section):
    study = _table("ssb_plans_study_workers").filter(pl.col("query") == "q4.3")
    assert study.height
    for r in study.iter_rows(named=True):
        ev = _evidence(section["findings"], "q4.3_workers", r["server"])["evidence"]
        assert f"q4.3 plans {r['workers_planned']} of {r['allowed_workers']} workers" in ev, ev
        assert r["leftmost_relation"] in ev


def test_version_ratios_agree_with_the_notebooks_own_table(section):
    """ssb_versions (time of the newer / time of the older, written by notebook 20) turned into 'as fast'."""
    versions = _table("ssb_versions")
    f = section["findings"]
    for mode in ("parallel", "serial"):
        vr = versions.filter(pl.col("mode") == mode)
        assert vr.height
        for r in vr.iter_rows(named=True):
            row = _evidence(f, f"newer_version_{mode}", f"{r['server']} vs {r['baseline']}")
            expect = f"{r['query']} {1 / r['ratio']:.2f}× [{1 / r['ci_high']:.2f}–{1 / r['ci_low']:.2f}]"
            assert expect in row["evidence"], (expect, row["evidence"])
        faster = vr.filter(pl.col("verdict") == "faster").height
        assert f"faster on {faster}," in row["evidence"]


def test_parallel_speedups_agree_with_the_speedup_table(section, servers):
    sp = _table("ssb_speedup").filter(pl.col("mode") == "parallel")
    cores = int(_table("environment_machine").filter(pl.col("key") == "cpu_cores")["value"][0])
    for srv in servers["server"]:
        row = _evidence(section["findings"], "parallel_a", srv)
        for r in sp.filter(pl.col("server") == srv).iter_rows(named=True):
            assert f"{r['query']} {1 / r['ratio']:.2f}×" in row["evidence"], (r, row["evidence"])
        allowed = int(_table("ssb_plans").filter(pl.col("server") == srv, pl.col("mode") == "parallel")[
            "allowed_workers"].max())  # fmt: skip
        assert f"ceiling {min(allowed + 1, cores)}×" in row["evidence"]


def test_results_agreement_counts_every_execution(section):
    ck = _table("ssb_checksums")
    row = _evidence(section["findings"], "results_agree", "all")
    assert f"{int(ck['executions'].sum()):,} executions" in row["evidence"]
    assert row["verdict"] == ("supported" if ck["agree"].all() else "not supported")


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
    assert ssb_report.findings(PROFILE, COMMITTED).equals(section["findings"])
    assert ssb_report.method(PROFILE, COMMITTED) == section["method"]
    again = [json.dumps(c.to_dict(), sort_keys=True) for c in ssb_report.charts(PROFILE, COMMITTED)]
    assert again == [json.dumps(c.to_dict(), sort_keys=True) for c in section["charts"]]


# -- variants of the committed data, in a temporary directory ---------------------------------------------------


def _copy(tmp_path):
    root = tmp_path / "derived"
    shutil.copytree(derived.profile_dir(PROFILE, COMMITTED), root / "t")
    return root


def test_one_repetition_leaves_the_ratios_undetermined(tmp_path):
    root = _copy(tmp_path)
    execs = _table("ssb_executions").filter(pl.col("warmup") | (pl.col("repetition") == 0))
    tables = ex.derive(execs)
    for name, df in {"ssb_executions": execs, "ssb_summary": tables["summary"], "ssb_speedup": tables["speedup"],
                     "ssb_jit": tables["jit"]}.items():  # fmt: skip
        derived.write_table(df, name, "t", root=root)
    f = ssb_report.findings("t", root)
    for finding in ("parallel_speedup", "parallel_a", "jit_q1", "jit_per_query", "newer_version_parallel"):
        assert set(f.filter(pl.col("finding") == finding)["verdict"]) <= {UNDETERMINED, NOT_RUN}, finding
    assert "(no interval)" in _evidence(f, "parallel_a", f["server"][0])["evidence"]


def test_a_wrong_answer_is_reported(tmp_path):
    root = _copy(tmp_path)
    ck = _table("ssb_checksums").with_columns(
        agree=pl.when(pl.col("query") == "q2.2").then(False).otherwise(pl.col("agree")))
    derived.write_table(ck, "ssb_checksums", "t", root=root)
    row = _evidence(ssb_report.findings("t", root), "results_agree", "all")
    assert row["verdict"] == "not supported" and "q2.2" in row["evidence"]


def test_one_server_has_no_version_comparison(tmp_path):
    root = _copy(tmp_path)
    keep = sorted(set(_table("ssb_executions")["server"]))[0]
    for name in ssb_report.TABLES:
        df = _table(name)
        if "server" in df.columns:
            derived.write_table(df.filter(pl.col("server") == keep), name, "t", root=root)
    f = ssb_report.findings("t", root)
    for mode in ("parallel", "serial"):
        assert _evidence(f, f"newer_version_{mode}", "all")["verdict"] == NOT_RUN
    assert set(f.filter(pl.col("finding").is_in(PER_SERVER))["server"]) == {keep}
    assert keep in ssb_report.method("t", root)

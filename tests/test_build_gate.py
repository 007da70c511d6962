"""A version is also a build (issue 31): a claim that compares servers is scored only between builds equal in all
but the version; otherwise it reads *not comparable*, the difference named and the figure kept. The gate is
declared with each study (`Study.comparisons`) and applied by `Study.judge` after the regimes."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import captured_identities

from pglab.core import derived
from pglab.core.stats import builds
from pglab.core.stats import findings as fnd
from pglab.core.stats import verdicts as v
from pglab.studies import STUDIES
from pglab.studies.base import Study

BUILD = {
    "build_opt": "-O2",
    "build_cflags": "-Wall -fno-strict-aliasing -fwrapv -O2",
    "build_llvm": "none",
    "debug_assertions": "off",
    "block_size": 8192,
    "wal_segment_size": "16MB",
    "data_checksums": "off",
}


def _server(name: str, version: str, gcc: str, **build) -> dict:
    return {
        "server": name,
        "version_string": f"PostgreSQL {version} on x86_64-pc-linux-gnu, compiled by gcc (GCC) {gcc}, 64-bit",
        "build_compiler": "gcc " + ".".join(gcc.split(".")[:2]),
        **BUILD,
        **build,
    }


def _finding(finding: str, server: str, verdict: str = v.SUPPORTED) -> dict:
    return {
        "study": "S1",
        "finding": finding,
        "claim": "the newer version is faster",
        "server": server,
        "verdict": verdict,
        "evidence": "Our 0.90× [0.88–0.92] (min–max, n=5) lies within ×/÷1.5 of the study's 0.90×",
        "study_value": 0.9,
        "our_value": 0.9,
        "our_low": 0.88,
        "our_high": 0.92,
        "interval": "min–max, n=5",
    }


def _tables(tmp_path, servers: list[dict], baseline: str | None = None) -> derived.Tables:
    out = {"environment_servers": pl.from_dicts(servers)}
    if baseline:
        others = [s["server"] for s in servers if s["server"] != baseline]
        out["x_paired"] = pl.DataFrame({"server": others, "baseline": [baseline] * len(others)})
    derived.write(out, "p", tmp_path)
    return derived.Tables("p", tmp_path)


def test_a_version_claim_between_compilers_is_not_comparable_naming_the_difference(tmp_path):
    tables = _tables(tmp_path, [_server("pg16", "16.4", "12.2.0"), _server("pg17", "17.2", "4.4.7", build_opt="-Os")])
    f = fnd.table([_finding("newer_version_serial", "pg17 vs pg16"), _finding("answers_right", "pg17")])
    out = builds.apply_comparability(f, (builds.Comparison(("newer_version_*",)),), tables)
    row = out.filter(pl.col("finding") == "newer_version_serial").row(0, named=True)
    assert row["verdict"] == v.NOT_COMPARABLE
    assert row["evidence"].startswith(
        "Builds differ: compiler gcc 4.4 (pg17) vs gcc 12.2 (pg16); optimisation -Os (pg17) vs -O2 (pg16). "
        "Measured all the same: supported, our 0.90× [0.88–0.92]"
    ), row["evidence"]
    assert row["evidence"].endswith("(needs pg17 and pg16 built alike)")
    assert (row["our_value"], row["our_low"], row["our_high"]) == (0.9, 0.88, 0.92)  # the figure kept
    assert out.filter(pl.col("finding") == "answers_right")["verdict"][0] == v.SUPPORTED  # not a comparison
    assert out.schema == f.schema
    cv = v.claim_verdicts(out)
    assert cv.filter(pl.col("finding") == "newer_version_serial")["verdict"][0] == v.NOT_COMPARABLE
    t = v.tally(cv).filter(study="all").row(0, named=True)
    assert (t["tested"], t[v.NOT_COMPARABLE], t[v.SUPPORTED]) == (1, 1, 1)


def test_builds_alike_but_for_the_version_leave_the_verdict_and_name_the_builds(tmp_path):
    # the compiler's patch level, configure options and PostgreSQL's own flags follow the version: not counted
    tables = _tables(
        tmp_path,
        [
            _server("pg16", "16.4", "12.2.0", build_configure="--with-openssl"),
            _server(
                "pg17",
                "17.2",
                "12.2.1",
                build_configure="--with-openssl --with-zstd",
                build_cflags="-Wall -fno-strict-aliasing -fwrapv -fexcess-precision=standard -fvisibility=hidden -O2",
            ),
        ],
    )
    f = fnd.table([_finding("newer_version_serial", "pg17 vs pg16")])
    out = builds.apply_comparability(f, (builds.Comparison(("newer_version_*",)),), tables)
    row = out.row(0, named=True)
    assert row["verdict"] == v.SUPPORTED
    assert row["evidence"] == f["evidence"][0] + ". pg17 and pg16 built alike (gcc 12.2 -O2)."
    assert {k: row[k] for k in fnd.NUMBERS} == {k: f.row(0, named=True)[k] for k in fnd.NUMBERS}


def test_a_baseline_read_from_a_table_and_what_is_not_scored(tmp_path):
    servers = [
        _server("pg10", "10.23", "4.4.7"),
        _server("pg11", "11.22", "4.4.7"),
        _server("pg12", "12.22", "4.4.7", build_cflags="-O2 -fno-omit-frame-pointer"),
        _server("pg13", "13.23", "4.4.7", debug_assertions="on"),
    ]
    tables = _tables(tmp_path, servers, baseline="pg10")
    gate = (builds.Comparison(("tps_*",), baseline=("x_paired", "baseline")),)
    f = fnd.table(
        [
            _finding("tps_10", "pg11", v.CONTRADICTED),
            _finding("tps_10", "pg12", v.UNDETERMINED),
            _finding("tps_10", "pg13", v.NOT_TESTABLE),
            _finding("tps_100", "all", v.NOT_RUN),
        ]
    )
    by = {r["server"]: r for r in builds.apply_comparability(f, gate, tables).iter_rows(named=True)}
    assert by["pg11"]["verdict"] == v.CONTRADICTED and "pg11 and pg10 built alike" in by["pg11"]["evidence"]
    assert by["pg12"]["verdict"] == v.NOT_COMPARABLE
    assert by["pg12"]["evidence"].startswith(
        "Builds differ: code generation -fno-omit-frame-pointer (pg12) vs none (pg10). Measured all the same: "
        "undetermined"
    )
    # not scored stays as it was, with the difference noted; not run untouched
    assert by["pg13"]["verdict"] == v.NOT_TESTABLE
    assert by["pg13"]["evidence"].endswith("Builds differ: assertions on (pg13) vs off (pg10).")
    assert by["all"] == f.row(3, named=True)
    # one server not comparable, one tested: the tested decides the claim
    assert v.claim_verdicts(builds.apply_comparability(f, gate, tables))["verdict"].to_list() == [
        v.CONTRADICTED,
        v.NOT_RUN,
    ]


def test_a_run_before_the_build_identity_compares_what_it_recorded(tmp_path):
    """The committed reference predates the full capture: the compiler comes from version_string, the fields it
    never recorded are named as not recorded, not counted as a difference."""
    old = [
        {k: r[k] for k in ("server", "version_string")} | {"block_size": 8192}
        for r in (_server("pg16", "16.4", "7.5.0"), _server("pg17", "17.2", "7.5.0"), _server("pg10", "10.23", "4.4.7"))
    ]
    tables = _tables(tmp_path, old)
    gate = (builds.Comparison(("newer_*",)),)
    f = fnd.table([_finding("newer_a", "pg17 vs pg16"), _finding("newer_b", "pg16 vs pg10")])
    out = {r["finding"]: r for r in builds.apply_comparability(f, gate, tables).iter_rows(named=True)}
    assert out["newer_a"]["verdict"] == v.SUPPORTED
    assert out["newer_a"]["evidence"].endswith(
        "pg17 and pg16 built alike (gcc 7.5; optimisation, code generation, assertions, WAL segment size, "
        "checksums not recorded in this run)."
    )
    assert out["newer_b"]["verdict"] == v.NOT_COMPARABLE
    assert "compiler gcc 7.5 (pg16) vs gcc 4.4 (pg10)" in out["newer_b"]["evidence"]
    # a server the environment does not list cannot be shown built alike
    f2 = fnd.table([_finding("newer_c", "pg18 vs pg17")])
    assert builds.apply_comparability(f2, gate, tables)["evidence"][0].startswith("Build of pg18 not recorded.")


def test_without_an_environment_the_findings_stay(tmp_path):
    derived.write({"other": pl.DataFrame({"x": [1]})}, "p", tmp_path)
    f = fnd.table([_finding("newer_version_serial", "pg17 vs pg16")])
    gate = (builds.Comparison(("newer_version_*",)),)
    assert builds.apply_comparability(f, gate, derived.Tables("p", tmp_path)).equals(f)


def test_study_judge_applies_the_declared_gate_to_the_reference(committed_copy):
    """The reference's version claims: pg17 vs pg16 (both gcc 7.5) scored; over pgbench's baseline pg11 (gcc 7.5)
    pg10 (gcc 4.4) not comparable, its figure kept, and the versions built alike scored."""
    by_name = {s.name: s for s in STUDIES if isinstance(s, Study)}
    tables = derived.Tables("default", committed_copy)
    ssb = by_name["ssb"].judge(tables).filter(pl.col("finding") == "newer_version_parallel")
    assert ssb.height == 1 and set(ssb["verdict"]) <= set(v.TESTED)
    assert ssb["evidence"].str.contains("pg17 and pg16 built alike (gcc 7.5", literal=True).all()
    pg = by_name["pgbench"].judge(tables).filter(pl.col("finding").str.starts_with("tpcb_versions"))
    pg10, alike = pg.filter(server="pg10"), pg.filter(pl.col("server") != "pg10")
    assert pg10.height == 1 and (pg10["verdict"] == v.NOT_COMPARABLE).all()
    assert pg10["evidence"].str.contains(r"gcc 4\.4 \(pg10\) vs gcc 7\.5 \(pg11\).*Measured all the same: ").all()
    assert alike.height and set(alike["verdict"]) <= set(v.TESTED)
    assert pg["our_value"].is_not_null().all()
    for study in by_name.values():  # a declared gate reads a pair the reference can resolve
        for c in study.comparisons:
            assert c.baseline is None or c.baseline[0] in study.tables, (study.name, c)


@pytest.fixture(scope="module")
def real_identities(installs):
    """The identities the environment capture records from the real servers of this machine's installs."""
    if len(installs) < 2:
        pytest.skip("one install here: no two builds to compare")
    return captured_identities(installs[:2], "gate")


def test_the_gate_answers_as_builds_difference_for_two_real_installs(real_identities, tmp_path):
    a, b = real_identities
    tables = _tables(tmp_path, real_identities)
    for jit in (False, True):
        gate = (builds.Comparison(("newer_*",), jit=jit),)
        f = fnd.table([_finding("newer_x", f"{a['server']} vs {b['server']}")])
        row = builds.apply_comparability(f, gate, tables).row(0, named=True)
        diff = builds.difference(a, b, jit)
        if diff is None:
            assert row["verdict"] == v.SUPPORTED and f"{a['server']} and {b['server']} built alike" in row["evidence"]
        else:
            assert row["verdict"] == v.NOT_COMPARABLE
            assert row["evidence"].startswith(diff[:1].upper() + diff[1:] + ". Measured all the same: supported")
    # what this machine's two installs differ in, when they do, is named in the words of the capture
    if a["build_compiler"] != b["build_compiler"]:
        assert f"compiler {a['build_compiler']} ({a['server']}) vs {b['build_compiler']} ({b['server']})" in (
            builds.difference(a, b)
        )


def test_not_comparable_is_counted_apart_everywhere():
    """Kept out of `tested` like not testable here: the overall verdict, the tally, the headline, the glance table's
    rule, the verdict's colour and the calibration's flippable claims."""
    from pglab.report import calibration as cal
    from pglab.report import summary

    assert v.overall([v.NOT_COMPARABLE, v.NOT_TESTABLE, v.NOT_RUN]) == v.NOT_COMPARABLE
    assert v.overall([v.NOT_COMPARABLE, v.CONTRADICTED]) == v.CONTRADICTED
    f = fnd.table([_finding("a", "pg17 vs pg16", v.NOT_COMPARABLE), _finding("b", "pg17", v.SUPPORTED)])
    t = v.tally(v.claim_verdicts(f))
    assert t.filter(study="all").select("tested", v.NOT_COMPARABLE).row(0) == (1, 1)
    assert summary.headline(t).endswith("Not tested: 1 not comparable, 0 not testable here, 0 not run.")
    assert "pglab-untested" in summary.verdict_html(v.NOT_COMPARABLE)
    assert "<th class=apart>not comparable</th>" in summary.glance_html(t)
    runs = {"r1": f, "r2": f.with_columns(pl.lit(v.UNDETERMINED).alias("verdict"))}
    flips = {r["finding"]: r["flippable"] for r in cal.flip_table(runs).iter_rows(named=True)}
    assert flips == {"a": True, "b": True}  # one run scored each: both could flip
    flips = cal.flip_table({"r1": f, "r2": f})
    assert dict(zip(flips["finding"], flips["flippable"], strict=True)) == {"a": False, "b": True}

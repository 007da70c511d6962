"""The report's pgbench section (S3, S4's client scaling) on the committed default data, read from a copy so
that nothing can write to data/derived/default: every claim of the studies present with a verdict from the
vocabulary, every ratio with its interval, verdicts that follow from the derived numbers, charts that
serialise, a method that names every server, and the same output twice."""

import json
import math
import re

import polars as pl
import pytest

from pglab.core import derived
from pglab.core.derived import Tables
from pglab.core.stats import findings as fs
from pglab.core.stats import stats
from pglab.core.stats import verdicts as V
from pglab.studies.pgbench import report as pgbench_report
from pglab.studies.pgbench import verdicts as PV


@pytest.fixture(scope="module")
def root(committed_copy):
    return committed_copy


@pytest.fixture(scope="module")
def found(root):
    return pgbench_report.findings(Tables("default", root))


def _floor(root):
    return PV.floor_of(derived.read_table("pgbench_noise", "default", root))


def _own_floor(root, r: dict) -> float:
    """The floor of a quantity without an A/A control of its own: none where pooled over clusters, else the
    select-only A/A's standing in (`verdicts._borrowed`)."""
    return 0.0 if (r.get("n_clusters") or 1) >= 2 else (_floor(root) or 0.0)


def _decided(r: dict) -> tuple[float, float]:
    """The interval the verdict reads: the 90 % one (`verdicts.decision_interval`)."""
    return V.decision_interval(V.Evidence(r["ratio"], r["low"], r["high"], r["n_rounds"], r["coverage"], r["method"]))


def _one(found, finding, server):
    row = found.filter((pl.col("finding") == finding) & (pl.col("server") == server))
    assert row.height == 1, (finding, server, row.to_dicts())
    return row.row(0, named=True)


def _same_numbers(row, r):
    """The finding carries the table's ratio and interval; a verdict drawn from them quotes them."""
    assert (row["our_value"], row["our_low"], row["our_high"]) == (r["ratio"], r["low"], r["high"])
    if not _too_weak(r):
        assert stats.ratio_with_interval(r["ratio"], r["low"], r["high"]) in row["evidence"]


def _too_weak(r):
    """No verdict beyond 'undetermined' from a flagged measurement or an interval covering < 90 %."""
    return bool(r.get("flag")) or r["low"] is None or (r["coverage"] or 0) < V.MIN_COVERAGE


def test_every_claim_has_a_row_with_a_verdict_from_the_vocabulary(root, found):
    paired = derived.read_table("pgbench_paired", "default", root)
    majors = derived.read_table("pgbench_servers", "default", root)["major"].drop_nulls()
    ran = set(derived.read_table("pgbench_select_only", "default", root)["scale"].drop_nulls())
    keys = set(found["finding"])
    want = {f"no_vacuum_tps_scale_{s}" for s in derived.read_table("pgbench_no_vacuum", "default", root)["scale"]}
    want |= {f"select_only_scale_{s}" for s in PV.STUDY_SCALES} | {"widest_gap", "scaleup_select-only", "scaleup_tpcb"}
    for what, key in (("load time", "load_time"), ("series tps", "tpcb_versions")):
        want |= {f"{key}_{g.replace('=', '_')}" for g in paired.filter(pl.col("what") == what)["group"]}
    if majors.len() and majors.min() >= 9:
        want.add("no_vacuum_before_hot")
    want |= {f"select_only_small_buffers_scale_{s}" for s in PV.BUFFERS_SCALES}  # S3's mechanism, on one server
    assert keys == want
    assert set(found["verdict"]) <= set(V.VERDICTS)  # the new vocabulary: no "not supported"
    assert set(found["study"]) == {"S3", "S4"}
    assert set(found.filter(pl.col("finding").str.starts_with("scaleup"))["study"]) == {"S4"}
    assert found.columns == list(fs.SCHEMA | fs.NUMBERS)
    claims = {k: c.statement for k, c in PV.CLAIMS.items()}
    for r in found.iter_rows(named=True):
        assert r["claim"] in claims.values(), r["finding"]
    # a study scale this profile did not run is said to be not run, not guessed
    for s in PV.STUDY_SCALES:
        rows = found.filter(pl.col("finding") == f"select_only_scale_{s}")
        assert (set(rows["verdict"]) == {fs.NOT_RUN}) == (s not in ran), s
    # the reference predates the buffers experiment: its mechanism claim is not run there, not guessed
    if not derived.Tables("default", root).optional("pgbench_buffers").height:
        for s in PV.BUFFERS_SCALES:
            rows = found.filter(pl.col("finding") == f"select_only_small_buffers_scale_{s}")
            assert rows["verdict"].to_list() == [fs.NOT_RUN], rows.to_dicts()
    # the study's gap (7.3 vs 9.1) and the pre-HOT claim cannot be tested on majors 9 and newer
    for key in ("widest_gap", "no_vacuum_before_hot") if "no_vacuum_before_hot" in want else ("widest_gap",):
        assert found.filter(pl.col("finding") == key)["verdict"].to_list() == [V.NOT_TESTABLE], key


def test_every_ratio_carries_its_interval(found):
    """Or says why it has none."""
    for r in found.iter_rows(named=True):
        for m in re.finditer(r"our \d\.\d\d×", r["evidence"]):  # ours (the study's and the tolerance band aside)
            rest = r["evidence"][m.end() :]
            assert re.match(r" \[\d+\.\d\d–\d+\.\d\d\]| \(too few repetitions", rest), (r["finding"], r["evidence"])


def test_no_vacuum_verdicts_follow_the_no_vacuum_table(root, found):
    """'No change within ±10 %' is supported only when the fitted interval (at 90 %, which decides) lies inside
    ±10 %, contradicted only when it lies wholly outside and the effect is beyond the noise floor (none where the
    trend is pooled over clusters: it has no A/A control of its own); undetermined when that floor is itself wider
    than ±10 %; never 'direction only'."""
    nv = derived.read_table("pgbench_no_vacuum", "default", root)
    m = 1 + PV.NO_CHANGE
    assert nv.height > 0
    for r in nv.iter_rows(named=True):
        row = _one(found, f"no_vacuum_tps_scale_{r['scale']}", r["server"])
        _same_numbers(row, r)
        floor = _own_floor(root, r)
        low, high = _decided(r)
        small = 1 / (1 + floor) < r["ratio"] < 1 + floor
        if _too_weak(r) or floor > math.log(m):
            want = V.UNDETERMINED
        elif low >= 1 / m and high <= m:
            want = V.SUPPORTED
        elif (high < 1 / m or low > m) and not small:
            want = V.CONTRADICTED
        else:
            want = V.UNDETERMINED
        assert row["verdict"] == want, row


def test_version_comparisons_follow_the_paired_table(root, found):
    """Each newer server over the oldest, per (what, group) of pgbench_paired, under the one rule for a claim
    without a size: supported when the whole interval shows a noticeable effect (beyond 5 % and the noise floor)
    in the claimed direction; direction only when it is past the floor but not wholly beyond 5 %; contradicted when
    it shows no noticeable effect; undetermined across the floor or where the floor is wider than 5 %. The floor is the
    select-only A/A's for select-only, none for a pooled load time or series (no A/A of their own); the interval
    read is the 90 % one. An interval that contains 1 is never a win."""
    paired = derived.read_table("pgbench_paired", "default", root)
    need = math.log1p(V.UNSIZED_MIN)
    keys = {"load time": "load_time", "select-only tps": "select_only", "series tps": "tpcb_versions"}
    compared = paired.filter(pl.col("what").is_in(list(keys)))
    assert compared.height > 0
    for r in compared.iter_rows(named=True):
        row = _one(found, f"{keys[r['what']]}_{r['group'].replace('=', '_')}", r["server"])
        _same_numbers(row, r)
        assert f"({r['server']} over {r['baseline']}" in row["evidence"]
        lower = r["better"] == "lower"
        if r["what"] == "select-only tps":  # the study's claim: at scales 1 and 10 the oldest is best, not newer
            study_scale = int(r["group"].split("=")[1]) < 100
            lower = PV.CLAIMS["select_only_small" if study_scale else "select_only_large"].direction == V.LOWER
        sign = -1 if lower else 1
        floor = math.log1p(_floor(root) or 0.0) if r["what"] == "select-only tps" else math.log1p(_own_floor(root, r))
        d_low, d_high = _decided(r) if r["low"] else (None, None)
        lo, hi = sorted((sign * math.log(d_low), sign * math.log(d_high))) if r["low"] else (None, None)
        if _too_weak(r):
            want = V.UNDETERMINED
        elif lo > max(need, floor):
            want = V.SUPPORTED
        elif floor > need:
            want = V.UNDETERMINED
        elif hi < need:
            want = V.DIRECTION_ONLY if lo > floor else V.CONTRADICTED
        else:
            want = V.DIRECTION_ONLY if lo > floor else V.UNDETERMINED
        assert row["verdict"] == want, row
        if r["low"] <= 1 <= r["high"]:
            assert row["verdict"] != V.SUPPORTED


def test_the_scale_up_follows_the_paired_table_for_11_over_10(root, found):
    paired = derived.read_table("pgbench_paired", "default", root).filter(pl.col("what") == "scale-up tps")
    majors = dict(derived.read_table("pgbench_servers", "default", root).select("server", "major").iter_rows())
    for mode in ("select-only", "tpcb"):
        # 11 over 10 whichever is S3's baseline (the reference's is 11: its rows are 10 over 11, read turned round)
        pair = PV.eleven_over_ten(paired.filter(pl.col("group") == f"mode={mode}").to_dicts(), majors)
        rows = found.filter(pl.col("finding") == f"scaleup_{mode}")
        if not pair:
            assert rows["server"].to_list() == ["all"] and rows["verdict"][0] in (V.NOT_RUN, V.NOT_TESTABLE)
            continue
        row = _one(found, f"scaleup_{mode}", pair[0]["server"])
        _same_numbers(row, pair[0])
        if mode == "select-only":  # pgbench -S has no aggregate: shown, not scored
            assert row["verdict"] == V.NOT_TESTABLE
        elif _too_weak(pair[0]) or pair[0]["low"] <= 1 <= pair[0]["high"]:
            assert row["verdict"] in (V.UNDETERMINED, V.CONTRADICTED)
        assert row["verdict"] != V.DIRECTION_ONLY or pair[0]["low"] > 1


def test_method_names_every_server_its_version_and_the_commands(root):
    text = pgbench_report.method(Tables("default", root))
    env = derived.read_table("environment_servers", "default", root)
    ran = set(derived.read_table("pgbench_runs", "default", root)["server"])  # not SSB's JIT-only server
    for r in env.filter(pl.col("server").is_in(ran)).iter_rows(named=True):
        assert r["server"] in text and r["version_string"].split(" on ")[0] in text
    runs = derived.read_table("pgbench_runs", "default", root)
    for exp in ("pgbench_init", "pgbench_select_only", "pgbench_scaling", "pgbench_series"):
        cmds = set(runs.filter(pl.col("experiment") == exp)["command"])
        assert any(f"`{c}`" in text for c in cmds), exp
    assert "shared_buffers = 2 GB" in text  # 262144 × 8kB as the server reported it


def test_charts_serialise_with_tooltips_and_the_output_is_deterministic(root):
    charts = pgbench_report.charts(Tables("default", root))
    assert 1 <= len(charts) <= 8  # versions, series, scale-up, buffers, timeline, latency, telemetry
    specs = [json.dumps(c.to_dict(), sort_keys=True) for c in charts]
    assert all('"tooltip"' in s for s in specs)
    assert specs == [json.dumps(c.to_dict(), sort_keys=True) for c in pgbench_report.charts(Tables("default", root))]
    assert pgbench_report.method(Tables("default", root)) == pgbench_report.method(Tables("default", root))
    assert pgbench_report.findings(Tables("default", root)).equals(pgbench_report.findings(Tables("default", root)))

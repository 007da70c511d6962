"""S3's and S4's claims through the one verdict rule, on small synthetic tables whose truth is known: each
verdict path of the pgbench findings (supported, contradicted, direction only, undetermined below the noise
floor or for a flagged ceiling, not testable, not run), derived by `pgbench_paired` exactly as from a run."""

import math

import polars as pl
import pytest

from pglab.core import derived
from pglab.core.stats import findings as fs
from pglab.core.stats import verdicts as vd
from pglab.studies.pgbench import paired_tables as pgbench_paired
from pglab.studies.pgbench import verdicts as pgbench_verdicts

ROUNDS = 6


def _tables(
    select_ratio=1.0,
    series_ratio=1.0,
    load_ratio=1.0,
    tpcb_11=1.10,
    aa_wobble=0.01,
    series_fall=1.0,
    majors=(10, 11),
    scaling_gain=1.0,
    baseline: int = 0,
) -> dict:
    """Two servers (majors), ROUNDS rounds; the newer one's values are the older's times the given ratios, with
    a small alternating wobble so intervals have width; A/A runs differ by aa_wobble. baseline: the index in
    majors of the server the others are compared with (0: the older, as S3's first design; 1: the newer)."""
    a, b = (f"pg{m}" for m in majors)
    w = [1 + 0.004 * (-1) ** r for r in range(ROUNDS)]
    sel, init, series, scaling = [], [], [], []
    for r in range(ROUNDS):
        for srv, k in ((a, 1.0), (b, select_ratio)):
            sel.append(
                {"server": srv, "scale": 10, "item": "select-only", "round": r, "warmup": False, "tps": 1000 * k * w[r]}
            )
            sel.append(
                {
                    "server": srv,
                    "scale": 10,
                    "item": "select-only-aa",
                    "round": r,
                    "warmup": False,
                    "tps": 1000 * k * w[r] * (1 + aa_wobble * (-1) ** r),
                }
            )
        for srv, k in ((a, 1.0), (b, load_ratio)):
            init.append({"server": srv, "scale": 10, "round": r, "load_s": 2.0 * k * w[r]})
        for srv, k in ((a, 1.0), (b, series_ratio)):
            series.append(
                {"server": srv, "scale": 10, "series": 0, "run": r + 1, "tps": 500 * k * w[r] * series_fall**r}
            )
        for c in (1, 2):
            for srv, k in ((a, 1.0), (b, tpcb_11)):
                gain = scaling_gain if c == 2 else 1.0
                scaling.append(
                    {
                        "server": srv,
                        "mode": "tpcb",
                        "clients": c,
                        "round": r,
                        "warmup": False,
                        "tps": 300 * k * w[r] * gain,
                    }
                )
    servers = pl.DataFrame(
        {
            "server": [a, b],
            "major": list(majors),
            "version_num": [m * 10000 for m in majors],
            "pgbench_client_version": ["18.6"] * 2,
            "client_note": [None, None],
        }
    )
    t = {
        "pgbench_select_only": pl.from_dicts(sel),
        "pgbench_init": pl.from_dicts(init),
        "pgbench_series": pl.from_dicts(series),
        "pgbench_scaling": pl.from_dicts(scaling),
        "pgbench_servers": servers,
    }
    return t | pgbench_paired.tables(t, (a, b)[baseline], cores=2)


def _verdicts(t: dict) -> dict[str, str]:
    f = pgbench_verdicts.findings(t)
    assert set(f["verdict"]) <= set(fs.VERDICTS) and "not supported" not in set(f["verdict"])
    return {r["finding"]: r["verdict"] for r in f.iter_rows(named=True)}


def test_known_truth_gives_each_verdict():
    v = _verdicts(_tables(select_ratio=0.80, series_ratio=1.5, load_ratio=1.3, tpcb_11=1.10))
    assert v["select_only_scale_10"] == fs.SUPPORTED  # newer slower: the study's "oldest has the highest"
    assert v["tpcb_versions_scale_10"] == fs.SUPPORTED  # newer faster
    assert v["load_time_scale_10"] == fs.CONTRADICTED  # newer loads 30 % slower
    assert v["scaleup_tpcb"] == fs.SUPPORTED  # 11 over 10 by 10 %
    assert v["no_vacuum_tps_scale_10"] == fs.SUPPORTED  # flat series
    assert v["scaleup_select-only"] == fs.NOT_RUN  # no select-only scale-up ran
    assert v["select_only_scale_1"] == v["select_only_scale_100"] == fs.NOT_RUN
    assert v["no_vacuum_before_hot"] == v["widest_gap"] == fs.NOT_TESTABLE
    assert "cluster_growth" not in " ".join(v)  # shown, never scored


def test_direction_only_and_a_falling_series():
    v = _verdicts(_tables(tpcb_11=1.40, series_fall=0.9))
    assert v["scaleup_tpcb"] == fs.DIRECTION_ONLY  # 11 faster, but 40 % is not "about 10 %"
    assert v["no_vacuum_tps_scale_10"] == fs.CONTRADICTED  # 10 % lost per run


def test_an_effect_below_the_noise_floor_decides_nothing():
    t = _tables(select_ratio=0.95, aa_wobble=0.15)
    floor = pgbench_verdicts.floor_of(t["pgbench_noise"])
    assert 0.14 < floor < 0.2  # the A/A wobble of ±15 %
    assert _verdicts(t)["select_only_scale_10"] == fs.UNDETERMINED


def _on_two_clusters(t: dict) -> dict:
    """The same measurements on a second cluster of each server (pg10_c2, ...), the paired tables pooled."""
    raw = ("pgbench_select_only", "pgbench_init", "pgbench_series", "pgbench_scaling", "pgbench_servers")
    both = {k: pl.concat([t[k], t[k].with_columns(server=pl.col("server") + "_c2")]) for k in raw}
    return both | pgbench_paired.tables(both, "pg10", cores=2)


def test_the_select_only_floor_gates_select_only_claims_only():
    """Rule 15: the A/A control runs select-only, so its floor (±16 % here) is select-only tps's: a 30 % slower
    load, a 10 % faster TPC-B series and scale-up and a flat no-vacuum series, pooled over two clusters, are judged
    on their own intervals, and say so; on one cluster the select-only floor stands in (the 10 % faster series
    within it: undetermined), and says so."""
    one = _tables(select_ratio=0.95, load_ratio=1.3, tpcb_11=1.10, series_ratio=1.10, aa_wobble=0.15)
    assert pgbench_verdicts.floor_of(one["pgbench_noise"]) > 0.14
    two = _on_two_clusters(one)
    f = {r["finding"]: r for r in pgbench_verdicts.findings(two).iter_rows(named=True)}
    assert f["select_only_scale_10"]["verdict"] == fs.UNDETERMINED  # 5 % within the select-only floor
    assert f["load_time_scale_10"]["verdict"] == fs.CONTRADICTED
    assert f["tpcb_versions_scale_10"]["verdict"] == fs.SUPPORTED
    assert f["scaleup_tpcb"]["verdict"] == fs.SUPPORTED
    assert f["no_vacuum_tps_scale_10"]["verdict"] == fs.SUPPORTED
    for key in ("load_time_scale_10", "tpcb_versions_scale_10", "no_vacuum_tps_scale_10", "scaleup_tpcb"):
        assert pgbench_verdicts.OWN_FLOOR_NOTE in f[key]["evidence"], f[key]["evidence"]
    f1 = {r["finding"]: r for r in pgbench_verdicts.findings(one).iter_rows(named=True)}
    assert f1["tpcb_versions_scale_10"]["verdict"] == fs.UNDETERMINED  # the stand-in floor is wider than 5 %
    assert pgbench_verdicts.STAND_IN_NOTE in f1["tpcb_versions_scale_10"]["evidence"]


def test_a_speed_up_beyond_the_cores_is_flagged_undetermined():
    t = _tables(scaling_gain=3.0)  # 2 clients 3x one client's tps on 2 cores: impossible
    assert t["pgbench_paired"].filter(pl.col("what") == "scale-up tps")["flag"][0]
    assert _verdicts(t)["scaleup_tpcb"] == fs.UNDETERMINED


def test_scaleup_of_other_versions_is_not_testable():
    v = _verdicts(_tables(majors=(15, 18)))
    assert v["scaleup_tpcb"] == fs.NOT_TESTABLE


def test_a_collapsed_run_shows_in_the_drift_table():
    t = _tables()
    sel = t["pgbench_select_only"].with_columns(
        tps=pl.when((pl.col("round") == 3) & (pl.col("server") == "pg11") & (pl.col("item") == "select-only"))
        .then(pl.col("tps") / 4)
        .otherwise(pl.col("tps"))
    )
    t = t | {"pgbench_select_only": sel}
    d = pgbench_paired.drift_table(t).filter((pl.col("what") == "select-only tps") & (pl.col("server") == "pg11"))
    assert d["collapsed_runs"][0] == 1 and d["lowest_over_median"][0] < 1 / 3
    # methodology rule 18: the collapsed round is an artefact round (under half its cell's others): shown above,
    # left out of the A/A floor, which is the other rounds' (with it the floor read > 50 %)
    aa = pgbench_paired.noise_table(t).filter(pl.col("server") == "pg11")
    clean = pgbench_paired.noise_table(_tables()).filter(pl.col("server") == "pg11")
    assert aa["floor"][0] < 0.1 and aa["floor"][0] == pytest.approx(clean["floor"][0], abs=0.02)


def test_scaleup_is_scored_whichever_version_is_the_baseline():
    """S3's baseline moved to 11 (params pgbench.baseline): the scale-up rows are then 10 over 11, and S4's claim
    (11 over 10) must read them inverted, not call itself not testable."""
    for baseline in (0, 1):
        t = _tables(tpcb_11=1.10, baseline=baseline)
        f = pgbench_verdicts.findings(t).filter(pl.col("finding") == "scaleup_tpcb").row(0, named=True)
        assert f["verdict"] == fs.SUPPORTED, (baseline, f["evidence"])
        assert (
            f["server"] == "pg11" and 1.09 < f["our_value"] < 1.11 and f["our_low"] <= f["our_value"] <= f["our_high"]
        )
    v = _verdicts(_tables(tpcb_11=1.40, baseline=1))
    assert v["scaleup_tpcb"] == fs.DIRECTION_ONLY and v["scaleup_select-only"] == fs.NOT_RUN


def test_the_reference_scores_s4_scaleup_from_its_data(committed_copy):
    """The reference (default-20261129-001216) compared 10 and 11 against S3's baseline 11: its scale-up rows
    are 10 over 11, and S4's claims are scored from them (tpcb) or say why pgbench -S cannot test the claim."""
    t = derived.Tables("default", committed_copy)
    rows = t["pgbench_paired"].filter(pl.col("what") == "scale-up tps")
    tpcb = rows.filter(pl.col("group") == "mode=tpcb").row(0, named=True)
    assert (tpcb["server"], tpcb["baseline"]) == ("pg10", "pg11")  # what the lookup has to turn around
    f = {r["finding"]: r for r in pgbench_verdicts.findings(t).iter_rows(named=True)}
    got = f["scaleup_tpcb"]
    assert got["verdict"] != fs.NOT_TESTABLE and got["server"] == "pg11", got["evidence"]
    assert math.isclose(got["our_value"], 1 / tpcb["ratio"]) and math.isclose(got["our_low"], 1 / tpcb["high"])
    want = vd.verdict(
        pgbench_verdicts.CLAIMS["scaleup_tpcb"],
        vd.Evidence(
            1 / tpcb["ratio"],
            1 / tpcb["high"],
            1 / tpcb["low"],
            tpcb["n_rounds"],
            tpcb["coverage"],
            tpcb["method"],
            tuple(x for x in [tpcb["flag"]] if x),
        ),
    )  # TPC-B-like tps: no A/A control of its own, so no floor
    assert got["verdict"] == want.label
    sel = f["scaleup_select-only"]
    assert sel["verdict"] == fs.NOT_TESTABLE and "aggregat" in sel["evidence"] and sel["our_value"] is not None


def test_an_opposite_effect_beyond_the_floor_reads_contradicted_on_the_references_tables(committed_copy):
    """S3's small-buffers claim at scale 1 on the reference's tables: select-only with 2MB of shared_buffers slower
    than with 2GB, the whole interval beyond the A/A floor. A floor wider than a noticeable 5 % leaves a *small*
    effect in the claimed direction undecidable, but not a clear effect the other way. The reference's own row
    (its width, method and pooled components) is moved, where its run did not show it so, until its whole interval
    lies the other way beyond both the floor and 6 %: the case is the rule's, not one run's figure (the reference
    of 141652 showed it; that of 213214 reads 0.89× [0.81-0.94] against a 9.2 % floor: undetermined)."""
    t = derived.Tables("default", committed_copy)
    tables = {name: t[name] for name in t}
    floor, wide = pgbench_verdicts.floor_of(tables["pgbench_noise"]), 0.06
    paired = tables["pgbench_buffers_paired"]
    smallest = paired.filter(pl.col("scale") == 1)["shared_buffers_bytes"].min()
    case = (pl.col("scale") == 1) & (pl.col("shared_buffers_bytes") == smallest)
    edge = 1 / (1 + max(floor, wide))
    shift = min(1.0, 0.98 * edge / paired.filter(case)["high"][0])
    ends = [c for c in ("ratio", "low", "high", "within_low", "within_high") if c in paired.columns]
    tables["pgbench_buffers_paired"] = paired.with_columns(
        pl.when(case).then(pl.col(c) * shift).otherwise(pl.col(c)).alias(c) for c in ends
    )
    bp = tables["pgbench_buffers_paired"].filter(case).row(0, named=True)
    assert bp["high"] < edge  # the case: opposite, beyond the floor and a noticeable 5 %
    f = pgbench_verdicts.findings(tables).filter(pl.col("finding") == "select_only_small_buffers_scale_1")
    assert f["verdict"].to_list() == [fs.CONTRADICTED], f["evidence"].to_list()
    assert "opposite" in f["evidence"][0]
    claim, ev = pgbench_verdicts.CLAIMS["select_only_small_buffers"], vd.Evidence.from_row(bp)
    assert wide > vd.UNSIZED_MIN and vd.verdict(claim, ev, wide).label == vd.CONTRADICTED  # before the floor's gate
    # the reference's row as measured, whatever it reads, keeps the rule: never supported while it shows the opposite
    as_run = pgbench_verdicts.findings(t).filter(pl.col("finding") == "select_only_small_buffers_scale_1")
    assert as_run["verdict"].to_list() != [fs.SUPPORTED]

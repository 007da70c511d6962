"""S2's claims scored by the one rule on synthetic runs with known truth: every verdict path (supported,
direction only, contradicted, undetermined for too few rounds, a wide interval, an effect below the A/A noise
floor or a flagged parallel speed-up, not run), the A/A noise table, the drift, and the paired ratios."""

import numpy as np
import polars as pl
import pytest

from pglab.core import noise
from pglab.core import verdicts as v
from pglab.studies.auto_explain import derive as aer
from pglab.studies.auto_explain import verdicts as av
from pglab.studies.auto_explain.params import STUDY_LATENCY_MS, AutoExplainParams

P = AutoExplainParams(rows=1_000_000)  # the study's table: every claim testable
# a faithful machine: the study's ratios, and its serial count's latency, so also its ns per row (the parallel
# count at 1.7x faster than serial, within what 2 cores allow)
BASE = {"limit": 0.04, "count": 30.0, "count_serial": STUDY_LATENCY_MS[(P.baseline, "count_serial")]}


def _truth(**ratio) -> dict:
    """Latency per (condition, item): the study's ratios unless overridden (condition_item=ratio to baseline)."""
    t = {}
    for c, i in P.cells():
        study = STUDY_LATENCY_MS.get((c, i), STUDY_LATENCY_MS[(P.baseline, i)])
        study_base = STUDY_LATENCY_MS[(P.baseline, i)]
        if c in ("explain_logged", "analyze_logged"):  # logged over its nothing-logged twin, as the study's
            quiet = c.removesuffix("_logged")
            study = STUDY_LATENCY_MS[(c, i)] / STUDY_LATENCY_MS[(quiet, i)] * STUDY_LATENCY_MS[(quiet, i)]
        t[(c, i)] = BASE[i] * ratio.get(f"{c}_{i}", study / study_base)
    return t


def _runs(
    truth: dict, rounds: int = 8, round_sd: float = 0.05, sd: float = 0.003, seed: int = 1, servers=("pgA",)
) -> pl.DataFrame:
    """Rounds share a machine factor (what pairing cancels); each run adds its own small noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for server in servers:
        for r in range(rounds):
            f = np.exp(rng.normal(0, round_sd))
            rows += [
                {
                    "server": server,
                    "condition": c,
                    "item": i,
                    "repetition": r,
                    "warmup": False,
                    "round": r,
                    "value": x * f * np.exp(rng.normal(0, sd)),
                    "cores": 2,
                }
                for (c, i), x in truth.items()
            ]
    return pl.from_dicts(rows)


PLANS = pl.DataFrame({"server": ["pgA"], "item": ["count"], "processes": [3]})


def _verdicts(runs, plans=PLANS, params=P) -> dict:
    m = av.measured(runs)
    f = av.findings(runs, plans, av.noise_table(m, params), params)
    return dict(zip(f["finding"], f["verdict"], strict=True))


def test_the_studys_numbers_are_supported_everywhere():
    got = _verdicts(_runs(_truth()))
    assert set(got) == {s.key for s in av.specs(P)} and len(got) == 12
    assert set(got.values()) == {v.SUPPORTED}, got


def test_sizes_excluded_give_direction_only_and_no_effect_contradicts():
    # ANALYZE costs 2.5× (not 1.70×): direction only; logging costs nothing: contradicted (the study's 1.30× would
    # be far beyond the noise floor); EXPLAIN costs 20 %: a "costs little" claim wholly outside ±5 %: contradicted
    t = _truth(analyze_count=2.5, explain_count_serial=1.2)
    t[("explain_logged", "limit")] = t[("explain", "limit")]
    got = _verdicts(_runs(t))
    assert got["analyze_count"] == v.DIRECTION_ONLY
    assert got["logging_explain"] == v.CONTRADICTED
    assert got["explain_count_serial"] == v.CONTRADICTED
    assert got["loading"] == v.SUPPORTED


def test_few_rounds_wide_intervals_and_the_noise_floor_leave_it_undetermined():
    assert set(_verdicts(_runs(_truth(), rounds=3)).values()) == {v.UNDETERMINED}  # min–max of 3 covers 75 %
    # unpaired noise of ±8 % per run: "no change within ±5 %" can be neither shown nor refuted
    wide = _verdicts(_runs(_truth(), round_sd=0.0, sd=0.08, seed=3))
    assert wide["loading"] == v.UNDETERMINED and wide["explain_limit"] == v.UNDETERMINED
    # a 3 % ANALYZE effect on limit claimed as 1.70× on count: below a floor of several %, the claim's size far
    # beyond it -> contradicted; the A/A noise says what the floor is
    noisy = _runs(_truth(analyze_count=1.03), round_sd=0.0, sd=0.03, seed=5)
    m = av.measured(noisy)
    floor = av.floor_of(av.noise_table(m, P), "pgA", ["count"])
    assert floor is not None and floor > 0.01
    ev = av.evidence(m, "pgA", next(s for s in av.specs(P) if s.key == "analyze_count"))
    assert abs(np.log(ev.ratio)) < np.log1p(floor) or ev.low < 1  # no effect resolved
    assert _verdicts(noisy)["analyze_count"] == v.CONTRADICTED


def test_a_speed_up_above_the_cores_flags_the_parallel_claims():
    # serial count 7 ms, parallel 1 ms: 7× on 2 cores with 3 processes is impossible -> measurement problem
    t = _truth()
    for c in ("loaded_disabled", "loaded_disabled_aa", "explain", "analyze", "analyze_no_timing"):
        t[(c, "count")] = t[(c, "count")] / 4.0
    m = av.measured(_runs(t))
    assert "physical ceiling" in av.parallel_flag(m, PLANS, "pgA", P)
    got = _verdicts(_runs(t))
    assert got["analyze_count"] == got["analyze_serial_vs_parallel"] == got["timing_count"] == v.UNDETERMINED
    assert got["analyze_count_serial"] == v.SUPPORTED  # serial only: not flagged


def test_below_the_studys_rows_the_parallel_count_magnitudes_are_not_testable():
    # 1e5 rows (the default): the parallel count is slower than the serial one (worker start-up) -> its ANALYZE
    # ratios say nothing of the study's; the serial count's claims are still scored
    small = AutoExplainParams()
    t = _truth()
    # a tenth of the study's rows: the serial count a tenth as long (7 ms, so ~63 ns per row of ANALYZE, within
    # ×/÷1.5 of the study's 45.5), the parallel one slower than it (8 ms: worker start-up)
    t = {
        (c, i): x * (7.0 / BASE[i] if i == "count_serial" else 4.0 / BASE[i] if i == "count" else 1)
        for (c, i), x in t.items()
    }
    for c in ("loaded_disabled", "loaded_disabled_aa", "explain", "analyze", "analyze_no_timing"):
        t[(c, "count")] = t[(c, "count")] * 2.0
    runs = _runs(t)
    f = av.findings(runs, PLANS, av.noise_table(av.measured(runs), small), small)
    got = dict(zip(f["finding"], f["verdict"], strict=True))
    assert {k for k, x in got.items() if x == v.NOT_TESTABLE} == set(av.PARALLEL_MAGNITUDE)
    assert got["analyze_count_serial"] == got["timing_count_serial"] == v.SUPPORTED
    why = f.filter(pl.col("finding") == "analyze_count")["evidence"][0]
    assert "100,000 rows" in why and "needs rows ≥ 1,000,000" in why and "8.0 ms against the serial 7.0 ms" in why
    assert f.filter(pl.col("finding") == "analyze_count")["our_value"][0] is not None  # shown, not scored


def test_conditions_missing_from_the_matrix_are_not_run():
    conds = {k: c for k, c in P.conditions.items() if not k.startswith("analyze_no_timing")}
    p = P.model_copy(update={"conditions": conds})
    t = {k: x for k, x in _truth().items() if not k[0].startswith("analyze_no_timing")}
    got = _verdicts(_runs(t), params=p)
    assert got["timing_count"] == got["timing_count_serial"] == v.NOT_RUN
    assert got["analyze_count"] == v.SUPPORTED


def test_noise_table_drift_and_paired_ratios():
    runs = _runs(_truth(), servers=("pgA", "pgB"))
    m = av.measured(runs)
    n = av.noise_table(m, P)
    assert list(n.columns) == list(noise.SCHEMA)
    assert set(n["server"]) == {"pgA", "pgB", "all"} and n.filter(pl.col("server") == "all")["n_pairs"][0] == 6
    assert (n["floor"] < 0.02).all()  # run noise 0.3 %: the shared round factor cancels
    d = av.drift_table(m, P)
    assert d.height == 6 and d["drift"].is_not_null().all()
    r = aer.ratios(runs, P)
    over = r.filter(
        (pl.col("comparison") == "overhead")
        & (pl.col("condition") == "analyze")
        & (pl.col("item") == "count_serial")
        & (pl.col("server") == "pgA")
    )
    assert over["ratio"][0] == pytest.approx(96.212 / 50.726, rel=0.01) and over["method"][0] == "min–max, n=8"
    logging = r.filter(pl.col("comparison") == "logging")
    assert set(zip(logging["condition"], logging["baseline"], strict=True)) == {
        ("explain_logged", "explain"),
        ("analyze_logged", "analyze"),
        ("analyze_no_timing_logged", "analyze_no_timing"),
    }
    s = aer.summary(runs, P)
    assert set(s["ci_method"]) == {"min–max, n=8"}


def test_the_aa_condition_must_be_the_baseline_again():
    from pydantic import ValidationError

    conds = P.model_dump(mode="json")["conditions"]
    conds["loaded_disabled_aa"]["settings"] = {"auto_explain.log_min_duration": 0}
    with pytest.raises(ValidationError, match="A/A control"):
        AutoExplainParams(conditions=conds)

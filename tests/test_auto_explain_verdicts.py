"""S2's claims scored by the one rule on synthetic runs with known truth: every verdict path (supported,
direction only, contradicted, undetermined for too few rounds, a wide interval, an effect below the A/A noise
floor, an overhead within the runs' noise or a flagged parallel speed-up, not run), the count's scale-free
quantities at the study's rows and ours, the A/A noise table, the drift, and the paired ratios."""

import numpy as np
import polars as pl
import pytest

from pglab.core.stats import noise
from pglab.core.stats import verdicts as v
from pglab.studies.auto_explain import derive as aer
from pglab.studies.auto_explain import verdicts as av
from pglab.studies.auto_explain.params import STUDY_LATENCY_MS, AutoExplainParams

P = AutoExplainParams(rows=1_000_000)  # the study's table
# a faithful machine: the study's ratios on limit; on the counts the study's baseline serial latency and, over a
# parallel baseline at 30 ms (1.7x faster than serial, within what 2 cores allow), the study's overheads in ms:
# so its ns per row, its serial-over-parallel overhead and its shares removed
BASE = {"limit": 0.04, "count": 30.0, "count_serial": STUDY_LATENCY_MS[(P.baseline, "count_serial")]}
STUDY_NS = {
    i: (STUDY_LATENCY_MS[("analyze", i)] - STUDY_LATENCY_MS[(P.baseline, i)]) for i in ("count", "count_serial")
}


def _truth(**ratio) -> dict:
    """Latency per (condition, item): the study's (ratios on limit, overheads in ms on the counts) unless
    overridden (condition_item=ratio to the baseline)."""
    t = {}
    for c, i in P.cells():
        study = STUDY_LATENCY_MS.get((c, i), STUDY_LATENCY_MS[(P.baseline, i)])
        study_base = STUDY_LATENCY_MS[(P.baseline, i)]
        if c in ("explain_logged", "analyze_logged"):  # logged over its nothing-logged twin, as the study's
            quiet = c.removesuffix("_logged")
            study = STUDY_LATENCY_MS[(c, i)] / STUDY_LATENCY_MS[(quiet, i)] * STUDY_LATENCY_MS[(quiet, i)]
        default = BASE[i] * study / study_base if i == "limit" else BASE[i] + study - study_base
        t[(c, i)] = BASE[i] * ratio[f"{c}_{i}"] if f"{c}_{i}" in ratio else default
    return t


def _small(par_ns: float = STUDY_NS["count"], ser_ns: float = STUDY_NS["count_serial"], removed=None) -> dict:
    """Our default table (1e5 rows): the serial count a tenth of the study's, the parallel one slower than it
    (6 ms of worker start-up over a 2.25 ms scan), log_analyze costing `par_ns` / `ser_ns` ns per row and
    log_timing = off removing `removed` of it ({item: share}, else the study's)."""
    rows, t = 100_000, _truth()
    base = {"count": 2.25 + 6.0, "count_serial": STUDY_LATENCY_MS[(P.baseline, "count_serial")] / 10}
    for i, ns in (("count", par_ns), ("count_serial", ser_ns)):
        a = STUDY_LATENCY_MS[("analyze", i)]
        share = (removed or {}).get(
            i, (a - STUDY_LATENCY_MS[("analyze_no_timing", i)]) / (a - STUDY_LATENCY_MS[(P.baseline, i)])
        )
        over = ns * rows / 1e6
        for c in ("loaded_disabled", "loaded_disabled_aa", "explain"):
            t[(c, i)] = base[i]
        t[("analyze", i)] = base[i] + over
        t[("analyze_no_timing", i)] = base[i] + over * (1 - share)
    return t


SMALL = AutoExplainParams()  # the default: 1e5 rows


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
    # ANALYZE costs 2.5× on the parallel count (45 ns per row, not 15.7): direction only; logging costs nothing:
    # contradicted (the study's 1.30× would be far beyond the noise floor); EXPLAIN costs 20 %: a "costs little"
    # claim wholly outside ±5 %: contradicted
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
    # a 3 % logging effect claimed as 1.30×: below a floor of several %, the claim's size far beyond it ->
    # contradicted; the A/A noise says what the floor is
    t = _truth()
    t[("explain_logged", "limit")] = t[("explain", "limit")] * 1.03
    noisy = _runs(t, round_sd=0.0, sd=0.03, seed=5)
    m = av.measured(noisy)
    floor = av.floor_of(av.noise_table(m, P), "pgA", ["limit"])
    assert floor is not None and floor > 0.01
    ev = av.evidence(m, "pgA", next(s for s in av.specs(P) if s.key == "logging_explain"))
    assert abs(np.log(ev.ratio)) < np.log1p(floor) or ev.low < 1  # no effect resolved
    assert _verdicts(noisy)["logging_explain"] == v.CONTRADICTED
    # ANALYZE's overhead on the parallel count within the runs' noise: a round with none leaves the scale-free
    # quantities without an interval (never a verdict on a log of a difference that is not there)
    t = _truth(analyze_count=1.001, analyze_no_timing_count=1.0005)
    got = _verdicts(_runs(t, round_sd=0.0, sd=0.01, seed=5))
    assert got["analyze_count"] == got["analyze_serial_vs_parallel"] == got["timing_count"] == v.UNDETERMINED


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


def test_at_our_rows_the_parallel_count_is_scored_per_row():
    # 1e5 rows (the default): the parallel count slower than the serial one (worker start-up), yet its overhead
    # per row, the serial over the parallel overhead and the share log_timing = off removes are the study's: the
    # fixed start-up cancels in each difference, so every claim is scored, and a faithful machine is supported
    runs = _runs(_small())
    f = av.findings(runs, PLANS, av.noise_table(av.measured(runs), SMALL), SMALL)
    got = dict(zip(f["finding"], f["verdict"], strict=True))
    assert set(got.values()) == {v.SUPPORTED}, f.select("finding", "evidence").to_dicts()
    ev = dict(zip(f["finding"], f["evidence"], strict=True))
    assert ev["analyze_count"].startswith("Our 15.") and "the study's 15.7 ns per row" in ev["analyze_count"]
    assert (
        ev["analyze_serial_vs_parallel"].startswith("Our 2.")
        and "the study's 2.89×" in ev["analyze_serial_vs_parallel"]
    )
    assert "the study's 0.881 of the overhead removed" in ev["timing_count"]
    row = f.filter(pl.col("finding") == "analyze_serial_vs_parallel").row(0, named=True)
    assert (
        row["study_value"] == pytest.approx(45.486 / 15.747) and row["our_low"] <= row["our_value"] <= row["our_high"]
    )


def _small_verdicts(**kw) -> dict:
    runs = _runs(_small(**kw))
    f = av.findings(runs, PLANS, av.noise_table(av.measured(runs), SMALL), SMALL)
    return dict(zip(f["finding"], f["verdict"], strict=True))


def test_the_parallel_counts_sizes_other_than_the_studys():
    # less than ×/÷1.5 of the study's 15.7 ns per row on the parallel count, more than a third: direction only;
    # the serial over the parallel overhead then 45.5 / 7 = 6.5×, beyond ×1.5 of the study's 2.89×: direction only
    got = _small_verdicts(par_ns=7.0)
    assert got["analyze_count"] == got["analyze_serial_vs_parallel"] == v.DIRECTION_ONLY
    assert got["analyze_count_serial"] == v.SUPPORTED
    # below a third (5.2 ns): contradicted
    assert _small_verdicts(par_ns=4.0)["analyze_count"] == v.CONTRADICTED
    # parallel query costing as much per row as serial: no larger overhead without it, the claim contradicted
    # (1.0× against 2.89×: below a third of its effect on the log scale, 1.42×); per row, direction only
    got = _small_verdicts(par_ns=STUDY_NS["count_serial"])
    assert got["analyze_serial_vs_parallel"] == v.CONTRADICTED and got["analyze_count"] == v.DIRECTION_ONLY
    # serial 1.6× the parallel overhead: right way, a third to two thirds of the effect: direction only
    assert _small_verdicts(par_ns=STUDY_NS["count_serial"] / 1.6)["analyze_serial_vs_parallel"] == v.DIRECTION_ONLY
    # log_timing = off removing 0.4 of the parallel count's overhead (the study 0.881): direction only; 0.1:
    # contradicted; the serial count's share stays the study's
    got = _small_verdicts(removed={"count": 0.4})
    assert got["timing_count"] == v.DIRECTION_ONLY and got["timing_count_serial"] == v.SUPPORTED
    assert _small_verdicts(removed={"count": 0.1})["timing_count"] == v.CONTRADICTED


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
    every = n.filter((pl.col("server") == "all") & (pl.col("metric") == "latency, all items"))
    assert set(n["server"]) == {"pgA", "pgB", "all"} and every["n_pairs"].to_list() == [6]
    # per item over both servers: the floor an item falls back to before its server's over every item
    per_item = n.filter((pl.col("server") == "all") & (pl.col("metric") != "latency, all items"))
    assert per_item["n_pairs"].to_list() == [2, 2, 2]
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


def test_an_item_floor_from_too_few_pairs_gives_way_to_the_servers():
    """Issue 30: a floor rests on at least noise.MIN_AA_PAIRS A/A pairs. With two clusters an item has two pairs
    (one outlier makes its floor), so its server's floor over all items (six pairs) gates the claim; an item with
    enough pairs of its own keeps its own; where nothing has enough, the floor with the most pairs."""

    def table(pairs: dict) -> pl.DataFrame:
        rows = [
            noise.row("S2", s, m, {"n_pairs": n, "false_difference_rate": 0.0, "floor": f, "method": "x"})
            for (s, m), (n, f) in pairs.items()
        ]
        return noise.table(rows)

    few = {
        ("pgA", "latency, limit"): (2, 0.77),
        ("pgA", "latency, count"): (2, 0.04),
        ("pgA", "latency, all items"): (6, 0.12),
        ("all", "latency, all items"): (12, 0.10),
    }
    assert av.floor_of(table(few), "pgA", ["limit"]) == pytest.approx(0.12)
    assert av.floor_of(table(few), "pgA", ["count", "limit"]) == pytest.approx(0.12)
    many = few | {("pgA", "latency, count"): (noise.MIN_AA_PAIRS, 0.04)}
    assert av.floor_of(table(many), "pgA", ["count"]) == pytest.approx(0.04)
    assert av.floor_of(table(many), "pgA", ["count", "limit"]) == pytest.approx(0.12)  # the noisier item
    # a floor borrowed from several items is raised to the item's own resolution (1 µs of a 42 µs latency); an
    # item's own floor has its resolution in it already
    assert av.floor_of(table(few), "pgA", ["limit"], {"limit": 0.2}) == pytest.approx(0.2)
    assert av.floor_of(table(many), "pgA", ["count"], {"count": 0.5}) == pytest.approx(0.04)
    # one server, one cluster: nothing reaches five pairs; the row with the most pairs
    alone = {
        ("pgA", "latency, limit"): (1, 0.3),
        ("pgA", "latency, all items"): (3, 0.08),
        ("all", "latency, all items"): (3, 0.08),
    }
    assert av.floor_of(table(alone), "pgA", ["limit"]) == pytest.approx(0.08)
    assert av.floor_of(table({}), "pgA", ["limit"]) is None
    # the item over every server comes before the server's over all items: count's 8 pairs gate count, not the
    # limit item's bursts
    across = few | {("pgA", "latency, count"): (4, 0.04), ("all", "latency, count"): (8, 0.03)}
    assert av.floor_of(table(across), "pgA", ["count"]) == pytest.approx(0.03)
    assert av.floor_of(table(across), "pgA", ["count", "limit"]) == pytest.approx(0.12)


def test_several_aa_conditions_each_give_pairs_and_each_must_be_the_baseline_again():
    """aa_condition as a list (params/default.yaml: two): every one an A/A copy of the baseline, each giving one
    pair per cluster and item to the floor."""
    from pydantic import ValidationError

    conds = P.model_dump(mode="json")["conditions"]
    conds["loaded_disabled_aa2"] = dict(conds["loaded_disabled_aa"], label="A/A 2")
    two = AutoExplainParams(conditions=conds, aa_condition=["loaded_disabled_aa", "loaded_disabled_aa2"])
    assert two.aa_names == ["loaded_disabled_aa", "loaded_disabled_aa2"]
    truth = _truth()
    twice = truth | {("loaded_disabled_aa2", i): x for (c, i), x in truth.items() if c == "loaded_disabled"}
    n = av.noise_table(av.measured(_runs(twice)), two)
    one = av.noise_table(av.measured(_runs(_truth())), P)
    pick = (pl.col("server") == "all") & (pl.col("metric") == "latency, all items")
    assert n.filter(pick)["n_pairs"][0] == 2 * one.filter(pick)["n_pairs"][0]
    assert "loaded_disabled_aa and loaded_disabled_aa2" in n["method"][0]
    other = dict(conds["loaded_disabled_aa2"], settings={"auto_explain.log_min_duration": 0})
    bad = dict(conds, loaded_disabled_aa2=other)
    with pytest.raises(ValidationError, match="A/A control"):
        AutoExplainParams(conditions=bad, aa_condition=["loaded_disabled_aa", "loaded_disabled_aa2"])
    with pytest.raises(ValidationError, match="aa_condition"):
        AutoExplainParams(conditions=conds, aa_condition=["loaded_disabled_aa", "loaded_disabled"])


def test_each_claims_text_states_the_band_its_rule_uses():
    """A claim's words say what the rule does with it (issue 57): the logging claims' "≈ 30 %" once read "±5 %"
    while the rule took ×/÷ 1.5. Now the band in the text is the one the verdict reports, and only a "no change"
    claim, whose rule is its margin, speaks of ±x %."""
    for s in av.specs(P):
        c = s.claim
        if c.direction == v.SAME:
            assert f"±{c.margin:.0%}".replace("%", " %") in c.statement, c.statement
            continue
        assert "±" not in c.statement and c.margin is None, c.statement
        if "×/÷" in c.statement:
            ev = v.Evidence(c.ratio, c.ratio, c.ratio, 10, 0.95, "exact")
            reason = v.verdict(c, ev).reason  # "... within ×/÷1.5 of the study's 1.30× (1.19×–1.49×)"
            band = reason[reason.rindex("(") + 1 : reason.rindex(")")]
            assert f"×/÷ {v.TOLERANCE:g}" in c.statement and band in c.statement, (c.statement, reason)


def _studies_s2_table() -> dict[tuple[str, str], float]:
    """docs/studies.md's S2 figures (latency average, ms): (row label, column) → value, read from the digest."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "studies.md").read_text()
    block = text[text.index("| condition | limit | count, parallel | count, serial |") :]
    rows = block.split("\n\n")[0].splitlines()[2:]  # the table's rows, up to the blank line after it
    out = {}
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for col, x in zip(("limit", "count", "count_serial"), cells[1:], strict=True):
            if x:
                out[(cells[0], col)] = float(x)
    return out


def test_the_ns_per_row_claims_carry_the_studys_value_from_its_figures():
    """The summary's "theirs" of S2's ns-per-row claims was blank (issue 57): the study's value is the overhead
    in its own figures (docs/studies.md's S2 table), ANALYZE's latency less the baseline's over its 1e6 rows, shown
    in its unit and kept off the ratio strip (a quantity is no ratio)."""
    from pglab.core.stats import findings as fnd
    from pglab.report import summary

    docs = _studies_s2_table()
    base, analyze = "loaded, disabled (`log_min_duration = -1`)", "EXPLAIN ANALYZE (`log_analyze = on`), nothing logged"
    want = {i: (docs[(analyze, i)] - docs[(base, i)]) / av.STUDY_ROWS * 1e6 for i in ("count", "count_serial")}
    assert 15 < want["count"] < 16 and 45 < want["count_serial"] < 46  # 15.7 and 45.5 ns per row
    runs = _runs(_small())
    f = av.findings(runs, PLANS, av.noise_table(av.measured(runs), SMALL), SMALL)
    for item, ns in want.items():
        row = f.filter(pl.col("finding") == f"analyze_{item}").row(0, named=True)
        assert row["study_value"] == pytest.approx(ns) and row["unit"] == "ns per row", row
        assert row["our_value"] is None  # ours in the evidence's words: not a ratio for the strip
    share = f.filter(pl.col("finding") == "timing_count").row(0, named=True)
    assert share["unit"] == "of the overhead removed" and 0.8 < share["study_value"] < 0.9
    ratio = f.filter(pl.col("finding") == "analyze_serial_vs_parallel").row(0, named=True)
    assert ratio["unit"] == "×" and fnd.on_ratio_scale(ratio["unit"])
    html = summary.summary_html(f)
    assert f"{want['count']:.3g} ns per row" in html and f"{want['count_serial']:.3g} ns per row" in html
    assert "15.7×" not in html and "45.5×" not in html  # never read as a ratio

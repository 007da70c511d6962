"""Summaries and bootstrap ratio intervals: values, edge cases, determinism and actual coverage; the one notation
every report writes an interval in."""

import time

import numpy as np
import polars as pl
import pytest

from pglab.core.stats.stats import (
    HIGHER,
    LOWER,
    NO_BASELINE,
    NO_DATA,
    NO_DIFFERENCE,
    TOO_FEW,
    UNDEFINED,
    bootstrap_ci,
    compare,
    interval,
    ratio_ci,
    ratio_with_interval,
    resample,
    summarize,
)

FAST = [10.1, 9.8, 10.4, 10.0, 9.9]
SLOW = [20.3, 19.7, 20.9, 20.1, 19.8]


def frame() -> pl.DataFrame:
    rows = []
    for server in ("pg18", "pg15"):  # deliberately not in sorted order
        for cond, base in (("jit_on", 20.0), ("jit_off", 10.0), ("same", 10.0)):
            for rep, noise in enumerate([0.1, -0.2, 0.4, 0.0, -0.1]):
                rows.append({"server": server, "condition": cond, "rep": rep, "value": base + noise})
    return pl.DataFrame(rows)


def test_summarize_values_order_and_columns():
    out = summarize(frame(), by=["server", "condition"])
    assert out.columns == [
        "server",
        "condition",
        "n",
        "n_missing",
        "median",
        "mean",
        "min",
        "max",
        "stddev",
        "ci_low",
        "ci_high",
    ]
    assert out.select("server", "condition").rows() == [
        ("pg15", "jit_off"),
        ("pg15", "jit_on"),
        ("pg15", "same"),
        ("pg18", "jit_off"),
        ("pg18", "jit_on"),
        ("pg18", "same"),
    ]
    row = out.row(1, named=True)
    v = np.array([20.1, 19.8, 20.4, 20.0, 19.9])
    assert row["n"] == 5 and row["n_missing"] == 0
    assert row["median"] == pytest.approx(np.median(v)) and row["mean"] == pytest.approx(v.mean())
    assert (row["min"], row["max"]) == (pytest.approx(19.8), pytest.approx(20.4))
    assert row["stddev"] == pytest.approx(np.std(v, ddof=1))
    assert row["min"] <= row["ci_low"] <= row["median"] <= row["ci_high"] <= row["max"]


def test_summarize_is_deterministic_and_group_independent():
    df = frame()
    a = summarize(df, by=["server", "condition"])
    assert a.equals(summarize(df.reverse(), by=["server", "condition"]))
    alone = summarize(df.filter(pl.col("server") == "pg18"), by=["server", "condition"])
    assert alone.equals(a.filter(pl.col("server") == "pg18"))


def test_summarize_single_value_missing_values_and_no_by():
    df = pl.DataFrame({"q": ["a", "b", "b", "b"], "value": [5.0, 1.0, None, float("nan")]})
    out = summarize(df, by=["q"])
    a, b = out.rows(named=True)
    assert (a["n"], a["median"], a["stddev"], a["ci_low"], a["ci_high"]) == (1, 5.0, None, None, None)
    assert (b["n"], b["n_missing"], b["median"]) == (1, 2, 1.0)
    total = summarize(df, by=[])
    assert total.columns[0] == "n" and total.row(0, named=True)["n"] == 2


def test_summarize_all_missing_group():
    out = summarize(pl.DataFrame({"q": ["a"], "value": [None]}, schema={"q": pl.String, "value": pl.Float64}), by=["q"])
    row = out.row(0, named=True)
    assert row["n"] == 0 and row["n_missing"] == 1 and row["median"] is None


def test_identical_samples_no_detectable_difference():
    r = ratio_ci(FAST, FAST)
    assert r["ratio"] == 1.0 and r["verdict"] == NO_DIFFERENCE
    assert r["ci_low"] < 1.0 < r["ci_high"]


def test_clearly_separated_samples():
    r = ratio_ci(SLOW, FAST)
    assert r["ratio"] == pytest.approx(20.1 / 10.0)
    assert r["ci_low"] > 1.0 and r["verdict"] == HIGHER
    r = ratio_ci(FAST, SLOW)
    assert r["ci_high"] < 1.0 and r["verdict"] == LOWER
    assert (r["n_a"], r["n_b"], r["stat_a"], r["stat_b"]) == (5, 5, 10.0, 20.1)


def test_seed_determinism():
    rng = np.random.default_rng(0)
    a, b = rng.normal(11, 1, 12), rng.normal(10, 1, 12)
    assert ratio_ci(a, b, seed=3) == ratio_ci(a, b, seed=3)
    assert ratio_ci(a, b, seed=3) == ratio_ci(a[::-1], b[::-1], seed=3)  # row order does not matter
    assert ratio_ci(a, b, seed=3)["ci_low"] != ratio_ci(a, b, seed=4)["ci_low"]


def test_mean_statistic_and_confidence_level():
    a = np.random.default_rng(1).normal(12, 1, 8)
    b = np.random.default_rng(2).normal(10, 1, 8)
    r95 = ratio_ci(a, b, stat="mean")
    r80 = ratio_ci(a, b, stat="mean", confidence=0.80)
    assert r95["ratio"] == pytest.approx(a.mean() / b.mean())
    assert r95["ci_low"] <= r80["ci_low"] <= r80["ci_high"] <= r95["ci_high"]
    with pytest.raises(ValueError, match="stat must be"):
        ratio_ci(a, b, stat="p99")
    with pytest.raises(ValueError, match="confidence"):
        ratio_ci(a, b, confidence=95)


def test_single_repetition_and_no_data():
    r = ratio_ci([2.0], [1.0, 1.0])
    assert r["ratio"] == 2.0 and (r["ci_low"], r["ci_high"]) == (None, None) and r["verdict"] == TOO_FEW
    assert bootstrap_ci([3.0]) == (None, None)
    r = ratio_ci([], [1.0])
    assert r["ratio"] is None and r["verdict"] == NO_DATA


def test_zeros():
    r = ratio_ci([1.0, 2.0], [0.0, 0.0, 0.0])
    assert r["ratio"] is None and r["verdict"] == UNDEFINED
    r = ratio_ci([0.0, 0.0], [0.0, 0.0])
    assert r["verdict"] == UNDEFINED
    r = ratio_ci([0.0, 0.0, 0.0], [1.0, 2.0, 1.5])  # a zero numerator is a valid ratio 0
    assert r["ratio"] == 0.0 and r["verdict"] == LOWER
    with np.errstate(all="raise"):  # resamples with a zero baseline median must not warn or give NaN
        r = ratio_ci([1.0, 1.0, 2.0], [0.0, 1.0, 1.0], n_boot=2000)
    assert r["ratio"] == 1.0 and r["ci_high"] == float("inf") and r["verdict"] == NO_DIFFERENCE


def test_interval_covers_true_ratio_in_simulation():
    # 200 experiments, n=10 per side, log-normal timings with a true 1.25x ratio of medians.
    rng = np.random.default_rng(12345)
    hits = 0
    for i in range(200):
        a = 1.25 * np.exp(rng.normal(0, 0.2, 10))
        b = np.exp(rng.normal(0, 0.2, 10))
        r = ratio_ci(a, b, n_boot=2000, seed=i)
        hits += r["ci_low"] <= 1.25 <= r["ci_high"]
    assert hits / 200 >= 0.85


def test_no_effect_rarely_called_a_difference():
    rng = np.random.default_rng(7)
    verdicts = [
        ratio_ci(np.exp(rng.normal(0, 0.3, 10)), np.exp(rng.normal(0, 0.3, 10)), n_boot=2000, seed=i)["verdict"]
        for i in range(200)
    ]
    assert verdicts.count(NO_DIFFERENCE) / 200 >= 0.85


def test_bootstrap_is_fast():
    ratio_ci(FAST, SLOW)  # warm up
    start = time.perf_counter()
    for _ in range(10):
        ratio_ci(FAST, SLOW, n_boot=10_000)
    assert (time.perf_counter() - start) / 10 < 0.05


def test_compare_long_output():
    out = compare(frame(), by=["server"], condition_col="condition", baseline="jit_off")
    assert out.columns == [
        "server",
        "condition",
        "baseline",
        "n",
        "n_baseline",
        "median",
        "median_baseline",
        "ratio",
        "ci_low",
        "ci_high",
        "verdict",
    ]
    assert out.select("server", "condition").rows() == [
        ("pg15", "jit_on"),
        ("pg15", "same"),
        ("pg18", "jit_on"),
        ("pg18", "same"),
    ]
    assert out["verdict"].to_list() == [HIGHER, NO_DIFFERENCE, HIGHER, NO_DIFFERENCE]
    assert out["ratio"].to_list() == pytest.approx([2.0, 1.0, 2.0, 1.0])
    assert out["baseline"].unique().to_list() == ["jit_off"]
    assert out.equals(compare(frame().reverse(), by=["server"], condition_col="condition", baseline="jit_off"))


def test_compare_missing_baseline_and_single_repetition():
    df = pl.DataFrame(
        {
            "query": ["q1", "q1", "q1", "q2", "q2"],
            "cond": ["base", "base", "new", "new", "new"],
            "value": [1.0, 1.2, 2.0, 3.0, 3.1],
        }
    )
    out = compare(df, by=["query"], condition_col="cond", baseline="base")
    q1, q2 = out.rows(named=True)
    assert q1["verdict"] == TOO_FEW and q1["ratio"] == pytest.approx(2.0 / 1.1) and q1["ci_low"] is None
    assert q2["verdict"] == NO_BASELINE and q2["ratio"] is None and q2["median"] == pytest.approx(3.05)
    with pytest.raises(ValueError, match="not in frame"):
        compare(df, by=["server"], condition_col="cond", baseline="base")


def test_one_resampler_for_both_bootstraps():
    """pglab.core.stats.paired resamples through stats.resample: the same generator stream gives the same replicates."""
    from pglab.core.stats import paired

    x = np.random.default_rng(3).normal(0, 0.1, 12)
    means = resample(x, "mean", 2000, np.random.default_rng([4, 0]))
    tail = paired.expanded_tail(12)
    low, high = paired.bootstrap_mean_interval(x, n_boot=2000, seed=4)
    assert low[0] == np.quantile(means, tail, method="lower")
    assert high[0] == np.quantile(means, 1 - tail, method="higher")


def test_one_interval_notation():
    assert interval(0.98, 1.45) == "[0.98–1.45]"  # brackets, en dash, no spaces
    assert interval(-32.4, 18.2, "+.0f") == "[-32–+18]" and interval(1.14, 46.66, ".1f") == "[1.1–46.7]"
    assert interval(12345.6, 23456.7, ",.0f") == "[12,346–23,457]"
    assert interval(None, 1.0) == "" and interval(1.0, None) == ""
    assert ratio_with_interval(1.234, 0.981, 1.449) == "1.23× [0.98–1.45]"
    assert ratio_with_interval(1.234) == "1.23×" and ratio_with_interval(None) == "—"
    assert ratio_with_interval(None, none="no data") == "no data"
    # a third decimal where two would hide the verdict: a narrow interval, or an end that would read 1.00
    assert ratio_with_interval(0.861, 0.8601, 0.8612) == "0.861× [0.860–0.861]"
    assert ratio_with_interval(0.933, 0.872, 0.998) == "0.933× [0.872–0.998]"
    assert ratio_with_interval(1.044, 1.005, 1.141) == "1.044× [1.005–1.141]"
    assert ratio_with_interval(1.003, 0.981, 1.025, digits=3) == "1.003× [0.981–1.025]"

"""Summaries and the bootstrap interval of a median: values, edge cases, determinism, speed; the one notation every
report writes an interval in. (Comparisons are paired: tests/test_paired*.py.)"""

import time

import numpy as np
import polars as pl
import pytest

from pglab.core.stats.stats import bootstrap_ci, interval, ratio_with_interval, resample, summarize

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


def test_seed_determinism():
    a = np.random.default_rng(0).normal(11, 1, 12)
    assert bootstrap_ci(a, seed=3) == bootstrap_ci(a, seed=3)
    assert bootstrap_ci(a, seed=3) == bootstrap_ci(a[::-1], seed=3)  # row order does not matter
    # a median's ends are sample values, which other seeds reach too; a mean's show the seed
    assert bootstrap_ci(a, "mean", seed=3) != bootstrap_ci(a, "mean", seed=4)


def test_mean_statistic_and_confidence_level():
    a = np.random.default_rng(1).normal(12, 1, 8)
    low95, high95 = bootstrap_ci(a, stat="mean")
    low80, high80 = bootstrap_ci(a, stat="mean", confidence=0.80)
    assert low95 <= low80 <= a.mean() <= high80 <= high95
    with pytest.raises(ValueError, match="stat must be"):
        bootstrap_ci(a, stat="p99")
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci(a, confidence=95)


def test_single_value_and_no_data():
    assert bootstrap_ci([3.0]) == (None, None) and bootstrap_ci([]) == (None, None)
    assert bootstrap_ci([None, 2.0, float("nan")]) == (None, None)  # missing values are no values


def test_bootstrap_is_fast():
    bootstrap_ci(SLOW)  # warm up
    start = time.perf_counter()
    for _ in range(10):
        bootstrap_ci(SLOW, n_boot=10_000)
    assert (time.perf_counter() - start) / 10 < 0.05


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

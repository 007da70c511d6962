"""Spread and uncertainty for repeated measurements (methodology §4): the kit's one bootstrap, a sample's summary
with the interval of its median, and the one notation every report writes an interval in.

A comparison of two conditions is never made here: it is paired within rounds (`pglab.core.stats.paired`), one
ratio and one interval per comparison, which the findings judge and the descriptive tables show.

Choices, and why:

* Intervals are percentile bootstrap intervals of the **median** (the statistic the studies chart), from
  ``n_boot`` resamples with a fixed seed, so a notebook re-run gives identical numbers. Each group uses
  the same seed and values are sorted first, so a group's result depends neither on the other groups
  in the frame nor on row order.
* The interval ends are taken with numpy's ``lower`` / ``higher`` quantile methods, i.e. actual resampled
  values just outside the nominal quantiles: slightly conservative at the small n (3–10) of benchmark
  repetitions.
* With fewer than two values there is no interval: nulls.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

__all__ = [
    "resample",
    "percentile_interval",
    "bootstrap_ci",
    "summarize",
    "interval",
    "ratio_digits",
    "ratio_with_interval",
]

_STATS = {"median": np.median, "mean": np.mean}


def _values(x) -> np.ndarray:
    """Sorted 1-D float array without NaN / None (failed runs are counted separately, not averaged in).

    Sorting makes every result a function of the values alone, not of the row order they arrived in.
    """
    arr = np.asarray(x, dtype=float).ravel()  # numpy turns None into NaN here
    return np.sort(arr[~np.isnan(arr)])


def _stat_fn(stat: str):
    try:
        return _STATS[stat]
    except KeyError:
        raise ValueError(f"stat must be one of {sorted(_STATS)}, not {stat!r}") from None


def resample(x: np.ndarray, stat: str, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The kit's one bootstrap: ``stat`` of each of ``n_boot`` resamples (with replacement) of the 1-D values x,
    drawn from ``rng``. Every interval here and in pglab.core.stats.paired resamples through it.

    One (n_boot, n) index matrix: 10k resamples of n=5 take about a millisecond. int32 indices draw the same
    numbers as numpy's default int64 ones (same generator stream), in half the memory."""
    idx = rng.integers(0, x.size, size=(n_boot, x.size), dtype=np.int32)
    return _stat_fn(stat)(x[idx], axis=1)


def percentile_interval(boot: np.ndarray, tail: float) -> tuple[float, float]:
    """The ``tail`` and 1 - ``tail`` quantiles of bootstrap replicates, as actual replicates just outside the
    nominal quantiles (numpy's ``lower`` / ``higher`` methods)."""
    return float(np.quantile(boot, tail, method="lower")), float(np.quantile(boot, 1.0 - tail, method="higher"))


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    return percentile_interval(boot, (1.0 - confidence) / 2.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")


def bootstrap_ci(
    x, stat: str = "median", n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of ``stat`` of one sample; (None, None) below two values."""
    _check_confidence(confidence)
    v = _values(x)
    _stat_fn(stat)
    if v.size < 2:
        return None, None
    return _interval(resample(v, stat, n_boot, np.random.default_rng(seed)), confidence)


def _grouped(df: pl.DataFrame, keys: list[str], value: str) -> list[dict]:
    """One dict per group: the key values plus ``_values`` (list), groups sorted by the keys."""
    for col in [*keys, value]:
        if col not in df.columns:
            raise ValueError(f"column {col!r} not in frame (columns: {df.columns})")
    vals = pl.col(value).cast(pl.Float64).alias("_values")
    if not keys:
        return [{"_values": df.get_column(value).cast(pl.Float64).to_list()}]
    return df.group_by(keys, maintain_order=True).agg(vals).sort(keys, nulls_last=True).to_dicts()


def _frame(df: pl.DataFrame, keys: list[str], rows: list[dict], schema: dict) -> pl.DataFrame:
    cols = [pl.Series(k, [r[k] for r in rows], dtype=df.schema[k]) for k in keys]
    cols += [pl.Series(name, [r[name] for r in rows], dtype=dtype) for name, dtype in schema.items()]
    return pl.DataFrame(cols)


_SUMMARY_SCHEMA = {
    "n": pl.Int64,
    "n_missing": pl.Int64,
    "median": pl.Float64,
    "mean": pl.Float64,
    "min": pl.Float64,
    "max": pl.Float64,
    "stddev": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
}


def summarize(
    df: pl.DataFrame,
    by: Sequence[str],
    value: str = "value",
    n_boot: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Per group of ``by``: n, n_missing (null/NaN values, e.g. failed runs), median, mean, min, max,
    stddev (sample, ddof=1), ci_low, ci_high (bootstrap interval of the median; null when n < 2).

    Rows sorted by ``by``; columns are ``by`` then the fixed order above.
    """
    by = list(by)
    rows = []
    for g in _grouped(df, by, value):
        raw = g.pop("_values")
        v = _values(raw)
        low, high = bootstrap_ci(v, "median", n_boot, seed, confidence)
        has = v.size > 0
        rows.append(
            {
                **g,
                "n": int(v.size),
                "n_missing": len(raw) - int(v.size),
                "median": float(np.median(v)) if has else None,
                "mean": float(np.mean(v)) if has else None,
                "min": float(v.min()) if has else None,
                "max": float(v.max()) if has else None,
                "stddev": float(np.std(v, ddof=1)) if v.size > 1 else None,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return _frame(df, by, rows, _SUMMARY_SCHEMA)


# -- how an interval reads: one notation for every study's report and evidence --------------------------------


def interval(low: float | None, high: float | None, spec: str = ".2f") -> str:
    """An interval as every report writes it: '[0.98–1.45]', square brackets, an en dash, no spaces; each end
    formatted with ``spec`` ('.1f' for percentages, '+.0f' for signed ones, ',.0f' for tps); '' when an end is
    missing (the caller says why there is no interval)."""
    if low is None or high is None:
        return ""
    return f"[{low:{spec}}–{high:{spec}}]"


def ratio_digits(low: float | None, high: float | None) -> int:
    """Decimals of a ratio and its interval: 2, or 3 where two would hide what decides the verdict: an interval
    narrower than 0.02, or an end that would read 1.00 (which side of 1 it lies on)."""
    if low is None or high is None:
        return 2
    return 3 if high - low < 0.02 or "1.00" in (f"{low:.2f}", f"{high:.2f}") else 2


def ratio_with_interval(
    ratio: float | None, low: float | None = None, high: float | None = None, digits: int | None = None, none: str = "—"
) -> str:
    """'1.23× [0.98–1.45]'; '1.23×' without an interval, ``none`` without a ratio. Decimals: ``digits``, or
    `ratio_digits`' rule. The label of the interval ("min–max, n=7", "95 % bootstrap ...") is the caller's."""
    if ratio is None:
        return none
    d = ratio_digits(low, high) if digits is None else digits
    ends = interval(low, high, f".{d}f")
    return f"{ratio:.{d}f}×" + (f" {ends}" if ends else "")

"""Paired, blocked comparisons: conditions compared within each round, never across the whole run.

The schedule interleaves conditions (round r of every condition runs before round r+1 of any), so a round is a
block: whatever the machine did during it (clock, noisy neighbour, cache state) touched every condition of that
round alike. Comparing within rounds cancels that; an unpaired bootstrap over all values lets it widen, or bias,
the interval. The choices, and why:

* **The estimate** is the geometric mean of the per-round ratios value(B) / value(A), i.e. exp(mean of the log
  ratios): it is symmetric (A/B is exactly 1 / (B/A)), and the bootstrap of a mean is smooth where the median of
  a few values jumps between them. Several values of one condition in one round are reduced to their median first.
* **The interval** comes from bootstrapping the rounds (the per-round log ratios), vectorised with numpy, fixed
  seed, values sorted so row order does not matter. It is Hesterberg's *expanded percentile* interval: the tail
  quantiles are widened so the normal tail matches sqrt(n / (n-1)) · t(n-1), which fixes the plain percentile
  interval's under-coverage at 10–30 rounds (≈ 91 % instead of 95 % at n = 10).
* **Below 10 rounds** there is no bootstrap: the interval is the min–max of the round ratios and is labelled so
  ("min–max, n=5"), with its coverage: min–max of n values covers the median with probability 1 − 2^(1−n)
  (75 % at n = 3, 94 % at n = 5). Never called a 95 % interval.
* Values must be positive (times, rates): zero, negative or missing values drop their round from the comparison.
* **Artefact rounds** (`core.artefacts`: under 0.4× or over 2.5× the cell's other rounds) are left out of every
  comparison, here and in the fast mode, unless the caller says the rounds are not exchangeable (`artefacts=False`).
* **Drift** between blocks: the baseline's second half of rounds over its first half (geometric means), with a
  Welch t interval on the logs. Pairing removes drift shared by both conditions; this tells how much there was.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
import polars as pl

from . import artefacts as _artefacts
from .stats import percentile_interval, resample

MIN_BOOTSTRAP = 10  # rounds (or values) below which the interval is min–max, labelled so
CONFIDENCE = 0.95
N_BOOT = 10_000

PAIRED_SCHEMA = {
    "n_rounds": pl.Int64,
    "ratio": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "coverage": pl.Float64,
    "method": pl.String,
}


def minmax_coverage(n: int) -> float:
    """Probability that [min, max] of n values covers the median of their distribution."""
    return 1.0 - 2.0 ** (1 - n) if n >= 2 else 0.0


def _minmax(out: dict, low: float, high: float, n: int) -> dict:
    """`out` with the min–max interval of n values (below MIN_BOOTSTRAP), labelled so, and its coverage."""
    return {**out, "low": low, "high": high, "coverage": minmax_coverage(n), "method": f"min–max, n={n}"}


def expanded_tail(n: int, confidence: float = CONFIDENCE) -> float:
    """Per-side tail probability of Hesterberg's expanded percentile interval for a mean of n values."""
    from scipy import stats  # here: half a second of imports that only an interval needs

    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return float(stats.norm.cdf(-z))


def bootstrap_mean_interval(
    x: np.ndarray, n_boot: int = N_BOOT, seed: int = 0, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Expanded-percentile bootstrap interval of the mean of each row of x (k studies × n values, no NaN).

    Each row is resampled by `pglab.stats.resample` (the kit's one bootstrap), vectorised over the resamples: 1,000
    studies of 10 rounds with 10,000 resamples each take about a second. Row i uses its own generator seeded
    (seed, i): a row's interval does not depend on how many rows come with it."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    k, n = x.shape
    tail = expanded_tail(n, confidence)
    low, high = np.empty(k), np.empty(k)
    for i in range(k):
        means = resample(x[i], "mean", n_boot, np.random.default_rng([seed, i]))
        low[i], high[i] = percentile_interval(means, tail)
    return low, high


def log_ratio_interval(logs, n_boot: int = N_BOOT, seed: int = 0, confidence: float = CONFIDENCE) -> dict:
    """Ratio (geometric mean of the round ratios) with its interval, from the per-round log ratios."""
    v = np.sort(np.asarray(logs, dtype=float))
    n = int(v.size)
    out = {"n_rounds": n, "ratio": None, "low": None, "high": None, "coverage": None, "method": "no paired rounds"}
    if n == 0:
        return out
    out["ratio"] = float(np.exp(v.mean()))
    if n == 1:
        return {**out, "method": "one round, no interval"}
    if n < MIN_BOOTSTRAP:
        return _minmax(out, float(np.exp(v[0])), float(np.exp(v[-1])), n)
    lo, hi = bootstrap_mean_interval(v[None, :], n_boot, seed, confidence)
    return {
        **out,
        "low": float(np.exp(lo[0])),
        "high": float(np.exp(hi[0])),
        "coverage": confidence,
        "method": f"{confidence:.0%} bootstrap over rounds, n={n}".replace("%", " %"),
    }


def round_values(
    df: pl.DataFrame, keys: Sequence[str], round_col: str = "round", value: str = "value", artefacts: bool = True
) -> pl.DataFrame:
    """One value per (keys, round): the median of the round's positive, finite values (others dropped); a cell's
    artefact rounds (`core.artefacts`) left out unless `artefacts` is False."""
    missing = [c for c in [*keys, round_col, value] if c not in df.columns]
    if missing:
        raise ValueError(f"columns {missing} not in frame (columns: {df.columns})")
    v = pl.col(value).cast(pl.Float64)
    rv = (
        df.filter(v.is_finite() & (v > 0))
        .group_by([*keys, round_col])
        .agg(v.median().alias(value))
        .sort([*keys, round_col])
    )
    return _artefacts.drop(rv, keys, round_col, value) if artefacts else rv


def paired_ratios(
    df: pl.DataFrame,
    by: Sequence[str],
    condition_col: str,
    baseline,
    round_col: str = "round",
    value: str = "value",
    artefacts: bool = True,
) -> pl.DataFrame:
    """Per group, condition (other than the baseline) and round: ratio = value / baseline's value that round.

    Columns: by, condition_col, round_col, ratio. Rounds missing either side are left out."""
    by = list(by)
    if condition_col in by:
        raise ValueError(f"condition column {condition_col!r} must not also be in by")
    rv = round_values(df, [*by, condition_col], round_col, value, artefacts)
    base = rv.filter(pl.col(condition_col) == baseline).drop(condition_col).rename({value: "_base"})
    other = rv.filter(pl.col(condition_col) != baseline)
    return (
        other.join(base, on=[*by, round_col], how="inner", nulls_equal=True)
        .select(*by, condition_col, round_col, (pl.col(value) / pl.col("_base")).alias("ratio"))
        .sort([*by, condition_col, round_col])
    )


def paired_compare(
    df: pl.DataFrame,
    by: Sequence[str],
    condition_col: str,
    baseline,
    round_col: str = "round",
    value: str = "value",
    n_boot: int = N_BOOT,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    artefacts: bool = True,
) -> pl.DataFrame:
    """Every condition against the baseline within rounds, one row per (group, condition).

    Columns: by, condition_col, baseline, n_rounds, ratio (geometric mean of round ratios, condition over
    baseline), low, high (interval; min–max below 10 rounds), coverage (nominal), method (label for the reader).
    Rows sorted by by, condition."""
    by = list(by)
    pr = paired_ratios(df, by, condition_col, baseline, round_col, value, artefacts)
    rows = []
    groups = pr.group_by([*by, condition_col], maintain_order=True).agg(pl.col("ratio").log().alias("_logs"))
    for g in groups.to_dicts():
        logs = g.pop("_logs")
        rows.append({**g, "baseline": baseline, **log_ratio_interval(logs, n_boot, seed, confidence)})
    schema = {**{c: df.schema[c] for c in [*by, condition_col]}, "baseline": df.schema[condition_col], **PAIRED_SCHEMA}
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


# -- the fast mode ---------------------------------------------------------------------------------------------------

FAST_QUANTILE = 0.1
FAST_N_BOOT = 2_000
# What the fast mode's interval truly covers at n rounds, simulated (3 executions a round, i.i.d. lognormal noise of
# 5 % per execution and 2 % per round; 4,000 studies at 4-6 rounds, 2,000 elsewhere; tests/test_paired_coverage.py
# re-checks it). From 10 rounds on it holds its nominal 95 %; below, a bootstrap of few rounds is too narrow.
FAST_COVERAGE = {2: 0.51, 3: 0.78, 4: 0.85, 5: 0.89, 6: 0.92, 7: 0.94, 8: 0.94, 9: 0.94}
FAST_METHOD = "fast mode"  # how `fast_compare` labels its rows' method, which `is_fast` reads back


def is_fast(methods) -> bool:
    """Whether a comparison table's `method` values (or one value) come from `fast_compare`."""
    values = [methods] if isinstance(methods, str) or methods is None else list(methods)
    return any(str(m).startswith(FAST_METHOD) for m in values if m is not None)


def _row_quantiles(x: np.ndarray, q: float) -> np.ndarray:
    """numpy's linear `q` quantile of each row's non-NaN values (np.nanquantile along an axis is a Python loop)."""
    m = (~np.isnan(x)).sum(axis=1)
    h = (m - 1) * q
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, m - 1)
    x = np.sort(x, axis=1)  # NaN last
    rows = np.arange(x.shape[0])
    return x[rows, lo] + (h - lo) * (x[rows, hi] - x[rows, lo])


def _resampled_quantiles(x: np.ndarray, idx: np.ndarray, q: float) -> np.ndarray:
    """`_row_quantiles(x[idx].reshape(len(idx), -1), q)`, the `q` quantile of each resample's executions (resample b
    takes the rounds idx[b] of x, rounds × executions, NaN padded), without making the resamples: a resample is
    its rounds' counts, the k-th of its executions the smallest value with more than k of them at or below it (a
    binary search over every execution's value, all resamples at once). Bit-identical, and on rounds of thousands
    of executions (auto_explain's transactions) ~200× faster than sorting the 2,000 resamples."""
    n_boot, finite = idx.shape[0], ~np.isnan(x)
    values = np.sort(x[finite])
    # at_or_below[i, r]: round r's executions at or below values[i]
    rounds = [np.sort(row[ok]) for row, ok in zip(x, finite, strict=True)]
    at_or_below = np.stack([np.searchsorted(r, values, side="right") for r in rounds], axis=1)
    counts = np.zeros((n_boot, x.shape[0]), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n_boot), idx.shape[1]), idx.ravel()), 1)
    m = counts @ finite.sum(axis=1)
    h = (m - 1) * q
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, m - 1)

    def kth(k: np.ndarray) -> np.ndarray:
        left, right = np.zeros(n_boot, dtype=np.int64), np.full(n_boot, values.size - 1)
        while (left < right).any():
            mid = (left + right) // 2
            short = (at_or_below[mid] * counts).sum(axis=1) <= k
            left, right = np.where(short, mid + 1, left), np.where(short, right, mid)
        return values[left]

    v_lo, v_hi = kth(lo), kth(hi)
    return v_lo + (h - lo) * (v_hi - v_lo)


def _boot_quantiles(x: np.ndarray, idx: np.ndarray, q: float) -> np.ndarray:
    # below ~50 executions a round the resamples are small and sorting them is faster (measured here)
    return _resampled_quantiles(x, idx, q) if x.shape[1] > 48 else _row_quantiles(x[idx].reshape(len(idx), -1), q)


def _padded(arrays: list[np.ndarray]) -> np.ndarray:
    """Rounds × executions, NaN where a round had fewer: resampled rounds stay one numpy gather."""
    out = np.full((len(arrays), max(a.size for a in arrays)), np.nan)
    for k, a in enumerate(arrays):
        out[k, : a.size] = a
    return out


def _fast_label(n: int, cover: float, q: float = FAST_QUANTILE) -> str:
    return f"{FAST_METHOD}: {q:.0%} quantile of every execution, {cover:.0%} bootstrap over rounds, n={n}".replace(
        "%", " %"
    )


def _stable_seed(*key) -> int:
    """A cell's own generator seed: the same comparison gets the same interval in every table that shows it,
    whatever else was compared with it."""
    return zlib.crc32(repr(key).encode())


def _fast_row(
    a: list[np.ndarray], b: list[np.ndarray], n: int, q: float, n_boot: int, seed: int, confidence: float
) -> dict:
    """Ratio, interval, coverage and method from the condition's (a) and baseline's (b) executions, one rounds ×
    executions array per item (NaN padded). Several items: the geometric mean of the items' quantile ratios, so
    every item weighs alike; the bootstrap resamples the same rounds for every item and both sides."""
    out = dict.fromkeys(PAIRED_SCHEMA) | {"n_rounds": n, "method": f"{FAST_METHOD}: no paired rounds"}
    if not n:
        return out
    out["ratio"] = float(
        np.exp(np.mean([np.log(np.nanquantile(x, q) / np.nanquantile(y, q)) for x, y in zip(a, b, strict=True)]))
    )
    out["method"] = f"{FAST_METHOD}: one round, no interval"
    if n < 2:
        return out
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
    logs = [np.log(_boot_quantiles(x, idx, q) / _boot_quantiles(y, idx, q)) for x, y in zip(a, b, strict=True)]
    boot = np.exp(np.mean(logs, axis=0))
    # plain percentile: the expansion fits a mean; on the quantile it made A/A intervals too wide
    # (1.4 % false differences over 1,000 i.i.d. A/A studies, 3.9 % without)
    lo, hi = percentile_interval(boot, (1 - confidence) / 2)
    # what n rounds truly cover (FAST_COVERAGE, simulated): below 90 % (5 rounds and fewer) it decides nothing
    cover = min(confidence, FAST_COVERAGE.get(n, confidence))
    return out | {"low": lo, "high": hi, "coverage": cover, "method": _fast_label(n, cover, q)}


def fast_compare(
    df: pl.DataFrame,
    by: Sequence[str],
    condition_col: str,
    baseline,
    round_col: str = "round",
    value: str = "value",
    q: float = FAST_QUANTILE,
    n_boot: int = FAST_N_BOOT,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    item_col: str | None = None,
    artefacts: bool = True,
) -> pl.DataFrame:
    """Every condition against the baseline in the machine's fast mode, one row per (group, condition), with the
    columns of `paired_compare`.

    On a shared VM a query runs ~2× slower for stretches of 0.5–2 s, at times most of a run; a round whose every
    execution of one condition fell in such a stretch breaks a per-round ratio, however its value is reduced.
    Here every execution of a cell counts (all rounds pooled): ratio = the `q` quantile of the condition's
    executions over the baseline's, i.e. what the query costs when the machine is not slowed, which only needs
    `q` of the executions to be unslowed. The interval resamples the rounds (the same rounds for both sides,
    so what a round shared stays paired), `n_boot` times, percentile interval. Its stated coverage is what n rounds
    truly cover in simulation (FAST_COVERAGE: 89 % at 5 rounds, so it decides no verdict below 6; pooled over two
    clusters of 5 rounds, `between_runs.POOLED_COVERAGE`: 95 %).

    `item_col`: several items pooled per group (e.g. the operators of a study): the geometric mean of each item's
    quantile ratio over the rounds every item and both sides have, resampled together."""
    by = list(by)
    v = pl.col(value).cast(pl.Float64)
    keys = by or ["_all"]
    items = [item_col] if item_col else ["_item"]
    d = df.filter(v.is_finite() & (v > 0)).with_columns(_all=pl.lit(0), _item=pl.lit(0))
    if artefacts:  # a round whose median is far outside its cell's others loses all its executions
        rv = round_values(d, [*keys, condition_col, *items], round_col, value, artefacts=False)
        bad = _artefacts.flagged(rv, [*keys, condition_col, *items], round_col, value)
        d = d.join(
            bad.select(*keys, condition_col, *items, round_col),
            on=[*keys, condition_col, *items, round_col],
            how="anti",
            nulls_equal=True,
        )
    cells = d.group_by([*keys, condition_col, *items, round_col]).agg(v.alias("_v"))
    rows = []
    for _, g in cells.sort([*keys, condition_col, *items, round_col]).group_by(keys, maintain_order=True):
        per = {
            (c, it): dict(zip(x[round_col], x["_v"], strict=True))
            for (c, it), x in g.group_by([condition_col, *items], maintain_order=True)
        }
        names = sorted({it for _, it in per})
        head = {k: g[k][0] for k in by}
        for cond in dict.fromkeys(c for c, _ in per if c != baseline):
            pairs = [(per.get((cond, it)), per.get((baseline, it))) for it in names]
            if any(x is None or y is None for x, y in pairs):
                continue
            rounds = sorted(set.intersection(*(set(x) & set(y) for x, y in pairs)))
            arrays = (
                [
                    (
                        _padded([np.asarray(x[r], dtype=float) for r in rounds]),
                        _padded([np.asarray(y[r], dtype=float) for r in rounds]),
                    )
                    for x, y in pairs
                ]
                if rounds
                else []
            )
            row = _fast_row(
                [x for x, _ in arrays],
                [y for _, y in arrays],
                len(rounds),
                q,
                n_boot,
                _stable_seed(seed, *head.values(), cond),
                confidence,
            )
            rows.append({**head, condition_col: cond, "baseline": baseline, **row})
    schema = {**{c: df.schema[c] for c in [*by, condition_col]}, "baseline": df.schema[condition_col], **PAIRED_SCHEMA}
    return pl.from_dicts(rows, schema=schema).sort([*by, condition_col]) if rows else pl.DataFrame(schema=schema)


# -- one sample ------------------------------------------------------------------------------------------------------


def order_statistic_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, int, float]:
    """0-based ranks (lo, hi) of the distribution-free interval for a median of n values, and its exact coverage:
    the narrowest one whose binomial coverage is at least `confidence`."""
    cdf, k = 0.0, 0
    while True:  # grow k while P(Bin(n, 1/2) <= k) stays within the tail
        nxt = cdf + math.comb(n, k) / 2**n
        if nxt > (1 - confidence) / 2:
            break
        cdf, k = nxt, k + 1
    k = max(k, 1)  # 1-based rank k: [x(k), x(n+1-k)] covers with 1 - 2·P(Bin <= k-1)
    return k - 1, n - k, 1 - 2 * cdf


def median_interval(values, confidence: float = CONFIDENCE) -> dict:
    """Median of one sample with an honest interval: min–max below 10 values ("min–max, n=5", with its coverage
    1 − 2^(1−n)), else the order-statistic interval with its exact coverage. Missing / NaN values are ignored."""
    v = np.asarray(values, dtype=float).ravel()
    v = np.sort(v[~np.isnan(v)])
    n = int(v.size)
    out = {"n": n, "median": None, "low": None, "high": None, "coverage": None, "method": "no data"}
    if n == 0:
        return out
    out["median"] = float(np.median(v))
    if n == 1:
        return {**out, "method": "one value, no interval"}
    if n < MIN_BOOTSTRAP:
        return _minmax(out, float(v[0]), float(v[-1]), n)
    lo, hi, cov = order_statistic_interval(n, confidence)
    return {
        **out,
        "low": float(v[lo]),
        "high": float(v[hi]),
        "coverage": cov,
        "method": f"{confidence:.0%} order-statistic interval, n={n}".replace("%", " %"),
    }


# -- drift between blocks --------------------------------------------------------------------------------------------


def drift(
    df: pl.DataFrame,
    by: Sequence[str],
    condition_col: str,
    baseline,
    round_col: str = "round",
    value: str = "value",
    confidence: float = CONFIDENCE,
    artefacts: bool = True,
) -> pl.DataFrame:
    """How much the baseline moved between the first and the second half of its rounds, per group.

    Columns: by, n_rounds, drift (geometric mean of the second half over the first), low, high (Welch t interval
    on the logs; null below 2 rounds per half), method."""
    from scipy import stats

    by = list(by)
    keys = by or ["_all"]  # no grouping keys: the whole frame is one group
    base = df.filter(pl.col(condition_col) == baseline).with_columns(_all=pl.lit(0))
    rv = round_values(base, keys, round_col, value, artefacts)
    rows = []
    for g in rv.group_by(keys, maintain_order=True).agg(pl.col(value).log().alias("_logs")).to_dicts():
        logs = np.asarray(g.pop("_logs"), dtype=float)  # rounds in order
        g.pop("_all", None)
        n, half = logs.size, logs.size // 2
        a, b = logs[:half], logs[n - half :]  # an odd middle round belongs to neither half
        row = {**g, "n_rounds": n, "drift": None, "low": None, "high": None, "method": "too few rounds (< 4)"}
        if half >= 2:
            d = b.mean() - a.mean()
            va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
            se = math.sqrt(va + vb)
            dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if se > 0 else a.size + b.size - 2
            t = stats.t.ppf(1 - (1 - confidence) / 2, dof)
            row.update(
                drift=math.exp(d),
                low=math.exp(d - t * se),
                high=math.exp(d + t * se),
                method=f"2nd / 1st half of {n} rounds, Welch t on logs",
            )
        rows.append(row)
    schema = {
        **{c: df.schema[c] for c in by},
        "n_rounds": pl.Int64,
        "drift": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
        "method": pl.String,
    }
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)

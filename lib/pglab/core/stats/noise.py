"""What this machine can resolve: a noise floor measured by an A/A control and the physical ceiling of a parallel
speed-up (the CPU's governor and clock are recorded with the environment, pgtools.environment).

**A/A control.** The same server and condition measured twice under two condition labels (say "A" and "A2"),
interleaved like every other condition, compared with `paired.paired_compare` exactly like a real comparison.
Any difference found is noise, so:

* the *false-difference rate* is the share of A/A comparisons whose interval excludes 1 (should be ≈ 5 %;
  clearly more means the intervals are too narrow for this machine);
* the *noise floor* is the larger of the 95th percentile of |log ratio| over the A/A comparisons (how far an
  A/A estimate strays from 1) and the median half-width of their intervals in log terms (so that a lucky few
  A/A pairs cannot make it tiny). It is given as a relative effect, e.g. 0.04 = ±4 %. An effect smaller than
  the floor cannot support a claim (`verdicts.verdict`).

Where each server is measured on several clusters, its comparisons are pooled over them (`between_runs`: the
geometric mean of the clusters' ratios), and so are its A/A comparisons before a floor is taken (`pool_aa`): the
floor is how far an estimate *of the kind judged* strays from 1. A floor from one cluster's A/A pairs gated a
two-cluster mean by a single cluster's noise (over runs 205822 and 232744, S3's select-only floor was ±8 % and
±24 % per cluster, ±6 % and ±9 % pooled; SSB's ±4.5 % and ±21 %, ±2.8 % and ±13 %).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from . import paired
from .between_runs import base_servers, has_replicas


def aa_comparisons(
    df: pl.DataFrame,
    by,
    condition_col: str,
    a,
    a_prime,
    round_col: str = "round",
    value: str = "value",
    compare=paired.paired_compare,
    **kw,
) -> pl.DataFrame:
    """The A/A comparisons (a_prime over a), one row per group, by the study's own comparison (`compare`:
    `paired.paired_compare` within rounds, or `paired.fast_compare`), so the floor is that comparison's."""
    aa = df.filter(pl.col(condition_col).is_in([a, a_prime]))
    return compare(aa, by, condition_col, a, round_col, value, **kw)


# what a comparison's row holds besides its key (`paired.paired_compare`, `paired.fast_compare`)
_STATS = ("baseline", "n_rounds", "ratio", "low", "high", "coverage", "method", "flag", "cluster", "n_clusters")


def pool_aa(aa: pl.DataFrame) -> pl.DataFrame:
    """A/A comparisons (`aa_comparisons`) pooled over each base server's clusters (`between_runs.base_servers`) as
    the real comparisons are: the geometric mean of the clusters' ratios, its interval the mean's from the clusters'
    own (log half-width √Σh² / k at their coverage; no between-cluster term: an A/A copy shares its cluster), and
    n_clusters. Where no server has a replica cluster: `aa` as it is (n_clusters 1). A cluster without an interval
    leaves its pooled pair without one."""
    if aa.is_empty() or "server" not in aa.columns or not has_replicas(aa["server"].unique().to_list()):
        return aa.with_columns(n_clusters=pl.lit(1, pl.Int64))
    keys = ["server", *(c for c in aa.columns if c not in _STATS and c != "server")]
    half = (pl.col("high").log() - pl.col("low").log()) / 2
    return (
        base_servers(aa.filter(pl.col("ratio") > 0))
        .with_columns(l=pl.col("ratio").log(), h2=half**2)
        .group_by(keys, maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in ("baseline", "method") if c in aa.columns),
            *(pl.col(c).sum() for c in ("n_rounds",) if c in aa.columns),
            *(pl.col(c).min() for c in ("coverage",) if c in aa.columns),
            pl.col("l").mean(),
            (pl.col("h2").sum().sqrt() / pl.len()).alias("h"),
            pl.col("h2").null_count().alias("missing"),
            pl.len().cast(pl.Int64).alias("n_clusters"),
        )
        .with_columns(
            ratio=pl.col("l").exp(),
            low=pl.when(pl.col("missing") == 0).then((pl.col("l") - pl.col("h")).exp()),
            high=pl.when(pl.col("missing") == 0).then((pl.col("l") + pl.col("h")).exp()),
        )
        .drop("l", "h", "missing")
    )


def noise_floor(aa: pl.DataFrame, resolution: float | None = None) -> dict:
    """From A/A comparisons (rows of `paired.paired_compare`): n_pairs, false_difference_rate, floor (relative,
    0.04 = ±4 %), floor_log, method. Comparisons without an interval are left out. `resolution` (relative): the
    smallest step the values can take (1 µs of a 42 µs latency: 0.024); the floor is never below it, since A/A
    values that round to the same step give a floor of exactly 0."""
    ok = aa.filter(pl.col("low").is_not_null() & pl.col("high").is_not_null() & pl.col("ratio").is_not_null())
    n = ok.height
    if n == 0:
        return {
            "n_pairs": 0,
            "false_difference_rate": None,
            "floor": None,
            "floor_log": None,
            "method": "no A/A comparison with an interval",
        }
    excl = ((ok["low"] > 1) | (ok["high"] < 1)).sum()
    est = np.abs(np.log(ok["ratio"].to_numpy()))
    half = (np.log(ok["high"].to_numpy()) - np.log(ok["low"].to_numpy())) / 2
    floor_log = float(max(np.quantile(est, 0.95, method="higher"), np.median(half)))
    k = int(ok["n_clusters"].max()) if "n_clusters" in ok.columns and n else 1
    pooled = f", each pooled over {k} clusters" if k > 1 else ""
    method = f"max(95th percentile of |log A/A ratio|, median A/A half-width) over {n} A/A pair(s){pooled}"
    if resolution:
        floor_log = max(floor_log, math.log1p(resolution))
        method += f", at least the values' resolution ±{resolution:.1%}".replace("%", " %")
    return {
        "n_pairs": n,
        "false_difference_rate": excl / n,
        "floor": math.exp(floor_log) - 1,
        "floor_log": floor_log,
        "method": method,
    }


# the `<study>_noise` table of every study (report.sections reads it): one row per server (or "all") and metric
SCHEMA = {
    "study": pl.String,
    "server": pl.String,
    "metric": pl.String,
    "n_pairs": pl.Int64,
    "false_difference_rate": pl.Float64,
    "floor": pl.Float64,
    "method": pl.String,
}


def row(study: str, server: str, metric: str, floor: dict) -> dict:
    """One row of SCHEMA from what `noise_floor` returned."""
    return {"study": study, "server": server, "metric": metric, **{k: floor[k] for k in SCHEMA if k in floor}}


def table(rows: list[dict]) -> pl.DataFrame:
    """The noise table (SCHEMA) of `rows`, empty with its columns when there are none."""
    return pl.from_dicts(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)


MIN_AA_PAIRS = 5  # a floor rests on at least this many A/A comparisons (issue 30): two pairs' floor is one outlier


def floor_from(noise_df: pl.DataFrame, candidates: list[tuple[str, str]]) -> dict | None:
    """The noise row a comparison is gated by: the first of `candidates` ((server, metric), the most specific
    first, e.g. the item's, then the server's over all its items) with a floor over at least MIN_AA_PAIRS A/A
    pairs; where none has that many, the one with the most pairs. None where no candidate has a floor."""
    rows = [
        r
        for server, metric in candidates
        for r in noise_df.filter((pl.col("server") == server) & (pl.col("metric") == metric)).iter_rows(named=True)
        if r["floor"] is not None
    ]
    enough = [r for r in rows if (r["n_pairs"] or 0) >= MIN_AA_PAIRS]
    return enough[0] if enough else max(rows, key=lambda r: r["n_pairs"] or 0, default=None)


def server_table(study: str, aa: pl.DataFrame, metric: str) -> pl.DataFrame:
    """The noise table of A/A comparisons `aa`: one row per base server (its A/A pairs pooled over its clusters,
    `pool_aa`) in name order, and "all" over every server's pairs, the floor a server with fewer than MIN_AA_PAIRS
    of its own falls back to (`server_floor`)."""
    if aa.is_empty():
        return table([])
    aa = pool_aa(aa).sort("server")
    rows = [row(study, s, metric, noise_floor(g)) for (s,), g in aa.group_by("server", maintain_order=True)]
    return table([*rows, row(study, "all", metric, noise_floor(aa))])


def server_floor(noise_df: pl.DataFrame, server: str, metric: str) -> float | None:
    """A server's floor of `metric` where it rests on MIN_AA_PAIRS A/A pairs, else every server's ("all")."""
    r = floor_from(noise_df, [(server, metric), ("all", metric)])
    return r["floor"] if r else None


def borrowed_floor(floor: float | None, n_clusters: int | None) -> tuple[float | None, bool]:
    """(the floor, pooled) of a comparison of a quantity with no A/A control of its own, where `floor` is another
    quantity's A/A floor (methodology rule 15: an uncertainty belongs to its quantity): none where the comparison
    is pooled over two or more clusters, whose interval carries the clusters' disagreement (pooled True); on one
    cluster `floor` stands in, the nearest the run has. The studies say which in their evidence."""
    pooled = (n_clusters or 1) >= 2
    return (None if pooled else floor), pooled


def below_floor(ratio: float, floor: float | None) -> bool:
    """True when the effect `ratio` (e.g. 1.03) is within ±floor (relative, e.g. 0.04) of no effect."""
    return floor is not None and ratio is not None and ratio > 0 and abs(math.log(ratio)) < math.log1p(floor)


CEILING_SLACK = 0.05  # timer and scheduling jitter: 1.03× "speed-up" of two equal serial plans is not a breach


def ceiling_check(speedup: float | None, processes: int, cores: int | None) -> str | None:
    """A flag when a speed-up (old time / new time) exceeds the physical ceiling min(processes, cores) by more
    than CEILING_SLACK: more than that many processes cannot run at once, so such a figure is a measurement
    problem (caching, a changed plan, a clock change), not a result. None when within it or not measured."""
    if speedup is None:
        return None
    ceiling = min(processes, cores) if cores else processes
    if speedup <= ceiling * (1 + CEILING_SLACK):
        return None
    capped = f"{processes} processes on {cores} cores" if cores else f"{processes} processes"
    return f"speed-up {speedup:.2f}× above the physical ceiling {ceiling}× ({capped}): a measurement problem"

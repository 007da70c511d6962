"""Intervals that hold across a re-run: the between-cluster component a within-run interval leaves out.

A run's rounds share its clusters: one initdb, one load, one ANALYZE sample, one physical layout per server. Two
runs differ in all of those, so the same figure moves between runs by more than its within-run interval allows
(measured: 18 % of run pairs outside their joint 95 % interval where 5 % should be). The remedy is a random-effects
interval: the within-run variance of the estimate plus a between-cluster variance, estimated from cluster-level
A/A pairs (the same server, condition and item measured on two independently made and loaded clusters), with
Welch–Satterthwaite degrees of freedom so that a variance estimated from few pairs widens the interval as it
should.

    var_c, df_c = cluster_variance(aa_log_ratios, aa_se)         # from the run's cluster A/A pairs
    low, high = across_run_interval(log_ratio, se, df, var_c, df_c)  # B / A, clusters on each side: 1 and 1
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def cluster_variance(aa_log_ratios: Sequence[float], aa_se: Sequence[float] | None = None) -> tuple[float, int]:
    """The between-cluster variance of one cluster's effect (log scale) and its degrees of freedom, from A/A pairs:
    each log(cluster 1 / cluster 2) of the same server, condition and item has variance 2·var_c plus its own
    within-run variance (aa_se², subtracted when given: a moment estimate, never below 0)."""
    d = np.asarray(aa_log_ratios, dtype=float)
    if d.size == 0:
        raise ValueError("no cluster A/A pair: the between-cluster variance cannot be estimated")
    within = np.asarray(aa_se, dtype=float) ** 2 if aa_se is not None else np.zeros_like(d)
    return max(0.0, float(np.mean(d**2 - within)) / 2.0), int(d.size)


def across_run_interval(
    log_ratio: float,
    se_within: float,
    df_within: int,
    var_cluster: float,
    df_cluster: int,
    clusters_a: int = 1,
    clusters_b: int = 1,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """The interval of B / A (not of its log) that a re-run on fresh clusters should land in: within-run variance
    plus var_cluster per cluster on each side (a side measured on k clusters and averaged: var_cluster / k)."""
    from scipy import stats  # here: half a second of imports that only an interval needs

    extra = var_cluster * (1 / clusters_a + 1 / clusters_b)
    var = se_within**2 + extra
    if var == 0:
        return math.exp(log_ratio), math.exp(log_ratio)
    denom = (se_within**4 / max(df_within, 1)) + (extra**2 / max(df_cluster, 1))
    df = var**2 / denom if denom > 0 else float(max(df_within, 1))
    t = float(stats.t.ppf(1 - (1 - confidence) / 2, df))
    half = t * math.sqrt(var)
    return math.exp(log_ratio - half), math.exp(log_ratio + half)


def within_run_interval(round_log_ratios: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean of the paired round log ratios, its t interval (as B / A) and its standard error and df: the interval a
    run gives when only its own rounds are counted."""
    from scipy import stats

    x = np.asarray(round_log_ratios, dtype=float)
    n = x.size
    se = float(x.std(ddof=1) / math.sqrt(n))
    t = float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1))
    m = float(x.mean())
    return math.exp(m - t * se), math.exp(m + t * se), se, n - 1

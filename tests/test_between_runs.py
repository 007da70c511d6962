"""An interval a reader compares across machines must hold across a re-run. Simulated runs with a known
between-cluster variance: each run measures B against A on fresh clusters (one each), 15 interleaved rounds, and a
cluster-level A/A (A on a second cluster) for every item. The within-run interval (rounds only) under-covers the
true ratio badly; the across-run interval (pglab.core.between_runs) covers it 93-97 % of the time."""

import math

import numpy as np

from pglab.core import between_runs as br

RUNS, ITEMS, ROUNDS = 2000, 13, 15  # SSB's 13 queries, its 15 rounds
SIGMA_CLUSTER, SIGMA_ROUND, TRUE = 0.03, 0.02, math.log(0.9)  # 3 % per cluster, 2 % per round; B is 10 % faster


def _simulate(seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    within_hits = across_hits = 0
    for _ in range(RUNS):
        # every item: a cluster effect for A, B and the A/A twin A2; independent round noise around them
        ca, cb, ca2 = rng.normal(0, SIGMA_CLUSTER, (3, ITEMS))
        noise = rng.normal(0, SIGMA_ROUND, (3, ITEMS, ROUNDS))
        a, b, a2 = ca[:, None] + noise[0], TRUE + cb[:, None] + noise[1], ca2[:, None] + noise[2]
        aa, aa_se = [], []
        for i in range(ITEMS):
            _, _, se, _ = br.within_run_interval(a2[i] - a[i])
            aa.append(float(np.mean(a2[i] - a[i])))
            aa_se.append(se)
        var_c, df_c = br.cluster_variance(aa, aa_se)
        lo, hi, se, df = br.within_run_interval(b[0] - a[0])  # the figure a reader takes away: item 0
        within_hits += lo <= math.exp(TRUE) <= hi
        lo, hi = br.across_run_interval(float(np.mean(b[0] - a[0])), se, df, var_c, df_c)
        across_hits += lo <= math.exp(TRUE) <= hi
    return within_hits / RUNS, across_hits / RUNS


def test_the_across_run_interval_covers_and_the_within_run_one_does_not():
    within, across = _simulate(20261126)
    print(f"\ncoverage over {RUNS} simulated runs: within-run {within:.1%}, across-run {across:.1%}")
    assert 0.93 <= across <= 0.97, across
    assert within < 0.6, within  # rounds alone say ±1.6 %; fresh clusters move the figure by ±4 %


def test_no_between_cluster_variance_gives_the_within_run_interval_back():
    lo, hi, se, df = br.within_run_interval([0.01, -0.01, 0.02, 0.0, 0.005])
    assert br.across_run_interval(float(np.mean([0.01, -0.01, 0.02, 0.0, 0.005])), se, df, 0.0, 10) == (lo, hi)
    assert br.cluster_variance([0.001, -0.001], [0.01, 0.01]) == (0.0, 2)  # within noise explains it all

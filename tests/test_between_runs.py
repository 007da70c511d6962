"""An interval a reader compares across machines must hold across a re-run. Simulated runs with a known
between-cluster variance: each run measures B against A on fresh clusters (one each), 15 interleaved rounds, and a
cluster-level A/A (A on a second cluster) for every item. The within-run interval (rounds only) under-covers the
true ratio badly; the across-run interval (pglab.core.stats.between_runs) covers it 93-97 % of the time."""

import math

import numpy as np

from pglab.core.stats import between_runs as br

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


# -- pooling a paired table measured on two clusters per server (params servers.clusters) ----------------------------

POOL_RUNS, POOL_ITEMS, POOL_ROUNDS, POOL_CLUSTERS = 1000, 9, 10, 2  # jit_operators: 9 operators, 10 rounds
POOL_TAU, POOL_ROUND = 0.03, 0.02  # a cluster moves a comparison by 3 % (sd), a round by 2 %
POOL_TRUE = np.log(np.linspace(0.7, 1.1, POOL_ITEMS))


def _paired_rows(rng) -> list[dict]:
    """One simulated run: every item compared within rounds on each of two fresh clusters, as a paired table."""
    rows = []
    for k in range(1, POOL_CLUSTERS + 1):
        u = rng.normal(0, POOL_TAU, POOL_ITEMS)  # this cluster's effect on each comparison
        for i in range(POOL_ITEMS):
            x = POOL_TRUE[i] + u[i] + rng.normal(0, POOL_ROUND, POOL_ROUNDS)
            lo, hi, _, _ = br.within_run_interval(x)
            rows.append(
                {
                    "server": "pg17" if k == 1 else f"pg17_c{k}",
                    "item": f"i{i}",
                    "condition": "b",
                    "baseline": "a",
                    "n_rounds": POOL_ROUNDS,
                    "ratio": math.exp(float(x.mean())),
                    "low": lo,
                    "high": hi,
                    "coverage": 0.95,
                    "method": f"95 % t over rounds, n={POOL_ROUNDS}",
                }
            )
    return rows


def _pool_simulate(seed: int) -> dict[str, float]:
    import polars as pl

    rng = np.random.default_rng(seed)
    hits = {"pooled": 0, "within_pooled": 0, "one_cluster": 0}
    n = 0
    for _ in range(POOL_RUNS):
        table = pl.from_dicts(_paired_rows(rng))
        pooled = br.pool_clusters(table, ["item", "condition"])
        assert pooled.height == POOL_ITEMS and set(pooled["server"]) == {"pg17"}
        one = table.filter(pl.col("server") == "pg17").sort("item")
        for r, o in zip(pooled.sort("item").iter_rows(named=True), one.iter_rows(named=True), strict=True):
            true = math.exp(POOL_TRUE[int(r["item"][1:])])
            hits["pooled"] += r["low"] <= true <= r["high"]
            hits["within_pooled"] += r["within_low"] <= true <= r["within_high"]
            hits["one_cluster"] += o["low"] <= true <= o["high"]
            assert r["low"] <= r["within_low"] and r["high"] >= r["within_high"]
            n += 1
    return {k: v / n for k, v in hits.items()}


def test_pooled_clusters_cover_fresh_runs_and_rounds_alone_do_not():
    """Two clusters per server, 9 comparisons, 10 rounds, between-cluster sd 3 %, round sd 2 %: the pooled
    interval covers the true ratio in 93-97 % of simulated runs; the rounds alone (one cluster's interval, or the
    two clusters' rounds without the between-cluster term) in far fewer."""
    cover = _pool_simulate(20261127)
    print(
        f"\ncoverage over {POOL_RUNS} runs x {POOL_ITEMS} comparisons: pooled across clusters {cover['pooled']:.1%}, "
        f"the same rounds without the between-cluster term {cover['within_pooled']:.1%}, "
        f"one cluster's rounds {cover['one_cluster']:.1%}"
    )
    assert 0.93 <= cover["pooled"] <= 0.97, cover
    assert cover["within_pooled"] < 0.75 and cover["one_cluster"] < 0.6, cover


def test_pooling_leaves_a_table_without_replicas_alone_and_names_the_base_servers():
    import polars as pl

    rng = np.random.default_rng(1)
    table = pl.from_dicts(_paired_rows(rng))
    single = table.filter(pl.col("server") == "pg17")
    assert br.pool_clusters(single, ["item", "condition"]) is single
    pooled = br.pool_clusters(table, ["item", "condition"])
    assert pooled["server"].unique().to_list() == ["pg17"]
    assert pooled["n_clusters"].to_list() == [2] * POOL_ITEMS
    assert (pooled["n_rounds"] == 2 * POOL_ROUNDS).all()
    assert pooled["method"][0].startswith(f"95 % t over rounds, n={POOL_ROUNDS}; pooled: 95 % across 2 clusters × 10")
    # geometric mean of the two clusters' ratios
    both = table.filter(pl.col("item") == "i0")["ratio"].to_numpy()
    assert math.isclose(pooled.filter(pl.col("item") == "i0")["ratio"][0], float(np.sqrt(both.prod())))
    # a user's server named like a replica without its base stays itself
    lone = table.filter(pl.col("server") == "pg17_c2")
    assert br.pool_clusters(lone, ["item", "condition"]) is lone


def test_replica_variance_is_the_cluster_variance_of_two_clusters():
    d = np.array([0.03, -0.02, 0.05, 0.01])
    se = np.array([0.01, 0.012, 0.008, 0.01])
    groups = [((x, 0.0), (s / math.sqrt(2), s / math.sqrt(2))) for x, s in zip(d, se, strict=True)]
    var, df = br.replica_variance(groups)
    var_c, df_c = br.cluster_variance(d, se)
    assert df == df_c and math.isclose(var, var_c)


def test_pool_shared_gives_every_base_server_one_variance_and_the_method_says_so():
    """Versions compared against a baseline (pgbench): each server has one comparison per experiment, too few
    for a variance of its own; `pool_shared` estimates one from every server's clusters, and `clusters_text`
    says what the intervals rest on."""
    import polars as pl

    rng = np.random.default_rng(3)
    rows = []
    for server in ("pg16", "pg17", "pg18"):
        t = pl.from_dicts(_paired_rows(rng)).filter(pl.col("item") == "i0")
        rows.append(t.with_columns(pl.col("server").str.replace("pg17", server)))
    table = pl.concat(rows)
    assert {v[1] for v in br.cluster_variances(table, ["item"]).values()} == {1}  # each server's own: df 1
    var, df = br.shared_variance(table, ["item"])
    assert df == 3 and var >= 0
    pooled = br.pool_shared(table, ["item", "condition"])
    assert sorted(pooled["server"]) == ["pg16", "pg17", "pg18"] and (pooled["n_clusters"] == 2).all()
    assert all(f"(df {df})" in m for m in pooled["method"])
    assert br.pool_shared(table.filter(pl.col("server") == "pg16"), ["item"]).height == 1  # no replicas: as is
    text = br.clusters_text(pooled)
    assert text.startswith(f"pg16: 2 clusters × {POOL_ROUNDS} rounds, between-cluster sd ")
    assert br.clusters_text(table) is None

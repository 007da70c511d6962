"""What a pooled row covers (issue 30): with `servers.clusters: 2` each study pools its paired table over two
clusters per server (`between_runs.pool_clusters`). Simulated runs at the round counts per cluster the default
profile uses, for each interval method, computed by the study code itself: every simulated run measures two fresh
clusters of one server, each cluster's interval comes from `paired.fast_compare` or `paired.paired_compare` on a
tidy table, and `pool_clusters` pools them. The true ratio is the one a fresh run's clusters centre on (the cluster
effects have mean 0 on the log scale, as in tests/test_between_runs.py). The pooled interval covers it in 93-97 %
of the comparisons where 5 or more comparisons estimate the between-cluster variance, up to 99 % (the safe side)
where only 2-4 do; the same rounds without the between-cluster term cover far less.
`between_runs.POOLED_COVERAGE` holds what these simulations give with six times the runs, and labels the pooled
rows. About 9 s."""

import math

import numpy as np
import polars as pl
import pytest

from pglab.core import between_runs as br
from pglab.core import paired

TAU = 0.03  # a cluster moves a comparison by 3 % (sd, log scale), as in tests/test_between_runs.py
ROUND_SD = 0.02  # round mode: a round's ratio moves by 2 %
# fast mode: paired.FAST_COVERAGE's noise (lognormal, 5 % per execution, 2 % per round shared by both sides) and
# the VM's bursts: an execution 2x slow with probability 0.1, every execution of one condition in one round with
# 0.05 (a burst over the cell). Median A/A half-width at 15 rounds x 1 execution: 5.5 % (SSB's measured floors:
# 1.1-7 %), at 10 rounds x 3 executions: 4.3 % (the JIT operators': 3.6 % quiet, 12-14 % noisy)
EXEC_SD, SHARED_SD, BURST, BURST_CELL = 0.05, 0.02, 0.1, 0.05


def _truth(items: int) -> np.ndarray:
    return np.log(np.linspace(0.7, 1.1, items))  # the comparisons' true log ratios


def _servers(runs: int, k: int) -> np.ndarray:
    """Run r's server: r<r> on cluster 1, r<r>_c2 on cluster 2 (`replicas`), so each run pools on its own."""
    return np.array([f"r{r}" if k == 1 else f"r{r}_c{k}" for r in range(runs)])


def _tidy(log: np.ndarray, runs: int, k: int) -> pl.DataFrame:
    """Cluster k's simulated log values, indexed (run, item, round, condition[, execution]), as a tidy table."""
    r, i, n, c = np.indices(log.shape)[:4]
    return pl.DataFrame(
        {
            "server": _servers(runs, k)[r.ravel()],
            "item": i.ravel(),
            "condition": np.array(["a", "b"])[c.ravel()],
            "round": n.ravel(),
            "value": np.exp(log).ravel(),
        }
    )


def fast_runs(rng, runs: int, items: int, rounds: int, executions: int) -> tuple[pl.DataFrame, np.ndarray]:
    """Simulated runs in the fast mode: per run, cluster and item, condition b against a over `rounds` rounds of
    `executions` each; b = a's distribution × the item's true ratio × the cluster's effect. The paired table of
    `paired.fast_compare` over every run's two clusters, and the true log ratios."""
    true, frames = _truth(items), []
    for k in (1, 2):
        effect = rng.normal(0, TAU, (runs, items))
        shape = (runs, items, rounds, 2, executions)  # run, item, round, condition (a, b), execution
        log = rng.normal(0, SHARED_SD, (runs, 1, rounds, 1, 1)) + rng.normal(0, EXEC_SD, shape)
        slow = (rng.random(shape) < BURST) | (rng.random((*shape[:4], 1)) < BURST_CELL)
        log = log + math.log(2) * slow + np.stack([np.zeros((runs, items)), true + effect], -1)[:, :, None, :, None]
        frames.append(_tidy(log, runs, k))
    return paired.fast_compare(pl.concat(frames), ["server", "item"], "condition", "a", "round"), true


def round_runs(rng, runs: int, items: int, rounds: int) -> tuple[pl.DataFrame, np.ndarray]:
    """Simulated runs in the round mode: per run, cluster and item one value of a and of b per round, their
    ratio the item's true ratio × the cluster's effect × lognormal round noise (ROUND_SD). The paired table of
    `paired.paired_compare` (min–max below 10 rounds), and the true log ratios."""
    true, frames = _truth(items), []
    for k in (1, 2):
        effect = rng.normal(0, TAU, (runs, items))
        a = rng.normal(0, ROUND_SD / math.sqrt(2), (runs, items, rounds))
        b = (true + effect)[:, :, None] + rng.normal(0, ROUND_SD / math.sqrt(2), (runs, items, rounds))
        log = np.stack([a, b], -1)
        frames.append(_tidy(log, runs, k))
    return paired.paired_compare(pl.concat(frames), ["server", "item"], "condition", "a", "round"), true


def coverage(table: pl.DataFrame, true: np.ndarray) -> dict:
    """How often each interval covers the true ratio: pooled (`pool_clusters`: one row per run and item), the
    same rounds without the between-cluster term (within), one cluster's own interval (one); and the labels."""
    pooled = br.pool_clusters(table, ["item", "condition", "baseline"])
    t = np.exp(true[pooled["item"].to_numpy()])

    def hits(frame, low, high, t):
        return float(np.mean((frame[low].to_numpy() <= t) & (t <= frame[high].to_numpy())))

    one = table.filter(~pl.col("server").str.contains("_c"))
    return {
        "n": pooled.height,
        "pooled": hits(pooled, "low", "high", t),
        "within": hits(pooled, "within_low", "within_high", t),
        "one": hits(one, "low", "high", np.exp(true[one["item"].to_numpy()])),
        "label": pooled["coverage"].unique().to_list(),
        "own_label": table["coverage"].unique().to_list(),
        "method": pooled["method"][0],
    }


# (method, rounds per cluster, the study whose shape it is, comparisons per server, executions per round, runs):
# the default profile's designs (params/default.yaml); runs so that the file takes about 9 s
CASES = [
    ("fast", 5, "jit_operators: 9 operators x on, on_optimized", 18, 6, 36),
    ("fast", 5, "SSB: 13 queries, parallel over serial", 13, 1, 50),
    ("fast", 5, "SSB sweep: 2 queries x 1, 2 workers over 0", 4, 1, 120),
    ("min–max", 5, "partitioning: 1-4 workers over serial", 4, None, 200),
    ("min–max", 4, "pgbench no-vacuum series: 5 versions over 11, 4 runs", 5, None, 160),
    ("min–max", 3, "parallel_index: 2 key sizes", 2, None, 400),
    ("min–max", 3, "pgbench select-only: 5 versions over 11", 5, None, 160),
    ("min–max", 6, "pgbench scale-up: 10 over 11, 2 modes x 3 client counts x 2 rounds", 2, None, 400),
    ("min–max", 2, "2 rounds: no default study pools so few", 2, None, 400),
]
IDS = [f"{'fast' if c[0] == 'fast' else 'minmax'}{c[1]}-{c[2].split(':')[0].replace(' ', '_')}" for c in CASES]


def simulate(method: str, rounds: int, items: int, executions: int | None, runs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    if method == "fast":
        return coverage(*fast_runs(rng, runs, items, rounds, executions))
    return coverage(*round_runs(rng, runs, items, rounds))


@pytest.mark.parametrize(("method", "rounds", "study", "items", "executions", "runs"), CASES, ids=IDS)
def test_the_pooled_interval_covers_what_its_label_says(method, rounds, study, items, executions, runs):
    c = simulate(method, rounds, items, executions, runs, seed=30_000 + 100 * rounds + items)
    print(
        f"\n{method}, {rounds} rounds per cluster ({study}), {c['n']} comparisons: pooled covers {c['pooled']:.1%}, "
        f"the rounds without the between-cluster term {c['within']:.1%}, one cluster's interval {c['one']:.1%} "
        f"(labelled {c['own_label']}); pooled label {c['label']}: {c['method']}"
    )
    # 93-97 %; up to 99 % (wider, the safe side) where 2-4 comparisons estimate the between-cluster variance: its t
    # has at most that many df (between_runs.across_run_interval), 97-98.5 % with six times the runs
    high = 0.97 if items > 4 else 0.99
    assert 0.93 <= c["pooled"] <= high, c
    # the label: what the simulations say (POOLED_COVERAGE), never above the nominal 95 %, at least the 90 % a
    # verdict needs; and within 3 points of what this smaller simulation gives
    want = min(paired.CONFIDENCE, br.POOLED_COVERAGE[(method, rounds)])
    assert c["label"] == [want] and 0.90 <= want <= c["pooled"] + 0.03, c
    assert f"pooled: {want:.0%}".replace("%", " %") in c["method"], c
    # the rounds alone (and one cluster's interval) under-cover: fresh clusters move the figure further. Least so
    # where the rounds' own interval is wide: SSB's one execution a round with bursts (about 91 %), min–max of 2
    # rounds (90 %, its t has 1 df)
    assert c["within"] < min(0.93, c["pooled"] - 0.03) or rounds == 2, c
    assert c["one"] < 0.8, c


def test_an_unsimulated_method_keeps_the_clusters_own_label():
    """A pooled row of a method and round count not in POOLED_COVERAGE (fast mode over 3 rounds, labelled 78 %)
    keeps the lowest of the clusters' own labels and the nominal confidence, as before."""
    c = coverage(*fast_runs(np.random.default_rng(1), 2, 3, 3, 3))
    assert (("fast", 3) not in br.POOLED_COVERAGE) and c["label"] == [paired.FAST_COVERAGE[3]], c

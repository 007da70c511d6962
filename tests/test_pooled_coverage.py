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

from pglab.core.stats import between_runs as br
from pglab.core.stats import paired

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


# -- a shift common to a cluster's comparisons, and the prior from archived runs (`between_runs.moderate`) ----------

TAU_COMMON, TAU_ITEM = 0.03, 0.01  # a cluster shifts every comparison by one 3 % draw, and each by 1 % more


def shifted_runs(rng, runs: int, items: int, rounds: int) -> tuple[pl.DataFrame, np.ndarray]:
    """`round_runs` whose cluster effect is mostly common to the cluster's comparisons (TAU_COMMON) with a little
    per comparison (TAU_ITEM): what three fresh runs showed (a server's estimate 7.5 %, 0.0 %, 6.5 %, nominally
    from 13 df), where the comparisons' disagreement is one draw per cluster, not one per comparison."""
    true, frames = _truth(items), []
    for k in (1, 2):
        effect = rng.normal(0, TAU_COMMON, (runs, 1)) + rng.normal(0, TAU_ITEM, (runs, items))
        a = rng.normal(0, ROUND_SD / math.sqrt(2), (runs, items, rounds))
        b = (true + effect)[:, :, None] + rng.normal(0, ROUND_SD / math.sqrt(2), (runs, items, rounds))
        frames.append(_tidy(np.stack([a, b], -1), runs, k))
    return paired.paired_compare(pl.concat(frames), ["server", "item"], "condition", "a", "round"), true


def moderated_coverage(seed: int, histories: int, runs: int, items: int, rounds: int) -> dict:
    """Per history: three archived runs give the prior (the root mean of their variances, as core.cluster_priors
    is made), then `runs` fresh runs are pooled with it and without it; how often each covers the truth."""
    rng = np.random.default_rng(seed)
    keys = ["item", "condition", "baseline"]
    hit = {"moderated": [], "own": [], "within": []}
    for _ in range(histories):
        archived, _ = shifted_runs(rng, 3, items, rounds)
        var = [v for v, _ in br.cluster_variances(archived, keys).values()]
        prior = br.Prior(math.sqrt(float(np.mean(var))), len(var))
        table, true = shifted_runs(rng, runs, items, rounds)
        bases = {s for s in table["server"].to_list() if "_c" not in s}
        with_prior = br.pool_clusters(table, keys, priors=dict.fromkeys(bases, prior))
        own = br.pool_clusters(table, keys)
        t = np.exp(true[own["item"].to_numpy()])
        for name, frame, lo, hi in (
            ("moderated", with_prior, "low", "high"),
            ("own", own, "low", "high"),
            ("within", own, "within_low", "within_high"),
        ):
            hit[name].append((frame[lo].to_numpy() <= t) & (t <= frame[hi].to_numpy()))
    return {k: float(np.mean(np.concatenate(v))) for k, v in hit.items()}


@pytest.mark.parametrize(("items", "rounds"), [(13, 5), (4, 5)], ids=["ssb13-r5", "partitioning4-r5"])
def test_a_prior_from_archived_runs_holds_coverage_when_clusters_shift_every_comparison(items, rounds):
    """When a cluster moves all its comparisons alike, a run's own between-cluster variance is one draw taken for
    many: its interval under-covers (84-89 %); shrunk toward a prior from three archived runs (df 1 + 3) it covers
    95-98 %, the upper end where many comparisons also differ one by one (their own 1 % is more than one draw's
    worth, which `moderate` does not count: the safe side); the rounds alone cover under 80 %."""
    c = moderated_coverage(seed=31_000 + items * 10 + rounds, histories=40, runs=6, items=items, rounds=rounds)
    print(f"\n{items} comparisons × {rounds} rounds, common shift {TAU_COMMON:.0%}: {c}")
    assert 0.93 <= c["moderated"] <= 0.985, c
    assert c["own"] < c["moderated"] - 0.02, c
    assert c["within"] < 0.8, c


def test_moderate_weighs_the_run_as_one_draw_and_the_prior_as_its_runs():
    """(1·var + 3·prior²) / 4 with 4 df for two clusters; three clusters count 2."""
    v, df = br.moderate(0.0, 2, br.Prior(0.04, 3))
    assert math.isclose(v, 3 * 0.04**2 / 4) and df == 4
    v, df = br.moderate(0.08**2, 3, br.Prior(0.04, 3))
    assert math.isclose(v, (2 * 0.08**2 + 3 * 0.04**2) / 5) and df == 5


# -- the hour: a run's noise and a shift common to its clusters (`between_runs.floor_interval`) ---------------------

RUN_SHIFT = 0.02  # the hour moves every cluster of a run alike by 2 % (sd, log scale): two clusters cannot see it
QUIET, NOISY = 0.004, 0.06  # round noise in a quiet hour and a noisy one (sd of a round's log ratio)


def hour_runs(rng, runs: int, items: int, rounds: int) -> tuple[pl.DataFrame, np.ndarray]:
    """`round_runs` in hours of their own: a third of the runs quiet, the rest noisy (what three fresh runs
    showed: JIT ratios ±2 % in one run, ±6-12 % in two), and every run shifted by its hour (RUN_SHIFT) on top of
    each cluster's own effect (TAU)."""
    true, frames = _truth(items), []
    noise = np.where(rng.random(runs) < 1 / 3, QUIET, NOISY)[:, None, None]
    shift = rng.normal(0, RUN_SHIFT, (runs, 1))
    for k in (1, 2):
        effect = shift + rng.normal(0, TAU / 3, (runs, items))
        a = rng.normal(0, 1, (runs, items, rounds)) * noise / math.sqrt(2)
        b = (true + effect)[:, :, None] + rng.normal(0, 1, (runs, items, rounds)) * noise / math.sqrt(2)
        frames.append(_tidy(np.stack([a, b], -1), runs, k))
    return paired.paired_compare(pl.concat(frames), ["server", "item"], "condition", "a", "round"), true


def spread_prior(rng, items: int, rounds: int) -> br.Prior:
    """The Prior three archived runs give, made as `calibration.spreads` and `cluster_priors` make it: the
    between-cluster sd (root mean of the runs' variances) and the spread of each pooled figure's log over the
    runs, its variances averaged over the comparisons (df: comparisons × 2)."""
    keys = ["item", "condition", "baseline"]
    archived, _ = hour_runs(rng, 3, items, rounds)
    var = [v for v, _ in br.cluster_variances(archived, keys).values()]
    pooled = br.pool_clusters(archived, keys)
    logs = np.log(pooled.sort("item", "server")["ratio"].to_numpy()).reshape(items, 3)
    spread = math.sqrt(float(np.mean(np.var(logs, axis=1, ddof=1))))
    return br.Prior(math.sqrt(float(np.mean(var))), 3, spread, items * 2, 3)


def test_a_floor_from_the_rerun_spread_keeps_a_quiet_runs_interval_true_and_its_verdicts_steady():
    """A quiet hour's narrow interval misses where other runs put the figure (the hour's shift is common to both
    clusters, so no within-run term sees it): pooled without the floor the quiet runs' intervals cover the long-run
    ratio well under 90 %, and a claim whose zone edge lies 4 % from it is decided in quiet runs and not in noisy
    ones. With the floor (`floor_interval`, the spread of three archived runs) every run covers 93-99 %, and run
    pairs agree on that verdict more often. (Any wider interval would agree more: the upper bound on coverage is
    what makes the agreement mean something.)"""
    rng = np.random.default_rng(4242)
    keys = ["item", "condition", "baseline"]
    items, rounds, edge_gap = 6, 5, 0.04
    hit = {"floor": [], "none": [], "quiet": []}
    decided = {"floor": [], "none": []}
    for _ in range(40):
        prior = spread_prior(rng, items, rounds)
        table, true = hour_runs(rng, 6, items, rounds)
        bases = {s for s in table["server"].to_list() if "_c" not in s}
        no_floor = br.Prior(prior.sd, prior.runs)
        for name, p in (("floor", prior), ("none", no_floor)):
            pooled = br.pool_clusters(table, keys, priors=dict.fromkeys(bases, p)).sort("server", "item")
            lo, hi = np.log(pooled["low"].to_numpy()), np.log(pooled["high"].to_numpy())
            t = true[pooled["item"].to_numpy()]
            hit[name].append((lo <= t) & (t <= hi))
            edge = t + edge_gap  # a zone edge 4 % above the long-run ratio: decided when the interval stays below
            decided[name].append((hi < edge).reshape(-1, items))
            if name == "none":
                width = (hi - lo).reshape(-1, items).mean(axis=1)
                quiet = np.repeat(width < np.median(width), items)
                hit["quiet"].append(((lo <= t) & (t <= hi))[quiet])
    cover = {k: float(np.mean(np.concatenate(v))) for k, v in hit.items()}

    def agreement(runs):  # share of run pairs (within a history) with the same verdict on each comparison
        same = [np.mean(r[i] == r[j]) for r in runs for i in range(len(r)) for j in range(i + 1, len(r))]
        return float(np.mean(same))

    agree = {k: agreement(v) for k, v in decided.items()}
    print(f"\ncoverage {cover}, verdict agreement over run pairs {agree}")
    assert 0.93 <= cover["floor"] <= 0.99, cover
    assert cover["quiet"] < 0.85, cover
    assert agree["floor"] > agree["none"] + 0.05, agree


def test_floor_interval_widens_to_the_spread_and_never_narrows():
    prior = br.Prior(0.0, 3, 0.05, 40, 3)
    t = 2.021  # t(0.975, 40)
    lo, hi = br.floor_interval(0.0, 0.99, 1.01, prior)
    assert math.isclose(lo, math.exp(-t * 0.05), rel_tol=1e-3) and math.isclose(hi, math.exp(t * 0.05), rel_tol=1e-3)
    assert br.floor_interval(0.0, 0.5, 2.0, prior) == (0.5, 2.0)  # already wider: kept
    assert br.floor_interval(0.0, 0.99, 1.01, br.Prior(0.03, 3)) == (0.99, 1.01)  # no spread declared
    assert br.floor_interval(0.0, None, None, prior) == (None, None)


def test_the_floor_leaves_aa_copies_single_clusters_and_rows_without_an_interval_alone():
    """Only a pooled comparison takes the re-run floor: an A/A copy's row (its two sides share the cluster and the
    hour: "b_aa", "workers=0_aa", an experiment's "x~aa"), a server measured on one cluster (an external server)
    and a row with no interval keep what they had without it, and their method does not claim it."""
    rng = np.random.default_rng(7)
    keys = ["item", "condition", "baseline"]
    table, _ = hour_runs(rng, 1, 4, 5)
    aa = {1: "b_aa", 2: "workers=0_aa", 3: "x~aa"}
    table = table.with_columns(
        pl.col("item").replace_strict(aa, default="b", return_dtype=pl.String).alias("condition")
    )
    lone = table.filter(pl.col("server") == "r0").with_columns(server=pl.lit("lab"))  # one cluster only
    gap = table.filter(pl.col("server") == "r0_c2", pl.col("item") == 0).with_columns(low=None, high=None)
    table = pl.concat([table.filter(~((pl.col("server") == "r0_c2") & (pl.col("item") == 0))), gap, lone])
    wide, none = br.Prior(0.02, 3, 0.5, 40, 3), br.Prior(0.02, 3)
    floored = br.pool_clusters(table, keys, priors={"r0": wide, "lab": wide}).sort("server", "item")
    plain = br.pool_clusters(table, keys, priors={"r0": none, "lab": none}).sort("server", "item")
    for f, p in zip(floored.iter_rows(named=True), plain.iter_rows(named=True), strict=True):
        assert (f["server"], f["item"]) == (p["server"], p["item"])
        pooled_comparison = f["server"] == "r0" and f["condition"] == "b" and f["low"] is not None
        if pooled_comparison:  # none here: item 0 lost its interval on cluster 2
            raise AssertionError(f)
        assert (f["low"], f["high"]) == (p["low"], p["high"]), f
        assert "no narrower than" not in (f["method"] or ""), f
    assert floored.filter(pl.col("server") == "r0", pl.col("condition") != "b")["low"].is_not_null().all()
    # and the comparison itself, with its interval on both clusters, is floored
    whole, _ = hour_runs(rng, 1, 1, 5)
    got = br.pool_clusters(whole, keys, priors={"r0": wide}).row(0, named=True)
    assert got["high"] / got["low"] > math.exp(2 * 1.96 * 0.5) and "no narrower than" in got["method"]

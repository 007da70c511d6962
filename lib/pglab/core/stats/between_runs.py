"""Intervals that hold across a re-run: the between-cluster component a within-run interval leaves out.

A run's rounds share its clusters: one initdb, one load, one ANALYZE sample, one physical layout per server. Two
runs differ in all of those, so the same figure moves between runs by more than its within-run interval allows
(measured: 18 % of run pairs outside their joint 95 % interval where 5 % should be). The remedy is a random-effects
interval: the within-run variance of the estimate plus a between-cluster variance, estimated from cluster-level
A/A pairs (the same server, condition and item measured on two independently made and loaded clusters), with
Welch–Satterthwaite degrees of freedom (never more than the pairs') so that a variance estimated from few pairs
widens the interval as it should.

    var_c, df_c = cluster_variance(aa_log_ratios, aa_se)         # from the run's cluster A/A pairs
    low, high = across_run_interval(log_ratio, se, df, var_c, df_c)  # B / A, clusters on each side: 1 and 1
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def cluster_variance(aa_log_ratios: Sequence[float], aa_se: Sequence[float] | None = None) -> tuple[float, int]:
    """The between-cluster variance of one cluster's effect (log scale) and its degrees of freedom, from A/A pairs:
    each log(cluster 1 / cluster 2) of the same server, condition and item has variance 2·var_c plus its own
    within-run variance (aa_se², none when not given). The Paule–Mandel estimate (`replica_variance`: the same
    pairs as two clusters each), never below 0; without aa_se it is the moment estimate mean(d²) / 2."""
    d = np.asarray(aa_log_ratios, dtype=float)
    if d.size == 0:
        raise ValueError("no cluster A/A pair: the between-cluster variance cannot be estimated")
    half = np.asarray(aa_se, dtype=float) ** 2 / 2 if aa_se is not None else np.zeros_like(d)
    if not half.any():
        return float(np.mean(d**2)) / 2.0, int(d.size)
    x = np.column_stack([d, np.zeros_like(d)]).ravel()
    return _paule_mandel(x, np.repeat(half, 2), np.repeat(np.arange(d.size), 2), int(d.size)), int(d.size)


def _paule_mandel(x: np.ndarray, v: np.ndarray, group: np.ndarray, df: int) -> float:
    """The between-cluster variance τ² ≥ 0 at which the clusters' weighted disagreement matches its degrees of
    freedom (Paule and Mandel 1982, one mean per comparison): Σ w·(x − x̄_w)² = df with w = 1 / (v + τ²), x a
    cluster's log ratio, v its within-run variance, x̄_w its comparison's weighted mean; 0 when the within-run
    variances alone explain the disagreement. Unlike the moment estimate (mean of d² − v), a comparison with a
    wide within-run interval (the fast mode's bootstrap when a burst fell in some of 5 rounds) weighs less, instead
    of its v cancelling the other comparisons' disagreement (simulated, tests/test_pooled_coverage.py: the fast mode
    over 5 rounds per cluster, SSB's 13 queries × 1 execution a round with bursts, pooled covered 92 % with the
    moment estimate, 95 % with this)."""
    v = np.maximum(v, 1e-24)  # an se of 0 (identical rounds): 1e-12 on the log scale, so that 1 / v is finite

    def q(t2: float) -> float:
        w = 1.0 / (v + t2)
        mean = np.bincount(group, w * x) / np.bincount(group, w)
        return float(np.sum(w * (x - mean[group]) ** 2))

    if q(0.0) <= df:
        return 0.0
    hi = max(float(np.var(x)), float(v.max()), 1e-12)
    while q(hi) > df:
        hi *= 4
    lo = 0.0
    for _ in range(200):  # q falls as τ² grows: bisection to the float's precision
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if q(mid) > df else (lo, mid)
    return (lo + hi) / 2


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
    plus var_cluster per cluster on each side (a side measured on k clusters and averaged: var_cluster / k).

    Its t quantile has the Welch–Satterthwaite degrees of freedom, never more than df_cluster: Satterthwaite takes
    an estimated variance for a known one, and a between-cluster variance estimated as 0 (or small) from two or
    three comparisons would leave the rounds' df alone, when it is that estimate, not the rounds, that is least
    certain (simulated, tests/test_pooled_coverage.py: min–max over 6 rounds per cluster, the variance from 2
    comparisons, covered 90 % uncapped and 97 % capped; over 5 rounds from 4 comparisons 92 % and 95 %)."""
    from scipy import stats  # here: half a second of imports that only an interval needs

    extra = var_cluster * (1 / clusters_a + 1 / clusters_b)
    var = se_within**2 + extra
    if var == 0:
        return math.exp(log_ratio), math.exp(log_ratio)
    denom = (se_within**4 / max(df_within, 1)) + (extra**2 / max(df_cluster, 1))
    df = var**2 / denom if denom > 0 else float(max(df_within, 1))
    df = min(df, float(max(df_cluster, 1)))
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


# -- a paired table measured on several clusters per server (params servers.clusters) ------------------------------


def implied_se(low: float | None, high: float | None, coverage: float | None, n_rounds: int | None) -> float | None:
    """The standard error (log scale) a row's interval implies: its half-width over the t quantile of its own
    coverage with n_rounds - 1 degrees of freedom (exact for a t interval; for a bootstrap or min–max interval
    the normal-theory reading of its width at the coverage it states). None without an interval."""
    from scipy import stats

    if low is None or high is None or not coverage or not n_rounds or n_rounds < 2 or low <= 0 or high <= 0:
        return None
    q = float(stats.t.ppf(1 - (1 - coverage) / 2, n_rounds - 1))
    return (math.log(high) - math.log(low)) / (2 * q) if q > 0 else None


def replica_variance(groups: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[float, int]:
    """The between-cluster variance of a comparison's log ratio, and its degrees of freedom, from comparisons
    each measured on k ≥ 2 clusters (logs, their se): the Paule–Mandel estimate over all of them (`_paule_mandel`:
    each comparison its own mean, each cluster weighted by 1 / (se² + τ²)), never below 0, with Σ (k - 1)
    degrees of freedom. Two clusters: `cluster_variance` of their differences (with aa_se² = se₁² + se₂²), the
    variance one cluster adds to the comparison."""
    xs, vs, gs, df = [], [], [], 0
    for logs, ses in groups:
        x, s = np.asarray(logs, dtype=float), np.asarray(ses, dtype=float)
        if x.size < 2:
            continue
        xs.append(x)
        vs.append(s**2)
        gs.append(np.full(x.size, len(gs)))
        df += x.size - 1
    if df == 0:
        raise ValueError("no comparison measured on two clusters: the between-cluster variance cannot be estimated")
    return _paule_mandel(np.concatenate(xs), np.concatenate(vs), np.concatenate(gs), df), df


def pooled_row(
    logs: Sequence[float],
    ses: Sequence[float],
    n_rounds: Sequence[int],
    var_cluster: float,
    df_cluster: int,
    confidence: float = 0.95,
    var_run: float = 0.0,
) -> dict:
    """One comparison over its k clusters: ratio = geometric mean of the clusters' ratios, its within-run
    variance the mean's (Σ se² / k², Welch–Satterthwaite df over the clusters' rounds), its interval the
    across-run one with var_cluster / k for the clusters' own effects (`across_run_interval`) and var_run for
    what moves every cluster of a run alike (`pool_clusters`' run_sd)."""
    k = len(logs)
    m = float(np.mean(logs))
    parts = np.asarray(ses, dtype=float) ** 2 / k**2
    se_w = math.sqrt(float(parts.sum()))
    dfs = np.maximum(np.asarray(n_rounds, dtype=float) - 1, 1)
    denom = float(np.sum(parts**2 / dfs))
    df_w = max(1, round(se_w**4 / denom)) if denom > 0 else int(dfs.sum())
    # across_run_interval counts var_cluster once per side; here both sides share each cluster: half per side
    se_r = math.sqrt(se_w**2 + var_run)  # a declared variance (from archived runs), counted as known
    low, high = across_run_interval(m, se_r, df_w, var_cluster / 2, df_cluster, k, k, confidence)
    from scipy import stats

    t_w = float(stats.t.ppf(1 - (1 - confidence) / 2, df_w))
    w_low, w_high = math.exp(m - t_w * se_w), math.exp(m + t_w * se_w)
    # never narrower than the rounds alone (with no between-cluster variance the two agree but for rounding)
    return {
        "ratio": math.exp(m),
        "low": min(low, w_low),
        "high": max(high, w_high),
        "within_low": w_low,
        "within_high": w_high,
    }


POOLED_COLUMNS = {
    "n_clusters": "Int64",
    "cluster_sd": "Float64",
    "cluster_sd_run": "Float64",
    "within_low": "Float64",
    "within_high": "Float64",
    # what the interval is made of beyond the rounds, for what would decide a verdict (`verdicts.decide`): the
    # between-cluster sd's df, the between-run sd, the re-run floor's spread and df. The dfs are Float64: an Int64
    # column reads as part of a comparison's key where runs are matched (report.calibration)
    "cluster_df": "Float64",
    "run_sd": "Float64",
    "floor_sd": "Float64",
    "floor_df": "Float64",
}


@dataclass(frozen=True)
class Prior:
    """What archived fresh runs say about a table and server, declared before a run (`cluster_priors`). sd: the
    between-cluster sd (log scale), the root mean of the variances that `runs` runs estimated, each from one pair
    of clusters. spread: how far the same figure moved from run to run (sd of its log over spread_runs archived
    runs, pooled over the table's comparisons, spread_df degrees of freedom): no pooled interval is narrower than
    this spread allows (`floor_interval`), so that a quiet hour's narrow interval still holds across a re-run."""

    sd: float
    runs: int
    spread: float = 0.0
    spread_df: int = 0
    spread_runs: int = 0
    note: str = ""  # what the reader must know of where it comes from (e.g. another host kind's runs)


# An A/A copy of a condition, by the kit's naming: "parallel_aa", "workers=0_aa", "loaded_disabled_aa2" (a
# second copy), an experiment's "<label>~aa". Its two sides share the cluster and the hour, so its figure does not
# move between runs as a comparison's does: it takes no re-run floor and feeds no re-run spread.
AA_COPY = re.compile(r"[_~]aa\d*$")


def is_aa_copy(*values) -> bool:
    """True when any of `values` (a row's key columns) names an A/A copy of a condition (`AA_COPY`)."""
    return any(isinstance(v, str) and AA_COPY.search(v) for v in values)


def floor_interval(m: float, low: float, high: float, prior: Prior | None, confidence: float = 0.95):
    """(low, high) widened where narrower than the prior's re-run spread: at least exp(m ± t·spread), t at
    spread_df. Why: one run's interval measures its own hour's noise; over three fresh runs a quiet run's ±2 %
    missed where the other two runs put the same figure, and verdicts near a zone's edge flipped with the hour
    (docs/verdicts.md). Never narrows an interval; no prior or no spread: unchanged."""
    if prior is None or prior.spread <= 0 or low is None or high is None:
        return low, high
    from scipy import stats

    t = float(stats.t.ppf(1 - (1 - confidence) / 2, max(prior.spread_df, 1)))
    return min(low, math.exp(m - t * prior.spread)), max(high, math.exp(m + t * prior.spread))


def moderate(var: float, k: int, prior: Prior) -> tuple[float, int]:
    """A run's between-cluster variance from k clusters per server, shrunk toward `prior` (Smyth 2004's moderated
    variance, limma): (df·var + d0·sd0²) / (df + d0) with df + d0 degrees of freedom. df = k − 1 however many
    comparisons fed the estimate: a cluster that is slower for every comparison alike is one observation, so
    with two clusters a run's estimate is one draw (measured over three fresh runs: pg18llvm's SSB clusters
    disagreed by 7.5 %, 0.0 % and 6.5 %; nominally df 13). d0 = the archived runs the prior pools, one draw each."""
    df = max(k - 1, 1)
    return (df * var + prior.runs * prior.sd**2) / (df + prior.runs), df + prior.runs


# What a pooled row's 95 % interval truly covers, by the clusters' interval method and rounds per cluster, simulated
# (tests/test_pooled_coverage.py, which re-checks it with a sixth of the runs): runs of two fresh clusters of one
# server in the default profile's designs, each cluster's interval from paired.fast_compare / paired_compare on a
# tidy table, pooled by `pool_clusters`; a cluster moves a comparison by 3 % (sd, log scale), round noise 2 % (round
# mode), the fast mode with FAST_COVERAGE's noise plus the VM's bursts (an execution 2x slow with probability 0.1,
# a whole cell 0.05). Per key the lowest over the studies' shapes (1,200-14,300 comparisons each):
#   fast, 5 rounds: 95 % (the JIT operators' 18 comparisons × 6 executions a round, SSB's 13 × 1; the SSB sweep's
#     4 × 1: 97 %; 8 × 20, auto_explain's shape, which does not pool yet: 95 %)
#   min–max, 5 rounds: 95 % (partitioning, 4 comparisons); 4 rounds: 95 % (pgbench's no-vacuum series, 4 runs:
#     5 versions over 11; 2 comparisons: 97 %); 3 rounds: 95 % (pgbench select-only, 5 comparisons;
#     parallel_index, 2: 97 %); 6 rounds: 97 % (pgbench's scale-up: 2 modes × 3 client counts × 2 rounds);
#     2 rounds: 98 % (no default study pools so few)
# The same rounds without the between-cluster term cover 47-91 %, one cluster's own interval 26-76 %. Before the
# Paule–Mandel variance and the df cap (`replica_variance`, `across_run_interval`) the pooled interval covered 90-94 %
# (98 % at 2 rounds). Sensitivity (not in the tests): between-cluster sd 6 %: 95-98 %; 1 %, or round noise 5 %:
# 96-99.5 %, the widest where 2 comparisons estimate the variance. A row whose variance is shrunk toward a prior
# (`moderate`) keeps its key's label: simulated with a shift common to a cluster's comparisons it covers 95.8-97.2 %
# where the run's own variance covers 85-88 % (tests/test_pooled_coverage.py), so the label holds.
POOLED_COVERAGE = {
    ("fast", 5): 0.95,
    ("min–max", 2): 0.98,
    ("min–max", 3): 0.95,
    ("min–max", 4): 0.95,
    ("min–max", 5): 0.95,
    ("min–max", 6): 0.97,
}
POOLED_CONFIDENCE = 0.95  # the confidence POOLED_COVERAGE was simulated at


def interval_family(method: str | None) -> str | None:
    """The key of a clusters' interval method in POOLED_COVERAGE: "fast" (`paired.fast_compare`), "min–max"
    (`paired.paired_compare` below 10 rounds); None for any other."""
    from .paired import is_fast

    if method is None:
        return None
    return "fast" if is_fast(method) else "min–max" if method.startswith("min–max") else None


def pooled_coverage(methods: Sequence[str | None], n_rounds: Sequence[int], coverages, confidence: float) -> float:
    """A pooled row's coverage label: what its method and rounds per cluster cover in simulation (POOLED_COVERAGE),
    never above `confidence`; a method or round count not simulated keeps the lowest of the clusters' own labels
    and `confidence`."""
    families = {interval_family(m) for m in methods}
    key = (families.pop(), min(n_rounds)) if len(families) == 1 else None
    if key in POOLED_COVERAGE and math.isclose(confidence, POOLED_CONFIDENCE):
        return min(confidence, POOLED_COVERAGE[key])
    return min([confidence, *coverages])


def _rounds_text(n: Sequence[int]) -> str:
    return str(min(n)) if min(n) == max(n) else f"{min(n)}–{max(n)}"


# what pool_clusters writes into a pooled row's method ("... across 2 clusters × 3–5 rounds, ..."), read back here
_POOLED_TEXT = re.compile(r"across (\d+) clusters × (\d+)(?:–(\d+))? rounds")


def on_clusters(row: dict) -> str:
    """', on k clusters' for a row pooled over k > 1 replica clusters (`pool_clusters`), else '': for the evidence."""
    return f", on {row['n_clusters']} clusters" if (row.get("n_clusters") or 1) > 1 else ""


def pooled_basis(method: str | None) -> tuple[int, int, int] | None:
    """(clusters, fewest rounds, most rounds) a pooled interval's method says it rests on; None where the method
    pools nothing (an exact check, one cluster's rounds)."""
    m = _POOLED_TEXT.search(method or "")
    return (int(m[1]), int(m[2]), int(m[3] or m[2])) if m else None


def _with_se(table, server_col: str):
    import polars as pl

    from ..replicas import base_names

    bases = base_names(table[server_col].unique(maintain_order=True).to_list())
    return bases, table.with_columns(
        pl.col(server_col).replace_strict(bases).alias("_base"),
        pl.struct(["low", "high", "coverage", "n_rounds"])
        .map_elements(lambda r: implied_se(r["low"], r["high"], r["coverage"], r["n_rounds"]), return_dtype=pl.Float64)
        .alias("_se"),
    )


def cluster_variances(
    table, keys: Sequence[str], server_col: str = "server", variance_rows=None
) -> dict[str, tuple[float, int]]:
    """{base server: (between-cluster variance, df)} of a paired table with replica rows (see `pool_clusters`):
    from every comparison (`keys`) a base server has on two or more clusters with an interval, among the rows
    `variance_rows` (a polars expression; None: all). A server with no such comparison is left out."""
    import polars as pl

    keys = list(keys)
    _, t = _with_se(table, server_col)
    src = t if variance_rows is None else t.filter(variance_rows)
    src = src.filter(pl.col("ratio").is_not_null() & pl.col("_se").is_not_null())
    est = {}
    for base, g in src.group_by("_base", maintain_order=True):
        groups = [
            (np.log(x["ratio"].to_numpy()), x["_se"].to_numpy()) for _, x in g.group_by(keys, maintain_order=True)
        ]
        try:
            est[base[0]] = replica_variance(groups)
        except ValueError:
            pass
    return est


def base_servers(table, server_col: str = "server"):
    """`table` with every replica cluster's server under its base server's name (`replicas.base_names`, params
    servers.clusters), for a base server's figures over all its clusters; a table without servers as it is."""
    import polars as pl

    from ..replicas import base_names

    if server_col not in table.columns:
        return table
    bases = base_names(table[server_col].unique(maintain_order=True).to_list())
    return table.with_columns(pl.col(server_col).replace_strict(bases, return_dtype=pl.String))


def has_replicas(servers) -> bool:
    """Whether some of `servers` (names) are replica clusters of another one of them (`replicas.base_names`)."""
    from ..replicas import base_names

    return any(b != n for n, b in base_names(servers).items())


def pool_clusters(
    table,
    keys: Sequence[str],
    server_col: str = "server",
    variance_rows=None,
    variances: dict[str, tuple[float, int]] | None = None,
    confidence: float = 0.95,
    run_sd: float = 0.0,
    run_rows=None,
    priors: Mapping[str, Prior] | Prior | None = None,
):
    """A paired table (`paired.paired_compare`'s columns: ratio, low, high, n_rounds, coverage, method) whose
    servers were measured on several clusters (`replicas`: pg17, pg17_c2, ...) as one row per base server and
    comparison (`keys`: the columns that name a comparison besides the server).

    ratio: the geometric mean over the comparison's clusters. Interval: `across_run_interval`, the within-run
    variance of that mean plus the between-cluster variance / k, which is estimated per base server from how its
    clusters disagree over all of the table's comparisons (`replica_variance`: the cluster-level A/A: the same
    comparison on two clusters), restricted to the rows `variance_rows` (a polars expression; e.g. without the
    A/A condition, whose two sides share a cluster and so differ by no cluster effect); or given per base
    server in `variances` ({server: (variance, df)}, e.g. a per-item table's for its pooled summary). n_rounds:
    the rounds of all clusters; coverage: what the clusters' method at their rounds covers pooled in simulation
    (`pooled_coverage`, from POOLED_COVERAGE: e.g. 95 % for the fast mode over 5 rounds per cluster, whose
    clusters' own intervals cover 89 %), never above `confidence`; for a method not simulated there the nominal
    `confidence` (93–97 % of fresh runs' true values in tests/test_between_runs.py's t intervals over 10 rounds),
    never above the clusters' own rows'; method: the clusters' own, then "pooled: <coverage> across k clusters × n
    rounds ...". Added columns: n_clusters, cluster_sd (sqrt of the variance, log scale) and cluster_df, within_low and
    within_high (the interval the rounds alone would give), run_sd and floor_sd / floor_df where they apply.

    A table without replicas comes back unchanged; a server measured on one cluster only (an external server)
    keeps its row (n_clusters 1, its within-run interval); rows without an interval pool to the ratio only.

    priors ({base server: Prior}, its `default` for a server without an entry, or one Prior for every server:
    `cluster_priors.priors`): each such server's
    variance is shrunk toward its prior (`moderate`); cluster_sd is then the moderated sd the interval uses,
    cluster_sd_run the run's own estimate; and its interval is at least as wide as the prior's re-run spread allows
    (`floor_interval`), said in its method (not an A/A copy's row, `is_aa_copy`: its figure does not move between
    runs as a comparison's does).

    run_sd (log scale): what moves every cluster of one run alike (the hour's load on the host, which two
    clusters measured in the same hour share and so cannot show), declared by a study from its archived runs'
    spread beyond their intervals (`make stability`); added to the rows `run_rows` selects (a polars expression;
    None: all), and named in their method."""
    import polars as pl

    if not has_replicas(table[server_col].unique(maintain_order=True).to_list()):
        return table
    keys = list(keys)
    _, t = _with_se(table, server_col)
    t = t.with_columns((pl.lit(run_sd > 0) if run_rows is None else run_rows & pl.lit(run_sd > 0)).alias("_run"))
    group = ["_base", *keys]
    est = cluster_variances(table, keys, server_col, variance_rows) | dict(variances or {})
    other = [
        c
        for c in table.columns
        if c not in {server_col, *keys, "ratio", "low", "high", "n_rounds", "coverage", "method"}
    ]
    rows = []
    for _, g in t.group_by(group, maintain_order=True):
        first = g.row(0, named=True)
        base = first["_base"]
        head = {server_col: base, **{k: first[k] for k in keys}, **{c: first[c] for c in other}}
        k = g.height
        ok = g.filter(pl.col("ratio").is_not_null())
        n = g["n_rounds"].to_list()
        row = {"n_rounds": int(sum(n)), "n_clusters": k}
        if k == 1:  # one cluster: its own row, nothing to pool
            own = {c: first[c] for c in ("ratio", "low", "high", "coverage", "method")}
            rows.append(head | row | own | {"within_low": first["low"], "within_high": first["high"]})
            continue
        if ok.height < k or ok["_se"].null_count() or base not in est:
            ratio = float(np.exp(np.log(ok["ratio"].to_numpy()).mean())) if ok.height else None
            why = "no interval on every cluster" if base in est else "no between-cluster variance"
            rows.append(
                head
                | row
                | {"ratio": ratio, "low": None, "high": None, "coverage": None, "method": f"{k} clusters, {why}"}
            )
            continue
        var_own, df_c = est[base]
        prior = priors if isinstance(priors, Prior) else (priors or {}).get(base) or getattr(priors, "default", None)
        var_c, df_c = moderate(var_own, k, prior) if prior else (var_own, df_c)
        var_run = run_sd**2 if bool(g["_run"].any()) else 0.0
        p = pooled_row(np.log(ok["ratio"].to_numpy()), ok["_se"].to_numpy(), n, var_c, df_c, confidence, var_run)
        floor = None if is_aa_copy(*(first[c] for c in keys)) else prior  # an A/A copy: no re-run floor
        p["low"], p["high"] = floor_interval(math.log(p["ratio"]), p["low"], p["high"], floor, confidence)
        cover = pooled_coverage(g["method"].to_list(), n, g["coverage"].to_list(), confidence)
        sd_text = f"between-cluster sd {math.sqrt(var_c):.1%} (df {df_c}" + (
            f": this run's {math.sqrt(var_own):.1%} with the prior {prior.sd:.1%} of {prior.runs} archived runs)"
            if prior
            else ")"
        )
        # the clusters' own method first (paired.is_fast reads it), then what the pooled interval rests on
        method = f"{first['method']}; pooled: " + (
            f"{cover:.0%} across {k} clusters × {_rounds_text(n)} rounds, {sd_text}"
            + (f", between-run sd {run_sd:.1%} (archived runs)" if var_run else "")
            + (
                f", no narrower than the figure's spread over {floor.spread_runs} archived runs (sd {floor.spread:.1%})"
                if floor and floor.spread > 0
                else ""
            )
            + (f" ({prior.note})" if prior and prior.note else "")
        ).replace("%", " %")
        sds = {"cluster_sd": math.sqrt(var_c), "cluster_sd_run": math.sqrt(var_own), "cluster_df": float(df_c)}
        if var_run:
            sds["run_sd"] = run_sd
        if floor and floor.spread > 0:
            sds |= {"floor_sd": floor.spread, "floor_df": float(max(floor.spread_df, 1))}
        rows.append(head | row | p | sds | {"coverage": cover, "method": method})
    schema = {c: table.schema[c] for c in table.columns} | {c: getattr(pl, d) for c, d in POOLED_COLUMNS.items()}
    return pl.from_dicts(rows, schema=schema).select(list(schema))


def shared_variance(table, keys: Sequence[str], server_col: str = "server", variance_rows=None) -> tuple[float, int]:
    """One between-cluster variance (and df) for every base server of a paired table with replica rows: from
    every (base server, comparison) measured on two or more clusters (`replica_variance`), where the servers
    are what is compared (versions against a baseline) and no server has enough comparisons of its own.
    ValueError when no comparison was measured on two clusters."""
    import polars as pl

    _, t = _with_se(table, server_col)
    src = t if variance_rows is None else t.filter(variance_rows)
    src = src.filter(pl.col("ratio").is_not_null() & pl.col("_se").is_not_null())
    groups = [
        (np.log(g["ratio"].to_numpy()), g["_se"].to_numpy())
        for _, g in src.group_by(["_base", *keys], maintain_order=True)
    ]
    return replica_variance(groups)


def pool_shared(table, keys: Sequence[str], server_col: str = "server", variance_rows=None, prior: Prior | None = None):
    """`pool_clusters` with one between-cluster variance for all base servers (`shared_variance`), shrunk toward
    `prior` when given (the shared estimate counts as one cluster pair's draw: every version's cluster k is
    compared with the baseline's cluster k, whose own shift they all share); the table itself without replicas."""
    if not has_replicas(table[server_col].unique(maintain_order=True).to_list()):
        return table
    from ..replicas import base_names

    bases = set(base_names(table[server_col].unique(maintain_order=True).to_list()).values())
    priors = dict.fromkeys(bases, prior) if prior else None
    try:
        est = shared_variance(table, keys, server_col, variance_rows)
    except ValueError:
        return pool_clusters(table, keys, server_col, variance_rows, priors=priors)
    return pool_clusters(table, keys, server_col, variances=dict.fromkeys(bases, est), priors=priors)


def clusters_text(table, server_col: str = "server") -> str | None:
    """What a pooled table's intervals rest on, per base server ('pg17: 2 clusters × 5 rounds, between-cluster
    sd 1.2 %'), for a report's method; None for a table without pooled rows (one cluster per server)."""
    import polars as pl

    if table is None or "n_clusters" not in table.columns or table.is_empty() or (table["n_clusters"].max() or 1) < 2:
        return None
    parts = []
    for (server,), g in table.filter(pl.col("n_clusters") > 1).group_by(server_col, maintain_order=True):
        sd = g["cluster_sd"].drop_nulls() if "cluster_sd" in g.columns else g["n_clusters"].clear()
        per = (g["n_rounds"] // g["n_clusters"]).unique().sort().to_list()
        parts.append(
            f"{server}: {g['n_clusters'].max()} clusters × {'/'.join(map(str, per))} rounds"
            + (f", between-cluster sd {sd[0]:.1%}".replace("%", " %") if sd.len() else "")
            + (_prior_text(g) or "")
        )
    return "; ".join(parts)


def _prior_text(g) -> str | None:
    """' (this run's 0.0 % shrunk toward its prior)' where a pooled row's sd is not the run's own estimate."""
    if "cluster_sd_run" not in g.columns:
        return None
    both = g.select("cluster_sd", "cluster_sd_run").drop_nulls()
    if both.is_empty() or math.isclose(both["cluster_sd"][0], both["cluster_sd_run"][0], abs_tol=5e-4):
        return None
    return f" (this run's {both['cluster_sd_run'][0]:.1%}, shrunk toward archived runs')".replace("%", " %")

"""Paired, blocked derivation of the SSB runs (issue 16), from the raw store's tables alone: every comparison
resamples the schedule's rounds, in the fast mode (`paired.fast_compare`, params `ssb.estimate: fast`) or one
ratio per round (`paired.paired_compare`); the A/A control gives the noise floor of the same comparison, the
baseline's drift between the halves of the run is kept, and each server's answers are checked against dbgen's
expected rows where the data is dbgen's at SF 1."""

from __future__ import annotations

import polars as pl

from ...core import replicas
from ...core.stats import between_runs, cluster_priors, noise, paired
from ...datasets.ssb import answers

NET = "_net"  # a JIT mode's executions net of the leader's JIT compile (`with_net_of_compile`): parallel_jit_net
# (condition, baseline) pairs compared over the same rounds: speed-up, JIT at S1's thresholds, JIT forced, and both
# JIT modes net of compiling
COMPARISONS = (
    ("parallel", "serial"),
    ("parallel_jit", "parallel"),
    ("parallel_jit_forced", "parallel"),
    ("parallel_jit" + NET, "parallel"),
    ("parallel_jit_forced" + NET, "parallel"),
)
SUITE, SUITE_Q1 = "all", "q1.x"  # items: the sum of every query's time in a round, of q1.1–q1.3's
S1_VERSIONS = (16, 17)
FAST, ROUND = "fast", "round"  # params ssb.estimate


def comparison(estimate: str = FAST):
    """The comparison every SSB table makes: `paired.fast_compare` ("fast") or `paired.paired_compare` ("round")."""
    if estimate not in (FAST, ROUND):
        raise ValueError(f"ssb.estimate: expected 'fast' or 'round', got {estimate!r}")
    return paired.fast_compare if estimate == FAST else paired.paired_compare


def ok_timed(execs: pl.DataFrame) -> pl.DataFrame:
    return execs.filter(~pl.col("warmup"), pl.col("error").is_null(), pl.col("seconds").is_not_null())


# the JIT claims' mode, the first a run compared with parallel: JIT net of compiling where every execution's JIT work
# was counted, inlining and optimisation forced first (at SF 70, S1's thresholds inline and optimise every plan; at a
# small SF only forcing does), then S1's thresholds as they are (a run without those counts)
JIT_CLAIM_MODES = ("parallel_jit_forced" + NET, "parallel_jit" + NET, "parallel_jit")


def jit_mode(pair: pl.DataFrame) -> str:
    """The mode the JIT claims and the ssb_jit view take from ssb_paired (JIT_CLAIM_MODES)."""
    have = set() if pair.is_empty() else set(pair.filter(pl.col("baseline") == "parallel")["mode"])
    return next((m for m in JIT_CLAIM_MODES if m in have), JIT_CLAIM_MODES[-1])


def with_net_of_compile(execs: pl.DataFrame, jit_exec: pl.DataFrame | None) -> pl.DataFrame:
    """`execs` and, under the mode <mode>_net, every timed execution in a JIT mode whose JIT work pg_stat_statements
    counted (`derive.jit_executions`: the leader's, read around that one execution) again, its wall time less that
    compile time: what JIT did to the execution itself. The JIT claims' quantity where the run recorded it (methodology
    rule 17): at the studies' scale (SF 70) compiling is a few per cent of a query's time, at ours most of it. The
    leader's compile time is its wall clock while its workers compile their own copies beside it, so on a machine
    whose cores they share it spans the compile phase. Unchanged for a run without those counts."""
    if jit_exec is None or jit_exec.is_empty():
        return execs
    net = jit_exec.select(
        "server",
        (pl.col("mode") + NET).alias("mode"),
        "query",
        pl.col("repetition").cast(execs.schema["repetition"]),
        pl.lit(False).alias("warmup"),
        pl.col("round").cast(execs.schema["round"]),
        ((pl.col("wall_ms") - pl.col("jit_ms")) / 1000).alias("seconds"),
    )
    return pl.concat([execs, net], how="diagonal_relaxed")


def with_suites(timed: pl.DataFrame, cond: str = "mode") -> pl.DataFrame:
    """Adds per (server, condition, round) the suite items: the sum over all queries (only rounds where each
    ran) and over q1.x; one ratio for the run, paired like the queries."""
    n_all = timed["query"].n_unique()
    frames = [timed.select("server", cond, "query", "round", "seconds")]
    for item, sub, n in ((SUITE, timed, n_all), (SUITE_Q1, timed.filter(pl.col("query").str.starts_with("q1.")), 3)):
        s = (
            sub.group_by("server", cond, "round")
            .agg(pl.col("seconds").sum(), pl.col("query").n_unique().alias("k"))
            .filter(pl.col("k") == n)
            .drop("k")
            .with_columns(query=pl.lit(item))
        )
        if sub["query"].n_unique() == n:
            frames.append(s.select("server", cond, "query", "round", "seconds"))
    return pl.concat(frames, how="vertical_relaxed")


def mode_comparisons(execs: pl.DataFrame, estimate: str = FAST) -> pl.DataFrame:
    """Per server, query (and suite) and comparison: the ratio condition / baseline, rounds resampled."""
    t = with_suites(ok_timed(execs))
    frames = []
    for cond, base in COMPARISONS:
        sub = t.filter(pl.col("mode").is_in([cond, base]))
        if set(sub["mode"]) == {cond, base}:
            frames.append(comparison(estimate)(sub, ["server", "query"], "mode", base, "round", "seconds"))
    return pooled(pl.concat(frames), ["query", "mode", "baseline"], "ssb_paired") if frames else pl.DataFrame()


def pooled(table: pl.DataFrame, keys: list[str], name: str, server_col: str = "server") -> pl.DataFrame:
    """With replica clusters (params servers.clusters): one row per base server and comparison, its interval
    across the clusters (`between_runs.pool_clusters`), the between-cluster variance from the queries' rows (the
    suites are sums of them), shrunk toward the table's prior (`cluster_priors`, `name`: the derived table's);
    without: the table itself."""
    if table.is_empty():
        return table
    queries = ~pl.col("query").is_in([SUITE, SUITE_Q1])
    # each quantity of the table pooled on its own (`cluster_priors.SPLIT`: the JIT block's rows are another
    # design's), its between-cluster variance from its own rows and its own prior. The suite (SUITES) is a sum, not a
    # query: where its host kind has archived suite figures, its variance comes from the suites' own rows toward
    # their prior and floor; else from its queries' rows, as theirs (`cluster_priors.own_quantity`)
    q = cluster_priors.quantity_expr(name, table.columns)
    t = table.with_columns(_q=q)
    t = t.with_columns(_q=pl.col("_q").replace({x: cluster_priors.own_quantity(x) for x in t["_q"].unique()}))
    parts = [
        between_runs.pool_clusters(
            g.drop("_q"),
            keys,
            server_col,
            variance_rows=None if cluster_priors.is_suite(q) else queries,
            priors=cluster_priors.priors(q),
        )
        for (q,), g in t.group_by("_q", maintain_order=True)
    ]
    return pl.concat(parts, how="diagonal_relaxed")


def version_servers(facts: dict) -> dict[int, str] | None:
    """{16: server, 17: server} when the run has both of S1's versions (the first server of each), else None."""
    by_major: dict[int, str] = {}
    bases = replicas.base_names(facts.get("servers", {}))  # a server's replica clusters are not other servers
    for name, f in sorted(facts.get("servers", {}).items()):
        if f.get("major") in S1_VERSIONS and bases[name] == name:
            by_major.setdefault(f["major"], name)
    return by_major if set(by_major) == set(S1_VERSIONS) else None


def version_comparisons(execs: pl.DataFrame, facts: dict, estimate: str = FAST) -> pl.DataFrame:
    """17 over 16 per mode and query (and suite), rounds resampled; empty when the run lacks 16 or 17."""
    vs = version_servers(facts)
    return pl.DataFrame() if vs is None else server_comparisons(execs, facts, [vs[17]], vs[16], estimate)


def server_comparisons(
    execs: pl.DataFrame, facts: dict, servers: list[str], baseline: str, estimate: str = FAST
) -> pl.DataFrame:
    """Each of `servers` (base servers) over `baseline` per mode (serial, parallel) and query (and suite), rounds
    resampled. With replica clusters: cluster k of each over cluster k of the baseline (pg17_c2 / pg16_c2), then
    pooled over k, toward the versions' priors."""
    names = set(facts.get("servers", {}))
    frames = []
    for k in range(1, replicas.MAX_CLUSTERS + 1):
        base_k = replicas.replica_name(baseline, k)
        others = [n for s in servers if (n := replicas.replica_name(s, k)) in names]
        if base_k not in names or not others:
            break
        t = with_suites(ok_timed(execs).filter(pl.col("server").is_in([base_k, *others])))
        t = t.filter(pl.col("mode").is_in(["serial", "parallel"]))
        frames.append(comparison(estimate)(t, ["mode", "query"], "server", base_k, "round", "seconds"))
    if not frames:
        return pl.DataFrame()
    return frames[0] if len(frames) == 1 else pooled(pl.concat(frames), ["mode", "query"], "ssb_versions_paired")


# the descriptive tables' columns: a paired table's comparison with both sides' medians, no verdict of their own
VIEW = {
    "server": pl.String,
    "query": pl.String,
    "mode": pl.String,
    "baseline": pl.String,
    "n_rounds": pl.Int64,
    "median": pl.Float64,
    "median_baseline": pl.Float64,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "coverage": pl.Float64,
}


def mode_view(pair: pl.DataFrame, execs: pl.DataFrame, mode: str, baseline: str) -> pl.DataFrame:
    """`mode` over `baseline` per server and query (not the suites) as ssb_paired holds it, the claims' ratio and
    interval (ci_low, ci_high: its low, high; pooled over a server's clusters), with both modes' medians over every
    timed execution of the server's clusters beside it: ssb_speedup (parallel / serial), ssb_jit (JIT / parallel)."""
    if pair.is_empty():
        return pl.DataFrame(schema=VIEW)
    t = ok_timed(execs)
    med = (
        between_runs.base_servers(t).group_by("server", "mode", "query").agg(pl.col("seconds").median().alias("median"))
    )
    rows = pair.filter(
        pl.col("mode") == mode, pl.col("baseline") == baseline, ~pl.col("query").is_in([SUITE, SUITE_Q1])
    )
    return (
        rows.rename({"low": "ci_low", "high": "ci_high"})
        .join(med, on=["server", "mode", "query"], how="left")
        .join(
            med.rename({"mode": "baseline", "median": "median_baseline"}),
            on=["server", "baseline", "query"],
            how="left",
        )
        .select(list(VIEW))
        .cast(VIEW)
        .sort("server", "query")
    )


def noise_table(execs: pl.DataFrame, study: str = "S1", estimate: str = FAST) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The A/A comparisons (parallel_aa over parallel per server and query) and the noise floor per server and
    over all servers ("all"): columns study, server, metric, n_pairs, false_difference_rate, floor, method."""
    t = ok_timed(execs)
    aa = noise.aa_comparisons(
        t, ["server", "query"], "mode", "parallel", "parallel_aa", "round", "seconds", compare=comparison(estimate)
    )
    return aa, noise.server_table(study, aa, "seconds per query, parallel")


def drift_table(execs: pl.DataFrame) -> pl.DataFrame:
    """The parallel mode's suite time, second half of the rounds over the first, per server."""
    t = with_suites(ok_timed(execs)).filter(pl.col("query") == SUITE)
    return paired.drift(t, ["server"], "mode", "parallel", "round", "seconds")


def sweep_comparisons(sweep: pl.DataFrame, estimate: str = FAST) -> pl.DataFrame:
    """Each worker count over 0 workers per server and query, the sweep's rounds resampled."""
    t = ok_timed(sweep)
    if t.is_empty() or 0 not in set(t["workers"]):
        return pl.DataFrame()
    cmp = comparison(estimate)(with_suites(t, "workers"), ["server", "query"], "workers", 0, "round", "seconds")
    return pooled(cmp, ["query", "workers", "baseline"], "ssb_sweep_paired")


def answers_table(execs: pl.DataFrame, facts: dict) -> pl.DataFrame:
    """Per server and query: whether dbgen's expected answer applies (dbgen's data at SF 1), and how many of the
    executions returned a different result (checksums against `answers.expected_checksum`)."""
    rows = []
    qs = facts.get("query_set", "pg_ssb_run")
    done = execs.filter(pl.col("error").is_null(), pl.col("checksum").is_not_null())
    for (server, q), g in done.group_by("server", "query", maintain_order=True):
        dataset = facts.get("servers", {}).get(server, {}).get("dataset")
        applies = answers.applies(dataset, qs, q)
        want = answers.expected_checksum(q) if applies else None
        wrong = g.filter(pl.col("checksum") != want).height if applies else None
        rows.append(
            {
                "server": server,
                "query": q,
                "checked": applies,
                "executions": g.height,
                "wrong": wrong,
                "expected_checksum": want,
                "generator": answers.generator_of(dataset),
            }
        )
    schema = {
        "server": pl.String,
        "query": pl.String,
        "checked": pl.Boolean,
        "executions": pl.Int64,
        "wrong": pl.Int64,
        "expected_checksum": pl.String,
        "generator": pl.String,
    }
    return pl.from_dicts(rows, schema=schema).sort("server", "query") if rows else pl.DataFrame(schema=schema)


def derive(
    execs: pl.DataFrame, sweep: pl.DataFrame, facts: dict, estimate: str = FAST, jit_exec: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """The new tables of the paired analysis, by their derived-table names; `jit_exec` (ssb_jit_executions): the JIT
    modes net of compiling compared too (`with_net_of_compile`)."""
    aa, floor = noise_table(execs, estimate=estimate)
    return {
        "ssb_paired": mode_comparisons(with_net_of_compile(execs, jit_exec), estimate),
        "ssb_versions_paired": version_comparisons(execs, facts, estimate),
        "ssb_aa": aa,
        "ssb_noise": floor,
        "ssb_drift": drift_table(execs),
        "ssb_sweep_paired": sweep_comparisons(sweep, estimate),
        "ssb_answers": answers_table(execs, facts),
    }

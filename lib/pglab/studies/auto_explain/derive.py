"""From the stage's raw runs to the report: summaries, paired overhead ratios, the study's table beside ours,
the log proof and the timer explanation; the findings, noise floor and drift are `verdicts`'.

Ratios are paired within rounds (`pglab.core.stats.paired`): per round a condition's latency over the baseline's
("loaded, disabled") on the same server and item, their geometric mean, and an interval over the rounds
(min–max, labelled so, below 10 rounds). The cost of writing the log is the ratio of a logged condition to
its nothing-logged counterpart (same settings, log_min_duration apart). A median's interval is
`paired.median_interval`'s (min–max below 10 runs).

With replica clusters (params servers.clusters: pg15, pg15_c2, ...) the comparisons (ratios, the study's table,
the noise floor, the findings) are per base server, pooled over its clusters (`between_runs.pool_clusters`);
what is measured per cluster and compares nothing (latencies, summary, log checks, plans, timer, drift, servers)
keeps one row per cluster."""

from __future__ import annotations

import os
import warnings

import numpy as np
import polars as pl

from ...core import raw_frames
from ...core.run import measurements, outcomes
from ...core.stats import between_runs, cluster_priors, paired
from ...core.stats.stats import ratio_with_interval
from . import verdicts as auto_explain_verdicts
from .params import EXPERIMENT, STUDY_BASELINE, STUDY_LATENCY_MS, AutoExplainParams
from .verdicts import measured

KEY = ["server", "condition", "item"]
RATIO_KEYS = ["comparison", "condition", "item", "baseline"]  # what names a comparison besides its server


def derive(store, params) -> dict[str, pl.DataFrame]:
    """Notebook 40's tables from the raw store alone: the skips, and when some server was measured every
    table of `auto_explain_results.analyse` that has columns."""
    out = {"auto_explain_skipped": outcomes.skipped(store, [EXPERIMENT]).sort("experiment", "server")}
    seen = {name: raw_frames.read(store, f"{EXPERIMENT}/{name}.json") for name in ("servers", "plans", "timer")}
    if any(df is None for df in seen.values()) or seen["servers"].filter(pl.col("skipped").is_null()).is_empty():
        return out
    runs = store.records(EXPERIMENT)
    cores = runs["cores"].drop_nulls().head(1).to_list() if "cores" in runs.columns else []  # the measuring machine's
    seen["runs"] = runs
    txns = transactions(store, runs) if params.auto_explain.estimate == "fast" else None
    tables = analyse(seen, params.auto_explain, cores=int(cores[0]) if cores else None, txns=txns)
    out |= {n: df for n, df in tables.items() if df.width}
    if (m := measurements.table(store, "auto_explain", [EXPERIMENT])) is not None:
        out["auto_explain_measurements"] = m
    return out


TXNS_PER_RUN = 200  # a run's transactions kept for the fast mode, evenly spaced (limit runs 20,000: bootstrap cost)


def transactions(store, runs: pl.DataFrame) -> pl.DataFrame | None:
    """Every measured run's transaction latencies (ms; at most TXNS_PER_RUN, evenly spaced over the run) from the
    raw artefacts `run` keeps; None when no measured run has any (runs recorded before they were kept). A run
    without its file (it logged none) is left out with a warning: its cell keeps its other rounds' transactions."""
    m = measured(runs)
    if m.is_empty() or "value_is" not in m.columns:
        return None
    parts, missing = [], []
    for r in m.filter(pl.col("value").is_not_null()).iter_rows(named=True):
        rel = f"{EXPERIMENT}/latencies/{r['server']}/{r['condition']}_{r['item']}_r{r['repetition']}.txt"
        if not store.has_artifact(rel):
            missing.append(rel)
            continue
        us = np.loadtxt(store.artifact_path(rel), dtype=float, ndmin=1)
        us = us[us > 0]  # pgbench's 0 µs entries are no latency (pgbench.timed)
        if not us.size:
            missing.append(rel)
            continue
        us = us[np.linspace(0, us.size - 1, min(us.size, TXNS_PER_RUN)).round().astype(int)]
        parts.append(
            pl.DataFrame(
                {
                    "server": r["server"],
                    "condition": r["condition"],
                    "item": r["item"],
                    "round": r["round"],
                    "value": us / 1000.0,
                }
            )
        )
    if parts and missing:
        warnings.warn(
            f"{len(missing)} of {len(missing) + len(parts)} measured runs kept no transactions (left out "
            f"of the fast mode): {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}",
            stacklevel=2,
        )
    return pl.concat(parts) if parts else None


def latencies(runs: pl.DataFrame) -> pl.DataFrame:
    """Every run, warm-ups included and flagged: the derived table of raw latencies."""
    cols = [
        "server",
        "condition",
        "item",
        "repetition",
        "warmup",
        "round",
        "value",
        "value_is",
        "latency_median_ms",
        "latency_mean_ms",
        "latency_avg_ms",
        "transactions",
        "tps",
        "cores",
        "elapsed_s",
        "loading",
        "preloaded",
        "restarted_before",
        "restarts",
        "error",
        "command",
        "client_version",
        "session_settings",
        "ts",
    ]
    have = [c for c in cols if c in runs.columns]
    return runs.select(have).rename({"value": "latency_ms", "latency_avg_ms": "latency_printed_ms"}, strict=False)


def _labels(params: AutoExplainParams) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "condition": list(params.conditions),
            "label": [c.label or n for n, c in params.conditions.items()],
            "condition_order": list(range(len(params.conditions))),
        }
    )


def study_latency(condition: str, item: str) -> float | None:
    return STUDY_LATENCY_MS.get((condition, item))


def study_ratio(condition: str, item: str, baseline: str = STUDY_BASELINE) -> float | None:
    a, b = study_latency(condition, item), study_latency(baseline, item)
    return a / b if a is not None and b else None


def summary(runs: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """Per server × condition × item: n, median, min, max, the median's interval (min–max below 10 runs,
    `ci_method` says which), and the study's ms."""
    m = measured(runs)
    rows = []
    for (server, cond, item), g in m.group_by(KEY, maintain_order=True):
        vals = g["value"].drop_nulls()
        mi = paired.median_interval(vals.to_numpy())
        rows.append(
            {
                "server": server,
                "condition": cond,
                "item": item,
                "n": mi["n"],
                "n_missing": g.height - vals.len(),
                "median": mi["median"],
                "min": vals.min() if vals.len() else None,
                "max": vals.max() if vals.len() else None,
                "ci_low": mi["low"],
                "ci_high": mi["high"],
                "ci_method": mi["method"],
                "study_ms": study_latency(cond, item),
            }
        )
    schema = {
        **dict.fromkeys(KEY, pl.String),
        "n": pl.Int64,
        "n_missing": pl.Int64,
        "median": pl.Float64,
        "min": pl.Float64,
        "max": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "ci_method": pl.String,
        "study_ms": pl.Float64,
    }
    s = pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    return s.sort(KEY).join(_labels(params), on="condition")


def counterparts(params: AutoExplainParams) -> dict[str, str]:
    """Each logged condition and the nothing-logged one with the same settings otherwise."""

    def rest(c):
        return {k: v for k, v in c.settings.items() if k != "auto_explain.log_min_duration"}

    out = {}
    for name, c in params.conditions.items():
        if c.expected_plans != "every":
            continue
        for other, o in params.conditions.items():
            if (
                o.load
                and o.expected_plans == "none"
                and rest(o) == rest(c)
                and other != params.baseline
                and other not in params.aa_names
            ):
                out[name] = other
                break
    return out


def _paired(
    m: pl.DataFrame, cond: str, base: str, comparison: str, med: pl.DataFrame, txns: pl.DataFrame | None = None
) -> pl.DataFrame:
    """cond over base per server and item, paired by round (with `txns`: in the fast mode, as the findings);
    the columns the charts and tables read."""
    src = txns if txns is not None else m
    d = src.filter(pl.col("condition").is_in([cond, base]))
    compare = paired.fast_compare if txns is not None else paired.paired_compare
    pc = compare(d, ["server", "item"], "condition", base, "round")
    if pc.is_empty():
        return pl.DataFrame()
    return _with_medians(
        pc.rename({"low": "ci_low", "high": "ci_high"}).with_columns(pl.lit(comparison).alias("comparison")), med
    )


def _with_medians(t: pl.DataFrame, med: pl.DataFrame) -> pl.DataFrame:
    """The condition's and the baseline's median latency beside each comparison (per server, condition, item)."""
    return t.join(med, on=["server", "condition", "item"], how="left").join(
        med.rename({"condition": "baseline", "median": "median_baseline"}),
        on=["server", "baseline", "item"],
        how="left",
    )


def ratios(
    runs: pl.DataFrame, params: AutoExplainParams, txns: pl.DataFrame | None = None, pool: bool = True
) -> pl.DataFrame:
    """Overhead ratios paired by round: every condition / baseline (comparison "overhead"), and every logged
    condition / its nothing-logged counterpart ("logging"). Study ratios beside, where the study has them. With
    replica clusters and `pool`: one row per base server and comparison (`pool_ratios`); else one per cluster."""
    m = measured(runs)
    med = m.group_by(KEY).agg(pl.col("value").median().alias("median"))
    parts = [_paired(m, c, params.baseline, "overhead", med, txns) for c in params.conditions if c != params.baseline]
    parts += [_paired(m, logged, quiet, "logging", med, txns) for logged, quiet in counterparts(params).items()]
    parts = [p for p in parts if p.width]
    if not parts:
        return pl.DataFrame()
    both = pl.concat(parts, how="vertical")
    study = [study_ratio(c, i, b) for c, i, b in zip(both["condition"], both["item"], both["baseline"], strict=True)]
    # how the conditions were measured: a design of its own for the priors (`cluster_priors.SPLIT`)
    measured_as = "interleaved" if auto_explain_verdicts.design(m) else "separate runs"
    out = (
        both.with_columns(pl.Series("study_ratio", study, dtype=pl.Float64), design=pl.lit(measured_as))
        .join(_labels(params), on="condition")
        .sort("comparison", "server", "condition_order", "item")
    )
    return pool_ratios(out, m, params) if pool else out


def _measured_only(params: AutoExplainParams) -> pl.Expr | None:
    """The comparisons a between-cluster variance may come from: all but the A/A control's, whose two sides
    share a cluster (no cluster effect parts them)."""
    return ~pl.col("condition").is_in(params.aa_names) if params.aa_names else None


def ratio_variances(per_cluster: pl.DataFrame, params: AutoExplainParams) -> dict[str, tuple[float, int]]:
    """{base server: (between-cluster variance, df)} of the per-cluster ratio table (`ratios(..., pool=False)`),
    as `pool_ratios` estimates it: what the findings' ratios are pooled with."""
    t = per_cluster.rename({"ci_low": "low", "ci_high": "high"})
    return between_runs.cluster_variances(t, RATIO_KEYS, variance_rows=_measured_only(params))


def pool_ratios(rat: pl.DataFrame, m: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """With replica clusters (params servers.clusters): one row per base server and comparison
    (`between_runs.pool_clusters`): the geometric mean over its clusters, its interval the rounds' plus the
    between-cluster variance from how its clusters disagreed over all its comparisons but the A/A control's (both
    its sides share a cluster, so no cluster effect parts them); medians over every cluster's runs. Added columns:
    n_clusters, cluster_sd, within_low, within_high. Without: `rat` itself."""
    if rat.is_empty() or not between_runs.has_replicas(rat["server"].unique(maintain_order=True).to_list()):
        return rat
    t = rat.drop("median", "median_baseline").rename({"ci_low": "low", "ci_high": "high"})
    pooled = between_runs.pool_clusters(
        t,
        RATIO_KEYS,
        variance_rows=_measured_only(params),
        priors=cluster_priors.priors("auto_explain_ratios" + auto_explain_verdicts.design(m)),
    )
    med = between_runs.base_servers(m).group_by(KEY).agg(pl.col("value").median().alias("median"))
    out = _with_medians(pooled.rename({"low": "ci_low", "high": "ci_high"}), med)
    cols = [*rat.columns, *(c for c in between_runs.POOLED_COLUMNS if c not in rat.columns)]
    return out.select(cols).sort("comparison", "server", "condition_order", "item")


def log_checks(runs: pl.DataFrame) -> pl.DataFrame:
    """The log proof of every run (warm-ups too: every run is checked)."""
    cols = [
        "server",
        "condition",
        "item",
        "repetition",
        "warmup",
        "expect_plans",
        "log_check",
        "log_reason",
        "log_destination",
        "transactions",
        "plans_logged",
        "plans_parsed",
        "parse_errors",
        "plans_with_rows",
        "plans_with_times",
        "plans_other_query",
        "plan_format",
        "log_entries",
        "log_bytes",
        "plan_bytes",
        "log_bytes_per_txn",
    ]
    return runs.select([c for c in cols if c in runs.columns])


def _sum(col: str) -> pl.Expr:
    """The sum, or null where nothing was counted (a log out of reach is not 0 plans logged)."""
    return pl.when(pl.col(col).is_not_null().any()).then(pl.col(col).sum())


def log_summary(checks: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """Per server × condition × item: runs checked and passed, plans logged against transactions."""
    if "log_check" not in checks.columns or checks.is_empty():
        return pl.DataFrame()
    # a server whose log the kit cannot read (an external one) has no counts at all: null columns, not missing
    num = ("plans_logged", "transactions", "plans_parsed", "plans_with_rows", "plans_with_times", "log_bytes_per_txn")
    checks = checks.with_columns(
        [(pl.col(c) if c in checks.columns else pl.lit(None)).cast(pl.Float64).alias(c) for c in num]
    )
    if "log_reason" not in checks.columns:
        checks = checks.with_columns(log_reason=pl.lit(None, dtype=pl.String))
    agg = checks.group_by(KEY + ["expect_plans"], maintain_order=True).agg(
        pl.len().alias("runs"),
        (pl.col("log_check") == "passed").sum().alias("passed"),
        (pl.col("log_check") == "failed").sum().alias("failed"),
        pl.col("log_check").filter(pl.col("log_check").is_in(["passed", "failed"]).not_()).first().alias("other"),
        pl.col("log_reason").drop_nulls().first().alias("first_reason"),
        _sum("plans_logged").alias("plans_logged"),
        _sum("transactions").alias("transactions"),
        _sum("plans_parsed").alias("plans_parsed"),
        _sum("plans_with_rows").alias("with_actual_rows"),
        _sum("plans_with_times").alias("with_times"),
        pl.col("log_bytes_per_txn").median().alias("log_bytes_per_txn"),
    )
    return agg.join(_labels(params), on="condition").sort(["server", "condition_order", "item"])


def logging_costs(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The logging comparisons (a condition that logs every plan over its nothing-logged twin) with the bytes the
    log grew by per transaction: with replica clusters the ratios are pooled per base server, so the bytes are the
    median over all its clusters' runs' medians, not its first cluster's."""
    logging = tables["auto_explain_ratios"].filter(pl.col("comparison") == "logging")
    sizes = tables.get("auto_explain_log_summary", pl.DataFrame())
    if "log_bytes_per_txn" not in sizes.columns:
        return logging
    per_base = (
        between_runs.base_servers(sizes.select("server", "condition", "item", "log_bytes_per_txn"))
        .group_by("server", "condition", "item")
        .agg(pl.col("log_bytes_per_txn").median())
    )
    return logging.join(per_base, on=["server", "condition", "item"], how="left")


def timer(
    summary_df: pl.DataFrame,
    plans: pl.DataFrame,
    timer_df: pl.DataFrame,
    params: AutoExplainParams,
    analyze: str = "analyze",
    no_timing: str = "analyze_no_timing",
    cores: int | None = None,
) -> pl.DataFrame:
    """The study's explanation on our data: ANALYZE with timing reads the clock twice per node call
    (a call per row returned, per loop); the extra latency over the baseline, per row processed and per
    clock read, next to what pg_test_timing says one read costs."""
    if plans.is_empty() or summary_df.is_empty():
        return pl.DataFrame()
    med = summary_df.select("server", "condition", "item", "median")

    def lat(cond, name):
        return med.filter(pl.col("condition") == cond).select("server", "item", pl.col("median").alias(name))

    t = (
        plans.select("server", "item", "nodes", "rows_processed", "node_calls", "processes")
        .join(timer_df.select("server", "per_loop_ns"), on="server", how="left")
        .join(lat(params.baseline, "baseline_ms"), on=["server", "item"], how="left")
        .join(lat(analyze, "analyze_ms"), on=["server", "item"], how="left")
        .join(lat(no_timing, "no_timing_ms"), on=["server", "item"], how="left")
    )
    cores = cores or os.cpu_count() or 1  # the measuring machine's (the runs record it), else this one's
    return (
        t.with_columns(
            (2 * pl.col("node_calls")).alias("clock_reads"),
            # the processes of a parallel plan run at once only as far as there are cores for them
            pl.min_horizontal(pl.col("processes"), pl.lit(cores)).alias("parallelism"),
            (pl.col("analyze_ms") - pl.col("baseline_ms")).alias("extra_ms"),
            (pl.col("no_timing_ms") - pl.col("baseline_ms")).alias("extra_no_timing_ms"),
        )
        .with_columns(
            (pl.col("extra_ms") * 1e6 / pl.col("rows_processed")).alias("extra_ns_per_row"),
            # the timing part alone (ANALYZE minus ANALYZE without timing), per clock read in one process
            (
                (pl.col("analyze_ms") - pl.col("no_timing_ms")) * 1e6 * pl.col("parallelism") / pl.col("clock_reads")
            ).alias("timing_ns_per_clock_read"),
            # what pg_test_timing predicts for the reads, spread over the processes that share the rows
            (pl.col("clock_reads") * pl.col("per_loop_ns") / pl.col("parallelism") / 1e6).alias("predicted_timing_ms"),
        )
        .sort(["server", "item"])
    )


# -- the study's table -----------------------------------------------------------------------------------------


def study_table(ratios_df: pl.DataFrame, summary_df: pl.DataFrame) -> pl.DataFrame:
    """Long: condition × item × server with the study's latency and ratio beside our median and ratio."""
    over = ratios_df.filter(pl.col("comparison") == "overhead")
    keep = summary_df.select(
        "server", "condition", "item", "label", "condition_order", "study_ms", pl.col("median").alias("median_ms")
    )
    r = over.select("server", "condition", "item", "ratio", "ci_low", "ci_high", "study_ratio")
    return keep.join(r, on=["server", "condition", "item"], how="left").sort(["condition_order", "item", "server"])


def study_table_wide(long: pl.DataFrame, items: list[str]) -> pl.DataFrame:
    """One row per condition: per item the study's ms and ratio, then our ratio [95 % CI] per server."""
    rows = []
    servers = sorted(long["server"].unique().to_list())
    for (cond, label), g in long.group_by(["condition", "label"], maintain_order=True):
        row = {"condition": label}
        for item in items:
            gi = g.filter(pl.col("item") == item)
            st_ms, st_r = study_latency(cond, item), study_ratio(cond, item)
            row[f"{item}: study"] = (
                ""
                if st_ms is None
                else (f"{st_ms:g} ms" + (f" = {st_r:.2f}×" if st_r is not None and cond != STUDY_BASELINE else ""))
            )
            for s in servers:
                r = gi.filter(pl.col("server") == s)
                if r.is_empty():
                    row[f"{item}: {s}"] = ""
                    continue
                r = r.row(0, named=True)
                if cond == STUDY_BASELINE or r["ratio"] is None:
                    row[f"{item}: {s}"] = f"{r['median_ms']:.3f} ms" if r["median_ms"] is not None else "failed"
                else:
                    row[f"{item}: {s}"] = ratio_with_interval(r["ratio"], r["ci_low"], r["ci_high"])
        rows.append(row)
    return pl.from_dicts(rows)


# -- everything at once -------------------------------------------------------------------------------------------


def analyse(
    seen: dict[str, pl.DataFrame], params: AutoExplainParams, cores: int | None = None, txns: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """All derived tables of the stage, keyed by their derived-table name; with `txns` (`transactions`) every
    comparison in the fast mode."""
    runs = seen["runs"]
    summ = summary(runs, params)
    m = measured(runs)
    per_cluster = ratios(runs, params, txns, pool=False)
    rat = pool_ratios(per_cluster, m, params)
    checks = log_checks(runs)
    tim = timer(summ, seen["plans"], seen["timer"], params, cores=cores)
    noise_df = auto_explain_verdicts.noise_table(m, params, txns)
    pooled = "n_clusters" in rat.columns  # replica clusters: the comparisons per base server
    # the study's table beside the pooled ratios: each base server's medians over all its clusters' runs
    study = study_table(rat, summary(between_runs.base_servers(runs), params) if pooled else summ)
    # the findings' ratios take the ratio table's between-cluster variance (the same comparisons, and more of them)
    variances = ratio_variances(per_cluster, params) if pooled else None
    return {
        "auto_explain_latencies": latencies(runs),
        "auto_explain_summary": summ,
        "auto_explain_ratios": rat,
        "auto_explain_study": study,
        "auto_explain_log_checks": checks,
        "auto_explain_log_summary": log_summary(checks, params),
        "auto_explain_plans": seen["plans"],
        "auto_explain_timer": tim,
        "auto_explain_servers": seen["servers"],
        "auto_explain_noise": noise_df,
        "auto_explain_drift": auto_explain_verdicts.drift_table(m, params),
        "auto_explain_evidence": auto_explain_verdicts.evidence_table(
            runs, seen["plans"], noise_df, params, txns, variances
        ),
    }

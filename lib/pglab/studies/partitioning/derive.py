"""Study S5's raw store -> the tidy tables of data/derived/<profile>/partitioning_*.csv.

- partitioning_setup: per server, how it was prepared (rows, checksum, sizes, settings in force, cache)
  and the run's parameters (repetitions, warm-ups, worker counts, seed).
- partitioning_partitions: per server and partition: rows, size, tablespace and directory, checksum.
- partitioning_executions: every timed execution (warm-ups flagged) with its result.
- partitioning_summary: median, min, max, 95 % interval of the median per (server, condition).
- partitioning_speedup: each worker count over serial as the findings compare them (partitioning_paired's ratio
  and interval, paired within rounds, pooled over a server's clusters), as a speed-up too, the medians beside.
- partitioning_results: the results per (server, condition): distinct counts, range of avg(x).
- partitioning_plans: per (server, condition) the plan's shape checks, workers planned / launched and the
  workers the planner's rule predicts; partitioning_gathers: one row per Gather.
- partitioning_planner: the plan with the study's 100 allowed workers against the rule, ours and the study's.
"""

from __future__ import annotations

import json

import polars as pl

from ...core.run import measurements, outcomes
from ...core.stats import between_runs, stats
from ...core.store import RunStore
from ...pgtools.explain import gather_workers, parse_plan
from . import verdicts as pv
from .params import (
    EXPERIMENT,
    STUDY_ALLOWED_WORKERS,
    STUDY_PARTITION_MB,
    STUDY_WORKERS_PLANNED,
    PartitioningParams,
)
from .plans import append_workers, check, study_pages
from .prepare import Prepared
from .run import load_setup, plan_path

EXEC_TYPES = {
    "server": pl.String,
    "condition": pl.String,
    "workers": pl.Int64,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "round": pl.Int64,
    "seconds": pl.Float64,
    "count": pl.Int64,
    "avg": pl.Float64,
    "error": pl.String,
    "sqlstate": pl.String,
    "loadavg_1m": pl.Float64,
}


def executions(store: RunStore) -> pl.DataFrame:
    df = store.records(EXPERIMENT)
    if df.is_empty():
        return pl.DataFrame(schema=EXEC_TYPES)
    df = df.rename({"value": "seconds"})
    return df.select(
        pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in EXEC_TYPES.items()
    )


def setup_table(store: RunStore, p: PartitioningParams, preps: dict[str, Prepared]) -> pl.DataFrame:
    """The run's first record of each server's preparation, with the stage's parameters."""
    rows = []
    for name, prep in preps.items():
        rec = load_setup(store, name) or prep.record()
        rec.pop("partitions", None)
        rows.append(
            rec
            | {
                "rows_param": p.rows,
                "partitions": p.partitions,
                "seed": p.seed,
                "max_workers": p.max_workers,
                "repetitions": p.repetitions,
                "warmups": p.warmups,
                "shuffle_seed": p.shuffle_seed,
                "prewarm": p.prewarm,
                "tablespaces": p.tablespaces.enabled,
            }
        )
    return pl.from_dicts(rows, infer_schema_length=None)


def partitions_table(store: RunStore, preps: dict[str, Prepared]) -> pl.DataFrame:
    rows = []
    for name, prep in preps.items():
        rec = load_setup(store, name) or {"partitions": prep.partitions}
        for part in rec["partitions"]:
            rows.append(
                {"server": name, "remainder": int(part["partition"].rsplit("_", 1)[1])}
                | {
                    k: part[k]
                    for k in ("partition", "rows", "bytes", "pages", "tablespace", "location", "filepath", "checksum")
                }
            )
    schema = {
        "server": pl.String,
        "remainder": pl.Int64,
        "partition": pl.String,
        "rows": pl.Int64,
        "bytes": pl.Int64,
        "pages": pl.Int64,
        "tablespace": pl.String,
        "location": pl.String,
        "filepath": pl.String,
        "checksum": pl.String,
    }
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def summary(execs: pl.DataFrame) -> pl.DataFrame:
    return stats.summarize(execs.filter(~pl.col("warmup")), by=["server", "workers", "condition"], value="seconds")


def speedup(execs: pl.DataFrame, pair: pl.DataFrame) -> pl.DataFrame:
    """Each worker count over serial: partitioning_paired's time ratio (`pair`, the A/A copy left out) and its
    interval as ci_low / ci_high, the speed-up (its inverse) with the interval inverted, both medians over every
    cluster's timed executions beside."""
    timed = execs.filter(~pl.col("warmup"))
    med = (
        between_runs.base_servers(timed).group_by("server", "condition").agg(pl.col("seconds").median().alias("median"))
    )
    return (
        pair.filter(pl.col("condition") != pv.AA)
        .rename({"low": "ci_low", "high": "ci_high"})
        .join(med, on=["server", "condition"], how="left")
        .join(med.rename({"condition": "baseline", "median": "median_baseline"}), on=["server", "baseline"], how="left")
        .select(
            "server",
            "condition",
            "baseline",
            "workers",
            "n_rounds",
            "median",
            "median_baseline",
            "ratio",
            "ci_low",
            "ci_high",
            "coverage",
            (1 / pl.col("ratio")).alias("speedup"),
            (1 / pl.col("ci_high")).alias("speedup_ci_low"),
            (1 / pl.col("ci_low")).alias("speedup_ci_high"),
        )
        .sort("server", "workers")
    )


def results(execs: pl.DataFrame) -> pl.DataFrame:
    """What every (server, condition) returned, over all its executions (warm-ups included)."""
    ok = execs.filter(pl.col("error").is_null())
    return (
        ok.group_by("server", "workers", "condition")
        .agg(
            pl.len().alias("executions"),
            pl.col("count").n_unique().alias("distinct_counts"),
            pl.col("count").min().alias("count_min"),
            pl.col("count").max().alias("count_max"),
            pl.col("avg").min().alias("avg_min"),
            pl.col("avg").max().alias("avg_max"),
        )
        .sort("server", "workers")
    )


def _plan_doc(store: RunStore, server: str, condition: str) -> dict | None:
    path = plan_path(server, condition) + ".json"
    return json.loads(store.artifact_path(path).read_text()) if store.has_artifact(path) else None


def plans_tables(
    store: RunStore, p: PartitioningParams, servers: list[str], preps: dict[str, Prepared]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per (server, condition) plan, and one per Gather in them."""
    rows, gathers = [], []
    for server in servers:
        pages = [x["pages"] for x in preps[server].partitions]
        threshold = preps[server].min_parallel_table_scan_size_blocks
        for cond, k in p.conditions():
            doc = _plan_doc(store, server, cond)
            if doc is None:
                continue
            rec = {
                "server": server,
                "condition": cond,
                "allowed_workers": k,
                "predicted_workers": append_workers(pages, threshold, k) if k else None,
            }
            if isinstance(doc["plan"], dict) and "error" in doc["plan"]:
                rows.append(rec | {"error": doc["plan"]["error"]})
                continue
            parsed = parse_plan(doc["plan"])
            costs_off = plan_path(server, cond) + ".costs_off.txt"
            fp = parse_plan(store.artifact_path(costs_off).read_text()).fingerprint
            root = parsed.root
            rows.append(
                rec
                | check(parsed.nodes, p.partitions)
                | {
                    "fingerprint": fp,
                    "planning_ms": parsed.planning_ms,
                    "execution_ms": parsed.execution_ms,
                    "shared_hit_blocks": root["shared_hit_blocks"],
                    "shared_read_blocks": root["shared_read_blocks"],
                }
            )
            for g in gather_workers(parsed).iter_rows(named=True):
                gathers.append({"server": server, "condition": cond, "allowed_workers": k} | g)
    plans = pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame({"server": []})
    if "error" not in plans.columns:
        plans = plans.with_columns(error=pl.lit(None, dtype=pl.String))
    gschema = {
        "server": pl.String,
        "condition": pl.String,
        "allowed_workers": pl.Int64,
        "gather_id": pl.Int64,
        "node_type": pl.String,
        "subplan_name": pl.String,
        "workers_planned": pl.Int64,
        "workers_launched": pl.Int64,
        "nodes_below": pl.Int64,
        "leftmost_node_type": pl.String,
        "leftmost_relation": pl.String,
    }
    return plans, pl.from_dicts(gathers, schema=gschema) if gathers else pl.DataFrame(schema=gschema)


def planner_table(store: RunStore, servers: list[str], partitions: int) -> pl.DataFrame:
    """With the study's 100 allowed workers: what each server plans, what the rule predicts for our
    partitions, and what it predicts for the study's (7, as it planned)."""
    rows = []
    spages = study_pages(STUDY_PARTITION_MB)
    for server in servers:
        doc = _plan_doc(store, server, f"plan_only_{STUDY_ALLOWED_WORKERS}")
        if doc is None:
            continue
        parsed = parse_plan(doc["plan"])
        c = check(parsed.nodes, partitions)
        pages, threshold, allowed = doc["partition_pages"], doc["min_parallel_table_scan_size_blocks"], doc["allowed"]
        rows.append(
            {
                "server": server,
                "allowed_workers": allowed,
                "partitions": len(pages),
                "max_partition_pages": max(pages),
                "threshold_pages": threshold,
                "workers_planned": c["workers_planned"],
                "predicted_workers": append_workers(pages, threshold, allowed),
                "parallel_append_under_gather": c["parallel_append_under_gather"],
                "shape": c["shape"],
                "study_partitions": len(spages),
                "study_max_partition_pages": max(spages),
                "study_predicted_workers": append_workers(spages, 1024, STUDY_ALLOWED_WORKERS),
                "study_workers_planned": STUDY_WORKERS_PLANNED,
            }
            | _scaled(store, server, partitions)
        )
    return pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame({"server": []})


def _scaled(store: RunStore, server: str, partitions: int) -> dict:
    """The plan-only EXPLAIN with the scan threshold scaled to our partitions (none in runs before it was taken)."""
    doc = _plan_doc(store, server, f"plan_only_scaled_{STUDY_ALLOWED_WORKERS}")
    if doc is None:
        return {"scaled_threshold_pages": None, "scaled_threshold_exact": None, "scaled_workers_planned": None}
    c = check(parse_plan(doc["plan"]).nodes, partitions)
    # the threshold's exact scaled value: below one block our partitions are too small to scale it (clamped to 1)
    exact = 1024 * max(doc["partition_pages"]) / max(study_pages(STUDY_PARTITION_MB))
    return {
        "scaled_threshold_pages": doc["min_parallel_table_scan_size_blocks"],
        "scaled_threshold_exact": exact,
        "scaled_workers_planned": c["workers_planned"],
    }


def derive(store: RunStore, params) -> dict[str, pl.DataFrame]:
    """Notebook 70's tables from the raw store alone: the skips, and when a server took part every table of
    `tables`, from each server's preparation as the run first recorded it (partitioning_run.store_setup)."""
    out = {"partitioning_skipped": outcomes.skipped(store, [EXPERIMENT]).sort("experiment", "server")}
    folder = store.artifact_path(f"{EXPERIMENT}/setup")
    names = sorted(f.stem for f in folder.glob("*.json")) if folder.is_dir() else []
    recs = {n: load_setup(store, n) for n in names}
    preps = {
        n: Prepared(
            n,
            skipped=r["skipped"],
            partitions=r["partitions"],
            min_parallel_table_scan_size_blocks=r["min_parallel_table_scan_size_blocks"],
        )
        for n, r in recs.items()
    }
    active = [n for n, r in recs.items() if r["skipped"] is None]
    if not active:
        return out
    out |= tables(store, params.partitioning, active, preps)
    if (m := measurements.table(store, "partitioning", [EXPERIMENT])) is not None:
        out["partitioning_measurements"] = m
    return out


def tables(
    store: RunStore, p: PartitioningParams, servers: list[str], preps: dict[str, Prepared]
) -> dict[str, pl.DataFrame]:
    execs = executions(store)
    main = execs.filter(pl.col("condition") != pv.AA)  # the A/A copy only feeds the noise floor
    plans, gathers = plans_tables(store, p, servers, preps)
    paired = pv.tables(execs)
    return {
        "partitioning_setup": setup_table(store, p, preps),
        "partitioning_partitions": partitions_table(store, preps),
        "partitioning_executions": execs,
        "partitioning_summary": summary(main),
        "partitioning_speedup": speedup(main, paired["partitioning_paired"]),
        "partitioning_results": results(execs),
        "partitioning_plans": plans,
        "partitioning_gathers": gathers,
        "partitioning_planner": planner_table(store, servers, p.partitions),
        **paired,
    }

"""The parallel index builds as tidy tables (data/derived/<profile>/parallel_index_*.csv).

* `parallel_index_builds`: every build as recorded, warm-ups included (marked), with the workers planned and
  launched and the index's size.
* `parallel_index_summary`: per server, key columns and workers: median seconds with min–max and the 95 %
  interval of the median, the serial median t0, and the ideal times t0 / (workers + 1) (the leader sorts its
  own share of the table beside its workers) and t0 / min(workers + 1, cores) (no more of them run at once
  than the machine has cores).
* `parallel_index_speedup`: t0 / t(workers) as the findings compare them: `parallel_index_paired`'s ratio and
  interval inverted (paired within rounds, pooled over a server's clusters), the medians beside; the time to build
  all keys once, the figure the findings judge per worker count, is `parallel_index_paired_suite`'s.
* `parallel_index_setup`: per server, what was in force (parallel_index_run.setup, kept in the raw store)."""

from __future__ import annotations

import polars as pl

from ...core.run import measurements, outcomes
from ...core.stats import between_runs, stats
from ...core.store import RunStore
from . import verdicts as piv
from .params import AA_SUFFIX, EXPERIMENT, STUDY_COMBINATIONS, columns_label

SETUP = f"{EXPERIMENT}/setup.json"  # parallel_index_run.setup: one row per server, columns in order

BUILD_SCHEMA = {
    "server": pl.String,
    "round": pl.Int64,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "workers": pl.Int64,
    "key_columns": pl.Int64,
    "columns": pl.String,
    "seconds": pl.Float64,
    "planned_workers": pl.Int64,
    "launched_workers": pl.Int64,
    "participant_mem_kb": pl.Int64,
    "sort": pl.String,
    "spill_kb": pl.Int64,
    "index_bytes": pl.Int64,
    "index_columns": pl.String,
    "error": pl.String,
}


def builds(store: RunStore) -> pl.DataFrame:
    """Every build of the run, one row each."""
    rows = store.records(EXPERIMENT).to_dicts() if store.file.exists() else []
    # the A/A copy of the serial builds only feeds the noise floor (parallel_index_verdicts)
    rows = [r for r in rows if not str(r.get("condition") or "").endswith(AA_SUFFIX)]
    out = [{"seconds": r.get("value")} | {k: r.get(k) for k in BUILD_SCHEMA if k != "seconds"} for r in rows]
    return pl.from_dicts(out, schema=BUILD_SCHEMA) if out else pl.DataFrame(schema=BUILD_SCHEMA)


def _timed(b: pl.DataFrame) -> pl.DataFrame:
    return b.filter(~pl.col("warmup"))


def summary(b: pl.DataFrame, cores: int) -> pl.DataFrame:
    keys = ["server", "key_columns", "workers"]
    timed = _timed(b)
    s = stats.summarize(timed, keys, "seconds")
    seen = timed.group_by(keys).agg(
        pl.col("columns").first(),
        pl.col("planned_workers").min().alias("planned_min"),
        pl.col("planned_workers").max().alias("planned_max"),
        pl.col("launched_workers").min().alias("launched_min"),
        pl.col("launched_workers").max().alias("launched_max"),
        pl.col("launched_workers").is_null().sum().alias("not_observed"),
        (pl.col("index_bytes").median() / 2**20).alias("index_mib"),
        pl.col("sort").drop_nulls().mode().sort().first().alias("sort"),
        (pl.col("spill_kb").median() / 1024).alias("spill_mib"),
        pl.col("error").drop_nulls().first().alias("error"),
    )
    t0 = s.filter(pl.col("workers") == 0).select("server", "key_columns", pl.col("median").alias("t0"))
    ceiling = pl.min_horizontal(pl.col("workers") + 1, pl.lit(cores))
    return (
        s.join(seen, on=keys, how="left")
        .join(t0, on=["server", "key_columns"], how="left")
        .with_columns(
            label=pl.col("key_columns").map_elements(columns_label, return_dtype=pl.String),
            ideal_s=pl.col("t0") / (pl.col("workers") + 1),
            ideal_cores_s=pl.col("t0") / ceiling,
            cores=pl.lit(cores, pl.Int64),
        )
        .sort(keys)
    )


def speedup(b: pl.DataFrame, per_key: pl.DataFrame, cores: int) -> pl.DataFrame:
    """Speed-up over the serial build per (server, key columns, workers): parallel_index_paired's ratio (`per_key`)
    and interval inverted, the medians over every cluster's builds beside; the serial build's row is the baseline
    (1, no interval). Ideal: workers + 1; ceiling: that capped at the cores; efficiency: speed-up over ideal."""
    timed = _timed(b)
    keys = ["server", "key_columns", "workers"]
    med = between_runs.base_servers(timed).group_by(keys).agg(pl.col("seconds").median().alias("median_s"))
    t0 = med.filter(pl.col("workers") == 0).select("server", "key_columns", pl.col("median_s").alias("t0_s"))
    none = pl.lit(None, pl.Float64)
    base = t0.select(
        "server",
        "key_columns",
        pl.lit(0, pl.Int64).alias("workers"),
        pl.lit(None, pl.Int64).alias("n_rounds"),
        pl.lit(1.0).alias("speedup"),
        none.alias("ci_low"),
        none.alias("ci_high"),
        none.alias("coverage"),
    )
    pair = per_key.filter(~pl.col("condition").str.ends_with(AA_SUFFIX)).select(
        "server",
        pl.col("key_columns").cast(pl.Int64),
        pl.col("workers").cast(pl.Int64),
        "n_rounds",
        (1 / pl.col("ratio")).alias("speedup"),
        (1 / pl.col("high")).alias("ci_low"),
        (1 / pl.col("low")).alias("ci_high"),
        "coverage",
    )
    ceiling = pl.min_horizontal(pl.col("workers") + 1, pl.lit(cores))
    return (
        pl.concat([base, pair.cast(base.schema)])
        .join(med, on=keys, how="left")
        .join(t0, on=["server", "key_columns"], how="left")
        .with_columns(
            ideal=(pl.col("workers") + 1).cast(pl.Float64),
            ceiling=ceiling.cast(pl.Float64),
            cores=pl.lit(cores, pl.Int64),
            label=pl.col("key_columns").map_elements(columns_label, return_dtype=pl.String),
        )
        .with_columns(efficiency=pl.col("speedup") / pl.col("ideal"))
        .select(
            *keys,
            "n_rounds",
            "median_s",
            "t0_s",
            "speedup",
            "ci_low",
            "ci_high",
            "coverage",
            "ideal",
            "ceiling",
            "cores",
            "efficiency",
            "label",
        )
        .sort(keys)
    )


def derive(store: RunStore, params=None) -> dict[str, pl.DataFrame]:
    """Notebook 60's tables from the raw store alone: the skips, and once the stage recorded its setup (some
    server built indexes) every table of `tables` with the setup, on the measuring machine's cores."""
    out = {"parallel_index_skipped": outcomes.skipped(store, [EXPERIMENT]).sort("experiment", "server")}
    rows = store.load_json(SETUP)
    if not rows:
        return out
    setup = pl.from_dicts(rows, infer_schema_length=None)
    out |= tables(store, int(setup["cores"][0])) | {"parallel_index_setup": setup}
    if (m := measurements.table(store, "parallel_index", [EXPERIMENT])) is not None:
        out["parallel_index_measurements"] = m
    return out


def tables(store: RunStore, cores: int) -> dict[str, pl.DataFrame]:
    b = builds(store)
    paired = piv.tables(store)
    return {
        "parallel_index_builds": b.sort("server", "round", "key_columns", "workers"),
        "parallel_index_summary": summary(b, cores),
        "parallel_index_speedup": speedup(b, paired["parallel_index_paired"], cores),
        **paired,
    }


def workers_check(b: pl.DataFrame) -> pl.DataFrame:
    """Per server and worker count: builds, and how many launched fewer workers than planned or were not
    observed (every build, warm-ups too)."""
    return (
        b.group_by("server", "workers")
        .agg(
            pl.len().alias("builds"),
            pl.col("planned_workers").min().alias("planned_min"),
            pl.col("planned_workers").max().alias("planned_max"),
            pl.col("launched_workers").min().alias("launched_min"),
            pl.col("launched_workers").max().alias("launched_max"),
            (pl.col("launched_workers") < pl.col("planned_workers")).sum().alias("launched_below_planned"),
            pl.col("launched_workers").is_null().sum().alias("not_observed"),
        )
        .sort("server", "workers")
    )


def warmup_effect(b: pl.DataFrame) -> pl.DataFrame:
    """Each warm-up build against the median of the timed builds of its cell: was the first build slower?"""
    keys = ["server", "key_columns", "workers"]
    timed = _timed(b).group_by(keys).agg(pl.col("seconds").median().alias("timed_median_s"))
    return (
        b.filter(pl.col("warmup"))
        .join(timed, on=keys)
        .select(
            *keys,
            pl.col("seconds").alias("warmup_s"),
            "timed_median_s",
            (pl.col("seconds") / pl.col("timed_median_s")).alias("ratio"),
        )
        .sort(keys)
    )


def size_table(summary: pl.DataFrame) -> pl.DataFrame:
    """Per key: the study's distinct key combinations (SF 100) beside the size of our index on every server."""
    ours = (
        summary.filter(pl.col("workers") == 0)
        .with_columns(pl.col("index_mib").round(1))
        .pivot(on="server", index=["key_columns", "label"], values="index_mib", sort_columns=True)
    )
    study = pl.DataFrame(
        {"key_columns": list(STUDY_COMBINATIONS), "study_combinations": list(STUDY_COMBINATIONS.values())},
        schema={"key_columns": pl.Int64, "study_combinations": pl.Int64},
    )
    return (
        ours.rename({c: f"{c} MiB" for c in ours.columns[2:]})
        .join(study, on="key_columns", how="left")
        .sort("key_columns")
    )

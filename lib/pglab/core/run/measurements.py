"""Every study's raw measurements in one shape: the `<stage>_measurements` derived tables.

Each stage keeps its own tables (per query, per pgbench run, ...) with the columns its analysis needs; beside
them it writes its measurements with the same leading columns in every study, so that one reader (a notebook,
a spreadsheet, `pl.concat` over the studies) handles them all:

    run, server, study, condition, round, metric, value, unit, item, repetition, warmup, experiment

One row per recorded measurement and metric, failed runs included with a null value (their error is in the
stage's own tables). `metric` is "time" (unit s or ms as recorded), "throughput" (tps), or "cpu time" (ms, the
backend's own, where the stage recorded it beside the time). Values are the raw store's, unchanged."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ..store import RunStore

SCHEMA = {
    "run": pl.String,
    "server": pl.String,
    "study": pl.String,
    "condition": pl.String,
    "round": pl.Int64,
    "metric": pl.String,
    "value": pl.Float64,
    "unit": pl.String,
    "item": pl.String,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "experiment": pl.String,
}
METRIC_OF_UNIT = {"s": "time", "ms": "time", "tps": "throughput"}


def table(store: RunStore, study: str, experiments: Sequence[str]) -> pl.DataFrame | None:
    """The stage's measurements in the shared shape, in recording order; None when it recorded none."""
    parts = []
    for n, experiment in enumerate(experiments):
        rec = store.records(experiment)
        if rec.is_empty():
            continue
        for col, dtype in (("round", pl.Int64), ("cpu_ms", pl.Float64), ("unit", pl.String)):
            if col not in rec.columns:
                rec = rec.with_columns(pl.lit(None, dtype=dtype).alias(col))
        unit = pl.col("unit").cast(pl.String)
        base = rec.select(
            pl.lit(store.run_id).alias("run"),
            pl.col("server").cast(pl.String),
            pl.lit(study).alias("study"),
            pl.col("condition").cast(pl.String),
            pl.col("round").cast(pl.Int64),
            unit.replace_strict(METRIC_OF_UNIT, default=unit).alias("metric"),
            pl.col("value").cast(pl.Float64),
            unit.alias("unit"),
            pl.col("item").cast(pl.String),
            pl.col("repetition").cast(pl.Int64),
            pl.col("warmup").cast(pl.Boolean),
            pl.lit(experiment).alias("experiment"),
            pl.lit(n).alias("_exp"),
            pl.int_range(pl.len()).alias("_order"),
        )
        parts.append(base)
        cpu = rec.select(pl.col("cpu_ms").cast(pl.Float64)).to_series()
        if cpu.is_not_null().any():  # the backend's CPU time beside the wall time: a second metric
            parts.append(base.with_columns(metric=pl.lit("cpu time"), value=cpu, unit=pl.lit("ms")))
    if not parts:
        return None
    # each record's metrics together, records in the order they were taken
    out = pl.concat(parts).sort("_exp", "_order", maintain_order=True)
    return out.select(list(SCHEMA)).cast(SCHEMA)

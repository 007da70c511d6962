"""The pgbench experiments' evidence as tidy tables, from the raw store alone (issue 60), through the pgbench study's
own telemetry tables (`pgtools.pgbench_telemetry.tables`), keyed by the experiment's name and each condition's
pgbench options:

- experiments_latency: per (experiment, server, condition, item) the condition's clients, threads, scale, rate and
  protocol, its median tps, p50 / p95 / p99 / max latency over every transaction of its rounds (each with an
  interval over the rounds), and how many runs had a checkpoint inside or a busy machine.
- experiments_timeline: per second of every measured run: transactions, tps, latency mean / p95 / max, and
  `checkpoint` on the second the run's last checkpoint began.
- experiments_server_counters: per measured run, what the statistics views counted (pg_stat_database, _wal,
  _checkpointer, _bgwriter, _io, pg_stat_statements where installed): view, counter, delta.
- experiments_telemetry: one row per measured run: tps beside its percentiles, the checkpoint flag, WAL written and
  the /proc sampler's CPU shares and steal / iowait flag.

Every table is written with its columns when no experiment ran pgbench (an SQL-only run)."""

from __future__ import annotations

import polars as pl

from ...core.store import RunStore
from ...pgtools import pgbench_telemetry as pt
from .params import CLIENTS, PROTOCOL, RATE, SCALE, THREADS, Experiment
from .pgbench_params import knobs
from .run import setup_path, store_name

CELL = ["experiment", "server", "condition", "item"]
RUN = [*CELL, "repetition", "round"]
KNOBS = {CLIENTS: pl.Int64, THREADS: pl.Int64, SCALE: pl.Int64, RATE: pl.Float64, PROTOCOL: pl.String}
_LATENCY_DROP = ("scale", "mode", "clients")  # the study's keys: the condition's knobs stand in for them

SCHEMAS = {
    "experiments_latency": {k: pl.String for k in CELL}
    | KNOBS
    | {k: t for k, t in pt.LATENCY.items() if k not in CELL and k not in _LATENCY_DROP},
    "experiments_timeline": {k: pt.TIMELINE[k] for k in RUN}
    | {k: t for k, t in pt.TIMELINE.items() if k not in pt.KEYS},
    "experiments_server_counters": {k: pt.COUNTERS[k] for k in RUN}
    | {"view": pl.String, "counter": pl.String, "delta": pl.Float64},
    "experiments_telemetry": {k: pt.TELEMETRY[k] for k in RUN}
    | {k: t for k, t in pt.TELEMETRY.items() if k not in pt.KEYS},
}
TABLES = tuple(SCHEMAS)


def conditions_knobs(e: Experiment, setup: dict) -> pl.DataFrame:
    """Per condition of a pgbench experiment its pgbench options (the factors' values over the workload's)."""
    rows = [{"condition": c["condition"]} | knobs(e, c["settings"]) for c in setup["conditions"]]
    return pl.from_dicts(rows, schema={"condition": pl.String} | KNOBS)


def _one(store: RunStore, e: Experiment, setup: dict) -> dict[str, pl.DataFrame]:
    got = pt.tables(store, [store_name(e)])
    if not got:
        return {}
    name = pl.lit(e.name).alias("experiment")
    lat = (
        got["pgbench_latency"]
        .with_columns(name)
        .drop(*_LATENCY_DROP)
        .join(conditions_knobs(e, setup), on="condition", how="left")
    )
    return {
        "experiments_latency": lat,
        "experiments_timeline": got["pgbench_timeline"].with_columns(name),
        "experiments_server_counters": got["pgbench_server_counters"].with_columns(name),
        "experiments_telemetry": got["pgbench_telemetry"].with_columns(name),
    }


def tables(store: RunStore, experiments: list[Experiment]) -> dict[str, pl.DataFrame]:
    """The four tables over every pgbench experiment that ran, each empty (with its columns) when none did."""
    parts: dict[str, list[pl.DataFrame]] = {k: [] for k in SCHEMAS}
    for e in experiments:
        setup = store.load_json(setup_path(e))
        if e.workload.kind != "pgbench" or setup is None:
            continue
        for k, df in _one(store, e, setup).items():
            parts[k].append(df.select([pl.col(c).cast(t) for c, t in SCHEMAS[k].items()]))
    return {k: pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMAS[k]) for k, frames in parts.items()}

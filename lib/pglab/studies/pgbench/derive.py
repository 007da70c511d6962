"""Derived tables of the pgbench stage: tidy, flat, one row per measurement, plus their summaries.

Written by `build` to `data/derived/<profile>/pgbench_*.csv`:

* `pgbench_runs`: every measurement of every pgbench experiment (warm-ups and failures included).
* `pgbench_init`, `pgbench_init_steps` (per-step seconds, long form), `pgbench_select_only`,
  `pgbench_scaling`, `pgbench_series` (runs 1..K), `pgbench_series_sizes` (run 0 = after the fresh load).
* summaries (`stats.summarize`: n, n_missing = failed runs, median, mean, min, max, stddev, 95 % CI of the
  median): `pgbench_init_summary`, `pgbench_select_only_summary`, `pgbench_scaling_summary`,
  `pgbench_series_summary` (per run over series repetitions), `pgbench_buffers_summary` (per shared_buffers).
* `pgbench_series_trend`: per server and scale, the study's min / max / mean of the series and size growth (the
  trend itself, tps over the runs with its interval: `pgbench_no_vacuum` in paired_tables).
* `pgbench_buffers`: S3's mechanism, per server, scale, shared_buffers and round: the measured select-only tps
  (`pgbench_buffers_paired` in paired_tables: each smaller shared_buffers over the largest, within rounds).
* `pgbench_timeseries` (aggregate logs, when params ask for them), `pgbench_settings`.
* with telemetry (`pgtools.pgbench_telemetry`): `pgbench_timeline` (per second of every measured run, checkpoints
  marked), `pgbench_latency` (p50 / p95 / p99 / max per cell), `pgbench_server_counters`, `pgbench_system` and
  `pgbench_telemetry` (per run: the checkpoint flag and the sampler's steal / iowait flag beside tps)."""

from __future__ import annotations

import json

import polars as pl

from ...core import derived
from ...core.run import measurements, outcomes
from ...core.stats import stats
from ...core.store import RunStore
from ...pgtools import pgbench_telemetry
from ...pgtools.pgbench_output import parse_aggregate_log
from . import paired_tables as pgbench_paired
from .run import FACTS

ITEM_AA = "select-only-aa"  # pgbench_stage.ITEM_AA (not imported: the stage needs servers)
EXPERIMENTS = ("pgbench_init", "pgbench_select_only", "pgbench_scaling", "pgbench_series", "pgbench_buffers")

_F, _I, _S, _B = pl.Float64, pl.Int64, pl.String, pl.Boolean
SCHEMA = {
    "server": _S,
    "experiment": _S,
    "condition": _S,
    "item": _S,
    "repetition": _I,
    "warmup": _B,
    "round": _I,
    "value": _F,
    "unit": _S,
    "ts": _S,
    "scale": _I,
    "mode": _S,
    "clients": _I,
    "threads": _I,
    "duration_s": _I,
    "transactions": _I,
    "series": _I,
    "run": _I,
    "resumed": _B,
    "shared_buffers": _S,
    "shared_buffers_bytes": _I,
    "shared_buffers_shown": _S,
    "restarts": _I,
    "tps": _F,
    "latency_avg_ms": _F,
    "latency_stddev_ms": _F,
    "initial_connection_ms": _F,
    "transactions_processed": _I,
    "failed_transactions": _I,
    "tps_kind": _S,
    "query_mode": _S,
    "wall_s": _F,
    "init_total_s": _F,
    "generation": _S,
    "tuples_generated": _I,
    "db_bytes_before": _I,
    "db_bytes_after": _I,
    "databases_bytes_before": _I,
    "databases_bytes_after": _I,
    "datadir_bytes_before": _I,
    "datadir_bytes_after": _I,
    "wal_dir_bytes_before": _I,
    "wal_dir_bytes_after": _I,
    "wal_written_bytes": _I,
    "client_version": _S,
    "pgbench_version": _S,
    "command": _S,
    "returncode": _I,
    "stdout_file": _S,
    "stderr_file": _S,
    "agglog_file": _S,
    "aggregate_interval_s": _I,
    "error": _S,
    "pgbench_errors": _S,
    "checkpoint_error": _S,
}
STEP_ORDER = (
    "drop_tables",
    "create_tables",
    "client_side_generate",
    "server_side_generate",
    "vacuum",
    "primary_keys",
    "foreign_keys",
)


def records(store: RunStore) -> pl.DataFrame:
    """Every pgbench measurement of the run with the columns of SCHEMA (null where not recorded) and the
    per-step load times (`step_<name>_s`)."""
    frames = [f for e in EXPERIMENTS if (f := store.records(e)).height]
    if not frames:
        return pl.DataFrame(schema=SCHEMA)
    df = pl.concat(frames, how="diagonal_relaxed")
    steps = sorted((c for c in df.columns if c.startswith("step_") and c.endswith("_s")), key=_step_key)
    cols = [
        (pl.col(c).cast(t, strict=False) if c in df.columns else pl.lit(None, dtype=t)).alias(c)
        for c, t in SCHEMA.items()
    ] + [pl.col(c).cast(_F, strict=False) for c in steps]
    return df.select(cols)


def _step_key(col: str) -> tuple:
    name = col.removeprefix("step_").removesuffix("_s")
    return (STEP_ORDER.index(name) if name in STEP_ORDER else len(STEP_ORDER), name)


def _of(df: pl.DataFrame, experiment: str, measured_only: bool = True) -> pl.DataFrame:
    out = df.filter(pl.col("experiment") == experiment)
    return out.filter(~pl.col("warmup")) if measured_only else out


def init_table(df: pl.DataFrame) -> pl.DataFrame:
    steps = [c for c in df.columns if c.startswith("step_")]
    return _of(df, "pgbench_init").select(
        "server",
        "scale",
        "repetition",
        "round",
        pl.col("value").alias("load_s"),
        "init_total_s",
        "wall_s",
        *steps,
        "db_bytes_before",
        "db_bytes_after",
        "databases_bytes_before",
        "databases_bytes_after",
        "datadir_bytes_before",
        "datadir_bytes_after",
        "wal_written_bytes",
        "generation",
        "tuples_generated",
        "client_version",
        "command",
        "error",
        "checkpoint_error",
    )


def init_steps_table(df: pl.DataFrame) -> pl.DataFrame:
    steps = [c for c in df.columns if c.startswith("step_")]
    init = _of(df, "pgbench_init").select("server", "scale", "repetition", *steps)
    if not steps:
        return pl.DataFrame(schema={"server": _S, "scale": _I, "repetition": _I, "step": _S, "seconds": _F})
    long = init.unpivot(index=["server", "scale", "repetition"], on=steps, variable_name="step", value_name="seconds")
    return long.with_columns(pl.col("step").str.strip_prefix("step_").str.strip_suffix("_s")).drop_nulls("seconds")


def _runs(df: pl.DataFrame, experiment: str, keys: list[str]) -> pl.DataFrame:
    return _of(df, experiment, measured_only=False).select(
        "server",
        *keys,
        "item",
        "repetition",
        "warmup",
        "round",
        pl.col("value").alias("tps"),
        "latency_avg_ms",
        "latency_stddev_ms",
        "initial_connection_ms",
        "transactions_processed",
        "failed_transactions",
        "clients",
        "threads",
        "duration_s",
        "wal_written_bytes",
        "error",
    )


def _sizes_after() -> list[pl.Expr]:
    """The sizes measured after a run of the series, under their plain names (db_bytes, ...)."""
    return [pl.col(f"{c}_after").alias(c) for c in ("db_bytes", "databases_bytes", "datadir_bytes", "wal_dir_bytes")]


def series_table(df: pl.DataFrame) -> pl.DataFrame:
    return (
        _of(df, "pgbench_series")
        .filter(pl.col("item") != "init")
        .select(
            "server",
            "scale",
            "series",
            "run",
            pl.col("value").alias("tps"),
            "latency_avg_ms",
            "transactions_processed",
            "failed_transactions",
            "clients",
            "threads",
            "transactions",
            "duration_s",
            *_sizes_after(),
            "wal_written_bytes",
            "resumed",
            "error",
        )
    )


BUFFERS = {
    "server": _S,
    "scale": _I,
    "shared_buffers": _S,
    "shared_buffers_bytes": _I,
    "round": _I,
    "tps": _F,
    "latency_avg_ms": _F,
    "transactions_processed": _I,
    "clients": _I,
    "threads": _I,
    "duration_s": _I,
    "db_bytes": _I,
    "shared_buffers_shown": _S,
    "restarts": _I,
    "error": _S,
}


def buffers_table(df: pl.DataFrame) -> pl.DataFrame:
    """S3's mechanism: the measured select-only runs of one server per (scale, shared_buffers, round), the size the
    server reported after its restart and the database's size beside them (warm-ups left out)."""
    rows = _of(df, "pgbench_buffers").select(
        *[c for c in BUFFERS if c not in ("tps", "db_bytes")], pl.col("value").alias("tps"), "db_bytes_before"
    )
    return rows.select(*[(pl.col("db_bytes_before") if c == "db_bytes" else pl.col(c)).alias(c) for c in BUFFERS]).sort(
        "server", "scale", "shared_buffers_bytes", "round"
    )


def series_sizes_table(df: pl.DataFrame) -> pl.DataFrame:
    """Sizes after the fresh load (run 0) and after every run of the series."""
    return _of(df, "pgbench_series").select("server", "scale", "series", "run", *_sizes_after())


def series_trend(series: pl.DataFrame, sizes: pl.DataFrame) -> pl.DataFrame:
    """The series as the study summed it up: its min / max / mean tps; database and data-directory growth from the
    fresh load to the end of the series (median over series). Whether tps falls over the runs, with its interval, is
    `pgbench_no_vacuum`'s (paired_tables.no_vacuum)."""
    rows = []
    for (server, scale), g in series.group_by(["server", "scale"], maintain_order=True):
        runs = sorted(g["run"].unique().to_list())
        tps = g["tps"].drop_nulls()
        s = sizes.filter((pl.col("server") == server) & (pl.col("scale") == scale))
        rows.append(
            {
                "server": server,
                "scale": scale,
                "runs": len(runs),
                "series": g["series"].n_unique(),
                "failed_runs": g["tps"].null_count(),
                "tps_min": tps.min(),
                "tps_max": tps.max(),
                "tps_mean": tps.mean(),
                "db_growth": _growth(s, "db_bytes"),
                "datadir_growth": _growth(s, "datadir_bytes"),
            }
        )
    schema = {
        "server": _S,
        "scale": _I,
        "runs": _I,
        "series": _I,
        "failed_runs": _I,
        "tps_min": _F,
        "tps_max": _F,
        "tps_mean": _F,
        "db_growth": _F,
        "datadir_growth": _F,
    }
    return pl.from_dicts(rows, schema=schema).sort("server", "scale") if rows else pl.DataFrame(schema=schema)


def _growth(sizes: pl.DataFrame, col: str) -> float | None:
    """Median over series repetitions of size at the end / size after the load."""
    ratios = []
    for _, g in sizes.group_by("series"):
        g = g.drop_nulls(col).sort("run")
        if g.height >= 2 and g[col][0]:
            ratios.append(g[col][-1] / g[col][0])
    return float(pl.Series(ratios).median()) if ratios else None


def timeseries(df: pl.DataFrame, store: RunStore) -> pl.DataFrame:
    """Per-interval throughput and latency of every logged run (threads' lines summed per interval);
    `partial` marks a run's first and last interval, which the run covers only in part."""
    frames = []
    logged = df.filter(pl.col("agglog_file").is_not_null() & ~pl.col("warmup"))
    for rec in logged.iter_rows(named=True):
        path = store.artifact_path(rec["agglog_file"])
        try:
            agg = parse_aggregate_log(path.read_text())
        except (OSError, ValueError):
            continue
        if agg.is_empty():
            continue
        per = (
            agg.group_by("interval_start")
            .agg(pl.col("num_transactions").sum(), pl.col("sum_latency").sum(), pl.col("max_latency").max())
            .sort("interval_start")
        )
        t0, t1 = per["interval_start"].min(), per["interval_start"].max()
        interval = rec["aggregate_interval_s"] or 1
        frames.append(
            per.select(
                *[
                    pl.lit(rec[k], dtype=SCHEMA[k]).alias(k)
                    for k in (
                        "server",
                        "experiment",
                        "condition",
                        "item",
                        "repetition",
                        "scale",
                        "mode",
                        "clients",
                        "series",
                        "run",
                    )
                ],
                (pl.col("interval_start") - t0).alias("t_s"),
                pl.col("num_transactions").alias("transactions"),
                (pl.col("num_transactions") / interval).alias("tps"),
                (pl.col("sum_latency") / pl.col("num_transactions") / 1000).alias("latency_avg_ms"),
                (pl.col("max_latency") / 1000).alias("latency_max_ms"),
                # intervals are aligned to whole seconds: the first and last of a run cover only part of one
                pl.col("interval_start").is_in([t0, t1]).alias("partial"),
            )
        )
    if not frames:
        return pl.DataFrame(schema={"server": _S, "experiment": _S, "t_s": _I, "tps": _F})
    return pl.concat(frames, how="vertical_relaxed")


def settings(store: RunStore) -> pl.DataFrame:
    rows = []
    for p in sorted(store.artifact_path("pgbench/servers").glob("*.json")):
        data = json.loads(p.read_text())
        srv = data["server"]
        rows += [
            {
                "server": srv["server"],
                "name": s["name"],
                "setting": s["setting"],
                "unit": s["unit"],
                "source": s["source"],
            }
            for s in data["settings"]
        ]
        rows.append(
            {
                "server": srv["server"],
                "name": "(pgbench client)",
                "setting": srv.get("pgbench_client_version"),
                "unit": "",
                "source": "pglab",
            }
        )
    schema = {"server": _S, "name": _S, "setting": _S, "unit": _S, "source": _S}
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def servers(store: RunStore) -> pl.DataFrame:
    """Per server: its major version (the version curve's x) and the pgbench that drove it, with the reason
    when `client: own` could not use the server's own."""
    rows = []
    for p in sorted(store.artifact_path("pgbench/servers").glob("*.json")):
        srv = json.loads(p.read_text())["server"]
        num = srv.get("version_num")
        rows.append(
            {
                "server": srv["server"],
                "major": srv.get("major") or (int(num) // 10000 if num else None),
                "version_num": num,
                "pgbench_client_version": srv.get("pgbench_client_version"),
                "client_note": srv.get("pgbench_client_note"),
            }
        )
    schema = {"server": _S, "major": _I, "version_num": _I, "pgbench_client_version": _S, "client_note": _S}
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def derive(store: RunStore, params=None) -> dict[str, pl.DataFrame]:
    """Notebook 30's tables from the raw store alone: the skips, and every table `build` makes once the stage
    recorded its facts (none when no server could run pgbench)."""
    out = {"pgbench_skipped": outcomes.skipped(store, list(EXPERIMENTS)).sort("experiment", "server")}
    facts = store.load_json(FACTS)
    if facts is None:
        return out
    return out | build(store, "", facts["baseline"], write=False, cores=facts["cores"])


def build(
    store: RunStore, profile: str, baseline: str | None, write: bool = True, cores: int | None = None
) -> dict[str, pl.DataFrame]:
    """Every table of the stage; `cores`: the measuring machine's (pgbench_paired's ceiling), else this one's."""
    df = records(store)
    t: dict[str, pl.DataFrame] = {}
    t["pgbench_runs"] = df.select(pl.lit(store.run_id).alias("run_id"), *[c for c in df.columns if c != "tps"])
    t["pgbench_init"] = init_table(df)
    t["pgbench_init_steps"] = init_steps_table(df)
    t["pgbench_select_only"] = _runs(df, "pgbench_select_only", ["scale"])
    t["pgbench_scaling"] = _runs(df, "pgbench_scaling", ["mode", "scale"])
    t["pgbench_series"] = series_table(df)
    t["pgbench_series_sizes"] = series_sizes_table(df)
    t["pgbench_buffers"] = buffers_table(df)

    t["pgbench_init_summary"] = stats.summarize(t["pgbench_init"], ["server", "scale"], "load_s").join(
        t["pgbench_init"]
        .group_by("server", "scale")
        .agg(
            pl.col("db_bytes_after").median().alias("db_bytes_median"),
            (pl.col("datadir_bytes_after") - pl.col("datadir_bytes_before")).median().alias("datadir_growth_median"),
        ),
        on=["server", "scale"],
        how="left",
    )
    measured = {n: t[n].filter(~pl.col("warmup")) for n in ("pgbench_select_only", "pgbench_scaling")}
    # the A/A control's second label is the same cell again: the summaries take the first only
    measured["pgbench_select_only"] = measured["pgbench_select_only"].filter(pl.col("item") != ITEM_AA)
    t["pgbench_select_only_summary"] = _with_latency(measured["pgbench_select_only"], ["server", "scale"])
    t["pgbench_scaling_summary"] = _with_latency(measured["pgbench_scaling"], ["server", "mode", "clients"])
    t["pgbench_series_summary"] = _with_latency(t["pgbench_series"], ["server", "scale", "run"])
    if t["pgbench_buffers"].height:  # S3's mechanism, for make compare: tps per shared_buffers value
        t["pgbench_buffers_summary"] = _with_latency(t["pgbench_buffers"], ["server", "scale", "shared_buffers"])
    t["pgbench_series_trend"] = series_trend(t["pgbench_series"], t["pgbench_series_sizes"])
    t["pgbench_timeseries"] = timeseries(df, store)
    t["pgbench_settings"] = settings(store)
    t["pgbench_servers"] = servers(store)
    t |= pgbench_paired.tables(t, baseline, cores)  # paired version comparisons, A/A noise floor, drift, trends
    if (m := measurements.table(store, "pgbench", EXPERIMENTS)) is not None:
        t["pgbench_measurements"] = m
    # what explains each measured run's figure (issue 32): none for a run recorded without telemetry
    t |= pgbench_telemetry.tables(store, EXPERIMENTS)
    if write:
        derived.write(t, profile)
    return t


def _with_latency(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    s = stats.summarize(df, by, "tps")
    lat = df.group_by(by).agg(pl.col("latency_avg_ms").median().alias("latency_avg_ms_median"))
    return s.join(lat, on=by, how="left")


def latency_view(lat: pl.DataFrame) -> pl.DataFrame:
    """pgbench_latency as the notebook shows it: per cell tps beside the percentiles (ms, interval over rounds)."""

    def pm(p: str) -> pl.Expr:
        text = pl.format("{} ({}–{})", *(pl.col(f"{p}{x}_ms").round(3) for x in ("", "_low", "_high")))
        return pl.when(pl.col(f"{p}_low_ms").is_null()).then(pl.col(f"{p}_ms").round(3).cast(_S)).otherwise(text)

    return lat.select(
        "experiment",
        "server",
        "condition",
        "item",
        "n_rounds",
        pl.col("tps_median").round(0),
        *(pm(p).alias(f"{p} ms") for p in ("p50", "p95", "p99")),
        pl.col("max_ms").round(3).alias("max ms"),
        "checkpoint_runs",
        "system_flags",
    ).sort("experiment", "condition", "item", "server")


def flagged_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs of pgbench_telemetry with a checkpoint inside or a steal / iowait flag, tps beside the flag."""
    return (
        runs.filter(pl.col("checkpoint").fill_null(False) | pl.col("system_flag").is_not_null())
        .select(
            "server",
            "experiment",
            "condition",
            "item",
            "repetition",
            pl.col("tps").round(0),
            pl.col("p95_ms").round(3),
            "checkpoint",
            "checkpoint_s",
            "system_flag",
        )
        .sort("experiment", "server", "condition", "item", "repetition")
    )

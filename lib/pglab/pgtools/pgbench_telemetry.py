"""What explains a pgbench figure (issue 32): the telemetry kept around a measured pgbench run, and the tables made
from it, from the raw store alone. Shared by the pgbench study (bench.Bench) and the experiments' pgbench workloads.

Kept around a run: `Watch` (server counters before and after, when the latest checkpoint began, and the /proc
sampler, on a connection of its own) and `keep_txlog` (pgbench's per-transaction log as counts per second). A
record that names these files (`txlog_file`, `txlog_epoch0`, `counters_file`, `system_file`, `started_epoch`,
`ended_epoch`, `telemetry_error`) gives, through `tables`:

* `pgbench_timeline`: per second of every run: transactions, tps, latency mean / p95 / max, and `checkpoint` on the
  second the run's last checkpoint began (pg_control's time, whole seconds, on the clock pgbench logs with).
* `pgbench_latency`: per cell (experiment, server, condition, item) p50 / p95 / p99 / max over every transaction
  of its rounds, each with an interval over the rounds (`pgbench.latency_percentiles`), beside the cell's tps and
  how many of its runs had a checkpoint inside or a steal / iowait flag.
* `pgbench_server_counters`: per run, what the statistics views counted (`server_counters.deltas`, tidy).
* `pgbench_system`: per run, the /proc sampler's intervals (CPU shares, context switches, run queue, memory, I/O).
* `pgbench_telemetry`: one row per run: tps beside the run's percentiles, `checkpoint` (one completed inside
  the run) and the sampler's summary with its steal / iowait `system_flag`.

A run of an older kit (no telemetry recorded) gives none of these tables."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import polars as pl

from ..core.run.system_sampler import SCHEMA as SYSTEM_SCHEMA
from ..core.run.system_sampler import SystemSampler
from ..core.servers.db import scrub
from ..core.servers.servers import Server
from ..core.store import RunStore
from . import pgbench, server_counters

_F, _I, _S, _B = pl.Float64, pl.Int64, pl.String, pl.Boolean
KEYS = {
    "server": _S,
    "experiment": _S,
    "condition": _S,
    "item": _S,
    "repetition": _I,
    "round": _I,
    "scale": _I,
    "mode": _S,
    "clients": _I,
    "series": _I,
    "run": _I,
}
_RAW = {
    "warmup": _B,
    "value": _F,
    "started_epoch": _F,
    "ended_epoch": _F,
    "txlog_file": _S,
    "txlog_epoch0": _I,
    "counters_file": _S,
    "system_file": _S,
    "telemetry_error": _S,
}
TXLOG_SCHEMA = {"second": _I, "latency_us": _I, "outcome": _S, "transactions": _I}
TIMELINE = KEYS | {
    "second": _I,
    "covered_s": _F,
    "transactions": _I,
    "failed": _I,
    "tps": _F,
    "latency_mean_ms": _F,
    "latency_p95_ms": _F,
    "latency_max_ms": _F,
    "partial": _B,
    "checkpoint": _B,
}
CELL = ["experiment", "server", "condition", "item"]
LATENCY = {
    **{k: KEYS[k] for k in CELL},
    "scale": _I,
    "mode": _S,
    "clients": _I,
    "n_rounds": _I,
    "transactions": _I,
    "zero_us": _I,
    "tps_median": _F,
    "p50_ms": _F,
    "p50_low_ms": _F,
    "p50_high_ms": _F,
    "p95_ms": _F,
    "p95_low_ms": _F,
    "p95_high_ms": _F,
    "p99_ms": _F,
    "p99_low_ms": _F,
    "p99_high_ms": _F,
    "max_ms": _F,
    "interval": _S,
    "checkpoint_runs": _I,
    "flagged_runs": _I,
    "system_flags": _S,
}
COUNTERS = KEYS | {"view": _S, "counter": _S, "delta": _F}
SYSTEM = KEYS | dict(SYSTEM_SCHEMA)
TELEMETRY = KEYS | {
    "tps": _F,
    "transactions_logged": _I,
    "zero_us": _I,
    "failed": _I,
    "p50_ms": _F,
    "p95_ms": _F,
    "p99_ms": _F,
    "max_ms": _F,
    "checkpoints": _I,
    "checkpoint": _B,
    "checkpoint_s": _I,
    "wal_bytes": _F,
    "cpu_user_mean": _F,
    "cpu_system_mean": _F,
    "cpu_iowait_mean": _F,
    "cpu_steal_mean": _F,
    "samples": _I,
    "system_flag": _S,
    "telemetry_error": _S,
}


def runs(store: RunStore, experiments) -> pl.DataFrame:
    """The measured runs (no warm-up) that recorded telemetry: their keys, tps and raw files, in recorded order."""
    frames = [f for e in experiments if (f := store.records(e)).height]
    if not frames:
        return pl.DataFrame(schema=KEYS | _RAW)
    df = pl.concat(frames, how="diagonal_relaxed")
    cols = [
        (pl.col(c).cast(t, strict=False) if c in df.columns else pl.lit(None, dtype=t)).alias(c)
        for c, t in (KEYS | _RAW).items()
    ]
    telemetry = pl.any_horizontal(pl.col(c).is_not_null() for c in ("txlog_file", "counters_file", "system_file"))
    return df.select(cols).filter(~pl.col("warmup") & telemetry)


def read_txlog(store: RunStore, relpath: str) -> pl.DataFrame:
    """A run's `.txlog.csv`: transactions per (second into the run, latency µs, outcome)."""
    return pl.read_csv(store.artifact_path(relpath), schema=TXLOG_SCHEMA)


def latencies(txlog: pl.DataFrame) -> np.ndarray:
    """Every logged latency (µs) of the committed transactions, each as often as it occurred (0 µs included:
    `pgbench.latency_percentiles` leaves them out)."""
    ok = txlog.filter((pl.col("outcome") == "ok") & pl.col("latency_us").is_not_null())
    return np.repeat(ok["latency_us"].to_numpy(), ok["transactions"].to_numpy())


def _checkpoint(counters: dict | None, epoch0: int | None) -> dict:
    """checkpoints (the server's count over the run), checkpoint (one completed inside it) and checkpoint_s (when
    the last one began, seconds into the run). pg_control changes only when a checkpoint is done, so it settles the
    flag where readable; before 17 the count includes timed checkpoints the server skipped as idle."""
    if not counters:
        return {"checkpoints": None, "checkpoint": None, "checkpoint_s": None}
    before, after = counters.get("before") or {}, counters.get("after") or {}
    cb, ca = before.get("checkpointer", {}), after.get("checkpointer", {})
    n = sum(int(ca[k] - cb[k]) for k in ("checkpoints_timed", "checkpoints_req") if k in ca and k in cb)
    t0, t1 = counters.get("checkpoint_time_before"), counters.get("checkpoint_time_after")
    moved = t0 is not None and t1 is not None and t1 != t0
    flag = moved if t0 is not None and t1 is not None else server_counters.checkpoint_in(before, after)
    at = int(t1) - epoch0 if moved and epoch0 is not None else None
    return {"checkpoints": n, "checkpoint": flag, "checkpoint_s": at}


def _timeline(rec: dict, txlog: pl.DataFrame, checkpoint_s: int | None) -> list[dict]:
    """One row per second from the one the run began in to the one it ended in (a second without a transaction is
    a row with none: a stall shows). A partial second's tps is over the part the run covered."""
    epoch0 = rec["txlog_epoch0"]
    t0 = rec["started_epoch"] - epoch0 if rec["started_epoch"] is not None else 0.0
    t1 = rec["ended_epoch"] - epoch0 if rec["ended_epoch"] is not None else None
    last = max(int(t1) if t1 is not None else 0, txlog["second"].max() if txlog.height else 0)
    keys = {k: rec[k] for k in KEYS}
    rows = []
    for s in range(0, last + 1):
        g = txlog.filter(pl.col("second") == s)
        lat = latencies(g)
        timed = lat[lat > 0] / 1000.0
        covered = min(s + 1.0, t1 if t1 is not None else s + 1.0) - max(float(s), t0)
        ok = int(g.filter(pl.col("outcome") == "ok")["transactions"].sum())
        rows.append(
            keys
            | {
                "second": s,
                "covered_s": covered,
                "transactions": ok,
                "failed": int(g.filter(pl.col("outcome") != "ok")["transactions"].sum()),
                "tps": ok / covered if covered > 0 else None,
                "latency_mean_ms": float(timed.mean()) if timed.size else None,
                "latency_p95_ms": float(np.percentile(timed, 95)) if timed.size else None,
                "latency_max_ms": float(timed.max()) if timed.size else None,
                "partial": covered < 1.0,
                "checkpoint": s == checkpoint_s,
            }
        )
    return rows


def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def tables(store: RunStore, experiments) -> dict[str, pl.DataFrame]:
    """The five tables, or none when no run of this store recorded telemetry."""
    r = runs(store, experiments)
    if r.is_empty():
        return {}
    timeline, counters, system, per_run, logs = [], [], [], [], []
    for rec in r.iter_rows(named=True):
        keys = {k: rec[k] for k in KEYS}
        snaps = store.load_json(rec["counters_file"]) if rec["counters_file"] else None
        cp = _checkpoint(snaps, rec["txlog_epoch0"])
        if snaps:
            counters += [keys | d for d in server_counters.deltas(snaps["before"], snaps["after"])]
        summary: dict = {}
        if rec["system_file"]:
            raw = store.load_json(rec["system_file"])
            sampler = SystemSampler.from_snapshots(raw["snapshots"], raw["interval_s"])
            system += [keys | row for row in sampler.table().iter_rows(named=True)]
            summary = sampler.summary()
        lat: dict = {}
        if rec["txlog_file"]:
            txlog = read_txlog(store, rec["txlog_file"])
            timeline += _timeline(rec, txlog, cp["checkpoint_s"])
            values = latencies(txlog)
            logs.append((rec | cp | {"system_flag": summary.get("flag")}, values))
            p = pgbench.latency_percentiles(values)
            lat = {
                "transactions_logged": int(txlog.filter(pl.col("outcome") == "ok")["transactions"].sum()),
                "zero_us": int((values == 0).sum()),
                "failed": int(txlog.filter(pl.col("outcome") != "ok")["transactions"].sum()),
            } | {k: p[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")}
        wal = (snaps or {}).get("after", {}).get("wal", {}).get("wal_bytes")
        wal0 = (snaps or {}).get("before", {}).get("wal", {}).get("wal_bytes")
        per_run.append(
            keys
            | {"tps": rec["value"]}
            | lat
            | cp
            | {
                "wal_bytes": wal - wal0 if wal is not None and wal0 is not None else None,
                "samples": summary.get("samples"),
                "system_flag": summary.get("flag"),
                "telemetry_error": rec["telemetry_error"],
            }
            | {k: summary.get(k) for k in ("cpu_user_mean", "cpu_system_mean", "cpu_iowait_mean", "cpu_steal_mean")}
        )
    return {
        "pgbench_timeline": _frame(timeline, TIMELINE),
        "pgbench_latency": latency(logs),
        "pgbench_server_counters": _frame(counters, COUNTERS),
        "pgbench_system": _frame(system, SYSTEM),
        "pgbench_telemetry": _frame(per_run, TELEMETRY),
    }


def latency(logs: list[tuple[dict, np.ndarray]]) -> pl.DataFrame:
    """Per cell: the percentiles of every transaction of its rounds and their interval over the rounds (the
    schedule's repetition; a series' repetition is the series), with the cell's median tps."""
    cells: dict[tuple, list[tuple[dict, np.ndarray]]] = {}
    for rec, values in logs:
        cells.setdefault(tuple(rec[k] for k in CELL), []).append((rec, values))
    rows = []
    for key, group in cells.items():
        values = np.concatenate([v for _, v in group])
        rounds = np.concatenate([np.full(v.size, rec["repetition"]) for rec, v in group])
        p = pgbench.latency_percentiles(values, rounds)
        n_rounds = len({rec["repetition"] for rec, v in group if (v > 0).any()})
        tps = [rec["value"] for rec, _ in group if rec["value"] is not None]
        first = group[0][0]
        rows.append(
            dict(zip(CELL, key, strict=True))
            | {k: first[k] for k in ("scale", "mode", "clients")}
            | {
                "n_rounds": n_rounds,
                "transactions": int(values.size),
                "zero_us": int((values == 0).sum()),
                "tps_median": float(np.median(tps)) if tps else None,
                "interval": "bootstrap 95 %" if n_rounds >= 10 else "min–max of rounds" if n_rounds >= 2 else None,
                # beside the figure: how many of its runs had a checkpoint inside, or a busy machine (sampler)
                "checkpoint_runs": sum(bool(rec["checkpoint"]) for rec, _ in group),
                "flagged_runs": sum(rec["system_flag"] is not None for rec, _ in group),
                "system_flags": "; ".join(sorted({rec["system_flag"] for rec, _ in group if rec["system_flag"]}))
                or None,
            }
            | {k: p[k] for k in LATENCY if k in p}
        )
    return _frame(rows, LATENCY).sort(CELL)


class Watch:
    """Server counters and the /proc sampler around one measured run, on a connection of its own to the run's
    database (the database counters are per database). Whatever fails here is noted, never the run's error."""

    def __init__(self, server: Server, dbname: str):
        self.server, self.dbname = server, dbname
        self.sampler = SystemSampler(interval_s=1.0)
        self.conn = None
        self.errors: list[str] = []
        self.rec: dict = {}

    def _try(self, what: str, fn):
        try:
            return fn()
        except Exception as e:
            self.errors.append(scrub(f"{what}: {type(e).__name__}: {e}"))
            return None

    def before(self) -> None:
        self.conn = self._try("connect", lambda: self.server.connect(self.dbname))
        if self.conn is not None:
            self.rec["before"] = self._try("counters before", lambda: server_counters.snapshot(self.conn))
            self.rec["checkpoint_time_before"] = server_counters.checkpoint_time(self.conn)
            self.rec["server_version_num"] = self.conn.info.server_version

    def after(self) -> None:
        if self.conn is None:
            return
        self._try("waiting for pgbench's sessions to end", self._settle)
        self.rec["after"] = self._try("counters after", lambda: server_counters.snapshot(self.conn))
        self.rec["checkpoint_time_after"] = server_counters.checkpoint_time(self.conn)

    def _settle(self) -> None:
        # a backend hands in its statistics as its session ends: read once pgbench's are gone (at most 5 s)
        deadline = time.monotonic() + 5
        sql = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        while self.conn.execute(sql).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.conn.info.server_version < 150000:
            # before 15 the statistics collector's file may be half a second old when read
            time.sleep(0.6)

    def keep(self, store: RunStore, base: str) -> dict:
        out = {}
        if self.rec.get("before") is not None and self.rec.get("after") is not None:
            store.save_json(f"{base}.counters.json", self.rec)
            out["counters_file"] = f"{base}.counters.json"
        if len(self.sampler.snapshots) >= 2:
            store.save_json(
                f"{base}.system.json", {"interval_s": self.sampler.interval_s, "snapshots": self.sampler.snapshots}
            )
            out["system_file"] = f"{base}.system.json"
        if self.errors:
            out["telemetry_error"] = "; ".join(self.errors)
        return out

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()


def keep_txlog(store: RunStore, logdir: Path, base: str, t_start: float) -> dict:
    """pgbench's per-transaction log in `logdir` (`-l`, no aggregate interval) kept as `<base>.txlog.csv`: counts per
    (second into the run, latency µs, outcome); the record's fields that name it."""
    # seconds counted from the whole second the run began in: pgbench's epoch seconds and pg_control's
    # checkpoint time are on the same clock (this machine's), so both land on the same second
    epoch0 = int(t_start)
    rows = pgbench.transaction_log_counts(logdir)
    lines = ["second,latency_us,outcome,transactions"]
    lines += [f"{e - epoch0},{'' if lat is None else lat},{outcome},{n}" for e, lat, outcome, n in rows]
    store.save_text(f"{base}.txlog.csv", "\n".join(lines) + "\n")
    return {
        "txlog_file": f"{base}.txlog.csv",
        "txlog_epoch0": epoch0,
        "txlog_transactions": sum(r[3] for r in rows),
    }

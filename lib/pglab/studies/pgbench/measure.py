"""One pgbench run as the experiments take it: run through `pglab.pgbench.run`, keep the whole output.

Every run leaves `pgbench/<name>.stdout.txt` and `.stderr.txt` in the run's raw store (and the aggregate
log as `.agglog.txt` when asked for); the fields returned go into the measurement's record: the value
(tps, or seconds for a load), the exact command (no connection details, so no secret), the client's
version, the WAL written and the figures pgbench printed. A failed run returns value None with the error:
it is recorded, never dropped and never retried.

With telemetry (params `pgbench.telemetry`, on by default) every timed run that is measured (not a warm-up,
not a load) also keeps what explains its figure (issue 32):

* `.txlog.csv`: pgbench's per-transaction log (`-l`) as counts per (second into the run, latency µs, outcome),
  from which derive takes the per-second timeline and exact latency percentiles. The per-transaction log, not
  `--aggregate-interval 1`: only it holds each latency, so one log gives both (the aggregate log keeps sums and
  extremes per interval: no percentile). `aggregate_log_s` > 0 asks for the aggregate log instead (pgbench
  writes one kind): the run then has its `.agglog.txt` and no percentiles.
* `.counters.json`: `server_counters.snapshot` of the database before and after (read once pgbench's sessions
  have ended, so that their statistics are in), and when the server's latest checkpoint began, before and
  after: a checkpoint inside the run is flagged on its row and marked on its second.
* `.system.json`: the /proc sampler's raw snapshots over the run (about one a second, `SystemSampler`).

A telemetry failure (a role that may not read a view) is noted in `telemetry_error`, never the run's error."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...core.db import scrub
from ...core.installs import Install
from ...core.servers import Server
from ...core.store import RunStore
from ...core.system_sampler import SystemSampler
from ...pgtools import pgbench, server_counters
from ...pgtools.pgbench_output import PgbenchOutputError, parse_aggregate_log
from . import databases as pgbench_db

# Scalar figures of parse_pgbench_output kept with each measurement (the lists stay in the raw output).
PARSED_KEYS = (
    "pgbench_version",
    "server_version",
    "transaction_type",
    "scaling_factor",
    "query_mode",
    "max_tries",
    "transactions_processed",
    "transactions_expected",
    "failed_transactions",
    "serialization_failures",
    "deadlock_failures",
    "other_failures",
    "retried_transactions",
    "skipped_transactions",
    "latency_avg_ms",
    "latency_stddev_ms",
    "latency_includes_failures",
    "initial_connection_ms",
    "tps",
    "tps_kind",
    "tps_including_connections",
    "aborted",
)


def threads_for(clients: int, threads: int) -> int:
    """-j: as asked (never more than clients), or with 0 ('auto') one per CPU core."""
    return max(1, min(clients, threads or os.cpu_count() or 1))


@dataclass
class Bench:
    store: RunStore
    installs: list[Install]
    client: str = "newest"  # or "own"
    aggregate_log_s: int = 0
    timeout_s: float = 3600
    telemetry: bool = True  # per-transaction log, server counters and /proc samples around every measured run
    _clients: dict = field(default_factory=dict, repr=False)

    def client_install(self, server: Server) -> Install:
        if server.name not in self._clients:
            self._clients[server.name] = pgbench.client_for(server, self.installs, self.client)
        return self._clients[server.name]

    def _artefact(self, name: str) -> str:
        # an interrupted step that left its output but no record runs again: keep both outputs
        base, n = f"pgbench/{name}", 1
        while self.store.has_artifact(f"{base}.stdout.txt"):
            n += 1
            base = f"pgbench/{name}.attempt{n}"
        return base

    def run(
        self,
        server: Server,
        dbname: str,
        args: list,
        name: str,
        *,
        init: bool = False,
        duration_s: int | None = None,
        log: bool = False,
        scripts: dict[str, str] | None = None,
    ) -> dict:
        """Run pgbench ARGS on `dbname`; `name` names the artefacts. Returns the record's fields."""
        args = [str(a) for a in args]
        logdir = None
        fields: dict = {}
        watch = None
        if log and self.aggregate_log_s and not init:
            if duration_s and duration_s % self.aggregate_log_s:
                # pgbench 14+ refuses a duration that is not a whole number of intervals
                fields["agglog_error"] = f"-T {duration_s} is not a multiple of {self.aggregate_log_s} s: no log"
            else:
                logdir = Path(tempfile.mkdtemp(prefix="pglab-pgbench-log-"))
                args += ["-l", f"--aggregate-interval={self.aggregate_log_s}", f"--log-prefix={logdir}/agg"]
        if log and self.telemetry and not init:
            watch = _Watch(server, dbname)
            if logdir is None:  # the aggregate log, when asked for, takes -l: pgbench writes one kind of log
                logdir = Path(tempfile.mkdtemp(prefix="pglab-pgbench-log-"))
                args += ["-l", f"--log-prefix={logdir}/tx"]
        try:
            before = pgbench_db.sizes(server, dbname)
            client = self.client_install(server)
            timeout = duration_s + 300 if duration_s else self.timeout_s
            if watch is not None:
                watch.before()
            with watch.sampler if watch is not None else contextlib.nullcontext():
                t_start = time.time()
                res = pgbench.run(server, args, client, dbname=dbname, scripts=scripts, timeout_s=timeout, init=init)
                t_end = time.time()
            if watch is not None:
                watch.after()
            after = pgbench_db.sizes(server, dbname)
            base = self._artefact(name)
            self.store.save_text(f"{base}.stdout.txt", res.stdout)
            self.store.save_text(f"{base}.stderr.txt", res.stderr)
            fields |= {
                "command": res.command.replace(str(logdir), "LOGDIR") if logdir else res.command,
                "client_version": res.client_version,
                "returncode": res.returncode,
                "wall_s": round(res.elapsed_s, 4),
                "stdout_file": f"{base}.stdout.txt",
                "stderr_file": f"{base}.stderr.txt",
                "wal_written_bytes": pgbench_db.wal_written(before, after),
                **pgbench_db.with_suffix({k: v for k, v in before.items() if k != "wal_lsn"}, "before"),
                **pgbench_db.with_suffix({k: v for k, v in after.items() if k != "wal_lsn"}, "after"),
            }
            if watch is not None:
                fields |= {"started_epoch": t_start, "ended_epoch": t_end} | watch.keep(self.store, base)
                if not any(logdir.glob("agg.*")):
                    fields |= self._keep_txlog(logdir, base, t_start)
            if logdir is not None and any(logdir.glob("agg.*")):
                fields |= self._keep_log(logdir, base)
            fields |= _init_fields(res.parsed) if init else _run_fields(res.parsed)
            fields["error"] = res.error
            if res.error:
                fields["value"] = None
            elif init:
                # wall time, as the study's `time pgbench -i`: every version, finer than pgbench's own
                # "done in 0.23 s" (13+; kept as init_total_s with the per-step breakdown)
                fields["value"] = fields["wall_s"]
            else:
                fields["value"] = res.parsed["tps"]
        except Exception as e:  # a server gone, a refused step: recorded as this run's outcome
            fields |= {"value": None, "error": scrub(f"{type(e).__name__}: {e}")}
        finally:
            if watch is not None:
                watch.close()
            if logdir is not None:
                shutil.rmtree(logdir, ignore_errors=True)
        fields["unit"] = "s" if init else "tps"
        return fields

    def _keep_log(self, logdir: Path, base: str) -> dict:
        # one file per thread (agg.PID, agg.PID.1, ...): kept together, thread files in order
        files = sorted(logdir.glob("agg.*"), key=lambda p: (len(p.name), p.name))
        text = "".join(p.read_text() for p in files)
        self.store.save_text(f"{base}.agglog.txt", text)
        out = {
            "agglog_file": f"{base}.agglog.txt",
            "agglog_threads": len(files),
            "aggregate_interval_s": self.aggregate_log_s,
        }
        try:
            out["agglog_lines"] = parse_aggregate_log(text).height
        except PgbenchOutputError as e:
            out["agglog_error"] = str(e)
        return out

    def _keep_txlog(self, logdir: Path, base: str, t_start: float) -> dict:
        # seconds counted from the whole second the run began in: pgbench's epoch seconds and pg_control's
        # checkpoint time are on the same clock (this machine's), so both land on the same second
        epoch0 = int(t_start)
        rows = pgbench.transaction_log_counts(logdir)
        lines = ["second,latency_us,outcome,transactions"]
        lines += [f"{e - epoch0},{'' if lat is None else lat},{outcome},{n}" for e, lat, outcome, n in rows]
        self.store.save_text(f"{base}.txlog.csv", "\n".join(lines) + "\n")
        return {
            "txlog_file": f"{base}.txlog.csv",
            "txlog_epoch0": epoch0,
            "txlog_transactions": sum(r[3] for r in rows),
        }


class _Watch:
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


def _run_fields(parsed: dict | None) -> dict:
    p = parsed or {}
    out = {k: p.get(k) for k in PARSED_KEYS}
    out["pgbench_errors"] = "; ".join(p.get("errors") or []) or None
    out["unrecognized_lines"] = len(p.get("unrecognized_lines") or [])
    return out


def _init_fields(parsed: dict | None) -> dict:
    p = parsed or {}
    out = {
        "init_total_s": p.get("total_s"),
        "generation": p.get("generation"),
        "tuples_generated": p.get("tuples_generated"),
    }
    for step, secs in (p.get("steps_s") or {}).items():
        out[f"step_{step}_s"] = secs
    out["pgbench_errors"] = "; ".join(p.get("errors") or []) or None
    return out

"""One pgbench run (`Bench.run`) of the pgbench study: run through `pglab.pgbench.run`, keep the whole output.

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

from ...core.installs.installs import Install
from ...core.run import schedule
from ...core.servers.db import scrub
from ...core.servers.servers import Server
from ...core.store import RunStore
from ...pgtools import pgbench, pgbench_telemetry
from ...pgtools.pgbench_output import PgbenchOutputError, parse_aggregate_log
from . import prepare

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


def failed(error: str, unit: str = "tps") -> dict:
    return {"value": None, "unit": unit, "error": error}


def scale_of(condition: str) -> int:
    """The scale of a step's condition or item (`s10`: 10)."""
    return int(condition.removeprefix("s"))


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
            watch = pgbench_telemetry.Watch(server, dbname)
            if logdir is None:  # the aggregate log, when asked for, takes -l: pgbench writes one kind of log
                logdir = Path(tempfile.mkdtemp(prefix="pglab-pgbench-log-"))
                args += ["-l", f"--log-prefix={logdir}/tx"]
        try:
            before = prepare.sizes(server, dbname)
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
            after = prepare.sizes(server, dbname)
            base = schedule.fresh_base(self.store, f"pgbench/{name}")
            self.store.save_text(f"{base}.stdout.txt", res.stdout)
            self.store.save_text(f"{base}.stderr.txt", res.stderr)
            fields |= {
                "command": res.command.replace(str(logdir), "LOGDIR") if logdir else res.command,
                "client_version": res.client_version,
                "returncode": res.returncode,
                "wall_s": round(res.elapsed_s, 4),
                "stdout_file": f"{base}.stdout.txt",
                "stderr_file": f"{base}.stderr.txt",
                "wal_written_bytes": prepare.wal_written(before, after),
                **prepare.with_suffix({k: v for k, v in before.items() if k != "wal_lsn"}, "before"),
                **prepare.with_suffix({k: v for k, v in after.items() if k != "wal_lsn"}, "after"),
            }
            if watch is not None:
                fields |= {"started_epoch": t_start, "ended_epoch": t_end} | watch.keep(self.store, base)
                if not any(logdir.glob("agg.*")):
                    fields |= pgbench_telemetry.keep_txlog(self.store, logdir, base, t_start)
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

"""The pgbench experiments of study S3 and S4's scale-up, on every server of the session.

    run_stage(session)                       # all of it (Study.run); or st = Stage(session); st.load(), ...

Experiments (each recorded under its own name in the run's raw store; its params: params.py):

* `pgbench_init`: `pgbench -i -s S` into a freshly created `pgbench_sS`, per server x scale, repetitions
  interleaved; value = wall seconds (as the study's `time`), with the per-step breakdown and sizes before/after.
* `pgbench_select_only`: `-S -c C -j J -T T` on `pgbench_sS`, warm-up round first, then repetitions
  round-robin over every server and scale.
* `pgbench_scaling`: select-only and TPC-B at clients 1, 2, 4, ... on one scale, interleaved likewise.
* `pgbench_series`: from a fresh load of `pgbench_sS_nv` (item `init`), K consecutive `-n` TPC-B runs
  (items `run01` ...) with no vacuum between; run k of every server before run k+1 of any. A series is
  sequential by nature: one interrupted and resumed continues on the same database, and its remaining
  runs say so (`resumed`).
* `pgbench_buffers`: S3's explanation of its select-only ranking (small shared_buffers win while the data sits
  in the OS cache), on one server (`buffers_server`): per round, each shared_buffers value in shuffled order, the
  server restarted with it, then per scale a warm-up run and the measured `-S` run on `pgbench_sS` (condition =
  the shared_buffers value, item = `sS`). The server's own settings come back afterwards, however it ends.

A step that fails is recorded with its error (value None), never dropped or retried; an experiment whose
every run on a server failed stops the stage (`outcomes.NothingMeasured`, naming the server and the first
error). Every pgbench run writes (loads, vacuums, TPC-B updates), so an external server without
allow_destructive takes no part: a recorded skip. A step already recorded in the run is not run again, so the
same run id resumes where it stopped.

One pgbench run (`Bench.run`): run through `pglab.pgbench.run`, keep the whole output.

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
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...core import replicas
from ...core.installs.installs import Install, discover, from_params
from ...core.run import outcomes, schedule
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import scrub
from ...core.servers.servers import Server, matches_version
from ...core.store import RunStore
from ...pgtools import environment, pgbench, pgbench_telemetry
from ...pgtools.pgbench_output import PgbenchOutputError, parse_aggregate_log
from . import prepare
from .params import size_bytes

log = logging.getLogger(__name__)

FACTS = "pgbench/facts.json"  # Stage.capture_settings: the baseline server and the cores, for derive
EXP_INIT = "pgbench_init"
EXP_SELECT = "pgbench_select_only"
EXP_SCALING = "pgbench_scaling"
EXP_SERIES = "pgbench_series"
EXP_BUFFERS = "pgbench_buffers"
ITEM_SELECT, ITEM_AA = "select-only", "select-only-aa"  # the A/A control: the same cell under a second label
EXPERIMENT_NAMES = {
    "load": EXP_INIT,
    "select_only": EXP_SELECT,
    "scaling": EXP_SCALING,
    "series": EXP_SERIES,
    "buffers": EXP_BUFFERS,
}
BUFFERS_RESTORED = "pgbench/buffers/{server}.restored.json"  # the server's shared_buffers before and after


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


def _scale(condition: str) -> int:
    return int(condition.removeprefix("s"))


def _minor(inst: Install) -> int:
    return int(inst.minor) if inst.minor.isdigit() else 0


def _shared_buffers(srv: Server) -> str:
    """shared_buffers as the server reports it ('2MB', '2GB')."""
    with srv.connect() as conn:
        return conn.execute("SELECT current_setting('shared_buffers')").fetchone()[0]


def _failed(error: str, unit: str = "tps") -> dict:
    return {"value": None, "unit": unit, "error": error}


def _refusal(srv: Server) -> str:
    return (
        f"every pgbench run writes (its databases are created, loaded, vacuumed and updated), which params "
        f"do not allow on external server {srv.name} (allow_destructive: false)"
    )


class Stage:
    def __init__(self, session: Session, installs: list[Install] | None = None):
        self.session = session
        self.p = session.params.pgbench
        self.store = session.store
        # pgbench writes in every run: only servers the kit may change (the others are recorded skips)
        self.servers: list[Server] = [s for s in session.servers if s.allow_destructive]
        self.refused = {s.name: _refusal(s) for s in session.servers if not s.allow_destructive}
        self._by_name = {s.name: s for s in self.servers}
        if installs is None:
            installs = discover(from_params(session.params.servers))
        self.bench = Bench(
            self.store, installs, self.p.client, self.p.aggregate_log_s, self.p.run_timeout_s, self.p.telemetry
        )
        self.timings: dict[str, float] = {}  # experiment -> seconds spent in this process
        self._series_ready: set[tuple[str, int, int]] = set()  # series loaded by this process
        self._series_failed: dict[tuple[str, int, int], str] = {}

    # -- the whole stage -------------------------------------------------------------------------------------

    def run(self, experiments: list[str] | None = None) -> dict[str, int]:
        """Run the experiments params enable (in the study's order); returns steps run now per experiment."""
        self.capture_settings()
        return {e: getattr(self, e)() for e in (experiments or self.p.experiments)}

    def skipped(self) -> list[str]:
        """Record the skip of every server that takes no part, for each experiment params enable; their names."""
        for e in self.p.experiments:
            for name, reason in self.refused.items():
                outcomes.skip(self.store, EXPERIMENT_NAMES[e], name, reason)
        return list(self.refused)

    def capture_settings(self) -> None:
        """Once per server and run: version and every non-default setting, and the pgbench client used; once per
        run the facts the tables need beside the measurements (pgbench_tables.derive needs no server)."""
        self.store.save_json(FACTS, {"baseline": self.baseline(), "cores": os.cpu_count()})
        for srv in self.servers:
            rel = f"pgbench/servers/{srv.name}.json"
            if self.store.has_artifact(rel):
                continue
            rec, settings = environment.server(srv)
            client = self.bench.client_install(srv)
            rec |= {
                "pgbench_client": client.name,
                "pgbench_client_version": client.version,
                "pgbench_client_note": pgbench.client_note(srv, self.p.client),
            }
            self.store.save_json(rel, {"server": rec, "settings": settings})

    def _timed(self, experiment: str, steps: list, measure, desc: str) -> int:
        for name, reason in self.refused.items():
            outcomes.skip(self.store, experiment, name, reason)
        t0 = time.monotonic()
        n = schedule.run_steps(steps, self.store, experiment, measure, desc=desc)
        self.timings[experiment] = self.timings.get(experiment, 0.0) + time.monotonic() - t0
        outcomes.require_measured(self.store, [experiment], list(self._by_name))
        return n

    # -- load ------------------------------------------------------------------------------------------------

    def _load(self, srv: Server, scale: int, dbname: str, name: str) -> dict:
        try:
            srv.recreate_database(dbname)
        except Exception as e:
            return _failed(scrub(f"{type(e).__name__}: {e}"), "s")
        cp_error = prepare.checkpoint(srv) if self.p.init.checkpoint else None
        fields = self.bench.run(srv, dbname, ["-i", "-s", scale], name, init=True)
        return fields | {"checkpoint_error": cp_error}

    def _ensure_loaded(self, srv: Server, scale: int, dbname: str) -> str | None:
        """Load `dbname` at `scale` unless a complete load is there; the error text if that fails.

        Every pgbench run writes (vacuum, history truncation, TPC-B updates), so on an external server even
        an existing database is used only with allow_destructive."""
        try:
            srv.require_destructive(f"run pgbench, which writes, in database {dbname}")
            if prepare.loaded_scale(srv, dbname) == scale:
                return None
        except Exception as e:
            return scrub(f"{type(e).__name__}: {e}")
        fields = self._load(srv, scale, dbname, f"prepare/{srv.name}/{dbname}")
        self.store.save_json(f"pgbench/prepare/{srv.name}/{dbname}.{time.time_ns()}.json", fields)
        if fields.get("error"):
            return f"{dbname} could not be loaded on {srv.name}: {fields['error']}"
        return None

    def load(self) -> int:
        cells = [(s.name, f"s{sc}", "init") for sc in self.p.scales for s in self.servers]
        steps = schedule.plan(cells, self.p.init.repetitions, warmups=0, shuffle_seed=self.p.shuffle_seed)

        def measure(st):
            sc = _scale(st.condition)
            name = f"init/{st.server}/s{sc}.r{st.repetition}"
            return {"scale": sc} | self._load(self._by_name[st.server], sc, prepare.database(sc), name)

        return self._timed(EXP_INIT, steps, measure, "pgbench -i")

    # -- select-only and scaling -----------------------------------------------------------------------------

    def _prepare(self, steps: list, experiment: str, scale_of) -> dict[tuple[str, int], str]:
        """Each (server, scale) the steps still to run need loaded; the error text of those that could not be."""
        errors = {}
        todo = schedule.pending(steps, self.store, experiment)
        for server, scale in sorted({(st.server, scale_of(st)) for st in todo}):
            err = self._ensure_loaded(self._by_name[server], scale, prepare.database(scale))
            if err:
                errors[(server, scale)] = err
        return errors

    def _timed_run(self, st, scale: int, mode: str, clients: int, q, prefix: str, tag: str | None = None) -> dict:
        """One -T run of the step: q.warmup_s for a warm-up, q.duration_s measured; its artefacts named
        `<prefix>.<tag><repetition>` (tag: warmup or r unless given)."""
        duration = q.warmup_s if st.warmup else q.duration_s
        name = f"{prefix}.{tag or ('warmup' if st.warmup else 'r')}{st.repetition}"
        threads = threads_for(clients, self.p.threads)
        args = (["-S"] if mode == "select-only" else []) + [
            "-c",
            clients,
            "-j",
            threads,
            "-T",
            duration,
            "-M",
            self.p.query_mode,
        ]
        fields = self.bench.run(
            self._by_name[st.server],
            prepare.database(scale),
            args,
            name,
            duration_s=duration,
            log=not st.warmup,
        )
        return {"scale": scale, "mode": mode, "clients": clients, "threads": threads, "duration_s": duration} | fields

    def select_only(self) -> int:
        q = self.p.select_only
        cells = [
            (s.name, f"s{sc}", item)
            for sc in self.p.scales
            for s in self.servers
            for item in (ITEM_SELECT, *([ITEM_AA] if s.name in self.aa_servers() else []))
        ]
        steps = schedule.plan(cells, q.repetitions, warmups=1 if q.warmup_s else 0, shuffle_seed=self.p.shuffle_seed)
        errors = self._prepare(steps, EXP_SELECT, lambda st: _scale(st.condition))

        def measure(st):
            sc = _scale(st.condition)
            if (st.server, sc) in errors:
                return {"scale": sc, "mode": "select-only", "clients": q.clients} | _failed(errors[(st.server, sc)])
            aa = ".aa" if st.item == ITEM_AA else ""
            return self._timed_run(st, sc, "select-only", q.clients, q, f"select_only/{st.server}/s{sc}{aa}")

        return self._timed(EXP_SELECT, steps, measure, "pgbench -S")

    def aa_servers(self) -> list[str]:
        """The servers whose select-only cells run twice per round, the A/A control (params select_only.aa_control)."""
        which = self.p.select_only.aa_control
        if which == "none":
            return []
        return [s.name for s in self.servers] if which == "all" else [b] if (b := self.baseline()) else []

    def scaling_servers(self) -> list[Server]:
        """The servers of the scale-up (params pgbench.scaling.versions, e.g. S4's 10 and 11; all when null)."""
        wanted = self.p.scaling.versions
        if not wanted:
            return self.servers
        chosen = [s for s in self.servers if s.install is None or any(matches_version(s.install, v) for v in wanted)]
        if not chosen:
            raise ValueError(
                f"pgbench.scaling.versions {wanted}: none of this run's pgbench servers "
                f"({[s.name for s in self.servers]}) is of those versions; name them in pgbench.versions"
            )
        return chosen

    def scaling(self) -> int:
        q, sc = self.p.scaling, self.p.scaling_scale
        cells = [(s.name, m, f"c{c}") for m in q.modes for c in q.client_counts() for s in self.scaling_servers()]
        steps = schedule.plan(cells, q.repetitions, warmups=1 if q.warmup_s else 0, shuffle_seed=self.p.shuffle_seed)
        errors = self._prepare(steps, EXP_SCALING, lambda st: sc)

        def measure(st):
            clients = int(st.item.removeprefix("c"))
            if (st.server, sc) in errors:
                return {"scale": sc, "mode": st.condition, "clients": clients} | _failed(errors[(st.server, sc)])
            return self._timed_run(st, sc, st.condition, clients, q, f"scaling/{st.server}/{st.condition}.c{clients}")

        return self._timed(EXP_SCALING, steps, measure, "pgbench scaling")

    # -- the no-vacuum series --------------------------------------------------------------------------------

    def series_steps(self) -> list[schedule.Step]:
        """Per series repetition: a fresh load of every (server, scale), then run k of every one of them
        before run k+1 of any (order within a round shuffled with the recorded seed)."""
        q = self.p.series
        cells = [(s.name, f"s{sc}") for sc in self.p.series_scales for s in self.servers]
        shuffled = schedule.shuffler(self.p.shuffle_seed)
        steps, rnd = [], 0
        for rep in range(q.repetitions):
            for k in range(q.runs + 1):
                item = "init" if k == 0 else f"run{k:02d}"
                steps += [schedule.Step(s, c, item, rep, False, rnd) for s, c in shuffled(cells)]
                rnd += 1
        return steps

    def series(self) -> int:
        q = self.p.series

        def measure(st):
            srv, sc = self._by_name[st.server], _scale(st.condition)
            db = prepare.database(sc, series=True)
            key = (st.server, sc, st.repetition)
            run = 0 if st.item == "init" else int(st.item.removeprefix("run"))
            base = {"scale": sc, "series": st.repetition, "run": run}
            if st.item == "init":
                fields = self._load(srv, sc, db, f"series/{st.server}/s{sc}.series{st.repetition}.init")
                if fields.get("error"):
                    self._series_failed[key] = fields["error"]
                else:
                    self._series_ready.add(key)
                return base | fields
            if key in self._series_failed:
                return base | _failed(f"the load this series starts from failed: {self._series_failed[key]}")
            resumed = key not in self._series_ready
            if resumed:
                # this series was started by an earlier process: continue it only on its own database
                if not srv.allow_destructive:
                    return base | _failed(f"{st.server}: pgbench writes; allow_destructive is off")
                loaded = prepare.loaded_scale(srv, db)
                if loaded != sc:
                    why = (
                        f"{db} on {st.server} holds no complete load of scale {sc} (found {loaded}) to continue "
                        "this series on; start a new run id to repeat the series"
                    )
                    return base | {"resumed": True} | _failed(why)
                self._series_ready.add(key)
            clients = q.clients
            threads = threads_for(clients, self.p.threads)
            length = ["-t", q.transactions] if q.transactions else ["-T", q.duration_s]
            args = ["-n", "-c", clients, "-j", threads, *length, "-M", self.p.query_mode]
            name = f"series/{st.server}/s{sc}.series{st.repetition}.{st.item}"
            fields = self.bench.run(srv, db, args, name, duration_s=q.duration_s, log=True)
            shape = {"mode": "tpcb-no-vacuum", "clients": clients, "threads": threads, "transactions": q.transactions}
            return base | shape | {"duration_s": q.duration_s, "resumed": resumed} | fields

        return self._timed(EXP_SERIES, self.series_steps(), measure, "pgbench -n series")

    # -- S3's mechanism: small against large shared_buffers, on one server -----------------------------------

    def buffers_server(self) -> Server | None:
        """The server of the buffers experiment: params buffers.version's among pgbench's servers (null: the newest),
        its first cluster only (params servers.clusters: `pg17_c2` is a replica of pg17, not another server). None
        when there is no kit server: the kit restarts no external server."""
        bases = replicas.base_names([s.name for s in self.servers])
        kit = [s for s in self.servers if bases[s.name] == s.name and s.managed and s.install is not None]
        wanted = self.p.buffers.version
        if wanted is not None:
            kit = [s for s in kit if matches_version(s.install, wanted)]
            if not kit:
                raise ValueError(
                    f"pgbench.buffers.version {wanted}: none of this run's kit servers for pgbench "
                    f"({[s.name for s in self.servers]}) is of that version; name it in pgbench.versions"
                )
        return max(kit, key=lambda s: (s.install.major, _minor(s.install)), default=None)

    def buffers_steps(self, server: str) -> list[schedule.Step]:
        """Per round, every shared_buffers value in shuffled order (the stage's seed), each a block: the server
        restarted with it, then per scale (shuffled too) a warm-up run and the measured run."""
        q = self.p.buffers
        shuffled = schedule.shuffler(self.p.shuffle_seed)
        steps = []
        for rnd in range(q.repetitions):
            for sb in shuffled(q.shared_buffers):
                for sc in shuffled(q.scales):
                    warm = [schedule.Step(server, sb, f"s{sc}", rnd, True, rnd)] if q.warmup_s else []
                    steps += [*warm, schedule.Step(server, sb, f"s{sc}", rnd, False, rnd)]
        return steps

    def buffers(self) -> int:
        q = self.p.buffers
        srv = self.buffers_server()
        if srv is None:
            for s in self.servers:
                outcomes.skip(self.store, EXP_BUFFERS, s.name, "an external server: the kit restarts only its own")
            return 0
        steps = self.buffers_steps(srv.name)
        errors = self._prepare(steps, EXP_BUFFERS, lambda st: _scale(st.item))
        # the block running now (round, shared_buffers), what the server reports, the scales warmed since its restart
        state: dict = {"block": None, "shown": None, "error": None, "warmed": set(), "restarts": 0, "changed": False}

        def measure(st):
            sc = _scale(st.item)
            base = {"scale": sc, "mode": "select-only", "clients": q.clients, "shared_buffers": st.condition}
            base["shared_buffers_bytes"] = size_bytes(st.condition)
            if (st.server, sc) in errors:
                return base | _failed(errors[(st.server, sc)])
            if state["block"] != (st.round, st.condition):
                state.update(block=(st.round, st.condition), warmed=set(), shown=None)
                state["error"] = self._restart_buffers(srv, st.condition, state)
            if state["error"]:
                return base | _failed(state["error"])
            prefix = f"buffers/{st.server}/{st.condition}.s{sc}"
            if not st.warmup and q.warmup_s and sc not in state["warmed"]:
                # resumed after this block's warm-up was recorded: the restart emptied the buffers, warm them again
                # (kept as a raw artefact, not recorded)
                self._timed_run(replace(st, warmup=True), sc, "select-only", q.clients, q, prefix, tag="rewarm")
            fields = self._timed_run(st, sc, "select-only", q.clients, q, prefix)
            state["warmed"].add(sc)
            return base | fields | {"shared_buffers_shown": state["shown"], "restarts": state["restarts"]}

        before = _shared_buffers(srv)
        settings = dict(srv.cluster.settings)
        done = False
        try:
            n = self._timed(EXP_BUFFERS, steps, measure, "pgbench -S, shared_buffers")
            done = True
        finally:
            if state["changed"]:
                self._restore_buffers(srv, settings, before, state, raise_errors=done)
        return n

    def _restart_buffers(self, srv: Server, value: str, state: dict) -> str | None:
        """Restart `srv` with shared_buffers `value`; the error text when it did not come back with it."""
        state["changed"] = True  # from here on the server is no longer as it was: restored at the end
        try:
            srv.restart({"shared_buffers": value})
            state["restarts"] += 1
            state["shown"] = _shared_buffers(srv)
        except Exception as e:
            return scrub(f"restart with shared_buffers {value}: {type(e).__name__}: {e}")
        if size_bytes(state["shown"]) != size_bytes(value):
            return f"restarted with shared_buffers {value}, the server reports {state['shown']}"
        return None

    def _restore_buffers(self, srv: Server, settings: dict, before: str, state: dict, raise_errors: bool) -> None:
        """The server back on the settings it ran with before the experiment (a restart), what it reports then
        kept beside the runs. Raised when the experiment itself ended well; logged when an error is on its way."""
        try:
            srv.restart(settings)
            after = _shared_buffers(srv)
        except Exception as e:
            if raise_errors:
                raise
            log.error("%s: shared_buffers not restored to %s: %s", srv.name, before, scrub(f"{type(e).__name__}: {e}"))
            return
        rel = BUFFERS_RESTORED.format(server=srv.name)
        self.store.save_json(rel, {"before": before, "after": after, "restarts": state["restarts"] + 1})
        if after != before and raise_errors:
            raise RuntimeError(f"{srv.name}: shared_buffers {after} after the buffers experiment, {before} before")

    # -- what will run ---------------------------------------------------------------------------------------

    def plan(self) -> list[dict]:
        """The grid params ask for: per experiment the command shape, runs (warm-ups included) and the
        seconds of -T alone (a lower bound of the wall time; loads and -t runs add theirs)."""
        p, n = self.p, len(self.servers)
        na = n + len(self.aa_servers())  # select-only cells: the A/A control adds one per server it runs on
        ns = len(self.scaling_servers()) if "scaling" in p.experiments else 0
        j = "auto" if not p.threads else p.threads
        q, c, s = p.select_only, p.scaling, p.series
        length = f"-t {s.transactions}" if s.transactions else f"-T {s.duration_s}"
        cc = c.client_counts()
        rows = {
            "load": ("pgbench -i -s S", n * len(p.scales) * p.init.repetitions, 0, f"scales {p.scales}"),
            "select_only": (
                f"pgbench -S -c {q.clients} -j {j} -T {q.duration_s}",
                na * len(p.scales) * (q.repetitions + (1 if q.warmup_s else 0)),
                na * len(p.scales) * (q.repetitions * q.duration_s + q.warmup_s),
                f"scales {p.scales}, {q.repetitions} repetitions + warm-up of {q.warmup_s} s, A/A control on "
                f"{len(self.aa_servers())} server(s)",
            ),
            "scaling": (
                f"pgbench [-S] -c C -j {j} -T {c.duration_s}",
                ns * len(c.modes) * len(cc) * (c.repetitions + (1 if c.warmup_s else 0)),
                ns * len(c.modes) * len(cc) * (c.repetitions * c.duration_s + c.warmup_s),
                f"scale {p.scaling_scale}, clients {cc}, {c.modes}, {c.repetitions} repetitions",
            ),
            "series": (
                f"pgbench -n -c {s.clients} -j {j} {length}",
                n * len(p.series_scales) * s.repetitions * (s.runs + 1),
                n * len(p.series_scales) * s.repetitions * s.runs * (s.duration_s or 0),
                f"scales {p.series_scales}, {s.runs} runs after a fresh load, {s.repetitions} series",
            ),
        }
        if "buffers" in p.experiments:
            b, srv = p.buffers, self.buffers_server()
            cells = (1 if srv else 0) * len(b.scales) * len(b.shared_buffers) * b.repetitions
            rows["buffers"] = (
                f"pgbench -S -c {b.clients} -j {j} -T {b.duration_s}",
                cells * (2 if b.warmup_s else 1),
                cells * (b.duration_s + b.warmup_s),
                f"on {srv.name if srv else 'no kit server'} only, shared_buffers {b.shared_buffers} (a restart for "
                f"each per round), scales {b.scales}, {b.repetitions} rounds, a warm-up run of {b.warmup_s} s per "
                "scale after each restart",
            )
        return [
            {"experiment": e, "command": r[0], "runs": r[1], "seconds_of_T": r[2], "grid": r[3]}
            for e, r in rows.items()
            if e in p.experiments
        ]

    # -- what came out ---------------------------------------------------------------------------------------

    def baseline(self) -> str | None:
        """The server the others are compared with: the oldest PostgreSQL version among the kit's servers."""
        kit = [s for s in self.servers if s.install is not None]
        if not kit:
            return self.servers[0].name if self.servers else None
        if self.p.baseline is not None:  # params pgbench.baseline: that version's (first) server
            named = [s for s in kit if matches_version(s.install, self.p.baseline)]
            if named:
                return named[0].name
        return min(kit, key=lambda s: (s.install.major, _minor(s.install))).name


def run_stage(session: Session) -> StageResult:
    """Every experiment params enable (`pgbench.experiments`, which notebook 30's `only` overrides), on the servers
    the kit may write to, started (the others recorded as skipped). `seen["stage"]`: the Stage, with its timings."""
    t0 = time.monotonic()
    st = Stage(session)
    st.skipped()
    ran = st.run() if st.servers else {}  # no server may run pgbench: nothing recorded beyond the skips
    return StageResult(
        steps_run=sum(ran.values()),
        wall_s=time.monotonic() - t0,
        servers=[s.name for s in st.servers],
        seen={"stage": st},
    )

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

One pgbench run, its output and its telemetry: `bench.Bench`; the buffers experiment's server, schedule and restarts:
`buffers.Buffers`."""

from __future__ import annotations

import os
import time

from ...core.installs.installs import Install, discover, from_params
from ...core.run import outcomes, schedule
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import scrub
from ...core.servers.servers import Server, matches_version
from ...pgtools import environment, pgbench
from . import prepare
from .bench import Bench, failed, scale_of, threads_for
from .buffers import EXP_BUFFERS, Buffers

FACTS = "pgbench/facts.json"  # Stage.capture_settings: the baseline server and the cores, for derive
EXP_INIT = "pgbench_init"
EXP_SELECT = "pgbench_select_only"
EXP_SCALING = "pgbench_scaling"
EXP_SERIES = "pgbench_series"
ITEM_SELECT, ITEM_AA = "select-only", "select-only-aa"  # the A/A control: the same cell under a second label
EXPERIMENT_NAMES = {
    "load": EXP_INIT,
    "select_only": EXP_SELECT,
    "scaling": EXP_SCALING,
    "series": EXP_SERIES,
    "buffers": EXP_BUFFERS,
}


def _refusal(srv: Server) -> str:
    return (
        f"every pgbench run writes (its databases are created, loaded, vacuumed and updated), which params "
        f"do not allow on external server {srv.name} (allow_destructive: false)"
    )


class Stage(Buffers):
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
            return failed(scrub(f"{type(e).__name__}: {e}"), "s")
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
            sc = scale_of(st.condition)
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
        errors = self._prepare(steps, EXP_SELECT, lambda st: scale_of(st.condition))

        def measure(st):
            sc = scale_of(st.condition)
            if (st.server, sc) in errors:
                return {"scale": sc, "mode": "select-only", "clients": q.clients} | failed(errors[(st.server, sc)])
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
                return {"scale": sc, "mode": st.condition, "clients": clients} | failed(errors[(st.server, sc)])
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
            srv, sc = self._by_name[st.server], scale_of(st.condition)
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
                return base | failed(f"the load this series starts from failed: {self._series_failed[key]}")
            resumed = key not in self._series_ready
            if resumed:
                # this series was started by an earlier process: continue it only on its own database
                if not srv.allow_destructive:
                    return base | failed(f"{st.server}: pgbench writes; allow_destructive is off")
                loaded = prepare.loaded_scale(srv, db)
                if loaded != sc:
                    why = (
                        f"{db} on {st.server} holds no complete load of scale {sc} (found {loaded}) to continue "
                        "this series on; start a new run id to repeat the series"
                    )
                    return base | {"resumed": True} | failed(why)
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
        return min(kit, key=prepare.version).name


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

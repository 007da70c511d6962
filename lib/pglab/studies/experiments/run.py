"""Running the experiments of params on the session's servers, recording into the raw store.

Per experiment: the data once per server (kept when the database already holds it), the conditions (every
combination of the setting factors, the baseline twice: A and its A/A copy), then warm-up rounds and interleaved
rounds over servers, conditions and items (`core.schedule.plan`, `run_steps`: a killed run resumes, skipping
what is recorded). Session-level settings go with the condition's connection; server-level ones are written to the
server's configuration (reload, or restart where PostgreSQL needs one). Within a round the steps are grouped by
server configuration, the groups' order rotating from round to round, so that a round costs one restart per
configuration, not one per step; after a restart each item runs once untimed before it is timed (a restart
empties shared_buffers). A cell whose setting the server lacks is *not testable here*; a setup script that fails
is an *error* on that server (file, statement number and first line, the server's message: printed and kept in
setup.json), and a failing workload statement is recorded with its error (printed once per cell) while the other
cells go on. The evidence beside the times: every SQL cell's plan, spills and buffers from one untimed EXPLAIN
(ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) taken right after its first timed execution under the same
configuration (rule 6: never timed; TIMING OFF: no clock reads per row, the sample costs about one execution)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ...core import replicas
from ...core.run import outcomes
from ...core.run.schedule import Step, grouped, plan, run_steps
from ...core.run.session import Session
from ...core.servers.db import scrub, timed_statement
from ...core.servers.servers import Connections, Server
from ...core.store import RunStore
from . import checks, pgbench_run
from .params import AA_SUFFIX, PGBENCH_FACTORS, SCALE, SERVER, Experiment
from .prepare import Prepared, ScriptError, first_line, prepare_data, server_contexts, shown_path, statements

EXPLAIN_OPTIONS = "ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON"  # the evidence sample's EXPLAIN (docstring above)
SESSION_CONTEXTS = frozenset({"user", "superuser"})  # what a connection may set for itself once connected
PGBENCH_ITEM = "pgbench"


def store_name(e: Experiment) -> str:
    """The experiment's name in the raw store's `experiment` column."""
    return f"x_{e.name}"


def setup_path(e: Experiment) -> str:
    return f"experiments/{e.name}/setup.json"


def plan_path(e: Experiment, server: str, cond_index: int, item: str) -> str:
    return f"experiments/{e.name}/plans/{server}/c{cond_index}/{item}.json"


def database(e: Experiment) -> str:
    d = e.data
    if SCALE in e.factors:  # pgbench's data per condition: a database per scale (pgbench_run)
        return pgbench_run.databases(e)
    if d.ssb is not None:
        from ...datasets.ssb.load import database_name

        return database_name(d.ssb.sf)
    if d.pgbench is not None:
        return f"pgbench_s{d.pgbench.scale}"
    return f"x_{e.name}".lower().replace("-", "_").replace(".", "_")


def items(e: Experiment) -> dict[str, str]:
    """item -> its SQL (SQL workloads: a file each, named by its stem); pgbench: its one item."""
    if e.workload.kind == "pgbench":
        return {PGBENCH_ITEM: ""}
    return {p.stem: p.read_text() for p in checks.sql_files(e)}


def _ordered(servers: list[Server]) -> list[Server]:
    def version(s: Server):
        i = s.install
        return (i.major, int(i.minor) if i and i.minor.isdigit() else 0) if i else (0, 0)

    return sorted(servers, key=version)


def resolve_servers(e: Experiment, servers: list[Server]) -> tuple[list[Server], str | None]:
    """The experiment's servers (oldest version first) and, with a server factor, its baseline server."""
    # a server named stands for its replica clusters too (params servers.clusters: pg17 and pg17_c2)
    bases = replicas.base_names([s.name for s in servers])
    chosen = servers if e.servers == "all" else [s for s in servers if bases[s.name] in e.servers]
    factor = e.factors.get(SERVER)
    if isinstance(factor, list):
        chosen = [s for s in chosen if bases[s.name] in map(str, factor)]
    chosen = _ordered(chosen)
    if SERVER not in e.factors or not chosen:
        return chosen, None
    base = str(e.baseline.get(SERVER, "oldest"))
    name = {"oldest": chosen[0].name, "newest": chosen[-1].name}.get(base, base)
    return chosen, bases.get(name, name)  # the baseline server's first cluster (derive pairs cluster k with k)


def prepare(e: Experiment, servers: list[Server], store: RunStore) -> dict[str, Prepared]:
    out = {}
    dbname = database(e)
    for s in servers:
        p = Prepared(s.name, dbname)
        try:
            p.contexts = server_contexts(s)
            p.unavailable = checks.unavailable(e, {k.lower() for k in p.contexts})
            if s.install is not None:
                p.unavailable |= checks.refused_values(e, s.install)
            p.data = prepare_data(e, s, dbname, store)
        except ScriptError as ex:  # the user's SQL failed: an error named in full, not "not testable here"
            p.skipped = f"setup {ex}"
            p.error = {"file": ex.file, "statement": ex.number, "first_line": ex.statement, "error": ex.error}
            outcomes.skip(store, store_name(e), s.name, p.skipped)
            print(f"ERROR experiment {e.name}: {p.skipped}", flush=True)
        except Exception as ex:  # this server cannot take part: recorded, the others go on
            p.skipped = f"{type(ex).__name__}: {ex}"
            outcomes.skip(store, store_name(e), s.name, p.skipped)
            print(f"ERROR experiment {e.name}: {s.name} cannot take part: {p.skipped}", flush=True)
        out[s.name] = p
    return out


def save_setup(
    e: Experiment, store: RunStore, servers: list[Server], base_server: str | None, preps: dict[str, Prepared]
) -> dict:
    """What the run decided for the experiment, written once: a resumed run keeps (and reuses) the first."""
    first = store.load_json(setup_path(e))
    if first is not None:
        return first
    conds = e.conditions()
    doc = {
        "experiment": e.name,
        "store_name": store_name(e),
        "database": database(e),
        "servers": [s.name for s in servers],
        "base_server": base_server,
        "conditions": [{"index": i, "condition": c, "settings": v} for i, (c, v) in enumerate(conds.items())],
        "baseline": e.baseline_condition(),
        "aa": e.baseline_condition() + AA_SUFFIX,
        "items": list(items(e)),
        "prepared": {
            n: {
                "database": p.database,
                "unavailable": p.unavailable,
                "data": p.data,
                "skipped": p.skipped,
                "error": p.error,
                "contexts": {k: p.contexts.get(k) for k in sorted({*e.settings, *e.setting_factors})},
            }
            for n, p in preps.items()
        },
        "versions": {s.name: (s.install.version if s.install else None) for s in servers},
    }
    store.save_json(setup_path(e), doc, keep_order=True)
    return doc


def setup_error(setup: dict, server: str) -> str | None:
    """Why the server could not take part (its data's setup failed, or it could not be reached), else None."""
    return setup["prepared"][server]["skipped"]


def testable(setup: dict, server: str, settings: dict) -> str | None:
    """None when the server has what a condition with these settings needs, else what it lacks (*not testable
    here*). A server whose setup failed is an error (`setup_error`), not this."""
    prep = setup["prepared"][server]
    gone = prep["unavailable"]
    missing = [gone[x] for k, v in settings.items() for x in (k, f"{k}={_value_text(v)}") if x in gone]
    return "; ".join(missing) or None


def _value_text(v) -> str:
    return ("True" if v else "False") if isinstance(v, bool) else str(v)  # as checks.refused_values writes it


def _split(settings: dict, contexts: dict[str, str]) -> tuple[dict, dict]:
    """(server-level, session-level) settings: by pg_settings.context on the server (extension settings: session)."""
    server, session = {}, {}
    for k, v in settings.items():
        (session if contexts.get(k) in SESSION_CONTEXTS or "." in k else server)[k] = v
    return server, session


class Runner:
    """Measures one experiment's steps, configuring each server as the step's condition needs."""

    def __init__(self, e: Experiment, s: Session, servers: list[Server], setup: dict, evidence: bool = True):
        self.e, self.s, self.setup = e, s, setup
        self.evidence = evidence  # the EXPLAIN sample per cell (off only to measure its cost: make bench-experiment)
        self.files = {p.stem: shown_path(str(p)) for p in checks.sql_files(e)} if e.workload.kind == "sql" else {}
        self.told: set[tuple[str, str, str]] = set()  # cells whose failure was printed
        self.servers = {x.name: x for x in servers}
        self.conds = {c["condition"]: c for c in setup["conditions"]}
        self.items = items(e)
        self.current: dict[str, dict] = {}  # server -> server-level settings in force
        self.conns = Connections(self.servers, setup["database"])
        self.warm: set[tuple[str, str, str]] = set()
        self.client = None
        self.configured: list[dict] = []

    def levels(self, server: str, condition: str) -> tuple[dict, dict]:
        settings = dict(self.e.settings) | self.conds[condition]["settings"]
        settings = {k: v for k, v in settings.items() if k not in PGBENCH_FACTORS}  # pgbench's options: its argv
        contexts = {k: self.setup["prepared"][server]["contexts"].get(k) for k in settings}
        return _split(settings, contexts)

    def config_key(self, step: Step) -> str:
        return json.dumps(self.levels(step.server, step.condition)[0], sort_keys=True, default=str)

    def ensure(self, server: str, wanted: dict) -> None:
        if self.current.get(server) == wanted:
            return
        x = self.servers[server]
        res = x.configure(wanted)
        self.configured.append({"server": server, "settings": wanted, **res})
        self.current[server] = wanted
        for key in [k for k in self.conns.open if k[0] == server]:
            self.conns.open.pop(key).close()
        self.warm = {w for w in self.warm if w[0] != server}

    def measure(self, step: Step) -> dict:
        server_level, session_level = self.levels(step.server, step.condition)
        try:
            self.ensure(step.server, server_level)
        except Exception as ex:  # a configuration the server refuses: this step fails, recorded, the rest go on
            self.current.pop(step.server, None)
            return {"value": None, "unit": self.unit(), "error": f"configure: {ex}"}
        if self.e.workload.kind == "pgbench":
            return self.pgbench_step(step, session_level)
        return self.sql_step(step, session_level)

    def unit(self) -> str:
        return "tps" if self.e.workload.kind == "pgbench" else "s"

    def sql_step(self, step: Step, session_level: dict) -> dict:
        sql = self.items[step.item]
        try:
            conn = self.conns.get(step.server, step.condition, session_level or None)
        except Exception as ex:
            return {"value": None, "unit": "s", "error": f"connect: {ex}"}
        key = (step.server, step.condition, step.item)
        if key not in self.warm and not step.warmup:  # cold after a (re)configuration: one untimed run first
            timed_statement(conn, sql, timeout_s=self.e.timeout_s, keep_rows=False)
        self.warm.add(key)
        t = timed_statement(conn, sql, timeout_s=self.e.timeout_s, keep_rows=False)
        out = {
            "value": t.elapsed_s if t.ok else None,
            "unit": "s",
            "rows": t.rowcount,
            "error": t.error,
            "sqlstate": t.sqlstate,
        }
        if not t.ok:
            out |= self.failed_statement(step, sql, t.error)
        idx = self.conds[step.condition]["index"]
        path = plan_path(self.e, step.server, idx, step.item)
        if self.evidence and t.ok and not step.warmup and not self.s.store.has_artifact(path):
            doc = {"condition": step.condition, "plan": sample_plan(conn, sql), "round": step.round}
            self.s.store.save_json(path, doc)
        return out

    def failed_statement(self, step: Step, sql: str, error: str | None) -> dict:
        """Where a workload file failed (file, statement, its first line), printed once per cell."""
        parts = statements(sql) or [sql]
        # a query a file is the rule; with several statements the server's error does not say which: the first named
        out = {"file": self.files.get(step.item, step.item), "statement": 1, "first_line": first_line(parts[0])}
        key = (step.server, step.condition, step.item)
        if key not in self.told:
            self.told.add(key)
            of = f" of {len(parts)}" if len(parts) > 1 else ""
            print(
                f"ERROR experiment {self.e.name}: workload {out['file']}: statement 1{of} ({out['first_line']}) "
                f"failed on {step.server} ({step.condition}): {error}",
                flush=True,
            )
        return out

    def pgbench_step(self, step: Step, session_level: dict) -> dict:
        # the condition's pgbench options and scripts, with the pgbench study's telemetry (pgbench_run)
        return pgbench_run.measure(self, step, session_level)


def sample_plan(conn, sql: str):
    """The evidence sample: EXPLAIN (EXPLAIN_OPTIONS) of `sql`, untimed; a statement that fails gives {"error": ...}."""
    import psycopg

    try:
        return conn.execute(f"EXPLAIN ({EXPLAIN_OPTIONS}) {sql.rstrip().rstrip(';')}").fetchone()[0]
    except psycopg.Error as ex:
        if not conn.autocommit:
            conn.rollback()
        return {"error": scrub(str(ex).strip())}


def steps_for(e: Experiment, setup: dict) -> tuple[list[Step], list[dict]]:
    """The schedule of the measurable cells, and the cells that are not (with why: not testable here, or the
    server's setup error)."""
    cells, not_testable = [], []
    for server in setup["servers"]:
        for c in setup["conditions"]:
            broken = setup_error(setup, server)
            why = broken or testable(setup, server, c["settings"])
            status = "error" if broken else "not testable here"
            for item in setup["items"]:
                if why is None:
                    cells.append((server, c["condition"], item))
                else:
                    not_testable.append(
                        {"server": server, "condition": c["condition"], "item": item, "reason": why, "status": status}
                    )
    return plan(cells, e.rounds, e.warmups, e.shuffle_seed), not_testable


@dataclass
class Result:
    experiment: str
    servers: list[str]
    steps_run: int
    not_testable: list[dict]  # the cells not measured, each with its status: error, or not testable here

    def count(self, status: str) -> int:
        return sum(c["status"] == status for c in self.not_testable)

    wall_s: float


def run_experiment(s: Session, e: Experiment, evidence: bool = True) -> Result:
    t0 = time.monotonic()
    servers, base_server = resolve_servers(e, s.servers)
    first = s.store.load_json(setup_path(e))
    if first is not None:  # a resumed run measures the servers and conditions it began with
        servers = [x for x in s.servers if x.name in first["servers"]]
    preps = prepare(e, servers, s.store)
    setup = save_setup(e, s.store, servers, base_server, preps)
    steps, not_testable = steps_for(e, setup)
    runner = Runner(e, s, servers, setup, evidence=evidence)
    steps = grouped(steps, lambda st: (st.server, runner.config_key(st)))
    try:
        n = run_steps(steps, s.store, store_name(e), runner.measure, desc=e.name, remeasure=True)
    finally:
        runner.conns.close()
        for x in servers:
            if x.name in runner.current and runner.current[x.name]:
                x.reset()
    return Result(e.name, [x.name for x in servers], n, not_testable, time.monotonic() - t0)


def run_all(s: Session) -> list[Result]:
    return [run_experiment(s, e) for e in s.params.experiments]


def estimate_s(params, servers: list[Server]) -> float:
    """make report's time model: every step of every experiment (SQL: ~0.1 s a step beside the statement, whose
    time is not known before it runs; pgbench: its duration), plus data loads and restarts, roughly."""
    total = 0.0
    for e in getattr(params, "experiments", []) or []:
        n_servers = len(resolve_servers(e, servers)[0]) or 1
        steps = (e.rounds + e.warmups) * len(e.conditions()) * n_servers
        per = e.workload.pgbench.duration_s + 0.5 if e.workload.kind == "pgbench" else 0.1 * len(e.workload.sql or [])
        total += steps * per + 15 * n_servers
    return total

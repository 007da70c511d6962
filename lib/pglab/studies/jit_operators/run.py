"""Running the JIT-per-operator stage: which servers can JIT, the table, the interleaved runs, the plans.

Per server: JIT available or not (the install ships llvmjit and `pg_jit_available()` says so with
`jit = on`); a server without it is recorded as "not available" with the reason and takes no further part.
On the others: a kit-owned database with the generated table (re-used when its comment says it holds the
same rows), VACUUM (FREEZE, ANALYZE), pg_prewarm. Then every (server, condition, operator) cell, warm-up
round first, then interleaved rounds, `executions` passes per round, each operator's conditions together
within a pass (`pglab.core.run.schedule.plan_blocked`, spread over the round), each run timed from the client as
psql's \\timing would (one connection per server and condition, its settings given at connection start), with
the backend's own CPU time beside it (kit servers: the process is local; null for a run that failed), its
one-value result kept to check that JIT off and on agree. The table is always named `public.jit_ops`, never through
search_path. Last, one untimed EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
per cell and the JIT settings in force, stored as artefacts of the run."""

from __future__ import annotations

import time

import polars as pl
import psycopg
from psycopg import sql

from ...core.run import outcomes
from ...core.run.prepare import prewarm
from ...core.run.schedule import plan_blocked, run_steps
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import ensure_database, explain_json, timed_statement, timeout_ms
from ...core.servers.servers import Connections, DestructiveStepRefused, Server
from ...core.store import RunStore
from .params import EXPERIMENT, GENERATOR, QUALIFIED, SCHEMA, TABLE, JitOperatorsParams

SETUP_SCHEMA = {
    "server": pl.String,
    "version_string": pl.String,
    "version_num": pl.Int64,
    "install_jit": pl.Boolean,
    "jit_available": pl.Boolean,
    "reason": pl.String,
    "rows": pl.Int64,
    "column_type": pl.String,
    "generator": pl.String,
    "table_bytes": pl.Int64,
    "prewarmed_blocks": pl.Int64,
    "prewarm_error": pl.String,
    "max_parallel_workers_per_gather": pl.Int64,
    "repetitions": pl.Int64,
    "executions": pl.Int64,
    "round_value": pl.String,
    "spread": pl.String,
    "warmups": pl.Int64,
    "shuffle_seed": pl.Int64,
    "metric": pl.String,
}


def table_comment(p: JitOperatorsParams) -> str:
    return f"pglab jit_operators: {p.rows} rows, {p.column_type}, {GENERATOR}"


def availability(server: Server) -> tuple[bool, str | None, dict]:
    """(available, reason if not, what the server says of itself)."""
    with server.connect() as conn:
        version_string, version_num = conn.execute(
            "SELECT version(), current_setting('server_version_num')::int"
        ).fetchone()
        # pg_jit_available() is false while jit = off: ask with jit on, in this session only
        conn.execute("SELECT set_config('jit', 'on', false)")
        available = bool(conn.execute("SELECT pg_jit_available()").fetchone()[0])
    info = {
        "version_string": version_string,
        "version_num": version_num,
        "install_jit": server.install.jit if server.install else None,
    }
    if available:
        return True, None, info
    if server.install is not None and not server.install.jit:
        return False, "JIT not available: this build ships no llvmjit", info
    return False, "JIT not available: pg_jit_available() is false with jit = on", info


def _make_table(server: Server, p: JitOperatorsParams) -> None:
    want = table_comment(p)
    # schema-qualified everywhere: unqualified, search_path would put "$user".jit_ops first
    table = sql.Identifier(SCHEMA, TABLE)
    with server.connect(p.database) as conn:
        have = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", (QUALIFIED,)).fetchone()[0]
        if have == want:
            return
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        typ = sql.SQL(p.column_type)  # one of a fixed set (params), not user text
        conn.execute(sql.SQL("CREATE TABLE {} (c1 {}, c2 {})").format(table, typ, typ))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT i % 1000 + 1, (i * 7) % 997 + 1 FROM generate_series(1, {}::bigint) i"
            ).format(table, sql.Literal(p.rows))
        )
        # frozen and analysed: no hint-bit writes or autovacuum during the timed runs
        conn.execute(sql.SQL("VACUUM (FREEZE, ANALYZE) {}").format(table))
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(table, sql.Literal(want)))


def prepare(server: Server, p: JitOperatorsParams) -> dict:
    """One setup row for the server; the table made and prewarmed where JIT is available."""
    available, reason, info = availability(server)
    row = {
        "server": server.name,
        **info,
        "jit_available": available,
        "reason": reason,
        "rows": p.rows,
        "column_type": p.column_type,
        "generator": GENERATOR,
        "max_parallel_workers_per_gather": p.max_parallel_workers_per_gather,
        "repetitions": p.repetitions,
        "executions": p.executions,
        "round_value": p.round_value,
        "spread": p.spread,
        "warmups": p.warmups,
        "shuffle_seed": p.shuffle_seed,
        "metric": p.metric,
    }
    if not available:
        return row
    try:
        if not server.managed:
            server.require_destructive(f"create database {p.database} and (re)create {QUALIFIED} in it")
    except DestructiveStepRefused as e:
        return row | {"jit_available": True, "reason": str(e)}
    ensure_database(server, p.database)
    _make_table(server, p)
    warm = prewarm(lambda: server.connect(p.database), "SELECT pg_prewarm(%s::regclass)", (QUALIFIED,), p.prewarm)
    row["prewarmed_blocks"], row["prewarm_error"] = warm
    with server.connect(p.database) as conn:
        row["table_bytes"] = conn.execute("SELECT pg_table_size(%s::regclass)", (QUALIFIED,)).fetchone()[0]
    return row


def runnable(setup: pl.DataFrame) -> list[str]:
    """Servers that take part: JIT available and nothing in the way."""
    return setup.filter(pl.col("jit_available") & pl.col("reason").is_null())["server"].to_list()


def backend_cpu_ns(pid: int | None) -> int | None:
    """On-CPU time of a local server process so far, in ns (/proc/<pid>/schedstat, first field), or None.

    Beside the wall time: the backend's own CPU time, JIT compilation included (the backend does it), and
    without the time the query waited for a CPU. Parallel workers' time is not in it (params refuse
    metric cpu with workers). On a shared VM it still moves with other load (steal, caches, frequency)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def measure_statement(conn: psycopg.Connection, statement: str, local: bool) -> dict:
    """One timed run of `statement` as `pglab.core.run.schedule` records it: wall time (value, s), the backend's CPU
    time over it (cpu_ms, when the server is `local`) and the one value it returned; or the error, with no
    time at all (a statement timeout's CPU time is not a sample of the query)."""
    pid = conn.info.backend_pid if local else None
    before = backend_cpu_ns(pid)
    t = timed_statement(conn, statement)
    after = backend_cpu_ns(pid)
    if not t.ok:
        return {"value": None, "unit": "s", "error": t.error, "sqlstate": t.sqlstate, "cpu_ms": None}
    cpu_ms = (after - before) / 1e6 if before is not None and after is not None else None
    # the one value the aggregate returns, as text: JIT off and on must give the very same
    return {"value": t.elapsed_s, "unit": "s", "result": str(t.rows[0][0]), "cpu_ms": cpu_ms}


def _measure_all(servers: dict[str, Server], p: JitOperatorsParams, session: Session) -> int:
    cells = [(s, c, op) for s in servers for c in p.measured_conditions() for op in p.operators]
    steps = plan_blocked(cells, p.repetitions, p.warmups, p.shuffle_seed, p.executions, p.spread)
    conns = Connections(servers, p.database)

    def measure(step):
        # the timeout goes with the connection: no set_config round trips inside the CPU-time window
        settings = p.session_settings(step.condition) | {"statement_timeout": timeout_ms(p.statement_timeout_s)}
        conn = conns.get(step.server, step.condition, settings)
        return measure_statement(conn, p.sql(step.item), local=servers[step.server].cluster is not None)

    try:
        return run_steps(steps, session.store, EXPERIMENT, measure, desc="JIT per operator", remeasure=True)
    finally:
        conns.close()


SETTINGS_QUERY = """
SELECT name, setting FROM pg_settings
WHERE name LIKE 'jit%%' OR name IN ('max_parallel_workers_per_gather', 'max_parallel_workers')
ORDER BY name
"""


def plan_path(server: str, condition: str, operator: str) -> str:
    return f"{EXPERIMENT}/plans/{server}/{condition}/{operator}.json"


def capture_plans(servers: dict[str, Server], p: JitOperatorsParams, session: Session) -> None:
    """One untimed EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) per cell, and the settings each condition ran
    under as the server reports them (artefacts, written once)."""
    store = session.store
    for name, server in servers.items():
        for cond in p.conditions:
            settings = p.session_settings(cond) | {"statement_timeout": timeout_ms(p.statement_timeout_s)}
            with server.connect(p.database, settings=settings) as conn:
                settings_path = f"{EXPERIMENT}/settings/{name}/{cond}.json"
                if not store.has_artifact(settings_path):
                    store.save_json(settings_path, dict(conn.execute(SETTINGS_QUERY).fetchall()))
                for op in p.operators:
                    path = plan_path(name, cond, op)
                    if store.has_artifact(path):
                        continue
                    # a plan that fails is recorded, not dropped
                    store.save_json(path, explain_json(conn, p.sql(op), record_error=True))


def run_stage(session: Session) -> StageResult:
    """The whole stage on the session's (started) servers. Resumable: recorded runs and plans are kept."""
    p = session.params.jit_operators
    t0 = time.monotonic()
    rows = [prepare(s, p) for s in session.servers]
    setup = pl.from_dicts(rows, schema=SETUP_SCHEMA)
    session.store.save_json(f"{EXPERIMENT}/setup.json", rows)  # kept from the first start of the run
    go = {s.name: s for s in session.servers if s.name in runnable(setup)}
    for r in setup.filter(pl.col("reason").is_not_null()).iter_rows(named=True):
        outcomes.skip(session.store, EXPERIMENT, r["server"], r["reason"])
    n = _measure_all(go, p, session) if go else 0
    outcomes.require_measured(session.store, [EXPERIMENT], list(go))
    capture_plans(go, p, session)
    return StageResult(steps_run=n, wall_s=time.monotonic() - t0, servers=list(go), seen={"setup": setup})


def load_plan(store: RunStore, server: str, condition: str, operator: str) -> dict | None:
    return store.load_json(plan_path(server, condition, operator))


def load_settings(store: RunStore, server: str, condition: str) -> dict:
    return store.load_json(f"{EXPERIMENT}/settings/{server}/{condition}.json", {})

"""Getting a server ready for the auto_explain stage: its settings, the study's table, the plans.

Per server: the study's base settings (`server.configure`), auto_explain in shared_preload_libraries or
not (a restart: `ServerState.ensure_loaded`), a kit-owned database with `tab1(c1 int)` of N rows,
VACUUM ANALYZE, pg_prewarm after every (re)start, and one untimed EXPLAIN ANALYZE per item so that the
plan (parallel or not, rows processed) is recorded beside the times."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import psycopg

from ...core.run.prepare import libraries, prewarm
from ...core.servers.db import ensure_database, explain_json, scrub
from ...core.servers.servers import DestructiveStepRefused, Server
from .params import STUDY_LOG_DESTINATION, AutoExplainParams

log = logging.getLogger(__name__)

TABLE_COMMENT = "pglab auto_explain study: tab1 with {rows} rows"


@dataclass
class ServerState:
    """What the stage knows about one server while it runs."""

    server: Server
    params: AutoExplainParams
    loading: str = "shared_preload"  # how auto_explain is loaded on this server (external: always session)
    loaded: bool | None = None  # auto_explain in shared_preload_libraries right now
    restarts: int = 0
    skip_reason: str | None = None  # the server takes no part, and why
    session_base: dict = field(default_factory=dict)  # study settings passed per connection (external)
    preloaded_by_server: bool = False  # auto_explain already in the server's own shared_preload_libraries
    configure_status: str | None = None
    prewarmed_blocks: int | None = None
    prewarm_error: str | None = None
    ready: bool = False  # database and table in place

    @property
    def name(self) -> str:
        return self.server.name

    # -- configuration ---------------------------------------------------------------------------------------

    def _server_settings(self, loaded: bool) -> dict:
        # the study's log destination (params.STUDY_LOG_DESTINATION) with the params' settings
        settings = dict(self.params.server_settings) | {"log_destination": STUDY_LOG_DESTINATION}
        libs = [x for x in libraries(self.server.settings.get("shared_preload_libraries")) if x != "auto_explain"]
        if loaded:
            libs.append("auto_explain")
        if libs or "shared_preload_libraries" in self.server.settings:
            settings["shared_preload_libraries"] = ",".join(libs)
        return settings

    def ensure_loaded(self, loaded: bool) -> bool:
        """auto_explain preloaded or not (shared_preload mode on a kit server; restarts as needed).
        Returns True when the server was restarted (its buffer cache is then warmed again)."""
        if self.loading != "shared_preload":
            loaded = False
        if self.loaded == loaded:
            return False
        res = self.server.configure(self._server_settings(loaded))
        self.configure_status = res["status"]
        restarted = res["status"] == "restarted"
        self.restarts += restarted
        self.loaded = loaded
        if self.ready and restarted:
            self.prewarm()
        return restarted

    def reset(self) -> None:
        if self.server.managed and self.loaded is not None:
            self.server.reset()
            self.loaded = None

    # -- connecting ------------------------------------------------------------------------------------------

    def connect(self, dbname: str | None = None, settings: dict | None = None) -> psycopg.Connection:
        return self.server.connect(dbname or self.params.database, settings=self.session_base | (settings or {}))

    # -- the data --------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Settings, database and table; sets skip_reason instead of raising when the server cannot
        take part (an external server without allow_destructive)."""
        p = self.params
        try:
            if not self.server.managed:
                self.server.require_destructive(f"create database {p.database} and (re)create tab1 in it")
        except DestructiveStepRefused as e:
            self.skip_reason = str(e)
            return
        if not self.server.managed:
            self.loading = "session_preload"  # no restart of a server the kit does not own
            self.skip_reason = self._session_load_refused()
            if self.skip_reason:
                return
            self._external_settings()
        else:
            self.loading = p.loading
        first_loaded = self.loading == "shared_preload" and any(c.load for c in p.conditions.values())
        self.ensure_loaded(first_loaded)
        ensure_database(self.server, self.params.database)
        self._table()
        self.ready = True
        self.prewarm()

    def _session_load_refused(self) -> str | None:
        """Why auto_explain cannot be loaded per connection here (None if it can): session_preload_libraries
        is for superusers, so an ordinary role of an external server cannot take part. Tried before anything
        is created."""
        try:
            with self.server.connect(settings={"session_preload_libraries": "auto_explain"}) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as e:
            first = scrub(str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
            return f"auto_explain cannot be loaded per connection on this external server: {first}"
        return None

    def _external_settings(self) -> None:
        with self.server.connect() as conn:
            rows = conn.execute(
                "SELECT name, context FROM pg_settings WHERE name = ANY(%s)", (list(self.params.server_settings),)
            ).fetchall()
            # pg_settings, not current_setting(): a role without pg_read_all_settings gets no row, not an error
            spl = conn.execute("SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'").fetchone()
        self.preloaded_by_server = "auto_explain" in libraries(spl[0] if spl else None)
        # what a session may set goes with every connection; the rest stays as the server has it
        settable = {n for n, ctx in rows if ctx in ("user", "superuser")}
        self.session_base = {k: v for k, v in self.params.server_settings.items() if k in settable}

    def _table(self) -> None:
        rows = self.params.rows
        want = TABLE_COMMENT.format(rows=rows)
        with self.connect() as conn:
            have = conn.execute("SELECT obj_description(to_regclass('tab1'), 'pg_class')").fetchone()[0]
            if have == want:
                return
            conn.execute("DROP TABLE IF EXISTS tab1")
            conn.execute("CREATE TABLE tab1(c1 INTEGER)")
            # the study's statement (a numeric series cast to integer)
            conn.execute(f"INSERT INTO tab1 SELECT generate_series(1, {rows:d})")
            conn.execute("VACUUM ANALYZE tab1")
            conn.execute(f"COMMENT ON TABLE tab1 IS '{want}'")

    def prewarm(self) -> None:
        """pg_prewarm tab1 into shared buffers (after every start: a restart empties them)."""
        blocks, error = prewarm(self.connect, "SELECT pg_prewarm('tab1')", wanted=self.params.prewarm)
        self.prewarmed_blocks = blocks or 0
        if error:
            self.prewarm_error = error
            log.warning("%s: pg_prewarm failed: %s", self.name, error)

    # -- plans -----------------------------------------------------------------------------------------------

    def explain(self, item: str) -> dict:
        """EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of an item, untimed, under the item's session settings."""
        it = self.params.items[item]
        with self.connect(settings=it.settings) as conn:
            doc = explain_json(conn, it.sql)  # raises: the timer explanation needs every item's plan
        return doc[0] if isinstance(doc, list) else json.loads(doc)[0]

    def describe(self) -> dict:
        return {
            "server": self.name,
            "kind": self.server.kind,
            "loading": self.loading,
            "restarts": self.restarts,
            "skipped": self.skip_reason,
            "log_reachable": self.server.cluster is not None,
            "preloaded_by_server": self.preloaded_by_server,
            "prewarmed_blocks": self.prewarmed_blocks,
            "prewarm_error": self.prewarm_error,
            "session_settings": json.dumps(self.session_base, sort_keys=True) if self.session_base else None,
        }


def plan_rows(state: ServerState, item: str, plan_json: dict) -> dict:
    """The recorded plan of one item, summarised: shape, parallelism, rows processed, node calls."""
    from ...pgtools.explain import parse_plan

    parsed = parse_plan(plan_json)
    n = parsed.nodes
    loops = n["actual_loops"].fill_null(0)
    rows = n["actual_rows"].fill_null(0)
    gathers = n.filter(n["workers_planned"].is_not_null())
    launched = int(gathers["workers_launched"].fill_null(0).sum()) if gathers.height else 0
    return {
        "server": state.name,
        "item": item,
        "fingerprint": parsed.fingerprint,
        "nodes": " > ".join(n["node_type"].to_list()),
        "workers_planned": int(gathers["workers_planned"].sum()) if gathers.height else 0,
        "workers_launched": launched,
        # rows every node returned, over all its loops (in all processes)
        "rows_processed": float((rows * loops).sum()),
        # each call of a node's ExecProcNode reads the clock twice under ANALYZE with timing: one call per
        # row returned plus the call that finds no more, per loop
        "node_calls": float(((rows + 1) * loops).sum()),
        "processes": launched + 1,  # the leader takes part (parallel_leader_participation)
        "execution_ms": parsed.execution_ms,
    }

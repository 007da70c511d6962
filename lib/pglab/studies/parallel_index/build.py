"""One timed, observed CREATE INDEX on lineorder, and how many parallel workers it really used.

The count comes from the server itself, for every timed build, through the build's own connection:

* planned: with `client_min_messages = debug1`, index_build() reports `building index "…" on table "…" with
  request for N parallel workers` (or `… serially`): the number the planner chose from
  max_parallel_maintenance_workers, the table's size and maintenance_work_mem (plan_create_index_workers).
* launched: with `trace_sort = on` every participant of a parallel build logs `begin index sort: …` when its
  sort starts; a parallel worker's messages reach the leader's client with the context `parallel worker`,
  so counting those counts the workers that really ran (fewer than planned when max_parallel_workers or
  max_worker_processes had no free slot). Each message costs a getrusage() call: about 40 per build,
  microseconds against builds of a tenth of a second and more.
* the sort: the same messages tell whether the sort stayed in memory or how much it wrote to temporary files
  (a parallel build always hands its participants' sorted runs to the leader through temporary files).

The index has a name of its own (INDEX); only an index of that name is ever dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from ...core.servers.db import timed_statement
from ...core.servers.servers import Server

INDEX = "pglab_parallel_index_build"
TABLE = "lineorder"

_PLANNED = re.compile(
    r'^building index "(?P<index>[^"]+)" on table "[^"]+" '
    r"(?:serially|with request for (?P<n>\d+) parallel workers?)"
)
_SORT = re.compile(r"^begin index sort: unique = \w+, workMem = (?P<kb>\d+)")
# the leader's (or the serial build's) last word on its sort: in memory, or how much went to temporary files
_END = re.compile(r"^(?P<kind>[a-z ]*sort) of worker -1 ended, (?P<n>\d+) (?P<unit>disk blocks|KB) used")
LOGTAPE_BLOCK_KB = 8  # tuplesort's temporary file blocks are BLCKSZ (8 kB in every build the kit meets)

INDEX_INFO = """
SELECT i.indisvalid, pg_relation_size(i.indexrelid), i.indrelid::regclass::text,
       (SELECT array_agg(a.attname::text ORDER BY k.n)
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
FROM pg_index i WHERE i.indexrelid = to_regclass(%s)
"""


@dataclass
class Observed:
    """What the server said about one build (None: not observed, e.g. a message text this kit does not know)."""

    planned: int | None = None
    launched: int | None = None
    participant_mem_kb: int | None = None  # workMem of the leader's own share of the sort
    sort: str | None = None  # "internal sort", "external sort", "parallel external sort"
    spill_kb: int | None = None  # temporary file space of the sort (0 in memory)
    messages: list[str] = field(default_factory=list, repr=False)


def observe(notices: list[tuple[str, str]], index: str = INDEX) -> Observed:
    """Read (message, context) notices of one CREATE INDEX."""
    out = Observed(messages=[f"{m}  [{c}]" if c else m for m, c in notices])
    for msg, _ in notices:
        m = _PLANNED.match(msg)
        if m and m.group("index") == index:
            out.planned = int(m.group("n") or 0)
    if out.planned is None:
        return out
    sorts = [(m, "parallel worker" in c) for msg, c in notices if (m := _SORT.match(msg))]
    out.launched = sum(1 for _, worker in sorts if worker)
    own = [int(m.group("kb")) for m, worker in sorts if not worker]
    out.participant_mem_kb = own[0] if own else None
    for msg, _ in notices:
        if m := _END.match(msg):
            out.sort = m.group("kind")
            out.spill_kb = int(m.group("n")) * LOGTAPE_BLOCK_KB if m.group("unit") == "disk blocks" else 0
    return out


def session_settings(workers: int, maintenance_work_mem: str) -> dict:
    """The build's connection: the worker count under test, the memory, and what makes the build observable."""
    return {
        "max_parallel_maintenance_workers": workers,
        "maintenance_work_mem": maintenance_work_mem,
        "client_min_messages": "debug1",
        "trace_sort": True,
    }


def create_sql(columns: list[str]) -> sql.Composed:
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    return sql.SQL("CREATE INDEX {} ON {}.{} ({})").format(
        sql.Identifier(INDEX), sql.Identifier("public"), sql.Identifier(TABLE), cols
    )


def drop_index(conn: psycopg.Connection) -> None:
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}.{}").format(sql.Identifier("public"), sql.Identifier(INDEX)))


def index_info(conn: psycopg.Connection) -> dict | None:
    """The kit's index as the catalog describes it (None if there is none)."""
    row = conn.execute(INDEX_INFO, (f"public.{INDEX}",)).fetchone()
    if row is None:
        return None
    return {"valid": row[0], "bytes": row[1], "table": row[2], "columns": list(row[3] or [])}


def _english(conn: psycopg.Connection) -> None:
    # the messages are matched in English; lc_messages needs a superuser (the kit's clusters use C anyway)
    try:
        conn.execute("SELECT set_config('lc_messages', 'C', false)")
    except psycopg.errors.InsufficientPrivilege:
        pass


def build(
    server: Server,
    dbname: str,
    columns: list[str],
    workers: int,
    maintenance_work_mem: str,
    timeout_s: float | None = None,
    keep: bool = False,
    extra_settings: dict | None = None,
) -> tuple[dict, Observed]:
    """CREATE INDEX on lineorder(columns) with max_parallel_maintenance_workers = workers, timed from send to
    completion (autocommit: the commit, which syncs the new index to disk, is inside the time).

    Returns the record's fields (`value` seconds or None plus `error`) and what was observed. The index is
    dropped afterwards (untimed) unless `keep`. Destructive: refused on an external server without
    allow_destructive."""
    server.require_destructive(f"create and drop index {INDEX} on {TABLE}")
    notices: list[tuple[str, str]] = []
    settings = session_settings(workers, maintenance_work_mem) | (extra_settings or {})
    with server.connect(dbname, settings=settings) as conn:
        conn.add_notice_handler(lambda d: notices.append((d.message_primary or "", d.context or "")))
        _english(conn)
        drop_index(conn)  # left over by an interrupted run
        notices.clear()
        timed = timed_statement(conn, create_sql(columns).as_string(conn), timeout_s=timeout_s, keep_rows=False)
        obs = observe(notices)
        info = index_info(conn) if timed.ok else None
        if not keep:
            drop_index(conn)
    rec = {
        "value": timed.elapsed_s if timed.ok else None,
        "unit": "s",
        "workers": workers,
        "key_columns": len(columns),
        "columns": ",".join(columns),
        "planned_workers": obs.planned,
        "launched_workers": obs.launched,
        "participant_mem_kb": obs.participant_mem_kb,
        "sort": obs.sort,
        "spill_kb": obs.spill_kb,
        "index_bytes": info["bytes"] if info else None,
        "index_columns": ",".join(info["columns"]) if info else None,
        "index_valid": info["valid"] if info else None,
    }
    if not timed.ok:
        rec |= {"error": timed.error, "sqlstate": timed.sqlstate}
    elif info is None or info["columns"] != list(columns) or not info["valid"]:
        rec |= {"value": None, "error": f"the index built is not the one asked for: {info}"}
    return rec, obs

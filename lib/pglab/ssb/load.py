"""Load an SSB dataset into a server: one database per dataset, rows streamed through COPY, nothing
written to disk first.

Each table is created and filled in one transaction with `COPY ... (FREEZE)`: the rows are written
already frozen (no hint-bit and freeze rewrites later), and with `wal_level = minimal` a table created in
the loading transaction skips WAL altogether. Generation runs in a child process (`iter_blocks_parallel`)
while this process relays its blocks to the server, so the two cores work side by side.

The database records which dataset it holds (`pglab_dataset`): loading the same (SF, seed, generator
version) again is skipped; a different one replaces it, only in a database the kit may destroy."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import psycopg

from ..servers import Server
from . import GENERATOR_VERSION, TABLES, create_table_sql, dataset_id, iter_blocks, iter_blocks_parallel

# smallest first: the dimensions are done while the lineorder generator is already running ahead
LOAD_ORDER = ("date", "supplier", "customer", "part", "lineorder")
METHODS = ("copy_freeze", "copy")
assert set(LOAD_ORDER) == set(TABLES)


def database_name(sf: float) -> str:
    text = f"{sf:g}".replace(".", "_").replace("-", "_")
    return f"ssb_sf{text}"


@dataclass
class LoadResult:
    server: str
    database: str
    dataset: dict
    skipped: bool
    method: str | None = None
    tables: list[dict] = field(default_factory=list)  # table, rows, seconds, table_bytes
    total_s: float = 0.0
    analyze_s: float = 0.0
    prewarm_s: float | None = None
    database_bytes: int | None = None

    def records(self) -> list[dict]:
        base = {"server": self.server, "database": self.database, **self.dataset, "method": self.method}
        return [base | t for t in self.tables]


def current_dataset(server: Server, dbname: str) -> dict | None:
    """The dataset the database says it holds (None if no such database or no complete load)."""
    try:
        with server.connect(dbname) as conn:
            row = conn.execute(
                "SELECT dataset FROM pglab_dataset WHERE complete"
            ).fetchone()  # fmt: skip
    except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
        return None
    return json.loads(row[0]) if row else None


def load(
    server: Server,
    sf: float,
    seed: int,
    prewarm: bool = True,
    method: str = "copy_freeze",
    force: bool = False,
    progress=None,
) -> LoadResult:
    """Make `server` hold SSB (sf, seed). `progress(table, rows_done)` is called as rows stream in."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    dbname = database_name(sf)
    wanted = dataset_id(sf, seed)
    have = current_dataset(server, dbname)
    if have == wanted and not force:
        res = LoadResult(server.name, dbname, wanted, skipped=True)
        if prewarm:
            res.prewarm_s = _prewarm(server, dbname)
        res.tables, res.database_bytes = _sizes(server, dbname)
        return res

    t_all = time.perf_counter()
    server.recreate_database(dbname)
    res = LoadResult(server.name, dbname, wanted, skipped=False, method=method)
    # lineorder's generator process starts first and runs ahead (bounded) while the small dimension
    # tables, generated here in this process, load; one extra process, not five, on a two-core machine
    sources = {"lineorder": iter_blocks_parallel("lineorder", sf, seed, "copy", workers=1, prefetch=4)}
    sources |= {t: iter_blocks(t, sf, seed, "copy") for t in LOAD_ORDER if t != "lineorder"}
    try:
        with server.connect(dbname, autocommit=False) as conn:
            for table in LOAD_ORDER:
                res.tables.append(_load_table(conn, table, sf, sources[table], method, progress))
            conn.execute("CREATE TABLE pglab_dataset (dataset text NOT NULL, complete boolean NOT NULL)")
            conn.execute("INSERT INTO pglab_dataset VALUES (%s, true)", (json.dumps(wanted, sort_keys=True),))
            conn.commit()
    finally:
        sources["lineorder"].close()
    t0 = time.perf_counter()
    with server.connect(dbname) as conn:
        # VACUUM sets the visibility map (index-only and parallel scans rely on it); ANALYZE the statistics
        conn.execute("VACUUM (ANALYZE)")
    res.analyze_s = time.perf_counter() - t0
    res.total_s = time.perf_counter() - t_all
    if prewarm:
        res.prewarm_s = _prewarm(server, dbname)
    sizes, res.database_bytes = _sizes(server, dbname)
    by_table = {s["table"]: s for s in sizes}
    for t in res.tables:
        t["table_bytes"] = by_table[t["table"]]["table_bytes"]
    return res


def _load_table(conn, table: str, sf: float, blocks, method: str, progress) -> dict:
    t0 = time.perf_counter()
    rows = 0
    freeze = " (FREEZE)" if method == "copy_freeze" else ""
    with conn.cursor() as cur:
        # created in the same transaction as the COPY: the condition for FREEZE (and for skipping WAL)
        cur.execute(create_table_sql(table, sf))
        with cur.copy(f'COPY "{table}" FROM STDIN{freeze}') as copy:
            for n, block in blocks:
                copy.write(block)
                rows += n
                if progress:
                    progress(table, n)
    conn.commit()
    return {"table": table, "rows": rows, "seconds": time.perf_counter() - t0}


def _prewarm(server: Server, dbname: str) -> float | None:
    """pg_prewarm every table into shared_buffers, as study S1 did (None where it is not available)."""
    if server.install is not None and not server.install.has("pg_prewarm"):
        return None
    t0 = time.perf_counter()
    with server.connect(dbname) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except psycopg.Error:
            return None
        for table in TABLES:
            conn.execute("SELECT pg_prewarm(%s::regclass)", (f'"{table}"',))
    return time.perf_counter() - t0


def _sizes(server: Server, dbname: str) -> tuple[list[dict], int]:
    with server.connect(dbname) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reltuples::bigint, pg_table_size(c.oid) FROM pg_class c"
            " WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace",
            (list(TABLES),),
        ).fetchall()
        db_bytes = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return [{"table": r[0], "rows": r[1], "table_bytes": r[2]} for r in rows], db_bytes


__all__ = ["GENERATOR_VERSION", "LoadResult", "current_dataset", "database_name", "load"]

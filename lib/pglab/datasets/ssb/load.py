"""Load an SSB dataset into a server: one database per dataset, rows streamed through COPY, nothing
written to disk first.

Each table is created and filled in one transaction with `COPY ... (FREEZE)`: the rows are written
already frozen (no hint-bit and freeze rewrites later), and with `wal_level = minimal` a table created in
the loading transaction skips WAL altogether. Generation runs in a child process (`iter_blocks_parallel`)
while this process relays its blocks to the server, so the two cores work side by side.

The database records which dataset it holds (`pglab_dataset`): loading the same (SF, seed, generator
version, flavor) again is skipped; a different one replaces it, only in a database the kit may destroy. The
record is written in two steps, each after what it vouches for: once every table is loaded (with the rows each
COPY reported, its seconds and the run that measured them), and marked complete only after `VACUUM
(ANALYZE)`. A load cut short before the first step starts over; one cut short between the two is only
analysed, and keeps the times its COPYs took."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import psycopg

from ...core.servers.servers import Server
from . import GENERATOR_VERSION, TABLES, create_table_sql, dataset_id, iter_blocks, iter_blocks_parallel
from .flavors import DEFAULT_FLAVOR, check_flavor

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
    skipped: bool  # the dataset was already there, complete: nothing loaded now
    method: str | None = None
    tables: list[dict] = field(default_factory=list)  # table, rows (as COPY reported), seconds, table_bytes
    total_s: float = 0.0
    analyze_s: float = 0.0
    prewarm_s: float | None = None
    database_bytes: int | None = None
    run_id: str | None = None  # the run whose load these times are (None: not known)
    refused: str | None = None  # why this server cannot hold the dataset (nothing else is set then)

    def records(self) -> list[dict]:
        base = {"server": self.server, "database": self.database, **self.dataset, "method": self.method}
        return [base | t for t in self.tables]


@dataclass
class DatasetState:
    """What `pglab_dataset` says: the dataset, whether it is complete (analysed), and its load's figures."""

    dataset: dict
    complete: bool
    load: dict  # run_id, method, tables [{table, rows, seconds}], copy_s, analyze_s, total_s


def dataset_state(server: Server, dbname: str) -> DatasetState | None:
    """The database's dataset record; None if there is no such database or no loaded dataset in it (a record
    of an older kit, without the load's figures, counts as none: it may never have been analysed)."""
    try:
        with server.connect(dbname) as conn:
            row = conn.execute("SELECT dataset, complete, load FROM pglab_dataset").fetchone()
    except (psycopg.OperationalError, psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
        return None
    if not row or row[2] is None:
        return None
    return DatasetState(json.loads(row[0]), bool(row[1]), json.loads(row[2]))


def current_dataset(server: Server, dbname: str) -> dict | None:
    """The dataset the database says it holds (None if no such database or no complete load)."""
    state = dataset_state(server, dbname)
    return state.dataset if state and state.complete else None


def load(
    server: Server,
    sf: float,
    seed: int,
    prewarm: bool = True,
    method: str = "copy_freeze",
    force: bool = False,
    progress=None,
    run_id: str | None = None,
    flavor: str = DEFAULT_FLAVOR,
) -> LoadResult:
    """Make `server` hold SSB (sf, seed, flavor: the generator's, see generate.py). `progress(table, rows_done)`
    is called as rows stream in; `run_id` is kept with the load's figures, so that a rerun of that run can still
    record them. A database holding another flavor (or seed, SF, generator version) is loaded anew."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    dbname = database_name(sf)
    wanted = dataset_id(sf, seed, check_flavor(flavor))  # the reuse check below compares all of it
    state = None if force else dataset_state(server, dbname)
    if state is not None and state.dataset == wanted:
        res = _from_state(server.name, dbname, state)
        if not state.complete:  # loaded, but the ANALYZE that completes it never finished: only that now
            server.require_destructive(f"finish the interrupted load of {dbname} (VACUUM ANALYZE)")
            res.analyze_s = _analyze_and_complete(server, dbname)
            res.total_s = state.load["copy_s"] + res.analyze_s
    else:
        res = _load_now(server, dbname, wanted, sf, seed, flavor, method, progress, run_id)
    if prewarm:
        res.prewarm_s = _prewarm(server, dbname)
    by_table, res.database_bytes = _sizes(server, dbname)
    for t in res.tables:
        t["table_bytes"] = by_table.get(t["table"])
    return res


def _from_state(server: str, dbname: str, state: DatasetState) -> LoadResult:
    ld = state.load
    tables = [{"table": t["table"], "rows": t["rows"], "seconds": t["seconds"]} for t in ld["tables"]]
    return LoadResult(
        server,
        dbname,
        state.dataset,
        skipped=state.complete,
        method=ld.get("method"),
        tables=tables,
        total_s=ld.get("total_s") or 0.0,
        analyze_s=ld.get("analyze_s") or 0.0,
        run_id=ld.get("run_id"),
    )


def _load_now(
    server: Server,
    dbname: str,
    wanted: dict,
    sf: float,
    seed: int,
    flavor: str,
    method: str,
    progress,
    run_id: str | None,
) -> LoadResult:
    t_all = time.perf_counter()
    server.recreate_database(dbname)
    res = LoadResult(server.name, dbname, wanted, skipped=False, method=method, run_id=run_id)
    sources = block_sources(sf, seed, flavor)
    try:
        with server.connect(dbname, autocommit=False) as conn:
            for table in LOAD_ORDER:
                res.tables.append(_load_table(conn, table, sf, sources[table], method, progress))
            copy_s = time.perf_counter() - t_all
            # step one of the record: every table is there (not yet analysed, so not complete)
            figures = {"run_id": run_id, "method": method, "tables": res.tables, "copy_s": copy_s}
            conn.execute("CREATE TABLE pglab_dataset (dataset text NOT NULL, complete boolean NOT NULL, load text)")
            conn.execute(
                "INSERT INTO pglab_dataset VALUES (%s, false, %s)",
                (json.dumps(wanted, sort_keys=True), json.dumps(figures)),
            )
            conn.commit()
    finally:
        sources["lineorder"].close()
    res.analyze_s = _analyze_and_complete(server, dbname)
    res.total_s = time.perf_counter() - t_all
    return res


def block_sources(sf: float, seed: int, flavor: str = DEFAULT_FLAVOR) -> dict:
    """Each table's (rows, COPY text) blocks, as the load sends them. lineorder's generator process starts
    here, first, and runs ahead (bounded) while the small dimension tables, generated in this process, load; one
    extra process, not five, on a two-core machine. Close sources["lineorder"] when done."""
    sources = {"lineorder": iter_blocks_parallel("lineorder", sf, seed, "copy", workers=1, prefetch=4, flavor=flavor)}
    sources |= {t: iter_blocks(t, sf, seed, "copy", flavor=flavor) for t in LOAD_ORDER if t != "lineorder"}
    return sources


def _analyze_and_complete(server: Server, dbname: str) -> float:
    """VACUUM (ANALYZE), then step two of the record: complete, with the whole load's figures."""
    t0 = time.perf_counter()
    with server.connect(dbname) as conn:
        # VACUUM sets the visibility map (index-only and parallel scans rely on it); ANALYZE the statistics
        conn.execute("VACUUM (ANALYZE)")
        analyze_s = time.perf_counter() - t0
        figures = json.loads(conn.execute("SELECT load FROM pglab_dataset").fetchone()[0])
        figures |= {"analyze_s": analyze_s, "total_s": figures["copy_s"] + analyze_s}
        conn.execute("UPDATE pglab_dataset SET complete = true, load = %s", (json.dumps(figures),))
    return analyze_s


def _load_table(conn, table: str, sf: float, blocks, method: str, progress) -> dict:
    t0 = time.perf_counter()
    sent = 0
    freeze = " (FREEZE)" if method == "copy_freeze" else ""
    with conn.cursor() as cur:
        # created in the same transaction as the COPY: the condition for FREEZE (and for skipping WAL)
        cur.execute(create_table_sql(table, sf))
        with cur.copy(f'COPY "{table}" FROM STDIN{freeze}') as copy:
            for n, block in blocks:
                copy.write(block)
                sent += n
                if progress:
                    progress(table, n)
        rows = cur.rowcount  # what the server's COPY reported ("COPY n"), not what we think we sent
    if rows != sent:
        raise RuntimeError(f"{table}: COPY reported {rows} rows, {sent} were sent")
    conn.commit()
    return {"table": table, "rows": rows, "seconds": time.perf_counter() - t0}


def _prewarm(server: Server, dbname: str) -> float | None:
    """pg_prewarm every table into shared_buffers, as study S1 did (None where it is not available)."""
    if server.install is not None and not server.install.has("pg_prewarm"):
        return None
    t0 = time.perf_counter()
    with server.connect(dbname) as conn:
        try:
            if server.allow_destructive:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            elif not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'").fetchone():
                return None  # a server the kit may not change: used as it is
        except psycopg.Error:
            return None
        for table in TABLES:
            conn.execute("SELECT pg_prewarm(%s::regclass)", (f'"{table}"',))
    return time.perf_counter() - t0


def _sizes(server: Server, dbname: str) -> tuple[dict[str, int], int]:
    """Bytes per table and of the database (row counts come from the load itself, never from pg_class)."""
    with server.connect(dbname) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid) FROM pg_class c"
            " WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace",
            (list(TABLES),),
        ).fetchall()
        db_bytes = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return dict(rows), db_bytes


__all__ = [
    "GENERATOR_VERSION",
    "DatasetState",
    "LoadResult",
    "block_sources",
    "current_dataset",
    "database_name",
    "dataset_state",
    "load",
]

"""Getting a server ready for study S5: settings, tablespaces, the hash-partitioned table, its data.

Per server: max_worker_processes / max_parallel_workers raised where the worker counts need it
(`Server.configure`, a restart on a kit server; an external server keeps its own and the limits in force
are recorded), a kit-owned database, `t` partitioned by hash into P partitions (each in a tablespace of
its own when params ask), the rows inserted after `setseed()` so that every server gets identical data,
VACUUM ANALYZE, a CHECKPOINT, a checksum of the data per partition, and pg_prewarm of every partition.

A table already loaded with the same rows, partitions, seed and layout (its comment says which) is kept:
a resumed run or a re-executed notebook does not load again. The loads of several servers run at the same
time (one INSERT per server, on its own core); settings change before, in the calling thread."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from ...core.run import prepare as run_prep
from ...core.servers.db import ensure_database
from ...core.servers.servers import DestructiveStepRefused, Server
from .params import PartitioningParams

log = logging.getLogger(__name__)

TABLESPACE_PREFIX = "pglab_part_"
# exactly the names the kit gives (prefix + number): LIKE 'pglab_part_%' would also match e.g. 'pglabXpartY'
TABLESPACE_PATTERN = f"^{TABLESPACE_PREFIX}[0-9]+$"
# the table always in schema public: an unqualified name could resolve to "<role>".t through search_path
TABLE = sql.Identifier("public", "t")
COMMENT_PREFIX = "pglab partitioning study: "
CHECKSUM_SETTINGS = {"extra_float_digits": 1, "jit": False}  # the text form of reals hashed, fixed


class TablespaceRefused(Exception):
    """The tablespaces option cannot be honoured on this server as params stand."""


@dataclass(frozen=True)
class Placement:
    partition: int
    tablespace: str | None  # None: the database's default tablespace
    location: str | None


def layout(server: Server, p: PartitioningParams) -> list[Placement]:
    """Where each partition goes. Kit server: a directory per partition under its cluster's state
    directory, or the locations params name for it. External server: only the locations params name."""
    n = p.partitions
    if not p.tablespaces.enabled:
        return [Placement(i, None, None) for i in range(n)]
    named = p.tablespaces.locations.get(server.name)
    if named:
        dirs = [named[i % len(named)] for i in range(n)]
    elif server.cluster is not None:
        dirs = [str(server.cluster.path / "tablespaces" / f"part_{i}") for i in range(n)]
    else:
        raise TablespaceRefused(
            f"{server.name}: partitioning.tablespaces.enabled needs directories on the server's own machine, "
            "and the kit creates them only for the servers it runs; name existing empty directories owned by "
            f"that server's OS user in params: partitioning.tablespaces.locations.{server.name}: [/dir1, /dir2, ...]"
        )
    distinct = list(dict.fromkeys(dirs))
    return [Placement(i, f"{TABLESPACE_PREFIX}{distinct.index(d)}", d) for i, d in enumerate(dirs)]


def _identity(p: PartitioningParams, places: list[Placement]) -> str:
    """What the loaded table is, kept as its comment: equal comment, equal data and layout."""
    return COMMENT_PREFIX + json.dumps(
        {"rows": p.rows, "partitions": p.partitions, "seed": p.seed, "locations": [x.location for x in places]},
        sort_keys=True,
    )


@dataclass
class Prepared:
    """What one server's preparation did and found; one row of partitioning_setup."""

    server: str
    skipped: str | None = None  # the server takes no part, and why
    configure_status: str | None = None  # reloaded / restarted / skipped (external) / None (nothing needed)
    configure_reason: str | None = None
    configured: dict = field(default_factory=dict)
    loaded_now: bool = False
    load_s: float | None = None  # INSERT only (loads of several servers overlap)
    vacuum_s: float | None = None
    data_checksum: str | None = None
    rows: int | None = None
    table_bytes: int | None = None
    block_size: int | None = None
    shared_buffers_bytes: int | None = None
    max_worker_processes: int | None = None
    max_parallel_workers: int | None = None
    min_parallel_table_scan_size_blocks: int | None = None
    prewarmed_blocks: int | None = None
    prewarm_error: str | None = None
    partitions: list[dict] = field(default_factory=list)

    @property
    def fits_in_shared_buffers(self) -> bool | None:
        if self.table_bytes is None or self.shared_buffers_bytes is None:
            return None
        return self.table_bytes <= self.shared_buffers_bytes

    def record(self) -> dict:
        d = asdict(self)
        d["configured"] = json.dumps(self.configured, sort_keys=True) if self.configured else None
        d.pop("partitions")
        d["fits_in_shared_buffers"] = self.fits_in_shared_buffers
        return d


# -- settings ------------------------------------------------------------------------------------------------


def needed_settings(p: PartitioningParams, current: dict[str, int]) -> dict:
    """The stage's server settings: params' server_settings plus worker limits raised where too low.

    A Gather with N workers needs N free background-worker slots (max_worker_processes also serves the
    logical replication launcher and extensions' workers: keep two spare) and max_parallel_workers >= N."""
    out = dict(p.server_settings)
    want = {"max_worker_processes": p.max_workers + 2, "max_parallel_workers": p.max_workers}
    for name, value in want.items():
        if name not in out and current.get(name, 0) < value:
            out[name] = value
    return out


def _limits(conn) -> dict[str, int]:
    rows = conn.execute(
        "SELECT name, setting::bigint FROM pg_settings WHERE name = ANY(%s)",
        (["max_worker_processes", "max_parallel_workers", "min_parallel_table_scan_size", "block_size"],),
    ).fetchall()
    out = dict(rows)
    out["shared_buffers_bytes"] = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0]
    return out


def configure(server: Server, p: PartitioningParams, prep: Prepared) -> None:
    with server.connect() as conn:
        current = _limits(conn)
    wanted = needed_settings(p, current)
    if wanted:
        res = server.configure(wanted)
        prep.configure_status, prep.configure_reason = res["status"], res["reason"]
        prep.configured = wanted if res["status"] != "skipped" else {}


# -- tablespaces ---------------------------------------------------------------------------------------------


def _prepare_directories(server: Server, places: list[Placement]) -> None:
    """Kit server: create the directories, owned by the server's OS user. Our own ones under the cluster's
    state directory are emptied first (left over from an interrupted run: no tablespace uses them now); a
    directory params name is created if missing, never emptied or taken over if it exists."""
    if server.cluster is None:
        return
    run_as = server.cluster.run_as
    own_root = server.cluster.path / "tablespaces"
    for loc in dict.fromkeys(x.location for x in places if x.location):
        d = Path(loc)
        if d.is_relative_to(own_root):
            if d.exists():
                shutil.rmtree(d)
            own_root.mkdir(exist_ok=True)
            run_as.chown(own_root)
        elif d.exists():
            continue
        d.mkdir(parents=True)
        run_as.chown(d)


def _drop_own_tablespaces(conn) -> None:
    names = conn.execute(
        "SELECT spcname FROM pg_tablespace WHERE spcname ~ %s ORDER BY spcname", (TABLESPACE_PATTERN,)
    ).fetchall()
    for (name,) in names:
        conn.execute(sql.SQL("DROP TABLESPACE {}").format(sql.Identifier(name)))


def _create_tablespaces(conn, places: list[Placement]) -> None:
    for name, loc in dict.fromkeys((x.tablespace, x.location) for x in places if x.tablespace):
        conn.execute(sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(sql.Identifier(name), sql.Literal(loc)))


# -- the table -----------------------------------------------------------------------------------------------


def _current_identity(conn) -> str | None:
    return conn.execute("SELECT obj_description(to_regclass('public.t'), 'pg_class')").fetchone()[0]


def load(server: Server, p: PartitioningParams, places: list[Placement], prep: Prepared) -> None:
    """Create and fill `t` unless the same table is already there (its comment tells)."""
    want = _identity(p, places)
    with server.connect(p.database) as conn:
        if _current_identity(conn) == want:
            return
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(TABLE))
    with server.connect() as conn:  # tablespaces are server-wide: only ours, by name
        _drop_own_tablespaces(conn)
        _prepare_directories(server, places)
        _create_tablespaces(conn, places)
    with server.connect(p.database) as conn:
        # the study's DDL
        conn.execute(
            sql.SQL("CREATE TABLE {} (id int, x real, y real, z real, sum text) PARTITION BY HASH (id)").format(TABLE)
        )
        for x in places:
            ddl = sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES WITH (modulus {}, remainder {})").format(
                sql.Identifier("public", f"t_{x.partition}"),
                TABLE,
                sql.Literal(p.partitions),
                sql.Literal(x.partition),
            )
            if x.tablespace:
                ddl += sql.SQL(" TABLESPACE {}").format(sql.Identifier(x.tablespace))
            conn.execute(ddl)
        t0 = time.perf_counter()
        # one session: setseed() then the study's INSERT, evaluated row by row in one process (random() is
        # parallel restricted), so the same seed gives the same rows on every server of 15+
        conn.execute("SELECT setseed(%s)", (p.seed,))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT x, 100*random(), 100*random(), 100*random(), md5(x::text) "
                "FROM generate_series(1, %s) x"
            ).format(TABLE),
            (p.rows,),
        )
        prep.load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # hint bits and visibility map now, not during the timed runs
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(TABLE))
        prep.vacuum_s = time.perf_counter() - t0
        try:
            conn.execute("CHECKPOINT")  # the load's dirty pages are not written during the timed runs
        except psycopg.Error as e:  # an external server may not let us
            log.warning("%s: CHECKPOINT failed: %s", server.name, str(e).strip())
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(TABLE, sql.Literal(want)))
    prep.loaded_now = True


PARTITIONS_SQL = """
SELECT c.relname AS partition, pg_get_expr(c.relpartbound, c.oid) AS bound,
       pg_relation_size(c.oid) AS bytes,
       pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
       coalesce(ts.spcname, (SELECT spcname FROM pg_tablespace d JOIN pg_database db ON db.dattablespace = d.oid
                             WHERE db.datname = current_database())) AS tablespace,
       CASE WHEN ts.oid IS NULL THEN NULL ELSE pg_tablespace_location(ts.oid) END AS location,
       pg_relation_filepath(c.oid) AS filepath
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid LEFT JOIN pg_tablespace ts ON ts.oid = c.reltablespace
WHERE i.inhparent = 'public.t'::regclass
ORDER BY length(c.relname), c.relname
"""

# an order-independent checksum: the sum of 64-bit hashes of every row's text form, per partition (named by
# relname, as PARTITIONS_SQL names them, whatever search_path would show)
CHECKSUM_SQL = """
SELECT c.relname AS partition, g.rows, g.hash_sum
FROM (SELECT tableoid, count(*) AS rows, sum(hashtextextended(t::text, 0)::numeric)::text AS hash_sum
      FROM public.t GROUP BY tableoid) g JOIN pg_class c ON c.oid = g.tableoid
"""


def inspect(server: Server, p: PartitioningParams, prep: Prepared) -> None:
    """Rows, size, tablespace and checksum of every partition; the data checksum over all of them."""
    with server.connect(p.database, settings=CHECKSUM_SETTINGS) as conn:
        cur = conn.execute(PARTITIONS_SQL)
        parts = [dict(zip([d.name for d in cur.description], r, strict=True)) for r in cur.fetchall()]
        sums = {r[0]: (r[1], r[2]) for r in conn.execute(CHECKSUM_SQL).fetchall()}
        limits = _limits(conn)
    for part in parts:
        rows, hash_sum = sums.get(part["partition"], (0, "0"))
        part |= {"rows": rows, "checksum": _digest(f"{part['partition']} {rows} {hash_sum}")}
    prep.partitions = parts
    prep.rows = sum(x["rows"] for x in parts)
    prep.table_bytes = sum(x["bytes"] for x in parts)
    prep.data_checksum = _digest("\n".join(f"{x['partition']} {x['checksum']}" for x in parts))
    prep.block_size = limits["block_size"]
    prep.shared_buffers_bytes = limits["shared_buffers_bytes"]
    prep.max_worker_processes = limits["max_worker_processes"]
    prep.max_parallel_workers = limits["max_parallel_workers"]
    prep.min_parallel_table_scan_size_blocks = limits["min_parallel_table_scan_size"]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prewarm(server: Server, p: PartitioningParams, prep: Prepared) -> None:
    """Every partition into shared buffers (the study measured cold; see the notebook for why we don't)."""
    query = "SELECT sum(pg_prewarm(inhrelid)) FROM pg_inherits WHERE inhparent = 'public.t'::regclass"
    blocks, error = run_prep.prewarm(lambda: server.connect(p.database), query, wanted=p.prewarm)
    prep.prewarmed_blocks = blocks or 0
    if error:
        prep.prewarm_error = error
        log.warning("%s: pg_prewarm failed: %s", server.name, error)


# -- all servers ---------------------------------------------------------------------------------------------


def prepare_all(
    servers: list[Server], p: PartitioningParams, preps: dict[str, Prepared] | None = None
) -> dict[str, Prepared]:
    """Prepare every server. An external server without allow_destructive is skipped (recorded why); the
    tablespace layout of all the others is checked before any server is changed. `preps` (filled in place)
    lets a caller see what was changed even when a later step fails, and reset() it."""
    if preps is None:
        preps = {}
    for s in servers:
        preps.setdefault(s.name, Prepared(s.name))
    ready = []
    for s in servers:
        try:
            if not s.managed:
                s.require_destructive(f"create database {p.database} and drop and re-create table public.t in it")
            ready.append(s)
        except DestructiveStepRefused as e:
            preps[s.name].skipped = str(e)
    places = {s.name: layout(s, p) for s in ready}  # TablespaceRefused here, before anything changes
    for s in ready:
        configure(s, p, preps[s.name])
        ensure_database(s, p.database)

    def load_one(s: Server) -> None:
        load(s, p, places[s.name], preps[s.name])
        inspect(s, p, preps[s.name])

    with ThreadPoolExecutor(max_workers=max(1, len(ready))) as pool:
        for f in [pool.submit(load_one, s) for s in ready]:
            f.result()
    for s in ready:
        prewarm(s, p, preps[s.name])
    return preps


def reset(servers: list[Server], preps: dict[str, Prepared]) -> None:
    """Back to params' base settings where the stage changed them."""
    for s in servers:
        if s.managed and preps[s.name].configure_status in ("reloaded", "restarted"):
            s.reset()

"""The SSB stage's JIT block (`run.run_modes`, methodology rule 17): the servers added for their JIT, at ssb.jit_sf,
measured one database at a time, in memory. Per server: pg_stat_statements loaded where it can be
(`stat_statements`), its database read into memory (`warm_database`), its warm-up rounds, then its timed rounds, with
the machine's disk bytes read over them (`ssb/jit_io/<server>.json`) and pg_stat_statements' JIT sums of every
execution in a JIT mode (`JitCounters`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg

from ...core import replicas
from ...core.run import system_sampler
from ...core.run.prepare import libraries
from ...core.run.schedule import Step, plan, run_steps
from ...core.servers.db import explain_json, scrub
from ...core.servers.servers import Connections, Server
from ...core.store import RunStore
from ...datasets.ssb import query_sql
from ...datasets.ssb.load import database_name
from .params import JIT_MODES, SsbParams

JIT_IO = "ssb/jit_io"  # <server>.json: its warming, and the disk bytes read while it was timed (`run_jit_block`)
JIT_COUNTERS = "ssb/jit_counters"  # <server>.json: where its executions' JIT sums come from, or why there are none
IO_TARGET = 0.05  # at most this share of a server's database read from disk while it is timed: CPU-bound
BUFFER_SHARE = 0.9  # of shared_buffers filled by the warming's 'buffer' pass (the rest for what the queries need)
FIRST_USER_OID = 16384  # FirstNormalObjectId: the database's own relations (tables, indexes, TOAST) from here on


def block_order(servers: list[Server]) -> list[Server]:
    """The JIT block's servers in the order they are measured, one after the other: every server's first cluster,
    then every server's second ... (pg15, pg18llvm, pg15_c2, pg18llvm_c2), so that a drift of the machine over the
    block falls on every server alike, not on the last one measured."""
    first: dict[str, int] = {}
    for i, s in enumerate(servers):
        first.setdefault(replicas.split_name(s.name)[0], i)

    def key(s: Server) -> tuple[int, int]:
        base, k = replicas.split_name(s.name)
        return k, first[base]

    return sorted(servers, key=key)


def io_path(server: str) -> str:
    return f"{JIT_IO}/{server}.json"


def counters_path(server: str) -> str:
    return f"{JIT_COUNTERS}/{server}.json"


def run_jit_block(
    group: list[Server],
    p: SsbParams,
    store: RunStore,
    experiment: str,
    cells: list[tuple],
    reps: int,
    warm: int,
    sf: float,
    execute: Callable[[Connections, Step], dict],
) -> None:
    """The JIT block measured one server (cluster) at a time, in `block_order` (methodology rule 17: a CPU claim is
    measured while the CPU is the bottleneck). At ssb.jit_sf the block's databases together outgrow a small
    machine's memory (four of 6.6 GB on 23.5 GiB), so that measuring them interleaved measured the disk. Per server:
    pg_stat_statements loaded where it can be (`stat_statements`: a restart), its database read into memory
    (`warm_database`), its warm-up rounds, then all its timed rounds (modes and queries interleaved within each
    round as anywhere else: parallel_jit pairs with parallel within a cluster and round), the machine's disk bytes
    read over them kept with the database's size (`ssb/jit_io/<server>.json`). A server whose record is there was
    measured whole and is not run again (resumable). `execute(conns, step)`: one timed execution, the record's
    fields, as the stage's other servers are timed (`run._execute`)."""
    for s in block_order(group):
        mine = [c for c in cells if c[0] == s.name]
        if not mine or store.has_artifact(io_path(s.name)):
            continue
        jit = any(c[1] in JIT_MODES for c in mine)
        counters = stat_statements(s, database_name(sf), p, store) if jit else None
        _server_block(s, p, store, experiment, mine, reps, warm, sf, counters, execute)


def _server_block(
    s: Server,
    p: SsbParams,
    store: RunStore,
    experiment: str,
    cells: list[tuple],
    reps: int,
    warm: int,
    sf: float,
    counters: JitCounters | None,
    execute: Callable[[Connections, Step], dict],
) -> None:
    """One server of the JIT block: warmed, its warm-up rounds, its timed rounds between two reads of the disk
    counters; then its io record."""
    dbname = database_name(sf)
    steps = plan(cells, reps, warm, p.shuffle_seed)
    warm_steps, timed = [st for st in steps if st.warmup], [st for st in steps if not st.warmup]
    resumed = any(store.done(st.server, experiment, st.condition, st.item, st.repetition) for st in timed)
    conns = Connections({s.name: s}, dbname)

    def measure(step: Step) -> dict:
        counted = counters is not None and step.condition in JIT_MODES
        before = counters.read(step.item) if counted else None
        out = execute(conns, step)
        if counted and out["value"] is not None:
            out |= counters.delta(before, counters.read(step.item))  # both reads outside the timed part
        return out

    desc = f"SSB queries, SF {sf:g}, {s.name}"
    try:
        d0, t0 = _disk(), time.monotonic()
        warmed = warm_database(s, dbname)
        d1, t1 = _disk(), time.monotonic()
        ran_warm = run_steps(warm_steps, store, experiment, measure, desc=f"{desc} (warm-up)")
        db_bytes = database_bytes(s, dbname)
        d2, t2, start = _disk(), time.monotonic(), _utc()
        ran = run_steps(timed, store, experiment, measure, desc=desc, remeasure=True)
        d3, t3, end = _disk(), time.monotonic(), _utc()
    finally:
        conns.close()
        if counters is not None:
            counters.close()
    read = _delta(d2, d3)
    share = read / db_bytes if read is not None and db_bytes else None
    record = {
        "server": s.name,
        "database": dbname,
        "sf": sf,
        "database_bytes": db_bytes,  # pg_database_size, before the timed part
        "disk_read_bytes": read,  # the machine's over the timed part: every process's reads count
        "read_share": share,
        "target_share": IO_TARGET,
        "within_target": None if share is None else share <= IO_TARGET,
        "timed_start_utc": start,  # as the records' ts: the server's timed executions fall between the two
        "timed_end_utc": end,
        "timed_s": round(t3 - t2, 3),
        "timed_executions": ran,  # run in this window (re-measured artefact rounds included)
        "resumed": resumed,  # some of its timed executions were recorded before this window (an interrupted run)
        "warm": warmed | {"seconds": round(t1 - t0, 3), "disk_read_bytes": _delta(d0, d1)},
        "warmup_executions": ran_warm,
        "warmup_s": round(t2 - t1, 3),
        "warmup_disk_read_bytes": _delta(d1, d2),
        "mem_available_bytes": d2["mem_available_bytes"] if d2 else None,  # when the timed part began
        "disk_counter": "/proc/diskstats: sectors read x 512, whole disks" if d2 else None,
        "jit_counters": PGSS if counters is not None else None,
    }
    store.save_json(io_path(s.name), record)
    if share is not None and share > IO_TARGET:
        print(
            f"pglab: {s.name} read {share:.1%} of its database from disk while it was timed (target: under "
            f"{IO_TARGET:.0%}); its SF {sf:g} times are partly the disk's",
            flush=True,
        )


def _utc() -> str:
    """Now, as the raw store stamps its records (`ts`), so that the two compare."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _disk() -> dict | None:
    """The machine's disk bytes read so far (/proc/diskstats: sectors read x 512 over whole disks, not partitions,
    as the system sampler counts them) and its available memory; None where /proc has no such counters."""
    try:
        snap = system_sampler.snapshot()
    except (OSError, ValueError, IndexError, KeyError):
        return None
    return {"read_bytes": snap["read_sectors"] * 512, "mem_available_bytes": snap.get("mem_available_kib", 0) * 1024}


def _delta(a: dict | None, b: dict | None) -> int | None:
    return b["read_bytes"] - a["read_bytes"] if a and b else None


def database_bytes(s: Server, dbname: str) -> int:
    with s.connect(dbname) as conn:
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]


RELATIONS_SQL = """
SELECT c.oid::bigint, c.oid::regclass::text, c.relkind::text,
       pg_relation_size(c.oid) / current_setting('block_size')::bigint AS blocks
FROM pg_class c
WHERE c.oid >= %s AND c.relkind IN ('r', 'i', 'm', 't') AND c.relpersistence <> 't' AND pg_relation_size(c.oid) > 0
ORDER BY blocks, c.oid
"""


def warm_database(s: Server, dbname: str) -> dict:
    """Read the server's whole SSB database into memory before it is timed: every relation of its own (tables,
    indexes, TOAST) with pg_prewarm(rel, 'read') into the OS cache, then the default 'buffer' mode for what
    shared_buffers holds (BUFFER_SHARE of it: the smallest relations whole, the dimension tables and any index,
    then lineorder's first blocks up to it). Without pg_prewarm: every table counted once (count(*)), which reads
    it into the OS cache (not its indexes). Returns what was done, for the server's io record."""
    with s.connect(dbname, settings={"jit": False}) as conn:
        rels = conn.execute(RELATIONS_SQL, (FIRST_USER_OID,)).fetchall()
        block = int(conn.execute("SELECT current_setting('block_size')").fetchone()[0])
        out = {"relations": len(rels), "relation_bytes": sum(r[3] for r in rels) * block}
        if not _prewarm_extension(s, conn):
            for _, name, kind, _ in rels:
                if kind in ("r", "m"):
                    conn.execute(f"SELECT count(*) FROM {name}")  # a regclass's own quoted name
            return out | {"method": "count(*) of every table (no pg_prewarm)"}
        read = sum(conn.execute("SELECT pg_prewarm(%s::oid, 'read')", (oid,)).fetchone()[0] for oid, *_ in rels)
        shared = conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'").fetchone()[0]
        budget, buffered = int(shared * BUFFER_SHARE), 0
        for oid, _, _, blocks in rels:  # smallest first
            take = min(blocks, budget - buffered)
            if take <= 0:
                break
            conn.execute("SELECT pg_prewarm(%s::oid, 'buffer', 'main', 0, %s)", (oid, take - 1))
            buffered += take
    return out | {
        "method": "pg_prewarm: read, then buffer",
        "read_blocks": read,
        "buffer_blocks": buffered,
        "shared_buffers_bytes": shared * block,
    }


def _prewarm_extension(s: Server, conn) -> bool:
    """pg_prewarm in this database (created where the kit may, as the load's prewarm does)."""
    if s.install is not None and not s.install.has("pg_prewarm"):
        return False
    try:
        if s.allow_destructive:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'").fetchone() is not None
    except psycopg.Error:
        return False


# -- the JIT compile time of every execution: pg_stat_statements' sums ---------------------------------------------

PGSS = "pg_stat_statements"
# (field of the record, pg_stat_statements column): its JIT sums since PostgreSQL 15 (pg_stat_statements 1.10)
JIT_TIMES = (
    ("jit_generation_ms", "jit_generation_time"),
    ("jit_inlining_ms", "jit_inlining_time"),
    ("jit_optimization_ms", "jit_optimization_time"),
    ("jit_emission_ms", "jit_emission_time"),
)
JIT_COUNTS = (
    ("jit_inlined", "jit_inlining_count"),
    ("jit_optimized", "jit_optimization_count"),
    ("jit_emitted", "jit_emission_count"),
)
JIT_DEFORM = ("jit_deform_ms", "jit_deform_time")  # 17 on (1.11): the deforming part of generation, not added
JIT_SCOPE = (
    "the leader's JIT: pg_stat_statements sums what the leader process compiled (each parallel worker compiles "
    "its own copy meanwhile; EXPLAIN ANALYZE's JIT block adds the workers')"
)


class JitCounters:
    """pg_stat_statements' JIT sums of one statement in one database, read on a connection of its own (jit off,
    so that reading them compiles nothing) before and after each execution, outside its timed part: the difference
    is that execution's JIT work. The statement is found by its query identifier (EXPLAIN VERBOSE's, the one
    pg_stat_statements keys on), so that nothing else run on the database counts (the set_config around each
    timed statement compiles too where the thresholds are 0)."""

    def __init__(self, server: Server, dbname: str, p: SsbParams, columns: set[str]):
        self.p = p
        self.times = JIT_TIMES + ((JIT_DEFORM,) if JIT_DEFORM[1] in columns else ())
        sums = ", ".join(f"coalesce(sum({c}), 0)" for _, c in (("", "jit_functions"), *self.times, *JIT_COUNTS))
        self.sql = (
            f"SELECT coalesce(sum(calls), 0), {sums} FROM {PGSS}"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid = %s"
        )
        self.conn = server.connect(dbname, settings={"jit": False})
        self.qids: dict[str, int | None] = {}

    def queryid(self, query: str) -> int | None:
        """The query identifier of SSB query `query` (plain EXPLAIN VERBOSE: planned, not run)."""
        if query not in self.qids:
            doc = explain_json(self.conn, query_sql(self.p.query_set, query), analyze=False, verbose=True)
            self.qids[query] = doc[0].get("Query Identifier")
        return self.qids[query]

    def read(self, query: str) -> tuple | None:
        qid = self.queryid(query)
        return None if qid is None else self.conn.execute(self.sql, (qid,)).fetchone()

    def delta(self, before: tuple | None, after: tuple | None) -> dict:
        """The record's JIT fields from two reads: jit_calls (executions counted between them: 1 for one),
        jit_functions, each phase in ms and jit_ms (their sum, as EXPLAIN's Total; deforming is part of generation),
        and whether it inlined, optimised and emitted."""
        if before is None or after is None:
            return {}
        d = [float(b) - float(a) for a, b in zip(before, after, strict=True)]
        out: dict = {"jit_calls": round(d[0]), "jit_functions": round(d[1])}
        times = dict(zip([f for f, _ in self.times], d[2 : 2 + len(self.times)], strict=True))
        out |= {f: round(v, 4) for f, v in times.items()}
        out["jit_ms"] = round(sum(times[f] for f, _ in JIT_TIMES), 4)
        out |= {f: v > 0 for (f, _), v in zip(JIT_COUNTS, d[2 + len(self.times) :], strict=True)}
        return out

    def close(self) -> None:
        self.conn.close()


def stat_statements(s: Server, dbname: str, p: SsbParams, store: RunStore) -> JitCounters | None:
    """pg_stat_statements' JIT sums for the server's executions in a JIT mode: on a kit server the library is put in
    shared_preload_libraries (a restart, before the database is warmed; it stays for the rest of the stage, every
    mode of the server alike) and the extension created in `dbname`. None where it cannot be (no pg_stat_statements
    in the build, PostgreSQL before 15 has no JIT columns, an external server that does not preload it, no query
    identifier): said once, printed, and then the executions carry no JIT fields. Either way noted in the store
    (`ssb/jit_counters/<server>.json`: its source, or the reason there is none)."""
    note: dict = {"server": s.name, "database": dbname, "source": None}
    why, counters = None, None
    if s.install is not None and not s.install.has(PGSS):
        why = f"this build has no {PGSS}"
    elif s.install is not None and s.install.major < 15:
        why = f"{PGSS} before PostgreSQL 15 has no JIT columns"
    elif s.managed:
        settings = dict(s.cluster.settings)
        libs = libraries(settings.get("shared_preload_libraries"))
        if PGSS not in libs:
            res = s.configure(settings | {"shared_preload_libraries": ",".join([*libs, PGSS])})
            note["restarted"] = res["status"] == "restarted"
    if why is None:
        why, counters = _counters(s, dbname, p, note)
    if why is not None:
        note["reason"] = why
        print(f"pglab: {s.name}: no JIT compile time per execution ({why}); the plans' EXPLAIN has it", flush=True)
    else:
        note |= {"source": PGSS, "scope": JIT_SCOPE}
    store.save_json(counters_path(s.name), note)
    return counters


def _counters(s: Server, dbname: str, p: SsbParams, note: dict) -> tuple[str | None, JitCounters | None]:
    try:
        with s.connect(dbname) as conn:
            if PGSS not in libraries(conn.execute("SHOW shared_preload_libraries").fetchone()[0]):
                return f"{PGSS} is not in the server's shared_preload_libraries (the kit does not restart it)", None
            if s.allow_destructive:
                conn.execute(f"CREATE EXTENSION IF NOT EXISTS {PGSS}")
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (PGSS,)).fetchone()
            if row is None:
                return f"{PGSS} is not created in {dbname} (and the kit may not create it on this server)", None
            note["extension_version"] = row[0]
            columns = {
                r[0] for r in conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass", (PGSS,))
            }
        if "jit_functions" not in columns:
            return f"{PGSS} {row[0]} has no JIT columns (1.10, PostgreSQL 15, has)", None
        counters = JitCounters(s, dbname, p, columns)
        if counters.queryid(p.query_ids()[0]) is None:
            counters.close()
            return "no query identifier (compute_query_id is off) to find the statements by", None
        return None, counters
    except psycopg.Error as e:
        return f"{PGSS} could not be read: {scrub(str(e).strip().splitlines()[0])}", None

"""Running the SSB stage of studies S1 and S4 (notebook 20): the 13 queries in serial / parallel / parallel + JIT
modes on every server, a worker sweep, and the plans that explain the times.

    result = STUDY.run(session)   # ssb.run.run_stage: the session's servers, its `ssb:` params (notebook overrides
                                  # applied by `Session.override`); resumable

Where each thing happens:
- `run_stage` gives the servers the SSB stage's settings and dataset (loaded where notebook 10 did not), records
  the run's facts (`record_facts`: derive needs no server), then runs the steps below in this order.
- `run_modes` times every (server, mode, query) with warm-up and interleaved repetitions (pglab.core.run.schedule);
  each execution's result rows are checksummed, so a wrong answer anywhere shows up as a disagreement. The JIT
  block (the servers added for their JIT, at ssb.jit_sf: `jit_block`) is measured one database at a time
  (`run_jit_block`, methodology rule 17): each server's database read into memory (`warm_database`), its warm-up
  rounds, then its timed rounds, with the machine's disk bytes read over them (`ssb/jit_io/<server>.json`) and
  pg_stat_statements' JIT sums of every execution in a JIT mode (`JitCounters`).
- `capture_plans` takes one untimed EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) and one
  EXPLAIN (COSTS OFF) per (server, mode, query), kept raw in the run's store and parsed with pglab.pgtools.explain.
- `run_sweep` times each query at max_parallel_workers_per_gather = 0 … N (S4, test B).
- `capture_study_plans` and `capture_scaled_plans`: plan-only EXPLAINs with S1's 5 allowed workers, as is and with
  min_parallel_table_scan_size scaled to SF / 70 (the q4.3 question on any machine).
`derive` turns the raw store into the tidy tables of data/derived/<profile>/ssb_*.csv."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import polars as pl
import psycopg

from ...core import replicas
from ...core.run import outcomes, system_sampler
from ...core.run.schedule import Step, plan, run_steps
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import explain_json, plan_shape, scrub, timed_statement
from ...core.servers.servers import Connections, Server, matches_version
from ...core.store import RunStore
from ...datasets.ssb import query_sql
from ...datasets.ssb import stage as ssb_stage
from ...datasets.ssb.answers import result_checksum
from ...datasets.ssb.load import LoadResult, database_name
from ...pgtools.explain import gather_workers, parse_plan
from . import reference as ref
from .params import JIT_MODES, SsbParams

EXPERIMENT = "ssb"
SWEEP = "ssb_sweep"
FACTS = "ssb/facts.json"
S1_SF = 70  # study S1's scale factor
DEFAULT_MIN_SCAN_KB = 8192  # min_parallel_table_scan_size's default, 8MB


def workers(p: SsbParams) -> int:
    return p.workers or os.cpu_count() or 1


JIT_FORCED = {"jit_above_cost": 0, "jit_inline_above_cost": 0, "jit_optimize_above_cost": 0}


def mode_settings(mode: str, n_workers: int) -> dict:
    """Session settings of each mode, as in study S1 (parallel_jit keeps the server's JIT thresholds, as S1 did;
    parallel_jit_forced sets them to 0 so that every plan is inlined and optimised; parallel_aa is parallel
    again under another label, the A/A control)."""
    if mode == "serial":
        return {"max_parallel_workers_per_gather": 0, "jit": False}
    par = {"max_parallel_workers_per_gather": n_workers, "max_parallel_workers": n_workers}
    if mode in ("parallel", "parallel_aa"):
        return par | {"jit": False}
    if mode == "parallel_jit":
        return par | {"jit": True}
    if mode == "parallel_jit_forced":
        return par | {"jit": True} | JIT_FORCED
    raise ValueError(f"unknown SSB mode {mode!r}")


def sweep_settings(condition: str) -> dict:
    k = int(condition.split("=")[1])
    return {"max_parallel_workers_per_gather": k, "max_parallel_workers": max(k, 1), "jit": False}


def version_server(server: Server, p: SsbParams) -> bool:
    """Whether the server is one of the versions the study compares (ssb.versions; all when none are named).
    The others were added for their JIT (ssb.jit_installs) and run only the parallel and JIT modes."""
    if not p.versions or server.install is None:
        return True
    if p.builds == "download" and server.install.source != "download":  # an install of a version's major
        return False
    return any(matches_version(server.install, v) for v in p.versions)


def scales(servers: list[Server], p: SsbParams) -> dict[str, float]:
    """The SSB scale factor of each server: ssb.jit_sf for the servers added for their JIT only (the JIT claims'
    regime), ssb.sf for the others."""
    return {s.name: p.jit_sf if p.jit_sf is not None and not version_server(s, p) else p.sf for s in servers}


def scale_groups(servers: list[Server], p: SsbParams) -> list[tuple[float, int, int, list[Server]]]:
    """(sf, repetitions, warm-ups, servers) of each scale, ssb.sf's first: each is timed in rounds of its own."""
    sf_of = scales(servers, p)
    out = []
    for sf in dict.fromkeys([p.sf, *sf_of.values()]):
        group = [s for s in servers if sf_of[s.name] == sf]
        if not group:
            continue
        if sf == p.sf:
            out.append((sf, p.repetitions, p.warmups, group))
        else:
            warm = p.warmups if p.jit_warmups is None else p.jit_warmups
            out.append((sf, p.jit_repetitions or p.repetitions, warm, group))
    return out


def availability(
    server: Server, modes: list[str], p: SsbParams | None = None, aa_here: bool = True
) -> dict[str, str | None]:
    """None where the mode can run, else the reason it cannot (recorded and shown in the report)."""
    out: dict[str, str | None] = {m: None for m in modes}
    jit_modes = [m for m in modes if m in JIT_MODES]
    if jit_modes:
        with server.connect(settings={"jit": True}) as conn:
            if not conn.execute("SELECT pg_jit_available()").fetchone()[0]:
                out |= {m: "JIT not available: this build has no llvmjit" for m in jit_modes}
    if p is not None and "serial" in modes and not version_server(server, p):
        out["serial"] = "added for its JIT only (not among ssb.versions): parallel and JIT modes only"
    if "parallel_aa" in modes and not aa_here:
        out["parallel_aa"] = "the A/A control runs on the first server only (ssb.aa_servers: first)"
    return out


def _timed_runs(
    servers,
    p: SsbParams,
    store: RunStore,
    experiment: str,
    cells,
    repetitions,
    settings_of,
    desc,
    sf=None,
    warmups=None,
):
    steps = plan(cells, repetitions, p.warmups if warmups is None else warmups, p.shuffle_seed)
    conns = Connections({s.name: s for s in servers}, database_name(p.sf if sf is None else sf))

    def measure(step):
        conn = conns.get(step.server, step.condition, settings_of(step.condition))
        return _execute(conn, p, step.item)

    try:
        return run_steps(steps, store, experiment, measure, desc=desc, remeasure=True)
    finally:
        conns.close()


def _execute(conn, p: SsbParams, query: str) -> dict:
    """One timed execution of `query`: the record's fields (the time, or the error as data)."""
    t = timed_statement(conn, query_sql(p.query_set, query), timeout_s=p.statement_timeout_s)
    if not t.ok:
        return {"value": None, "unit": "s", "error": t.error, "sqlstate": t.sqlstate}
    return {"value": t.elapsed_s, "unit": "s", "rows": t.rowcount, "checksum": result_checksum(t.rows)}


def run_modes(servers: list[Server], p: SsbParams, store: RunStore) -> pl.DataFrame:
    """Time every available (server, mode, query), each scale's servers in rounds of their own (scale_groups);
    returns the availability table."""
    n = workers(p)
    groups = scale_groups(servers, p)
    # aa_servers first: the first server at ssb.sf, every cluster of it (params servers.clusters: its floor over
    # all of them); the JIT servers at jit_sf have none of their own (their floor: the run's, from these shorter,
    # noisier queries, the larger of the two)
    bases = replicas.base_names([s.name for s in servers])
    firsts = {bases[groups[0][-1][0].name]} if groups else set()
    avail = {
        s.name: availability(s, p.modes, p, aa_here=p.aa_servers == "all" or bases[s.name] in firsts) for s in servers
    }
    rows = [
        {"server": s, "mode": m, "available": reason is None, "reason": reason}
        for s, modes in avail.items()
        for m, reason in modes.items()
    ]
    store.save_json("ssb/availability.json", rows)
    for sf, reps, warm, group in groups:
        cells = [
            (s.name, m, q) for s in group for m, r in avail[s.name].items() if r is None for q in p.mode_query_ids(m)
        ]
        if jit_block(sf, p):  # one database at a time, warmed, its disk reads and JIT counters recorded
            run_jit_block(group, p, store, cells, reps, warm, sf)
            continue
        desc = "SSB queries" if sf == p.sf else f"SSB queries, SF {sf:g}"
        _timed_runs(group, p, store, EXPERIMENT, cells, reps, lambda m: mode_settings(m, n), desc, sf, warm)
    return pl.DataFrame(
        rows, schema={"server": pl.String, "mode": pl.String, "available": pl.Boolean, "reason": pl.String}
    )


# -- the JIT block: one database at a time, in memory (methodology rule 17) ------------------------------------------

JIT_IO = "ssb/jit_io"  # <server>.json: its warming, and the disk bytes read while it was timed (`run_jit_block`)
JIT_COUNTERS = "ssb/jit_counters"  # <server>.json: where its executions' JIT sums come from, or why there are none
IO_TARGET = 0.05  # at most this share of a server's database read from disk while it is timed: CPU-bound
BUFFER_SHARE = 0.9  # of shared_buffers filled by the warming's 'buffer' pass (the rest for what the queries need)
FIRST_USER_OID = 16384  # FirstNormalObjectId: the database's own relations (tables, indexes, TOAST) from here on


def jit_block(sf: float, p: SsbParams) -> bool:
    """Whether the scale group at `sf` (scale_groups) is the JIT block: the servers added for their JIT, at
    ssb.jit_sf, a scale of their own."""
    return p.jit_sf is not None and sf == p.jit_sf and sf != p.sf


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
    group: list[Server], p: SsbParams, store: RunStore, cells: list[tuple], reps: int, warm: int, sf: float
) -> None:
    """The JIT block measured one server (cluster) at a time, in `block_order` (methodology rule 17: a CPU claim is
    measured while the CPU is the bottleneck). At ssb.jit_sf the block's databases together outgrow a small
    machine's memory (four of 6.6 GB on 23.5 GiB), so that measuring them interleaved measured the disk. Per server:
    pg_stat_statements loaded where it can be (`stat_statements`: a restart), its database read into memory
    (`warm_database`), its warm-up rounds, then all its timed rounds (modes and queries interleaved within each
    round as anywhere else: parallel_jit pairs with parallel within a cluster and round), the machine's disk bytes
    read over them kept with the database's size (`ssb/jit_io/<server>.json`). A server whose record is there was
    measured whole and is not run again (resumable)."""
    for s in block_order(group):
        mine = [c for c in cells if c[0] == s.name]
        if not mine or store.has_artifact(io_path(s.name)):
            continue
        jit = any(c[1] in JIT_MODES for c in mine)
        counters = stat_statements(s, database_name(sf), p, store) if jit else None
        _server_block(s, p, store, mine, reps, warm, sf, counters)


def _server_block(
    s: Server,
    p: SsbParams,
    store: RunStore,
    cells: list[tuple],
    reps: int,
    warm: int,
    sf: float,
    counters: JitCounters | None,
) -> None:
    """One server of the JIT block: warmed, its warm-up rounds, its timed rounds between two reads of the disk
    counters; then its io record."""
    n, dbname = workers(p), database_name(sf)
    steps = plan(cells, reps, warm, p.shuffle_seed)
    warm_steps, timed = [st for st in steps if st.warmup], [st for st in steps if not st.warmup]
    resumed = any(store.done(st.server, EXPERIMENT, st.condition, st.item, st.repetition) for st in timed)
    conns = Connections({s.name: s}, dbname)

    def measure(step: Step) -> dict:
        conn = conns.get(step.server, step.condition, mode_settings(step.condition, n))
        counted = counters is not None and step.condition in JIT_MODES
        before = counters.read(step.item) if counted else None
        out = _execute(conn, p, step.item)
        if counted and out["value"] is not None:
            out |= counters.delta(before, counters.read(step.item))  # both reads outside the timed part
        return out

    desc = f"SSB queries, SF {sf:g}, {s.name}"
    try:
        d0, t0 = _disk(), time.monotonic()
        warmed = warm_database(s, dbname)
        d1, t1 = _disk(), time.monotonic()
        ran_warm = run_steps(warm_steps, store, EXPERIMENT, measure, desc=f"{desc} (warm-up)")
        db_bytes = database_bytes(s, dbname)
        d2, t2, start = _disk(), time.monotonic(), _utc()
        ran = run_steps(timed, store, EXPERIMENT, measure, desc=desc, remeasure=True)
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


def _libs(value) -> list[str]:
    return [x.strip() for x in str(value or "").split(",") if x.strip()]


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
        libs = _libs(settings.get("shared_preload_libraries"))
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
            if PGSS not in _libs(conn.execute("SHOW shared_preload_libraries").fetchone()[0]):
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


def run_sweep(servers: list[Server], p: SsbParams, store: RunStore) -> list[int]:
    counts = p.worker_sweep if p.worker_sweep is not None else list(range(workers(p) + 1))
    cells = [(s.name, f"workers={k}", q) for s in servers for k in counts for q in p.sweep_query_ids()]
    _timed_runs(servers, p, store, SWEEP, cells, p.sweep_repetitions, sweep_settings, "SSB worker sweep")
    return counts


def capture_plans(servers: list[Server], p: SsbParams, store: RunStore, available: pl.DataFrame) -> None:
    """One untimed EXPLAIN ANALYZE (JSON) and EXPLAIN (COSTS OFF) per available (server, mode, query)."""
    n = workers(p)
    timeout_ms = str(max(1, round(p.statement_timeout_s * 1000)))
    sf_of = scales(servers, p)
    for s in servers:
        for mode in available.filter(pl.col("available") & (pl.col("server") == s.name))["mode"]:
            if mode == "parallel_aa":  # the same settings as parallel: its plan is parallel's
                continue
            with s.connect(database_name(sf_of[s.name]), settings=mode_settings(mode, n)) as conn:
                conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms,))
                for q in p.mode_query_ids(mode):
                    base = f"ssb/plans/{s.name}/{mode}/{q}"
                    if store.has_artifact(base + ".json"):
                        continue
                    sql = query_sql(p.query_set, q)
                    store.save_text(base + ".costs_off.txt", plan_shape(conn, sql))
                    # a plan that fails is recorded, not dropped
                    store.save_json(base + ".json", explain_json(conn, sql, verbose=True, record_error=True))
                    jit_settings = conn.execute(
                        "SELECT name, setting FROM pg_settings WHERE name LIKE 'jit%%' OR name LIKE '%%parallel%%'"
                    ).fetchall()
                    store.save_json(base + ".settings.json", dict(jit_settings))


def capture_study_plans(servers: list[Server], p: SsbParams, store: RunStore, allowed: int) -> pl.DataFrame:
    """Plain EXPLAIN (no execution) of each query with `allowed` workers per Gather, as study S1 allowed
    (5), whatever this machine's core count: how many workers does the planner ask for, driven by which
    table? Planning needs no cores, so this reproduces the q4.3 finding's mechanism on any machine."""
    settings = mode_settings("parallel", allowed)
    capture_plan_only(servers, p, store, settings, lambda s, q: study_plan_path(s, allowed, q))
    return study_plans_table(store, [s.name for s in servers], p.query_ids(), allowed)


def capture_plan_only(servers: list[Server], p: SsbParams, store: RunStore, settings: dict, path_of) -> None:
    """Plain EXPLAIN (VERBOSE, FORMAT JSON) of every query under `settings`, planned, not executed (planning needs
    no cores), kept once at path_of(server, query): the study's plans and the scaled ones (capture_study_plans,
    capture_scaled_plans)."""
    for s in servers:
        with s.connect(database_name(p.sf), settings=settings) as conn:
            for q in p.query_ids():
                path = path_of(s.name, q)
                if not store.has_artifact(path):
                    store.save_json(path, explain_json(conn, query_sql(p.query_set, q), analyze=False, verbose=True))


def study_plan_path(server: str, allowed: int, query: str) -> str:
    return f"ssb/plans/{server}/plan_only_{allowed}_workers/{query}.json"


def study_plans_table(store: RunStore, servers: list[str], qids: list[str], allowed: int) -> pl.DataFrame:
    """From the plan-only EXPLAINs capture_study_plans kept: the top Gather's workers and driving table."""
    rows = []
    for s in servers:
        for q in qids:
            gathers = gather_workers(parse_plan(store.load_json(study_plan_path(s, allowed, q))))
            top = gathers.head(1).to_dicts()
            rows.append(
                {
                    "server": s,
                    "query": q,
                    "allowed_workers": allowed,
                    "workers_planned": top[0]["workers_planned"] if top else 0,
                    "leftmost_relation": top[0]["leftmost_relation"] if top else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "server": pl.String,
            "query": pl.String,
            "allowed_workers": pl.Int64,
            "workers_planned": pl.Int64,
            "leftmost_relation": pl.String,
        },
    )


def record_facts(servers: list[Server], p: SsbParams, store: RunStore, loads: list[LoadResult]) -> dict:
    """Cores, workers and each server's version and dataset (generator flavor and version), kept in the run;
    with the servers' order (the last is the versions' baseline) and the notebook's SSB params (overrides
    applied), so that ssb.derive needs no server and no notebook."""
    data = {r.server: r.dataset for r in loads if not r.refused}
    facts = {
        "cores": os.cpu_count(),
        "workers": workers(p),
        "sf": p.sf,
        "query_set": p.query_set,
        "server_order": [s.name for s in servers],
        "ssb_params": p.model_dump(mode="json"),
        "servers": {
            s.name: {
                "major": s.install.major if s.install else None,
                "minor": s.install.minor if s.install else None,
                "jit": bool(s.install and s.install.jit),
                "dataset": data.get(s.name),
            }
            for s in servers
        },
    }
    store.save_json(FACTS, facts)
    return facts


def scaled_min_scan_kb(sf: float) -> int:
    """min_parallel_table_scan_size scaled by SF / 70, in whole 8 kB blocks (at least one): the planner then
    sees our tables in the same ratio to it as S1's tables at SF 70 were to the default 8MB."""
    return max(1, round(DEFAULT_MIN_SCAN_KB / 8 * sf / S1_SF)) * 8


def capture_scaled_plans(servers: list[Server], p: SsbParams, store: RunStore, allowed: int) -> pl.DataFrame:
    """Plain EXPLAIN (no execution) of every query with `allowed` workers and min_parallel_table_scan_size
    scaled to SF / 70: does q4.3 plan fewer workers than allowed, and driven by which table?"""
    kb = scaled_min_scan_kb(p.sf)
    settings = mode_settings("parallel", allowed) | {"min_parallel_table_scan_size": f"{kb}kB"}
    capture_plan_only(servers, p, store, settings, lambda s, q: scaled_plan_path(s, allowed, q))
    return scaled_plans_table(store, [s.name for s in servers], p, allowed)


def scaled_plan_path(server: str, allowed: int, query: str) -> str:
    return f"ssb/plans/{server}/plan_only_scaled_{allowed}_workers/{query}.json"


def scaled_plans_table(store: RunStore, servers: list[str], p: SsbParams, allowed: int) -> pl.DataFrame:
    """From the plan-only EXPLAINs capture_scaled_plans kept: the top Gather's workers and driving table."""
    kb = scaled_min_scan_kb(p.sf)
    rows = []
    for s in servers:
        for q in p.query_ids():
            gathers = gather_workers(parse_plan(store.load_json(scaled_plan_path(s, allowed, q))))
            top = gathers.head(1).to_dicts()
            rows.append(
                {
                    "server": s,
                    "query": q,
                    "allowed_workers": allowed,
                    "min_parallel_table_scan_kb": kb,
                    "workers_planned": top[0]["workers_planned"] if top else 0,
                    "leftmost_relation": top[0]["leftmost_relation"] if top else None,
                }
            )
    return pl.DataFrame(rows, schema=SCALED_SCHEMA)


SCALED_SCHEMA = {
    "server": pl.String,
    "query": pl.String,
    "allowed_workers": pl.Int64,
    "min_parallel_table_scan_kb": pl.Int64,
    "workers_planned": pl.Int64,
    "leftmost_relation": pl.String,
}


def _recorded(store: RunStore) -> int:
    return store.records(EXPERIMENT).height + store.records(SWEEP).height


def run_stage(session: Session) -> StageResult:
    """Notebook 20's measuring, on the session's servers with its `ssb:` params (a notebook's parameters are put
    there first by `Session.override`). Each server is started with the SSB stage's settings and made to hold the
    dataset (loaded unless notebook 10 did); one that may not hold it is a recorded skip. Then, on the others:
    the run's facts, every available mode, its plans, the worker sweep, and the plan-only EXPLAINs with S1's 5
    allowed workers (as is and scaled to SF / 70). Resumable: what the raw store holds is not run again.

    `seen`: `available` (which modes each server can run, and why not), `facts` (what derive reads of the
    servers), `loads` (one row per server and table loaded or found), `sweep_workers` (the sweep's counts)."""
    t0 = time.monotonic()
    p, store = session.params.ssb, session.store
    ssb_stage.prepare(session.servers, p)
    loads = ssb_stage.load_all(session.servers, p, store, scales(session.servers, p))  # done: skipped (notebook 10)
    targets = ssb_stage.usable(store, session.servers, loads, EXPERIMENT)
    seen = {"loads": ssb_stage.load_table(loads)}
    if not targets:
        return StageResult(steps_run=0, wall_s=time.monotonic() - t0, servers=[], seen=seen)
    before = _recorded(store)
    seen["facts"] = record_facts(targets, p, store, loads)  # versions, datasets, cores: derive needs no server
    seen["available"] = run_modes(targets, p, store)
    capture_plans(targets, p, store, seen["available"])
    # the sweep and the plan-only EXPLAINs at ssb.sf only (the JIT servers' larger scale is for the JIT claims)
    at_sf = [t for t in targets if scales(targets, p)[t.name] == p.sf]
    seen["sweep_workers"] = run_sweep(at_sf, p, store) if at_sf else []
    names = [t.name for t in targets]
    outcomes.require_measured(store, [EXPERIMENT], names)
    outcomes.require_measured(store, [SWEEP], [t.name for t in at_sf])
    # the plan-only EXPLAINs with the study's 5 allowed workers (as is and with the scan threshold scaled to SF / 70)
    capture_study_plans(at_sf, p, store, allowed=ref.S1_ALLOWED_WORKERS)
    capture_scaled_plans(at_sf, p, store, allowed=ref.S1_ALLOWED_WORKERS)
    return StageResult(steps_run=_recorded(store) - before, wall_s=time.monotonic() - t0, servers=names, seen=seen)

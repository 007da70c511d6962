"""Running study S5 on every server: the timed query at each worker count, then the plans.

Cells are (server, condition) with conditions `serial` (max_parallel_workers_per_gather = 0) and
`workers=k` for k = 1 … max_workers; warm-up rounds, then interleaved rounds (`pglab.core.run.schedule`), each
execution recorded with its result (count, avg) so that agreement between modes and servers is checked.
Time is the client's wall time over the Unix socket, from sending the query to the last row fetched; one
connection per cell, opened once. The plans come after, untimed: EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
and EXPLAIN (COSTS OFF) per cell, and a plain EXPLAIN with the study's 100 allowed workers."""

from __future__ import annotations

import time

from ...core.config import ParamsError
from ...core.installs.installs import discover, from_params
from ...core.run import outcomes
from ...core.run.schedule import plan, run_steps
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import explain_json, plan_shape, set_statement_timeout, timed_statement
from ...core.servers.servers import Connections, Server
from ...core.store import RunStore
from . import prepare as setup
from .params import (
    EXPERIMENT,
    ITEM,
    QUERY,
    STUDY_ALLOWED_WORKERS,
    STUDY_PARTITION_MB,
    PartitioningParams,
    condition_workers,
    unknown_location_servers,
)


def loadavg_1m() -> float | None:
    """The machine's 1-minute load average: other work on a shared machine shows in the times."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def session_settings(workers: int) -> dict:
    """Per-connection settings of a condition; JIT off everywhere (the study's PostgreSQL 11 had it off)."""
    return {"max_parallel_workers_per_gather": workers, "jit": False}


def time_query(servers: list[Server], p: PartitioningParams, store: RunStore) -> int:
    cells = [(s.name, cond, ITEM) for s in servers for cond, _ in p.timed_conditions()]
    steps = plan(cells, p.repetitions, p.warmups, p.shuffle_seed)
    conns = Connections({s.name: s for s in servers}, p.database)

    def measure(step):
        k = condition_workers(step.condition)
        conn = conns.get(step.server, step.condition, session_settings(k))
        t = timed_statement(conn, QUERY, timeout_s=p.statement_timeout_s)
        load = {"workers": k, "loadavg_1m": loadavg_1m()}  # read after the run: it includes it
        if not t.ok:
            return {"value": None, "unit": "s", "error": t.error, "sqlstate": t.sqlstate} | load
        count, avg = t.rows[0]
        return {"value": t.elapsed_s, "unit": "s", "count": int(count), "avg": float(avg)} | load

    try:
        return run_steps(steps, store, EXPERIMENT, measure, desc="S5 count(*), avg(x)", remeasure=True)
    finally:
        conns.close()


def plan_path(server: str, condition: str) -> str:
    return f"{EXPERIMENT}/plans/{server}/{condition}"


def scaled_threshold_blocks(partition_pages: list[int], block_size: int = 8192) -> int:
    """min_parallel_table_scan_size (in blocks, at least 1) scaled by our largest partition over the study's:
    the planner then sees our partitions in the ratio to it that the study's 8 GB ones had to the default 8MB."""
    study = max(mb * 1024 * 1024 // block_size for mb in STUDY_PARTITION_MB)
    return max(1, round(1024 * max(partition_pages) / study))


def capture_plans(servers: list[Server], p: PartitioningParams, store: RunStore, preps: dict) -> None:
    """Untimed plans per (server, condition), and the plan-only ones with the study's allowed workers (as is, and
    with the scan threshold scaled to our partitions: the study's planner decision on our data), kept raw."""
    k_study = STUDY_ALLOWED_WORKERS
    for s in servers:
        pages = [x["pages"] for x in preps[s.name].partitions]
        scaled = scaled_threshold_blocks(pages)
        plan_only = {
            f"plan_only_{k_study}": preps[s.name].min_parallel_table_scan_size_blocks,
            f"plan_only_scaled_{k_study}": scaled,
        }
        for cond, k in [*p.conditions(), *((c, k_study) for c in plan_only)]:
            base = plan_path(s.name, cond)
            if store.has_artifact(base + ".json"):
                continue
            settings = session_settings(k)
            if cond.startswith("plan_only_scaled"):
                settings |= {"min_parallel_table_scan_size": f"{scaled * 8}kB"}
            with s.connect(p.database, settings=settings) as conn:
                set_statement_timeout(conn, p.statement_timeout_s)
                if cond in plan_only:
                    # planning needs no cores: what the planner asks for when allowed as many as the study
                    doc = explain_json(conn, QUERY, analyze=False)
                    store.save_json(
                        base + ".json",
                        {
                            "allowed": k,
                            "plan": doc,
                            "partition_pages": pages,
                            "min_parallel_table_scan_size_blocks": plan_only[cond],
                        },
                    )
                    continue
                store.save_text(base + ".costs_off.txt", plan_shape(conn, QUERY))
                doc = explain_json(conn, QUERY, record_error=True)  # a plan that fails is recorded, not dropped
                store.save_json(base + ".json", {"allowed": k, "plan": doc})


def known_servers(s: Session) -> list[str]:
    """Every server name params can refer to: the session's, and with `servers.use` narrowing them, every
    install found and every external server too."""
    names = {x.name for x in s.servers}
    if s.params.servers.use != "all":
        names |= {i.name for i in discover(from_params(s.params.servers))}
        names |= {e.name for e in s.params.servers.external}
    return sorted(names)


def check_locations(s: Session, p: PartitioningParams) -> None:
    """Refuse tablespace locations for a server that does not exist, before any server is changed."""
    unknown = unknown_location_servers(p, known_servers(s)) if p.tablespaces.locations else []
    if unknown:
        raise ParamsError(
            f"{s.params.source or 'params'}: partitioning.tablespaces.locations: expected server "
            f"names among {known_servers(s)}; got unknown {unknown}"
        )


def run_stage(s: Session, p: PartitioningParams | None = None) -> StageResult:
    """Prepare every server, time the query interleaved over servers and worker counts, take the plans,
    put the servers' settings back (also when the preparation itself fails part-way). The setup of each
    server is kept in the raw store."""
    p = p or s.params.partitioning
    check_locations(s, p)
    t0 = time.monotonic()
    preps = {x.name: setup.Prepared(x.name) for x in s.servers}
    try:
        setup.prepare_all(s.servers, p, preps)
        for prep in preps.values():
            check_same_data(s.store, prep)
            store_setup(s.store, prep)
        for prep in preps.values():
            if prep.skipped is not None:
                outcomes.skip(s.store, EXPERIMENT, prep.server, prep.skipped)
        active = [x for x in s.servers if preps[x.name].skipped is None]
        steps = time_query(active, p, s.store)
        capture_plans(active, p, s.store, preps)
    finally:
        setup.reset(s.servers, preps)
    outcomes.require_measured(s.store, [EXPERIMENT], [x.name for x in active])
    return StageResult(
        steps_run=steps, wall_s=time.monotonic() - t0, servers=[x.name for x in active], seen={"preps": preps}
    )


def store_setup(store: RunStore, prep: setup.Prepared) -> None:
    """The server's preparation as first recorded in this run (a resumed run keeps the first record)."""
    store.save_json(f"{EXPERIMENT}/setup/{prep.server}.json", prep.record() | {"partitions": prep.partitions})


class DataChanged(Exception):
    """A resumed run would mix measurements of two different tables."""


def check_same_data(store: RunStore, prep: setup.Prepared) -> None:
    first = load_setup(store, prep.server)
    if first and prep.skipped is None and first.get("data_checksum") != prep.data_checksum:
        raise DataChanged(
            f"{prep.server}: run {store.run_id} was recorded on data with checksum {first.get('data_checksum')} "
            f"({first.get('rows')} rows); the table now has checksum {prep.data_checksum} ({prep.rows} rows). "
            "Start a new run (another run id) for other partitioning params."
        )


def load_setup(store: RunStore, server: str) -> dict | None:
    return store.load_json(f"{EXPERIMENT}/setup/{server}.json")

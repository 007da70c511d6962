"""The parallel index build stage (study S4 test C): settings that let the builds run in parallel, then every
(server, key columns, workers) cell built with warm-up and interleaved repetitions (pglab.core.run.schedule), each build
recorded in the run's store with the workers the server planned and launched for it.

    result = STUDY.run(session)   # run_stage: the session's servers, its `ssb:` (the dataset) and `parallel_index:`
                                  # params (notebook overrides applied by `Session.override`); resumable

run_stage: the SSB stage's settings and dataset (loaded where notebook 10 did not; `usable` skips a server that may
not hold it or may not create and drop the index), `setup` (configure, record what the builds run under), `run`
(the builds, the index dropped afterwards), `finish` (back to the SSB stage's settings)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace

import polars as pl

from ...core.run import outcomes
from ...core.run.schedule import Step, plan, run_steps
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.servers import Server
from ...core.store import RunStore
from ...datasets.ssb import stage as ssb_stage
from ...datasets.ssb.dataset import SsbDataset
from ...datasets.ssb.load import database_name
from .build import INDEX, TABLE, build, drop_index, session_settings
from .params import AA_SUFFIX, EXPERIMENT, ParallelIndexParams, build_memory

log = logging.getLogger(__name__)
# what is recorded as "in force" for every server (read in a build's own session, at the largest worker count)
IN_FORCE = (
    "server_version",
    "server_version_num",
    "max_worker_processes",
    "max_parallel_workers",
    "max_parallel_maintenance_workers",
    "maintenance_work_mem",
    "parallel_leader_participation",
    "min_parallel_table_scan_size",
    "shared_buffers",
    "wal_level",
    "trace_sort",
)


def server_settings(server: Server, ssb: SsbDataset, p: ParallelIndexParams) -> dict:
    """Server-level settings for the stage: the SSB stage's own (kept, so no restart between the SSB notebooks)
    plus enough worker slots for N parallel workers. maintenance_work_mem and the worker count are per session."""
    n = p.n_workers()
    base = server.settings
    return dict(ssb.stage_settings) | {
        # background workers come from max_worker_processes (the logical replication launcher holds one)
        "max_worker_processes": max(int(base.get("max_worker_processes", 8)), n + 2),
        "max_parallel_workers": max(int(base.get("max_parallel_workers", 8)), n),
    }


def usable(store: RunStore, servers: list[Server]) -> list[Server]:
    """The servers the builds may run on; each other one (an external server without allow_destructive: a
    build creates and drops an index) is a recorded skip."""
    why = (
        f"the builds create and drop index {INDEX} on {TABLE}, which params do not allow on this external server "
        "(allow_destructive: false)"
    )
    for srv in servers:
        if not srv.allow_destructive:
            outcomes.skip(store, EXPERIMENT, srv.name, why)
    return [srv for srv in servers if srv.allow_destructive]


def prepare(servers: list[Server], ssb: SsbDataset, p: ParallelIndexParams) -> list[dict]:
    """Refuse what params do not allow before anything changes, then configure every server."""
    for srv in servers:
        srv.require_destructive(f"create and drop index {INDEX} on {TABLE}")
    return [{"server": srv.name} | srv.configure(server_settings(srv, ssb, p)) for srv in servers]


def in_force(server: Server, dbname: str, p: ParallelIndexParams) -> dict:
    """The settings a build at the largest worker count runs under, and the table it reads."""
    with server.connect(dbname, settings=session_settings(p.n_workers(), build_memory(p))) as conn:
        rec = {name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0] for name in IN_FORCE}
        rows, size, opts = conn.execute(
            "SELECT reltuples::bigint, pg_relation_size(oid), array_to_string(reloptions, ',')"
            " FROM pg_class WHERE oid = to_regclass(%s)",
            (f"public.{TABLE}",),
        ).fetchone()
        leftover = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s", (TABLE,)).fetchone()[0]
    rec["server_version_num"] = int(rec["server_version_num"])
    return rec | {
        "lineorder_rows": rows,
        "lineorder_bytes": size,
        "lineorder_reloptions": opts or None,
        "lineorder_indexes_before": leftover,
    }


def cells(servers: list[Server], p: ParallelIndexParams) -> list[tuple[str, str, str]]:
    conds = [f"workers={w}" for w in p.workers()] + ([f"workers=0{AA_SUFFIX}"] if p.aa_control else [])
    return [(s.name, c, f"columns={k}") for s in servers for k in p.column_sets() for c in conds]


def steps(servers: list[Server], p: ParallelIndexParams) -> list[Step]:
    """Warm-up rounds (over the cells `warmup_cells` names), then the interleaved timed rounds."""
    every = cells(servers, p)
    if p.warmup_cells == "all":
        return plan(every, p.repetitions, p.warmups, p.shuffle_seed)
    top = f"workers={max(p.workers())}"
    warm = plan([c for c in every if c[1] == top], 0, p.warmups, p.shuffle_seed)
    timed = plan(every, p.repetitions, 0, p.shuffle_seed)
    return warm + [replace(s, round=s.round + p.warmups) for s in timed]


def parse_cell(condition: str, item: str) -> tuple[int, int]:
    return int(condition.split("=", 1)[1].removesuffix(AA_SUFFIX)), int(item.split("=", 1)[1])


def run(servers: list[Server], ssb: SsbDataset, p: ParallelIndexParams, store: RunStore) -> int:
    """Build every cell (warm-ups first, then round robin); returns how many builds ran now. The kit's index
    is gone afterwards from every server the kit may drop things on, whatever happened (see drop_all)."""
    dbname = database_name(ssb.sf)
    by_name = {s.name: s for s in servers}
    sets = p.column_sets()
    memory = build_memory(p)

    def measure(step) -> dict:
        workers, k = parse_cell(step.condition, step.item)
        rec, obs = build(by_name[step.server], dbname, sets[k], workers, memory, timeout_s=p.statement_timeout_s)
        if not step.warmup and step.repetition == 0 and not step.condition.endswith(AA_SUFFIX):
            # the server's own words for one build per cell, kept raw beside the numbers
            store.save_text(f"{EXPERIMENT}/{step.server}/workers{workers}-columns{k}.txt", "\n".join(obs.messages))
        return rec

    try:
        ran = run_steps(steps(servers, p), store, EXPERIMENT, measure, desc="CREATE INDEX", remeasure=True)
    finally:
        drop_all(servers, dbname)
    outcomes.require_measured(store, [EXPERIMENT], [s.name for s in servers])
    return ran


def drop_all(servers: list[Server], dbname: str) -> None:
    """Drop the kit's index on every server params let it drop things on (never elsewhere). Each server on
    its own: one that cannot be reached is logged and the others are still cleaned, and an exception already
    on its way out of the run is not replaced by a cleanup failure."""
    for srv in servers:
        if not srv.allow_destructive:
            continue
        try:
            with srv.connect(dbname) as conn:
                drop_index(conn)
        except Exception as e:  # logged, not raised: see the docstring
            log.warning("%s: could not drop index %s after the run: %s", srv.name, INDEX, str(e).strip())


def setup(servers: list[Server], ssb: SsbDataset, p: ParallelIndexParams, store: RunStore) -> pl.DataFrame:
    """prepare, then one row per server of what the builds run under (derived table parallel_index_setup)."""
    status = {r["server"]: r for r in prepare(servers, ssb, p)}
    dbname = database_name(ssb.sf)
    rows = [
        {"server": srv.name, "kind": srv.kind}
        | in_force(srv, dbname, p)
        | {
            "configure_status": status[srv.name]["status"],
            "configure_reason": status[srv.name]["reason"],
            "cores": os.cpu_count(),
            "sf": ssb.sf,
            "seed": ssb.seed,
            "prewarm": ssb.prewarm,
            "database": dbname,
            "key_columns": ",".join(p.key_columns),
            "column_counts": ",".join(map(str, sorted(p.column_counts))),
            "worker_counts": ",".join(map(str, p.workers())),
            "n_workers": p.n_workers(),
            "n_workers_default": "this machine's cores"
            if p.max_workers is None and p.worker_counts is None
            else "params",
            "repetitions": p.repetitions,
            "warmups": p.warmups,
            "warmup_cells": p.warmup_cells,
            "shuffle_seed": p.shuffle_seed,
            "maintenance_work_mem_param": p.maintenance_work_mem,
        }
        for srv in servers
    ]
    # kept as first recorded in the run (columns in order): the table is the store's, for derive as for the notebook
    store.save_json(f"{EXPERIMENT}/setup.json", rows, keep_order=True)
    return pl.from_dicts(store.load_json(f"{EXPERIMENT}/setup.json"), infer_schema_length=None)


def finish(servers: list[Server], ssb: SsbDataset) -> list[dict]:
    """Back to the SSB stage's settings (a reload unless the stage raised a restart-only setting)."""
    return [{"server": s.name} | s.configure(dict(ssb.stage_settings)) for s in servers]


def run_stage(session: Session) -> StageResult:
    """Notebook 60's measuring on the session's servers: the SSB dataset of its `ssb:` params on each (loaded
    where notebook 10 did not), then on every server that holds it and may take the index, `setup`, the builds
    (`run`) and `finish`. `seen`: `setup` (one row per server: what the builds run under), `loads`, `finish`."""
    t0 = time.monotonic()
    ssb, p, store = session.params.ssb, session.params.parallel_index, session.store
    ssb_stage.prepare(session.servers, ssb)
    loads = ssb_stage.load_all(session.servers, ssb, store)  # skipped when notebook 10 already loaded this dataset
    targets = usable(store, ssb_stage.usable(store, session.servers, loads, EXPERIMENT))
    seen = {"loads": ssb_stage.load_table(loads)}
    if not targets:
        return StageResult(steps_run=0, wall_s=time.monotonic() - t0, servers=[], seen=seen)
    seen["setup"] = setup(targets, ssb, p, store)
    ran = run(targets, ssb, p, store)
    seen["finish"] = finish(targets, ssb)
    return StageResult(steps_run=ran, wall_s=time.monotonic() - t0, servers=[t.name for t in targets], seen=seen)

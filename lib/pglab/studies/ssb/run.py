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
  (module jit_block, methodology rule 17): each server's database read into memory (`warm_database`), its warm-up
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
from collections.abc import Callable
from functools import partial

import polars as pl

from ...core import replicas
from ...core.run import outcomes
from ...core.run.schedule import Step, plan, run_steps
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers.db import explain_json, plan_shape, set_statement_timeout, timed_statement
from ...core.servers.servers import Connections, Server, matches_version
from ...core.store import RunStore
from ...datasets.ssb import query_sql
from ...datasets.ssb import stage as ssb_stage
from ...datasets.ssb.answers import result_checksum
from ...datasets.ssb.load import LoadResult, database_name
from ...pgtools.explain import gather_workers, parse_plan
from . import reference as ref
from .jit_block import run_jit_block
from .params import JIT_MODES, SsbParams

EXPERIMENT = "ssb"
SWEEP = "ssb_sweep"
FACTS = "ssb/facts.json"
S1_SF = 70  # study S1's scale factor
DEFAULT_MIN_SCAN_KB = 8192  # min_parallel_table_scan_size's default, 8MB


def workers(p: SsbParams) -> int:
    return p.workers or os.cpu_count() or 1


def jit_workers(p: SsbParams) -> int:
    """Parallel workers per Gather in the JIT block (ssb.jit_workers; null: one core for the leader, the rest)."""
    return p.jit_workers or max((os.cpu_count() or 1) - 1, 1)


def workers_of(server: Server, p: SsbParams) -> int:
    return jit_workers(p) if in_jit_block(server, p) else workers(p)


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


def in_jit_block(server: Server, p: SsbParams) -> bool:
    """Whether the server is measured in the JIT block (`jit_block.run_jit_block`): one added for its JIT (not one of
    ssb.versions) where ssb.jit_sf is set, even when jit_sf is ssb.sf."""
    return p.jit_sf is not None and not version_server(server, p)


def scales(servers: list[Server], p: SsbParams) -> dict[str, float]:
    """The SSB scale factor of each server: ssb.jit_sf for the servers added for their JIT only (the JIT claims'
    regime), ssb.sf for the others."""
    return {s.name: p.jit_sf if in_jit_block(s, p) else p.sf for s in servers}


def scale_groups(servers: list[Server], p: SsbParams) -> list[tuple[float, int, int, list[Server]]]:
    """(sf, repetitions, warm-ups, servers) of each group timed in rounds of its own: the servers at ssb.sf first,
    then the JIT block (`in_jit_block`, at ssb.jit_sf, its own rounds and warm-ups)."""
    main = [s for s in servers if not in_jit_block(s, p)]
    block = [s for s in servers if in_jit_block(s, p)]
    out = [(p.sf, p.repetitions, p.warmups, main)] if main else []
    if block:
        warm = p.warmups if p.jit_warmups is None else p.jit_warmups
        out.append((p.jit_sf, p.jit_repetitions or p.repetitions, warm, block))
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


def jit_block(group: list[Server], p: SsbParams) -> bool:
    """Whether a group of scale_groups is the JIT block (`jit_block.run_jit_block`): the servers added for their JIT
    (`in_jit_block`), measured one database at a time."""
    return bool(group) and all(in_jit_block(s, p) for s in group)


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
    try:
        return run_steps(steps, store, experiment, partial(_execute, p, settings_of, conns), desc=desc, remeasure=True)
    finally:
        conns.close()


def _execute(p: SsbParams, settings_of: Callable[[str], dict], conns: Connections, step: Step) -> dict:
    """One timed execution of the step's query on its server, in its condition's settings: the record's fields (the
    time, or the error as data)."""
    conn = conns.get(step.server, step.condition, settings_of(step.condition))
    t = timed_statement(conn, query_sql(p.query_set, step.item), timeout_s=p.statement_timeout_s)
    if not t.ok:
        return {"value": None, "unit": "s", "error": t.error, "sqlstate": t.sqlstate}
    return {"value": t.elapsed_s, "unit": "s", "rows": t.rowcount, "checksum": result_checksum(t.rows)}


def run_modes(servers: list[Server], p: SsbParams, store: RunStore) -> pl.DataFrame:
    """Time every available (server, mode, query), each scale's servers in rounds of their own (scale_groups);
    returns the availability table."""
    settings_of = partial(mode_settings, n_workers=workers(p))
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
        if jit_block(group, p):  # one database at a time, warmed, its disk reads and JIT counters recorded
            block_settings = partial(mode_settings, n_workers=jit_workers(p))
            run_jit_block(group, p, store, EXPERIMENT, cells, reps, warm, sf, partial(_execute, p, block_settings))
            continue
        desc = "SSB queries"
        _timed_runs(group, p, store, EXPERIMENT, cells, reps, settings_of, desc, sf, warm)
    return pl.DataFrame(
        rows, schema={"server": pl.String, "mode": pl.String, "available": pl.Boolean, "reason": pl.String}
    )


def run_sweep(servers: list[Server], p: SsbParams, store: RunStore) -> list[int]:
    counts = p.worker_sweep if p.worker_sweep is not None else list(range(workers(p) + 1))
    cells = [(s.name, f"workers={k}", q) for s in servers for k in counts for q in p.sweep_query_ids()]
    _timed_runs(servers, p, store, SWEEP, cells, p.sweep_repetitions, sweep_settings, "SSB worker sweep")
    return counts


def capture_plans(servers: list[Server], p: SsbParams, store: RunStore, available: pl.DataFrame) -> None:
    """One untimed EXPLAIN ANALYZE (JSON) and EXPLAIN (COSTS OFF) per available (server, mode, query)."""
    sf_of = scales(servers, p)
    for s in servers:
        for mode in available.filter(pl.col("available") & (pl.col("server") == s.name))["mode"]:
            if mode == "parallel_aa":  # the same settings as parallel: its plan is parallel's
                continue
            with s.connect(database_name(sf_of[s.name]), settings=mode_settings(mode, workers_of(s, p))) as conn:
                set_statement_timeout(conn, p.statement_timeout_s)
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
    return _plans_table(store, servers, qids, lambda s, q: study_plan_path(s, allowed, q), {"allowed_workers": allowed})


def _plans_table(store: RunStore, servers: list[str], qids: list[str], path_of, given: dict[str, int]) -> pl.DataFrame:
    """Per (server, query), the `given` settings and the top Gather's workers and driving table in the plan-only
    EXPLAIN kept at path_of(server, query) (capture_plan_only)."""
    rows = []
    for s in servers:
        for q in qids:
            gathers = gather_workers(parse_plan(store.load_json(path_of(s, q))))
            top = gathers.select("workers_planned", "leftmost_relation").head(1).to_dicts()
            rows.append({"server": s, "query": q} | given | (top[0] if top else NO_GATHER))
    schema = {"server": pl.String, "query": pl.String} | dict.fromkeys(given, pl.Int64)
    return pl.DataFrame(rows, schema=schema | {"workers_planned": pl.Int64, "leftmost_relation": pl.String})


NO_GATHER = {"workers_planned": 0, "leftmost_relation": None}  # a plan without a Gather plans no workers


def record_facts(servers: list[Server], p: SsbParams, store: RunStore, loads: list[LoadResult]) -> dict:
    """Cores, workers and each server's version and dataset (generator flavor and version), kept in the run;
    with the servers' order (the last is the versions' baseline) and the notebook's SSB params (overrides
    applied), so that ssb.derive needs no server and no notebook."""
    data = {r.server: r.dataset for r in loads if not r.refused}
    facts = {
        "cores": os.cpu_count(),
        "workers": workers(p),
        "jit_workers": jit_workers(p) if any(in_jit_block(s, p) for s in servers) else None,
        "sf": p.sf,
        "query_set": p.query_set,
        "server_order": [s.name for s in servers],
        "jit_block": [s.name for s in servers if in_jit_block(s, p)],  # measured apart: no sweep, no version figure
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
    given = {"allowed_workers": allowed, "min_parallel_table_scan_kb": scaled_min_scan_kb(p.sf)}
    return _plans_table(store, servers, p.query_ids(), lambda s, q: scaled_plan_path(s, allowed, q), given)


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
    # the sweep and the plan-only EXPLAINs on the versions' servers only (the JIT block is for the JIT claims)
    at_sf = [t for t in targets if not in_jit_block(t, p)]
    seen["sweep_workers"] = run_sweep(at_sf, p, store) if at_sf else []
    names = [t.name for t in targets]
    outcomes.require_measured(store, [EXPERIMENT], names)
    outcomes.require_measured(store, [SWEEP], [t.name for t in at_sf])
    # the plan-only EXPLAINs with the study's 5 allowed workers (as is and with the scan threshold scaled to SF / 70)
    capture_study_plans(at_sf, p, store, allowed=ref.S1_ALLOWED_WORKERS)
    capture_scaled_plans(at_sf, p, store, allowed=ref.S1_ALLOWED_WORKERS)
    return StageResult(steps_run=_recorded(store) - before, wall_s=time.monotonic() - t0, servers=names, seen=seen)

"""The SSB experiments of studies S1 and S4: the 13 queries in serial / parallel / parallel + JIT modes on
every server, a worker sweep, and the plans that explain the times.

Where each thing happens:
- `run_modes` times every (server, mode, query) with warm-up and interleaved repetitions (pglab.core.schedule);
  each execution's result rows are checksummed, so a wrong answer anywhere shows up as a disagreement.
- `capture_plans` takes one untimed EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) and one
  EXPLAIN (COSTS OFF) per (server, mode, query), kept raw in the run's store and parsed with pglab.pgtools.explain.
- `run_sweep` times each query at max_parallel_workers_per_gather = 0 … N (S4, test B).
- `executions`, `plans_table`, `checksum_agreement`, `derive` turn the raw store into the tidy tables of
  data/derived/<profile>/ssb_*.csv."""

from __future__ import annotations

import json
import os

import polars as pl

from ...core import stats
from ...core.db import explain_json, plan_shape, timed_statement
from ...core.schedule import plan, run_steps
from ...core.servers import Connections, Server, matches_version
from ...core.store import RunStore
from ...datasets.ssb import query_sql
from ...datasets.ssb.answers import result_checksum
from ...datasets.ssb.load import database_name
from ...pgtools.explain import gather_workers, parse_plan
from .params import JIT_MODES, SsbParams

EXPERIMENT = "ssb"
SWEEP = "ssb_sweep"


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
    return any(matches_version(server.install, v) for v in p.versions)


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


def _timed_runs(servers, p: SsbParams, store: RunStore, experiment: str, cells, repetitions, settings_of, desc):
    steps = plan(cells, repetitions, p.warmups, p.shuffle_seed)
    conns = Connections({s.name: s for s in servers}, database_name(p.sf))

    def measure(step):
        conn = conns.get(step.server, step.condition, settings_of(step.condition))
        t = timed_statement(conn, query_sql(p.query_set, step.item), timeout_s=p.statement_timeout_s)
        if not t.ok:
            return {"value": None, "unit": "s", "error": t.error, "sqlstate": t.sqlstate}
        return {"value": t.elapsed_s, "unit": "s", "rows": t.rowcount, "checksum": result_checksum(t.rows)}

    try:
        return run_steps(steps, store, experiment, measure, desc=desc)
    finally:
        conns.close()


def run_modes(servers: list[Server], p: SsbParams, store: RunStore) -> pl.DataFrame:
    """Time every available (server, mode, query); returns the availability table."""
    n = workers(p)
    avail = {
        s.name: availability(s, p.modes, p, aa_here=p.aa_servers == "all" or i == 0) for i, s in enumerate(servers)
    }
    rows = [
        {"server": s, "mode": m, "available": reason is None, "reason": reason}
        for s, modes in avail.items()
        for m, reason in modes.items()
    ]
    store.save_json("ssb/availability.json", rows)
    cells = [
        (s, m, q) for s, modes in avail.items() for m, r in modes.items() if r is None for q in p.mode_query_ids(m)
    ]
    _timed_runs(servers, p, store, EXPERIMENT, cells, p.repetitions, lambda m: mode_settings(m, n), "SSB queries")
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
    n = workers(p)
    timeout_ms = str(max(1, round(p.statement_timeout_s * 1000)))
    for s in servers:
        for mode in available.filter(pl.col("available") & (pl.col("server") == s.name))["mode"]:
            if mode == "parallel_aa":  # the same settings as parallel: its plan is parallel's
                continue
            with s.connect(database_name(p.sf), settings=mode_settings(mode, n)) as conn:
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
    no cores), kept once at path_of(server, query): the study's and the scaled plans (ssb.study_plans)."""
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


# -- derived tables ------------------------------------------------------------------------------------------


def executions(store: RunStore, experiment: str = EXPERIMENT) -> pl.DataFrame:
    """Every timed execution (warm-ups included, flagged), one row each."""
    df = store.records(experiment)
    if df.is_empty():
        return df
    for col, dtype in (("error", pl.String), ("checksum", pl.String), ("rows", pl.Int64), ("sqlstate", pl.String)):
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=dtype).alias(col))
    cond = "mode" if experiment == EXPERIMENT else "workers"
    df = df.select(
        "server",
        pl.col("condition").alias(cond),
        pl.col("item").alias("query"),
        "repetition",
        "warmup",
        "round",
        pl.col("value").cast(pl.Float64).alias("seconds"),
        "rows",
        "checksum",
        "error",
        "sqlstate",
        "ts",
    )
    if experiment == SWEEP:
        df = df.with_columns(pl.col("workers").str.split("=").list.get(1).cast(pl.Int64))
    return df


def plans_table(p: SsbParams, store: RunStore, available: pl.DataFrame, n_workers: int | None = None) -> pl.DataFrame:
    """One row per Gather of each captured plan (one row without gather for a plan that has none): workers
    planned and launched, the scan driving it, the JIT block, planning/execution time and the fingerprint.
    n_workers: the parallel modes' worker count the run used (its facts), else this machine's `workers(p)`."""
    rows = []
    n = n_workers or workers(p)
    for r in available.filter("available").iter_rows(named=True):
        if r["mode"] == "parallel_aa":
            continue
        for q in p.query_ids():
            base = f"ssb/plans/{r['server']}/{r['mode']}/{q}"
            if not store.has_artifact(base + ".json"):
                continue
            doc = json.loads(store.artifact_path(base + ".json").read_text())
            rec = {
                "server": r["server"],
                "mode": r["mode"],
                "query": q,
                "allowed_workers": 0 if r["mode"] == "serial" else n,
                "query_set": p.query_set,
            }
            if isinstance(doc, dict) and "error" in doc:
                rows.append(rec | {"error": doc["error"]})
                continue
            parsed = parse_plan(doc)
            jit = parsed.jit or {}
            in_force = {}
            if store.has_artifact(base + ".settings.json"):  # the JIT thresholds the plan was made under
                in_force = json.loads(store.artifact_path(base + ".settings.json").read_text())
            rec |= {k: float(in_force[k]) if k in in_force else None for k in JIT_THRESHOLDS}
            rec |= {
                "fingerprint": parse_plan(store.artifact_path(base + ".costs_off.txt").read_text()).fingerprint,
                "planning_ms": parsed.planning_ms,
                "execution_ms": parsed.execution_ms,
                "jit_functions": jit.get("functions"),
                "jit_generation_ms": jit.get("generation_ms"),
                "jit_inlining_ms": jit.get("inlining_ms"),
                "jit_optimization_ms": jit.get("optimization_ms"),
                "jit_emission_ms": jit.get("emission_ms"),
                "jit_total_ms": jit.get("total_ms"),
            }
            gathers = gather_workers(parsed)
            if gathers.is_empty():
                rows.append(rec | {"gather_id": None})
            for g in gathers.iter_rows(named=True):
                rows.append(rec | {k: v for k, v in g.items() if k != "node_id"})
    df = pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame({"server": []})
    # explicit types: a column that is null everywhere (no JIT at this scale) must still compare as numbers
    return df.with_columns(
        pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in PLAN_TYPES.items()
    )


JIT_THRESHOLDS = ("jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost")
PLAN_TYPES = {
    "server": pl.String,
    "mode": pl.String,
    "query": pl.String,
    "allowed_workers": pl.Int64,
    "fingerprint": pl.String,
    "planning_ms": pl.Float64,
    "execution_ms": pl.Float64,
    "jit_functions": pl.Int64,
    "jit_generation_ms": pl.Float64,
    "jit_inlining_ms": pl.Float64,
    "jit_optimization_ms": pl.Float64,
    "jit_emission_ms": pl.Float64,
    "jit_total_ms": pl.Float64,
    "gather_id": pl.Int64,
    "node_type": pl.String,
    "workers_planned": pl.Int64,
    "workers_launched": pl.Int64,
    "leftmost_relation": pl.String,
    "error": pl.String,
    "jit_above_cost": pl.Float64,
    "jit_inline_above_cost": pl.Float64,
    "jit_optimize_above_cost": pl.Float64,
    "query_set": pl.String,
}


def checksum_agreement(execs: pl.DataFrame) -> pl.DataFrame:
    """Per query: the distinct result checksums over all servers and modes. More than one is a wrong answer."""
    ok = execs.filter(pl.col("error").is_null() & pl.col("checksum").is_not_null())
    return (
        ok.group_by("query")
        .agg(
            pl.col("checksum").n_unique().alias("distinct_checksums"),
            pl.col("checksum").unique().sort().str.join(" ").alias("checksums"),
            pl.len().alias("executions"),
        )
        .with_columns(agree=pl.col("distinct_checksums") == 1)
        .sort("query")
    )


def readable(verdict: pl.Expr) -> pl.Expr:
    """Verdicts on time ratios in words: a lower time is faster."""
    return verdict.replace({"lower": "faster", "higher": "slower"})


def derive(execs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Summary per (server, mode, query); parallel speed-up over serial; the JIT effect over parallel."""
    timed = execs.filter(~pl.col("warmup"))
    return {
        "summary": stats.summarize(timed, by=["server", "mode", "query"], value="seconds"),
        "speedup": stats.compare(
            timed, by=["server", "query"], condition_col="mode", baseline="serial", value="seconds"
        ),
        "jit": stats.compare(
            timed.filter(pl.col("mode").is_in(["parallel", "parallel_jit"])),
            by=["server", "query"],
            condition_col="mode",
            baseline="parallel",
            value="seconds",
        ),
    }


def version_ratios(execs: pl.DataFrame, baseline_server: str) -> pl.DataFrame:
    """Each server's time relative to one server's, per mode and query (the S1 version comparison)."""
    timed = execs.filter(~pl.col("warmup"))
    return stats.compare(timed, by=["mode", "query"], condition_col="server", baseline=baseline_server, value="seconds")

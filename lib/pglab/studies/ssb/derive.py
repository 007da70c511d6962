"""The SSB notebooks' derived tables from the run's raw store alone (`python -m pglab derive` and the notebooks
call the same functions): `load` for notebook 10 (the loads, the data's selectivity), `derive` for notebook 20
(the timed runs, plans, answers, paired comparisons, versions and the worker sweep).

What the notebooks read from a live server is recorded first: each server's load (`record_load`), the
filter factors counted on its data (`record_selectivity`), and notebook 20's facts (servers in order,
versions, datasets, cores, workers, the SSB params with the notebook's overrides; `run.record_facts`)."""

from __future__ import annotations

import json

import polars as pl

from ...core import replicas
from ...core.config import CommonParams
from ...core.run import measurements, outcomes
from ...core.stats import stats
from ...core.store import RunStore
from ...datasets.ssb.load import LoadResult
from ...datasets.ssb.stage import EXP_LOAD, load_rows
from ...pgtools.explain import gather_workers, parse_plan
from . import paired_tables
from . import reference as ref
from .jit_block import io_path
from .params import SsbParams
from .run import EXPERIMENT, FACTS, SWEEP, scaled_plans_table, study_plans_table, workers

LOADS = "ssb/load"  # <server>.json: the server's rows of ssb_load, as notebook 10 loaded (or found) the data
SELECTIVITY = "ssb/selectivity"  # <server>.json: its rows of ssb_selectivity
AVAILABILITY = "ssb/availability.json"  # run.run_modes: which modes each server can run, and why not
AVAILABILITY_SCHEMA = {"server": pl.String, "mode": pl.String, "available": pl.Boolean, "reason": pl.String}


def record_load(store: RunStore, results: list[LoadResult]) -> None:
    """Each server's rows of the load table, first record of the run kept (refused loads are skips)."""
    for r in results:
        if not r.refused:
            store.save_json(f"{LOADS}/{r.server}.json", load_rows(r), keep_order=True)


def record_selectivity(store: RunStore, server: str, rows: list[dict]) -> None:
    store.save_json(f"{SELECTIVITY}/{server}.json", rows, keep_order=True)


def _per_server(store: RunStore, folder: str) -> list[list[dict]]:
    d = store.artifact_path(folder)
    return [store.load_json(f"{folder}/{f.name}") for f in sorted(d.glob("*.json"))] if d.is_dir() else []


def skipped(store: RunStore, experiments: list[str]) -> pl.DataFrame:
    return outcomes.skipped(store, experiments).sort("experiment", "server")


def load(store: RunStore, params: CommonParams | None = None) -> dict[str, pl.DataFrame]:
    """Notebook 10's tables: the skips, and (when a server holds the dataset) the loads and the selectivity."""
    out = {"ssb_load_skipped": skipped(store, [EXP_LOAD])}
    loads = [row for rows in _per_server(store, LOADS) for row in rows]
    if not loads:
        return out
    out["ssb_load"] = pl.DataFrame(loads, infer_schema_length=None)
    sel = _per_server(store, SELECTIVITY)
    if sel:
        out["ssb_selectivity"] = pl.concat([pl.DataFrame(rows) for rows in sel])
    return out


def ssb_params(facts: dict, params: CommonParams | None) -> SsbParams:
    """The SSB params notebook 20 ran with (its overrides applied), else the run's."""
    if "ssb_params" in facts:
        return SsbParams(**facts["ssb_params"])
    return params.ssb if params is not None else SsbParams()


def sweep_summary(sweep: pl.DataFrame) -> pl.DataFrame:
    """Per server, workers and query: median, min, max of the timed sweep runs, and perfect scaling from the
    serial median, t(0) / (workers + 1)."""
    sw = (
        sweep.filter(~pl.col("warmup"))
        .group_by("server", "workers", "query")
        .agg(pl.median("seconds").alias("median"), pl.min("seconds").alias("min"), pl.max("seconds").alias("max"))
    )
    ideal = sw.filter(workers=0).select("server", "query", pl.col("median").alias("t0"))
    return (
        sw.join(ideal, on=["server", "query"])
        .with_columns(ideal=pl.col("t0") / (pl.col("workers") + 1))
        .sort("server", "query", "workers")
    )


def _measurements(store: RunStore, study: str, experiments: list[str]) -> dict[str, pl.DataFrame]:
    m = measurements.table(store, study, experiments)
    return {} if m is None else {f"{study}_measurements": m}


def own_loads(store: RunStore, m: pl.DataFrame) -> pl.DataFrame:
    """Measurements with only the loads notebook 10 made (server and dataset, as `record_load` names them): a
    later study may load SSB at another scale into the same server or into another (its own set-up: the index
    builds load SF 1 into pg15, which notebook 10 loaded at SF 10) after notebook 20 wrote ssb_measurements, and
    `pglab derive` must give what the notebook wrote."""
    loaded = sorted(
        {
            f"{row['server']}|sf={float(row['sf']):g},seed={row['seed']},{row['method']}"
            for rows in _per_server(store, LOADS)
            for row in rows
        }
    )
    mine = (pl.col("server") + "|" + pl.col("condition")).is_in(loaded)
    return m.filter((pl.col("experiment") != EXP_LOAD) | mine)


def read_facts(store: RunStore) -> dict:
    return json.loads(store.artifact_path(FACTS).read_text()) if store.has_artifact(FACTS) else {}


# -- the tables ----------------------------------------------------------------------------------------------


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
            in_force = {}
            if store.has_artifact(base + ".settings.json"):  # the JIT thresholds and workers the plan was made under
                in_force = json.loads(store.artifact_path(base + ".settings.json").read_text())
            allowed = in_force.get("max_parallel_workers_per_gather")  # the JIT block's may differ (jit_workers)
            rec = {
                "server": r["server"],
                "mode": r["mode"],
                "query": q,
                "allowed_workers": 0 if r["mode"] == "serial" else int(allowed) if allowed is not None else n,
                "query_set": p.query_set,
            }
            if isinstance(doc, dict) and "error" in doc:
                rows.append(rec | {"error": doc["error"]})
                continue
            parsed = parse_plan(doc)
            jit = parsed.jit or {}
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


def server_scales(facts: dict) -> dict[str, float]:
    """Each server's SSB scale factor (its dataset's; ssb.jit_sf gives the JIT servers their own)."""
    return {
        n: float((f.get("dataset") or {}).get("sf", facts.get("sf")) or 0) for n, f in facts.get("servers", {}).items()
    }


def checksum_agreement(execs: pl.DataFrame, scales: dict[str, float] | None = None) -> pl.DataFrame:
    """Per query (and scale, where servers hold SSB at more than one): the distinct result checksums over all
    servers and modes. More than one is a wrong answer."""
    ok = execs.filter(pl.col("error").is_null() & pl.col("checksum").is_not_null())
    by = ["query"]
    if scales and len(set(scales.values())) > 1:
        ok, by = ok.with_columns(sf=pl.col("server").replace_strict(scales, default=None)), ["sf", "query"]
    return (
        ok.group_by(by)
        .agg(
            pl.col("checksum").n_unique().alias("distinct_checksums"),
            pl.col("checksum").unique().sort().str.join(" ").alias("checksums"),
            pl.len().alias("executions"),
        )
        .with_columns(agree=pl.col("distinct_checksums") == 1)
        .sort(by)
    )


def summary(execs: pl.DataFrame) -> pl.DataFrame:
    """Median, min–max and the median's interval per (server, mode, query) of the timed executions."""
    return stats.summarize(execs.filter(~pl.col("warmup")), by=["server", "mode", "query"], value="seconds")


VERSIONS = ["mode", "query", "server", "baseline", "n_rounds", "ratio", "ci_low", "ci_high", "coverage"]


def versions(execs: pl.DataFrame, facts: dict, at_sf: list[str], estimate: str) -> pl.DataFrame | None:
    """Each server at ssb.sf over the oldest version's, per mode and query (and suite), as the version claims
    compare them (`paired_tables.server_comparisons`; 17 over 16 is ssb_versions_paired's row); None with one
    server."""
    servers = facts.get("servers", {})
    bases = [s for s, b in replicas.base_names(at_sf).items() if s == b]
    if len(bases) < 2:
        return None
    oldest = min(bases, key=lambda s: (servers.get(s, {}).get("major") or 10**6, at_sf.index(s)))
    t = paired_tables.server_comparisons(execs, facts, [s for s in bases if s != oldest], oldest, estimate)
    return t.rename({"low": "ci_low", "high": "ci_high"}).select(VERSIONS) if t.width else None


def fingerprints(plans: pl.DataFrame, facts: dict) -> pl.DataFrame:
    """One row per (query, mode, server): the server's version and its plan's fingerprint (EXPLAIN COSTS OFF)."""
    ver = {
        n: f"v{f['major']}.{f['minor']}" if f.get("major") is not None else None  # text, never a number
        for n, f in facts.get("servers", {}).items()
    }
    major = {n: f.get("major") for n, f in facts.get("servers", {}).items()}
    df = plans.filter(pl.col("fingerprint").is_not_null()).select("query", "mode", "server", "fingerprint").unique()
    return (
        df.with_columns(
            version=pl.col("server").replace_strict(ver, default=None, return_dtype=pl.String),
            major=pl.col("server").replace_strict(major, default=None, return_dtype=pl.Int64),
        )
        .select("query", "mode", "server", "version", "major", "fingerprint")
        .sort("query", "mode", "major", "server")
    )


def plan_changes(fp: pl.DataFrame) -> list[str]:
    """A sentence per (query, mode) whose plan differs between the run's versions."""
    out = []
    for (q, mode), g in fp.sort("query", "mode", "major", "server").group_by("query", "mode", maintain_order=True):
        if g["fingerprint"].n_unique() > 1 and g["version"].n_unique() > 1:
            groups = g.group_by("fingerprint", maintain_order=True).agg(pl.col("version").unique().sort())
            sides = " vs ".join("/".join(str(v) for v in vs if v) for vs in groups["version"])
            out.append(f"{q} ({mode}): the plan differs between versions ({sides})")
    return out


JIT_IO_SCHEMA = {
    "server": pl.String,
    "sf": pl.Float64,
    "database_bytes": pl.Int64,
    "disk_read_bytes": pl.Int64,  # the machine's, over the server's timed part (every process's reads count)
    "read_share": pl.Float64,
    "target_share": pl.Float64,
    "within_target": pl.Boolean,
    "timed_s": pl.Float64,
    "warmup_s": pl.Float64,
    "warm_s": pl.Float64,  # reading its database into memory
    "jit_counters": pl.String,  # where its executions' JIT times come from (null: none)
}


JIT_EXECUTION_COLUMNS = (
    "jit_functions",
    "jit_ms",
    "jit_generation_ms",
    "jit_inlining_ms",
    "jit_optimization_ms",
    "jit_emission_ms",
)


def jit_executions(store: RunStore) -> pl.DataFrame:
    """Every timed execution in a JIT mode that carries its JIT times (pg_stat_statements' sums around it, the
    leader's: jit_block.JitCounters): its wall time beside what compiling took, the compile/execution split from every
    execution rather than one EXPLAIN ANALYZE. Only a read that counted exactly one call of the statement is its
    execution's (jit_calls 1; more: another session ran it in between, and the sums are not this execution's).
    Empty for a run that recorded none."""
    df = store.records(EXPERIMENT)
    if df.is_empty() or "jit_ms" not in df.columns:
        return pl.DataFrame()
    df = df.filter(pl.col("jit_ms").is_not_null(), ~pl.col("warmup"))
    if "jit_calls" in df.columns:
        df = df.filter(pl.col("jit_calls") == 1)
    return df.select(
        "server",
        pl.col("condition").alias("mode"),
        pl.col("item").alias("query"),
        "round",
        "repetition",
        (pl.col("value").cast(pl.Float64) * 1000).alias("wall_ms"),
        *[pl.col(c).cast(pl.Float64) for c in JIT_EXECUTION_COLUMNS],
    )


def jit_io_table(store: RunStore, names: list[str]) -> pl.DataFrame:
    """The JIT block's servers, each measured alone (jit_block.run_jit_block): its database's size and the disk bytes
    the machine read while it was timed, against the target share (the times are the CPU's, not the disk's)."""
    rows = []
    for name in names:
        r = store.load_json(io_path(name))
        if r is None:
            continue
        row = {k: r.get(k) for k in JIT_IO_SCHEMA if k != "warm_s"}
        rows.append(row | {"warm_s": (r.get("warm") or {}).get("seconds")})
    return pl.from_dicts(rows, schema=JIT_IO_SCHEMA) if rows else pl.DataFrame(schema=JIT_IO_SCHEMA)


def derive(store: RunStore, params: CommonParams | None = None) -> dict[str, pl.DataFrame]:
    """Notebook 20's tables; only the skips when no server held the dataset (nothing was run)."""
    out = {"ssb_skipped": skipped(store, [EXPERIMENT])}
    facts = read_facts(store)
    avail = store.load_json(AVAILABILITY)
    if not facts or avail is None:
        return out
    p = ssb_params(facts, params)
    names = facts.get("server_order") or sorted(facts.get("servers", {}))
    available = pl.DataFrame(avail, schema=AVAILABILITY_SCHEMA)
    execs, sweep = executions(store), executions(store, SWEEP)
    je = jit_executions(store)
    paired = paired_tables.derive(execs, sweep, facts, p.estimate, je)
    plans = plans_table(p, store, available, n_workers=facts.get("workers"))
    scales = server_scales(facts)
    checks = checksum_agreement(
        pl.concat([execs, sweep.rename({"workers": "mode"}).with_columns(pl.col("mode").cast(pl.String))]), scales
    )
    out |= {
        "ssb_executions": execs,
        "ssb_summary": summary(execs),
        # the descriptive views of ssb_paired's comparisons: one ratio and interval per comparison
        "ssb_speedup": paired_tables.mode_view(paired["ssb_paired"], execs, "parallel", "serial"),
        "ssb_jit": paired_tables.mode_view(
            paired["ssb_paired"],
            paired_tables.with_net_of_compile(execs, je),
            paired_tables.jit_mode(paired["ssb_paired"]),
            "parallel",
        ),
        "ssb_plans": plans,
        "ssb_checksums": checks,
        "ssb_availability": available,
        "ssb_sweep": sweep,
        "ssb_fingerprints": fingerprints(plans, facts),
        **paired,
    }
    # the sweep, the plan-only EXPLAINs and the versions at ssb.sf, not the JIT block (measured apart, perhaps at
    # another scale)
    block = set(facts.get("jit_block") or [])
    at_sf = [n for n in names if scales.get(n, p.sf) == p.sf and n not in block]
    if (io := jit_io_table(store, names)).height:  # runs before the JIT block was measured alone have none
        out["ssb_jit_io"] = io
    if je.height:
        out["ssb_jit_executions"] = je
    out["ssb_plans_study_workers"] = study_plans_table(store, at_sf, p.query_ids(), ref.S1_ALLOWED_WORKERS)
    out["ssb_plans_scaled"] = scaled_plans_table(store, at_sf, p, ref.S1_ALLOWED_WORKERS)
    if (vs := versions(execs, facts, at_sf, p.estimate)) is not None:
        out["ssb_versions"] = vs
    out["ssb_sweep_summary"] = sweep_summary(sweep)
    return out | {k: own_loads(store, t) for k, t in _measurements(store, "ssb", [EXP_LOAD, EXPERIMENT, SWEEP]).items()}

"""The SSB notebooks' derived tables from the run's raw store alone (`python -m pglab derive` and the notebooks
call the same functions): `load` for notebook 10 (the loads, the data's selectivity), `derive` for notebook 20
(the timed runs, plans, answers, paired comparisons, versions and the worker sweep).

What the notebooks read from a live server is recorded first: each server's load (`record_load`), the
filter factors counted on its data (`record_selectivity`), and notebook 20's facts (servers in order,
versions, datasets, cores, workers, the SSB params with the notebook's overrides; `study_plans.record_facts`)."""

from __future__ import annotations

import polars as pl

from ...core import measurements, outcomes
from ...core.config import CommonParams
from ...core.store import RunStore
from ...datasets.ssb.load import LoadResult
from ...datasets.ssb.stage import EXP_LOAD, load_rows
from . import experiment as ex
from . import paired_tables, study_plans
from . import reference as ref
from .params import SsbParams

LOADS = "ssb/load"  # <server>.json: the server's rows of ssb_load, as notebook 10 loaded (or found) the data
SELECTIVITY = "ssb/selectivity"  # <server>.json: its rows of ssb_selectivity
AVAILABILITY = "ssb/availability.json"  # ex.run_modes: which modes each server can run, and why not
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


def derive(store: RunStore, params: CommonParams | None = None) -> dict[str, pl.DataFrame]:
    """Notebook 20's tables; only the skips when no server held the dataset (nothing was run)."""
    out = {"ssb_skipped": skipped(store, [ex.EXPERIMENT])}
    facts = study_plans.read_facts(store)
    avail = store.load_json(AVAILABILITY)
    if not facts or avail is None:
        return out
    p = ssb_params(facts, params)
    names = facts.get("server_order") or sorted(facts.get("servers", {}))
    available = pl.DataFrame(avail, schema=AVAILABILITY_SCHEMA)
    execs, sweep = ex.executions(store), ex.executions(store, ex.SWEEP)
    tables = ex.derive(execs)
    plans = ex.plans_table(p, store, available, n_workers=facts.get("workers"))
    checks = ex.checksum_agreement(
        pl.concat([execs, sweep.rename({"workers": "mode"}).with_columns(pl.col("mode").cast(pl.String))])
    )
    out |= {
        "ssb_executions": execs,
        "ssb_summary": tables["summary"],
        "ssb_speedup": tables["speedup"],
        "ssb_jit": tables["jit"],
        "ssb_plans": plans,
        "ssb_checksums": checks,
        "ssb_availability": available,
        "ssb_sweep": sweep,
        "ssb_fingerprints": study_plans.fingerprints(plans, facts),
        **paired_tables.derive(execs, sweep, facts, p.estimate),
    }
    out["ssb_plans_study_workers"] = ex.study_plans_table(store, names, p.query_ids(), ref.S1_ALLOWED_WORKERS)
    out["ssb_plans_scaled"] = study_plans.scaled_plans_table(store, names, p, ref.S1_ALLOWED_WORKERS)
    if len(names) > 1:  # each server against the last one
        vr = ex.version_ratios(execs, baseline_server=names[-1])
        out["ssb_versions"] = vr.select(
            "mode",
            "query",
            "server",
            "baseline",
            "ratio",
            "ci_low",
            "ci_high",
            ex.readable(pl.col("verdict")).alias("verdict"),
        )
    out["ssb_sweep_summary"] = sweep_summary(sweep)
    m = _measurements(store, "ssb", [EXP_LOAD, ex.EXPERIMENT, ex.SWEEP])
    # the loads of notebook 10's servers only: a later study may load SSB into another server (its own set-up),
    # after notebook 20 wrote this table, and `pglab derive` must give what the notebook wrote
    loaded = sorted({row["server"] for rows in _per_server(store, LOADS) for row in rows})
    return out | {
        k: t.filter((pl.col("experiment") != EXP_LOAD) | pl.col("server").is_in(loaded)) for k, t in m.items()
    }

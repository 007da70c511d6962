"""What notebook 20 records beside the timings so that derivation needs no live server: the run's facts
(cores, workers, each server's version and dataset), the plan-only EXPLAIN of S1's q4.3 question at the study's
table-size ratios, and the plan fingerprints per query across the run's versions."""

from __future__ import annotations

import json
import os

import polars as pl

from ...core.servers import Server
from ...core.store import RunStore
from ...datasets.ssb.load import LoadResult
from ...pgtools.explain import gather_workers, parse_plan
from .experiment import capture_plan_only, mode_settings, workers
from .params import SsbParams

FACTS = "ssb/facts.json"
S1_SF = 70  # study S1's scale factor
DEFAULT_MIN_SCAN_KB = 8192  # min_parallel_table_scan_size's default, 8MB


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


def read_facts(store: RunStore) -> dict:
    return json.loads(store.artifact_path(FACTS).read_text()) if store.has_artifact(FACTS) else {}


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

"""The experiments' raw store -> tidy tables (data/derived/<profile>/experiments_*.csv), with no server.

- experiments_setup: one row per experiment: its question, data, workload, factors, baseline, hypothesis, rounds.
- experiments_cells: every (experiment, server, condition, item) and whether it was testable here (else why).
- experiments_runs: every measurement (warm-ups flagged), with its error; pgbench runs with their latency
  percentiles.
- experiments_summary: median and its interval per (experiment, server, condition, item, metric).
- experiments_paired: each condition against the baseline within rounds (and with a server factor, each server
  against the baseline server under each condition): B / A with its interval (`core.paired.paired_compare`).
- experiments_noise: the A/A control's noise floor per (experiment, server, metric).
- experiments_verdicts: one row per comparison of the experiment's main metric: with `expect`, the one rule's
  verdict on the hypothesis (`core.verdicts.verdict`, the declared tolerance); without, B / A beyond the A/A
  floor or not.
- experiments_plans: per SQL cell its plan's root node, shape fingerprint and execution time (the JSON is raw).
- experiments_errors: every failed measurement, with its cell and server."""

from __future__ import annotations

import polars as pl

from ...core import between_runs, noise, paired, replicas, stats
from ...core import verdicts as v
from ...core.store import RunStore
from ...pgtools.explain import parse_plan
from . import pgbench_params, pgbench_tables
from .params import AA_SUFFIX, SERVER, Experiment
from .run import PGBENCH_ITEM, plan_path, setup_path, store_name

SUITE = "suite"  # the SQL workload's items summed per round: the whole report's time
METRICS = {"sql": (("time_s", "lower"),), "pgbench": (("tps", "higher"), ("p95_ms", "lower"))}

RUN_TYPES = {
    "experiment": pl.String,
    "server": pl.String,
    "condition": pl.String,
    "item": pl.String,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "round": pl.Int64,
    "value": pl.Float64,
    "unit": pl.String,
    "error": pl.String,
    "sqlstate": pl.String,
    "rows": pl.Int64,
    "n": pl.Int64,
    "p50_ms": pl.Float64,
    "p95_ms": pl.Float64,
    "p99_ms": pl.Float64,
    "max_ms": pl.Float64,
}


def main_metric(e: Experiment) -> str:
    return METRICS[e.workload.kind][0][0]


def runs(store: RunStore, e: Experiment) -> pl.DataFrame:
    df = store.records(store_name(e))
    if df.is_empty():
        return pl.DataFrame(schema=RUN_TYPES)
    df = df.with_columns(experiment=pl.lit(e.name))
    return df.select(
        pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in RUN_TYPES.items()
    )


def long_values(e: Experiment, r: pl.DataFrame) -> pl.DataFrame:
    """Timed values as (experiment, server, condition, item, round, metric, value); SQL adds the suite per round
    (rounds where every item of the cell succeeded)."""
    t = r.filter(~pl.col("warmup") & pl.col("value").is_not_null())
    keys = ["experiment", "server", "condition", "item", "round"]
    if e.workload.kind == "sql":
        out = t.select(*keys, metric=pl.lit("time_s"), value="value")
        n_items = r["item"].n_unique()
        suite = (
            out.group_by("experiment", "server", "condition", "round", "metric")
            .agg(pl.col("value").sum(), pl.len().alias("_n"))
            .filter(pl.col("_n") == n_items)
            .drop("_n")
            .with_columns(item=pl.lit(SUITE))
        )
        return pl.concat([out, suite.select(out.columns)]) if n_items > 1 else out
    return pl.concat(
        [
            t.select(*keys, metric=pl.lit("tps"), value="value"),
            t.filter(pl.col("p95_ms").is_not_null()).select(*keys, metric=pl.lit("p95_ms"), value="p95_ms"),
        ]
    )


def _by_cluster(values: pl.DataFrame, base_server: str) -> list[tuple[pl.DataFrame, str]]:
    """(values of cluster k's servers, cluster k of the baseline server) for every cluster k that has it
    (params servers.clusters: pg18_c2 against pg15_c2); one cluster: [(values, base_server)]."""
    names = values["server"].unique(maintain_order=True).to_list()
    bases = replicas.base_names(names)
    out = []
    for k in range(1, replicas.MAX_CLUSTERS + 1):
        mine = [n for n in names if (replicas.split_name(n)[1] if bases[n] != n else 1) == k]
        if replicas.replica_name(base_server, k) in mine:
            out.append((values.filter(pl.col("server").is_in(mine)), replicas.replica_name(base_server, k)))
    return out or [(values, base_server)]


def comparisons(e: Experiment, values: pl.DataFrame, setup: dict, pool: bool = True) -> pl.DataFrame:
    """Every condition against the baseline (per server, item, metric), and with a server factor every server
    against the baseline server (per condition, item, metric); the A/A copy only against its baseline.

    With replica clusters (params servers.clusters) and `pool`: one row per base server and comparison, its
    interval across the clusters (`between_runs.pool_clusters`; the between-cluster variance from a server's
    setting comparisons, the A/A copy's left out, and from its server comparisons), a server against the
    baseline server compared cluster k with cluster k. `pool=False`: every cluster's own rows (the A/A floor's)."""
    base, aa = setup["baseline"], setup["aa"]
    parts = []
    cmp = paired.paired_compare(values, ["experiment", "server", "item", "metric"], "condition", base)
    if pool:
        keys = ["experiment", "item", "metric", "condition", "baseline"]
        cmp = between_runs.pool_clusters(cmp, keys, variance_rows=pl.col("condition") != aa)
    parts.append(
        cmp.rename({"condition": "b", "baseline": "a"}).with_columns(
            kind=pl.when(pl.col("b") == aa).then(pl.lit("A/A")).otherwise(pl.lit("setting"))
        )
    )
    if setup.get("base_server"):
        measured = values.filter(pl.col("condition") != aa)
        frames = [
            paired.paired_compare(sub, ["experiment", "condition", "item", "metric"], "server", base_k)
            for sub, base_k in _by_cluster(measured, setup["base_server"])
        ]
        by_server = frames[0] if len(frames) == 1 else pl.concat(frames)
        if pool and len(frames) > 1:
            by_server = between_runs.pool_clusters(by_server, ["experiment", "condition", "item", "metric"])
        parts.append(
            by_server.rename({"server": "b", "baseline": "a", "condition": "server"}).with_columns(
                kind=pl.lit("server")
            )
        )  # the condition sits in `server`'s place: renamed below
    cols = [
        "experiment",
        "kind",
        "server",
        "item",
        "metric",
        "a",
        "b",
        "n_rounds",
        "ratio",
        "low",
        "high",
        "coverage",
        "method",
    ]
    # pooled over replica clusters: what the interval rests on (absent with one cluster per server)
    extra = [c for c in between_runs.POOLED_COLUMNS if any(c in p.columns for p in parts)]
    out = [
        p.select(*cols, *(pl.col(c) if c in p.columns else pl.lit(None, dtype=pl.Float64).alias(c) for c in extra))
        for p in parts
        if p.height
    ]
    if not out:
        return pl.DataFrame(
            schema={
                c: pl.Float64
                if c in ("ratio", "low", "high", "coverage")
                else pl.Int64
                if c == "n_rounds"
                else pl.String
                for c in cols
            }
        )
    df = pl.concat(out, how="vertical_relaxed")
    # for a server comparison, `server` holds the condition: say so in a column of its own
    return df.with_columns(
        condition=pl.when(pl.col("kind") == "server").then(pl.col("server")).otherwise(None),
        server=pl.when(pl.col("kind") == "server").then(pl.lit(None)).otherwise(pl.col("server")),
    ).select("experiment", "kind", "server", "condition", *cols[3:], *extra)


def noise_table(cmp: pl.DataFrame) -> pl.DataFrame:
    """The A/A floor per experiment, server and metric, from `comparisons(..., pool=False)`: a server's floor over
    the A/A pairs of all its clusters (params servers.clusters)."""
    rows = []
    aa = cmp.filter(kind="A/A")
    if aa.height:
        aa = aa.with_columns(pl.col("server").replace_strict(replicas.base_names(aa["server"].unique().to_list())))
    for (exp, server, metric), g in aa.sort("experiment", "server", "metric").group_by(
        "experiment", "server", "metric", maintain_order=True
    ):
        rows.append({"experiment": exp, "server": server, "metric": metric} | noise.noise_floor(g))
    schema = {
        "experiment": pl.String,
        "server": pl.String,
        "metric": pl.String,
        "n_pairs": pl.Int64,
        "false_difference_rate": pl.Float64,
        "floor": pl.Float64,
        "floor_log": pl.Float64,
        "method": pl.String,
    }
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def _floor(noise_df: pl.DataFrame, exp: str, servers: list[str], metric: str) -> float | None:
    f = noise_df.filter(pl.col("experiment") == exp, pl.col("metric") == metric, pl.col("server").is_in(servers))
    vals = [x for x in f["floor"].to_list() if x is not None]
    return max(vals) if vals else None


def plain(row: dict, floor: float | None, sense: str) -> tuple[str, str]:
    """Without a hypothesis: B / A with its interval, beyond the A/A floor or not."""
    ev = v.Evidence.from_row(row)
    if row["ratio"] is None or row["low"] is None:
        return v.UNDETERMINED, f"{ev.text()}: no interval"
    if (row["coverage"] or 0) < v.MIN_COVERAGE:
        return v.UNDETERMINED, f"{ev.text()}: the interval covers {row['coverage']:.0%}, too few rounds to decide"
    better = "faster" if sense == "lower" else "higher"
    worse = "slower" if sense == "lower" else "lower"
    fl = f"the A/A floor ±{floor:.1%}" if floor is not None else "no A/A floor"
    if row["low"] > 1 or row["high"] < 1:
        up = row["low"] > 1
        word = (worse if up else better) if sense == "lower" else (better if up else worse)
        if noise.below_floor(row["ratio"], floor):
            return "no difference", f"{ev.text()}: excludes 1 but within {fl}"
        return word, f"B / A {ev.text()}: {word}, beyond {fl}"
    return "no difference", f"{ev.text()}: includes 1 ({fl})"


def verdict_rows(e: Experiment, cmp: pl.DataFrame, noise_df: pl.DataFrame) -> list[dict]:
    metric = main_metric(e)
    sense = dict(METRICS[e.workload.kind])[metric]
    item = SUITE if e.workload.kind == "sql" and cmp.filter(item=SUITE).height else None
    # the hypothesis is about the setting factors; about the servers when they are the only factor
    hypothesis_kind = "setting" if e.condition_factors else "server"  # settings or pgbench options
    rows = []
    for r in cmp.filter(pl.col("metric") == metric, pl.col("kind") != "A/A").iter_rows(named=True):
        if item is not None and r["item"] != item:
            continue
        servers = [r["server"]] if r["kind"] != "server" else [r["a"], r["b"]]
        floor = _floor(noise_df, e.name, servers, metric)
        if e.expect is not None and r["kind"] == hypothesis_kind:
            claim = v.Claim(e.question, v.LOWER if e.expect.ratio < 1 else v.HIGHER, e.expect.ratio)
            verdict = v.verdict(claim, v.Evidence.from_row(r), floor)  # the one rule: the declared tolerance
            label, reason = verdict.label, verdict.text()
        else:
            label, reason = plain(r, floor, sense)
        rows.append(
            {
                "experiment": e.name,
                "kind": r["kind"],
                "server": r["server"],
                "condition": r["condition"],
                "item": r["item"],
                "metric": metric,
                "a": r["a"],
                "b": r["b"],
                "ratio": r["ratio"],
                "low": r["low"],
                "high": r["high"],
                "method": r["method"],
                "floor": floor,
                "expected": e.expect.ratio if e.expect and r["kind"] == hypothesis_kind else None,
                "verdict": label,
                "reason": reason + (f" (on {r['n_clusters']} clusters)" if (r.get("n_clusters") or 1) > 1 else ""),
            }
        )
    return rows


def cells_table(e: Experiment, setup: dict, r: pl.DataFrame) -> list[dict]:
    from .run import testable

    rows = []
    for server in setup["servers"]:
        for c in setup["conditions"]:
            why = testable(setup, server, c["settings"])
            for item in setup["items"]:
                got = r.filter(server=server, condition=c["condition"], item=item, warmup=False)
                rows.append(
                    {
                        "experiment": e.name,
                        "server": server,
                        "condition": c["condition"],
                        "item": item,
                        "testable": why is None,
                        "reason": why,
                        "measured": got["value"].is_not_null().sum(),
                        "failed": got["value"].is_null().sum(),
                    }
                )
    return rows


def plan_rows(store: RunStore, e: Experiment, setup: dict) -> list[dict]:
    rows = []
    if e.workload.kind != "sql":
        return rows
    for server in setup["servers"]:
        for c in setup["conditions"]:
            for item in setup["items"]:
                doc = store.load_json(plan_path(e, server, c["index"], item))
                if doc is None:
                    continue
                base = {"experiment": e.name, "server": server, "condition": c["condition"], "item": item}
                if isinstance(doc["plan"], dict) and "error" in doc["plan"]:
                    rows.append(base | {"error": doc["plan"]["error"]})
                    continue
                p = parse_plan(doc["plan"])
                rows.append(
                    base
                    | {
                        "root": p.root["node_type"],
                        "fingerprint": p.fingerprint,
                        "execution_ms": p.execution_ms,
                        "error": None,
                    }
                )
    return rows


def setup_row(e: Experiment, setup: dict) -> dict:
    def short(m) -> str:
        return ", ".join(f"{k}: {x}" for k, x in (m or {}).items() if x is not None)

    w = e.workload
    work = (
        pgbench_params.describe(e)  # scripts with weights, clients, rate, protocol
        if w.kind == "pgbench"
        else f"{len(setup['items'])} SQL quer{'y' if len(setup['items']) == 1 else 'ies'}: " + ", ".join(setup["items"])
    )
    d = e.data
    data = (
        f"SSB SF {d.ssb.sf:g}"
        if d.ssb
        else f"pgbench -i scale {d.pgbench.scale}"
        if d.pgbench
        else f"setup script {d.sql.rsplit('/', 1)[-1]}"
        if d.sql
        else "none"
    )
    data = pgbench_params.describe_data(e) or data  # a scale factor: a database per scale
    return {
        "experiment": e.name,
        "question": e.question,
        "data": data,
        "workload": work,
        "servers": ", ".join(setup["servers"]),
        "factors": short({k: x if isinstance(x, str) else ", ".join(map(str, x)) for k, x in e.factors.items()}),
        "baseline": setup["baseline"] + (f" on {setup['base_server']}" if setup.get("base_server") else ""),
        "expect": e.expect.ratio if e.expect else None,
        "rounds": e.rounds,
        "warmups": e.warmups,
        "metric": main_metric(e),
        "database": setup["database"],
    }


def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


S, F, N, B = pl.String, pl.Float64, pl.Int64, pl.Boolean
SCHEMAS = {
    "experiments_setup": {
        "experiment": S,
        "question": S,
        "data": S,
        "workload": S,
        "servers": S,
        "factors": S,
        "baseline": S,
        "expect": F,
        "rounds": N,
        "warmups": N,
        "metric": S,
        "database": S,
    },
    "experiments_cells": {
        "experiment": S,
        "server": S,
        "condition": S,
        "item": S,
        "testable": B,
        "reason": S,
        "measured": N,
        "failed": N,
    },
    "experiments_verdicts": {
        "experiment": S,
        "kind": S,
        "server": S,
        "condition": S,
        "item": S,
        "metric": S,
        "a": S,
        "b": S,
        "ratio": F,
        "low": F,
        "high": F,
        "method": S,
        "floor": F,
        "expected": F,
        "verdict": S,
        "reason": S,
    },
    "experiments_plans": {
        "experiment": S,
        "server": S,
        "condition": S,
        "item": S,
        "root": S,
        "fingerprint": S,
        "execution_ms": F,
        "error": S,
    },
}


def derive(store: RunStore, params) -> dict[str, pl.DataFrame]:
    """Every experiments_* table from the raw store alone; none when the params have no experiments (or none ran)."""
    done = [e for e in (getattr(params, "experiments", None) or []) if store.load_json(setup_path(e)) is not None]
    if not done:
        return {}
    setups, cells, verdicts, plans, all_runs, all_cmp, values, own = [], [], [], [], [], [], [], []
    for e in done:
        setup = store.load_json(setup_path(e))
        r = runs(store, e)
        vals = long_values(e, r)
        cmp = comparisons(e, vals, setup)
        own.append(comparisons(e, vals, setup, pool=False) if between_runs.has_replicas(setup["servers"]) else cmp)
        setups.append(setup_row(e, setup))
        cells += cells_table(e, setup, r)
        plans += plan_rows(store, e, setup)
        all_runs.append(r)
        all_cmp.append(cmp)
        values.append(vals)
    cmp = pl.concat(all_cmp, how="diagonal_relaxed")
    nz = noise_table(pl.concat(own, how="diagonal_relaxed"))
    for e, c in zip(done, all_cmp, strict=True):
        verdicts += verdict_rows(e, c, nz)
    r = pl.concat(all_runs)
    vals = pl.concat(values)
    summary = stats.summarize(vals, by=["experiment", "server", "condition", "item", "metric"], value="value")
    return {
        "experiments_setup": _frame(setups, SCHEMAS["experiments_setup"]),
        "experiments_cells": _frame(cells, SCHEMAS["experiments_cells"]),
        "experiments_runs": r,
        "experiments_summary": summary,
        "experiments_paired": cmp,
        "experiments_noise": nz,
        "experiments_verdicts": _frame(verdicts, SCHEMAS["experiments_verdicts"]),
        "experiments_plans": _frame(plans, SCHEMAS["experiments_plans"]),
        "experiments_errors": r.filter(pl.col("error").is_not_null()).select(
            "experiment", "server", "condition", "item", "repetition", "warmup", "error", "sqlstate"
        ),
    } | pgbench_tables.tables(store, done)  # pgbench's latency, timeline, server counters (empty without pgbench)


TABLES = (
    "experiments_setup",
    "experiments_cells",
    "experiments_runs",
    "experiments_summary",
    "experiments_paired",
    "experiments_noise",
    "experiments_verdicts",
    "experiments_plans",
    "experiments_errors",
    *pgbench_tables.TABLES,
)
__all__ = ["AA_SUFFIX", "PGBENCH_ITEM", "SERVER", "TABLES", "derive"]

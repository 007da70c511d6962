"""The JIT-per-operator stage's derived tables, from the raw store (measurements, the setup and plan artefacts).

`derive(store, params)` returns them keyed by name, the findings too (notebook 50 and `python -m pglab derive`
call it); `tables(store, p, setup)` the stage's tables without the findings; `write(tables, profile)` writes
them with `pglab.core.derived`. Times are in ms. The reduction is the study's figure, 1 - t(JIT) / t(no JIT), from the
ratio the findings judge (`verdicts.per_operator`: jit_operators_paired's, in the fast mode or per round), its
interval turned into percent; in CPU and wall time."""

from __future__ import annotations

import polars as pl

from ...core.run import measurements, outcomes
from ...core.stats import between_runs, stats
from ...core.store import RunStore
from ...pgtools.explain import ExplainParseError, parse_plan
from . import verdicts as jv
from .params import EXPERIMENT, OPERATORS, STUDY_REDUCTION_PCT, JitOperatorsParams, label
from .run import SETUP_SCHEMA, load_plan, load_settings, runnable

RUNS_SCHEMA = {
    "server": pl.String,
    "condition": pl.String,
    "operator": pl.String,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "round": pl.Int64,
    "ms": pl.Float64,
    "cpu_ms": pl.Float64,
    "result": pl.String,
    "error": pl.String,
}

PHASES = ("generation_ms", "inlining_ms", "optimization_ms", "emission_ms")
METRICS = {"wall": "ms", "cpu": "cpu_ms"}  # metric -> column of the runs table


def runs(store: RunStore) -> pl.DataFrame:
    """Every run, warm-ups included (flagged), one row each: client wall time (ms) and backend CPU time
    (cpu_ms; null where the server is not local, and for a failed run, whatever an older record holds)."""
    df = store.records(EXPERIMENT)
    if df.is_empty():
        return pl.DataFrame(schema=RUNS_SCHEMA)
    for col, dtype in (("result", pl.String), ("error", pl.String), ("cpu_ms", pl.Float64)):
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=dtype).alias(col))
    return df.select(
        "server",
        "condition",
        pl.col("item").alias("operator"),
        "repetition",
        "warmup",
        "round",
        (pl.col("value").cast(pl.Float64) * 1000).alias("ms"),
        pl.when(pl.col("error").is_null()).then(pl.col("cpu_ms")).alias("cpu_ms"),
        "result",
        "error",
    ).cast(RUNS_SCHEMA)


def timed_long(r: pl.DataFrame) -> pl.DataFrame:
    """The timed runs (no warm-ups), one row per run and metric. A failed run is no sample in either metric:
    it stays as a row with a null value, which the statistics count as missing (n_missing), whatever time
    the raw record holds. A metric a server does not give (CPU time of an external server) has no rows."""
    failed = pl.col("error").is_not_null()
    parts = []
    for metric, col in METRICS.items():
        part = r.filter(~pl.col("warmup")).select(
            "server",
            "condition",
            "operator",
            "repetition",
            pl.lit(metric).alias("metric"),
            pl.when(failed).then(None).otherwise(pl.col(col)).alias("ms"),
            failed.alias("failed"),
            # every server gives wall time; CPU time only where some run of the server has it
            (pl.lit(True) if metric == "wall" else pl.col(col).is_not_null().any().over("server")).alias(
                "server_gives"
            ),
        )
        parts.append(part.filter(pl.col("ms").is_not_null() | (pl.col("failed") & pl.col("server_gives"))))
    return pl.concat(parts).drop("failed", "server_gives")


def _labels(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(label=pl.col("operator").replace_strict({k: label(k) for k in OPERATORS}))


def _order(p: JitOperatorsParams) -> pl.DataFrame:
    # the study's column order, for tables and charts
    return pl.DataFrame({"operator": p.operators, "operator_order": list(range(len(p.operators)))})


def summary(r: pl.DataFrame) -> pl.DataFrame:
    return _labels(stats.summarize(timed_long(r), ["server", "metric", "condition", "operator"], "ms"))


def reduction(r: pl.DataFrame, p: JitOperatorsParams) -> pl.DataFrame:
    """Per server, metric, JIT condition and operator: the ratio to the baseline and its interval as the findings
    compare them (`verdicts.per_operator`, pooled over a server's clusters: in the findings' metric the rows of
    jit_operators_paired; in the other one the same comparison, toward no archived prior), the reduction in percent
    (its interval the ratio's, mirrored) beside the study's percentage, and both medians over every cluster's runs."""
    frames = []
    for metric in METRICS:
        every = jv.compared(r, p, metric).filter(pl.col("metric") == metric)  # a server without CPU time: none
        if every.height:
            frames.append(jv.per_operator(every, p, "jit_operators_paired" if metric == p.metric else None)[0])
    if not frames:
        return pl.DataFrame(schema=REDUCTION)
    long = timed_long(r)
    med = (
        between_runs.base_servers(long)
        .group_by("server", "metric", "condition", "operator")
        .agg(pl.col("ms").median().alias("median"))
    )
    study = pl.DataFrame({"operator": list(STUDY_REDUCTION_PCT), "study_pct": list(STUDY_REDUCTION_PCT.values())})
    keys = ["server", "metric", "operator"]
    return _labels(
        pl.concat(frames, how="diagonal_relaxed")
        .filter(pl.col("condition") != p.aa_condition)
        .rename({"low": "ci_low", "high": "ci_high"})
        .join(med, on=[*keys, "condition"], how="left")
        .join(med.rename({"condition": "baseline", "median": "median_baseline"}), on=[*keys, "baseline"], how="left")
        .with_columns(
            reduction_pct=(1 - pl.col("ratio")) * 100,
            reduction_ci_low=(1 - pl.col("ci_high")) * 100,
            reduction_ci_high=(1 - pl.col("ci_low")) * 100,
        )
        .join(study, on="operator", how="left")
        .join(_order(p), on="operator", how="left")
        .select([c for c in REDUCTION if c != "label"])
        .cast({c: t for c, t in REDUCTION.items() if c != "label"})
        .sort("server", "metric", "condition", "operator")
    )


REDUCTION = {
    "server": pl.String,
    "metric": pl.String,
    "operator": pl.String,
    "condition": pl.String,
    "baseline": pl.String,
    "n_rounds": pl.Int64,
    "median": pl.Float64,
    "median_baseline": pl.Float64,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "coverage": pl.Float64,
    "reduction_pct": pl.Float64,
    "reduction_ci_low": pl.Float64,
    "reduction_ci_high": pl.Float64,
    "study_pct": pl.Float64,
    "operator_order": pl.Int64,
    "label": pl.String,
}


def result_checks(r: pl.DataFrame) -> pl.DataFrame:
    """Per server and operator: the distinct results over every condition and run. One = JIT off and on agree."""
    ok = r.filter(pl.col("error").is_null())
    return _labels(
        ok.group_by("server", "operator")
        .agg(
            pl.col("condition").n_unique().alias("conditions"),
            pl.len().alias("runs"),
            pl.col("result").n_unique().alias("distinct_results"),
            pl.col("result").unique().sort().str.join(" | ").alias("result"),
        )
        .with_columns(agree=pl.col("distinct_results") == 1)
        .sort("server", "operator")
    )


def _plan_row(server: str, cond: str, op: str, doc) -> dict:
    row = {"server": server, "condition": cond, "operator": op}
    if doc is None or (isinstance(doc, dict) and "error" in doc):
        return row | {"error": "no plan" if doc is None else doc["error"]}
    try:
        parsed = parse_plan(doc)
    except ExplainParseError as e:
        return row | {"error": f"unparseable plan: {e}"}
    s = parsed.summary().row(0, named=True)
    nodes = parsed.nodes
    return row | {
        "fingerprint": parsed.fingerprint,
        "nodes": " > ".join(nodes["node_type"].to_list()),
        "total_cost": parsed.root["total_cost"],
        "workers_planned": int(nodes["workers_planned"].fill_null(0).sum()),
        "planning_ms": parsed.planning_ms,
        "execution_ms": parsed.execution_ms,
        "shared_hit_blocks": s["shared_hit_blocks"],
        "shared_read_blocks": s["shared_read_blocks"],
        "jit": parsed.jit is not None,
        **{k: v for k, v in s.items() if k.startswith("jit_")},
        "error": None,
    }


PLANS_SCHEMA = {
    "server": pl.String,
    "condition": pl.String,
    "operator": pl.String,
    "fingerprint": pl.String,
    "nodes": pl.String,
    "total_cost": pl.Float64,
    "workers_planned": pl.Int64,
    "planning_ms": pl.Float64,
    "execution_ms": pl.Float64,
    "shared_hit_blocks": pl.Int64,
    "shared_read_blocks": pl.Int64,
    "jit": pl.Boolean,
    "jit_functions": pl.Int64,
    "jit_inlining": pl.Boolean,
    "jit_optimization": pl.Boolean,
    "jit_expressions": pl.Boolean,
    "jit_deforming": pl.Boolean,
    "jit_generation_ms": pl.Float64,
    "jit_deform_ms": pl.Float64,
    "jit_inlining_ms": pl.Float64,
    "jit_optimization_ms": pl.Float64,
    "jit_emission_ms": pl.Float64,
    "jit_total_ms": pl.Float64,
    "error": pl.String,
}


def plans(store: RunStore, p: JitOperatorsParams, servers: list[str]) -> pl.DataFrame:
    """One row per (server, condition, operator): the untimed EXPLAIN ANALYZE, summarised with its JIT block."""
    rows = [
        _plan_row(s, c, op, load_plan(store, s, c, op)) for s in servers for c in p.conditions for op in p.operators
    ]
    return _labels(pl.from_dicts(rows, schema=PLANS_SCHEMA)) if rows else _labels(pl.DataFrame(schema=PLANS_SCHEMA))


def settings(store: RunStore, p: JitOperatorsParams, servers: list[str]) -> pl.DataFrame:
    """The JIT and parallel settings in force in each condition, as the server reported them."""
    rows = [
        {"server": s, "condition": c, "name": k, "setting": str(v)}
        for s in servers
        for c in p.conditions
        for k, v in load_settings(store, s, c).items()
    ]
    return pl.from_dicts(
        rows, schema={"server": pl.String, "condition": pl.String, "name": pl.String, "setting": pl.String}
    )


def conditions(p: JitOperatorsParams) -> pl.DataFrame:
    """The conditions as params define them (session settings, every condition with the parallel setting)."""

    def text(v) -> str:
        return ("on" if v else "off") if isinstance(v, bool) else str(v)

    rows = [
        {
            "condition": c,
            "role": "baseline" if c == p.baseline else ("study" if c == p.study_condition else "extra"),
            "order": i,
            "settings": ", ".join(f"{k}={text(v)}" for k, v in p.session_settings(c).items()),
        }
        for i, c in enumerate(p.conditions)
    ]
    return pl.from_dicts(
        rows, schema={"condition": pl.String, "role": pl.String, "order": pl.Int64, "settings": pl.String}
    )


def jit_time(summ: pl.DataFrame, plan_tab: pl.DataFrame, p: JitOperatorsParams) -> pl.DataFrame:
    """Where the time goes, per server, JIT condition and operator: the JIT phases (from the plan), the
    medians without and with JIT (timed runs, in the params' metric; wall time where a server gives no CPU
    time), the net saving, and what the compiled code saved before paying for its compilation (net saving +
    JIT total). The two sources are separate runs: a guide, not an identity."""
    have = set(summ.filter((pl.col("metric") == p.metric) & (pl.col("n") > 0))["server"])
    med = summ.filter(
        pl.when(pl.col("server").is_in(list(have)))
        .then(pl.col("metric") == p.metric)
        .otherwise(pl.col("metric") == "wall")
    ).select("server", "metric", "condition", "operator", "median")
    base = med.filter(pl.col("condition") == p.baseline).select(
        "server", "operator", pl.col("median").alias("off_median_ms")
    )
    jit = plan_tab.filter(pl.col("jit")).select(
        "server",
        "condition",
        "operator",
        "jit_functions",
        "jit_inlining",
        "jit_optimization",
        *(pl.col(f"jit_{ph}").alias(ph) for ph in PHASES),
        pl.col("jit_total_ms").alias("jit_total_ms"),
    )
    return _labels(
        jit.join(med.rename({"median": "on_median_ms"}), on=["server", "condition", "operator"], how="left")
        .join(base, on=["server", "operator"], how="left")
        .with_columns(saved_ms=pl.col("off_median_ms") - pl.col("on_median_ms"))
        .with_columns(compiled_code_saved_ms=pl.col("saved_ms") + pl.col("jit_total_ms"))
        .join(_order(p), on="operator", how="left")
    )


def tables(store: RunStore, p: JitOperatorsParams, setup: pl.DataFrame) -> dict[str, pl.DataFrame]:
    servers = runnable(setup)
    r = _labels(runs(store))
    main = r.filter(pl.col("condition") != p.aa_condition)  # the A/A copy only feeds the noise floor
    summ = summary(main)
    plan_tab = plans(store, p, servers)
    return {
        "jit_operators_setup": setup,
        "jit_operators_conditions": conditions(p),
        "jit_operators_settings": settings(store, p, servers),
        "jit_operators_runs": r,
        "jit_operators_summary": summ,
        "jit_operators_reduction": reduction(r, p),
        "jit_operators_results": result_checks(r),
        "jit_operators_plans": plan_tab,
        "jit_operators_jit_time": jit_time(summ, plan_tab, p),
        **jv.tables(r, p),
    }


def setup_table(store: RunStore) -> pl.DataFrame | None:
    """The setup the stage recorded at its first start in the run (jit_operators_run.run_stage)."""
    rows = store.load_json(f"{EXPERIMENT}/setup.json")
    return None if rows is None else pl.from_dicts(rows, schema=SETUP_SCHEMA)


def derive(store: RunStore, params) -> dict[str, pl.DataFrame]:
    """Notebook 50's tables from the raw store alone: the skips, and when some server could run the stage
    every table of `tables` (the findings are judged from them: `Study.record_findings`)."""
    p = params.jit_operators
    out = {"jit_operators_skipped": outcomes.skipped(store, [EXPERIMENT]).sort("experiment", "server")}
    setup = setup_table(store)
    if setup is None or not runnable(setup):
        return out
    out |= tables(store, p, setup)
    if (m := measurements.table(store, "jit_operators", [EXPERIMENT])) is not None:
        out["jit_operators_measurements"] = m
    return out

"""Report section of study S4 test 1 (JIT per operator), computed from the derived tables only; the verdicts are
the one rule's on the paired tables (`pglab.studies.jit_operators.verdicts`)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core.stats import between_runs, method_notes, paired
from . import verdicts as jv
from .charts import jit_time_chart, reduction_chart, times_chart
from .params import GENERATOR, OPERATORS, QUALIFIED, label

TABLES = (
    "jit_operators_setup",
    "jit_operators_conditions",
    "jit_operators_summary",
    "jit_operators_reduction",
    "jit_operators_jit_time",
    "jit_operators_paired",
    "jit_operators_overall",
    "jit_operators_noise",
    "jit_operators_drift",
)
METRIC_WORDS = {"cpu": "backend CPU time", "wall": "wall time"}


def _executions_text(first: dict) -> str:
    """How many executions a cell had per round and which one counts (older runs: one, not recorded)."""
    k = first.get("executions")
    if not k or k == 1:
        return ""
    pick = "the fastest" if first.get("round_value", "min") == "min" else "their median"
    if first.get("spread") == "round":  # runs before the field existed ran their passes back to back
        return (
            f", {k} passes per round over every operator, each operator's conditions together within a pass "
            f"({pick} of a cell's {k} counts: bursts of other load only add time, and its executions are a "
            "whole pass apart)"
        )
    return (
        f", each operator's conditions together and {k} passes over them per round ({pick} counts: bursts "
        "of other load only add time)"
    )


def _fast(tables) -> bool:
    """Whether the comparisons were made in the fast mode (`paired.fast_compare`), not round by round."""
    return paired.is_fast(tables["jit_operators_paired"]["method"])


def _version(s: str | None) -> str:
    return (s or "unknown version").split(" on ")[0]


def _available(setup: pl.DataFrame) -> pl.DataFrame:
    return setup.filter(pl.col("jit_available") & pl.col("reason").is_null())


def clusters_markdown(pair: pl.DataFrame) -> str | None:
    """What each interval rests on when every server was measured on several clusters (params servers.clusters):
    None for a run of one cluster per server."""
    text = between_runs.clusters_text(pair)
    over, more = "the operators", "The summary over all operators takes the operators' variance."
    return method_notes.clusters_paragraph([text] if text else [], "table", "per-cluster tables", over, more=more)


def method(tables) -> str:
    setup = tables["jit_operators_setup"].sort("server")
    conds = tables["jit_operators_conditions"].sort("order")
    summ = tables["jit_operators_summary"]
    first = setup.row(0, named=True)
    servers = []
    for r in setup.iter_rows(named=True):
        state = "JIT available" if r["jit_available"] and r["reason"] is None else (r["reason"] or "not available")
        servers.append(f"{r['server']} ({_version(r['version_string'])}): {state}")
    ran = _available(setup)
    size = ""
    if ran.height and ran["table_bytes"][0] is not None:
        size = f", {ran['table_bytes'][0] / 2**20:.0f} MiB"
        warm = ran["prewarmed_blocks"][0]
        size += f", pg_prewarm'd ({warm:,} blocks)" if warm else ", not prewarmed"
    ops = ", ".join(f"{label(op)} `{OPERATORS[op][0]}`" for op in OPERATORS if op in set(summ["operator"]))
    cond_text = "; ".join(f"**{c['condition']}** ({c['role']}): `{c['settings']}`" for c in conds.iter_rows(named=True))
    seed = first["shuffle_seed"]
    return "\n".join(
        [
            "Notebook 50 ran the study's simple aggregates with JIT off and on, on every server with JIT, after a "
            "warm-up, interleaved, every run kept.",
            "",
            f"- **Servers**: {'; '.join(servers)}.",
            f"- **Data**: `{QUALIFIED}(c1 {first['column_type']}, c2 {first['column_type']})`, {first['rows']:,} rows "
            f"({GENERATOR}), VACUUM (FREEZE, ANALYZE){size}.",
            f"- **Queries**: `SELECT <aggregate> FROM {QUALIFIED}` for {ops or 'no operator'}.",
            f"- **Conditions**, session settings per connection: {cond_text}.",
            f"- **Timing**: client wall time of each statement (send to last row, one connection per condition, as "
            f"psql's \\timing) and the backend's own CPU time over it (`/proc/<pid>/schedstat`, kit servers: "
            f"the time it spent on a CPU, without time waiting for one; on this shared VM it still moves with other "
            f"load); the "
            f"findings use {METRIC_WORDS[first['metric']]}; failed runs count as missing, in both. "
            f"{first['repetitions']} rounds after "
            f"{first['warmups']} warm-up round(s), "
            f"interleaved across conditions and operators{_executions_text(first)}"
            f"{f' (order shuffled within rounds, seed {seed})' if seed is not None else ''}. "
            "Reduction = 1 − JIT / off from the findings' paired ratio (jit_operators_paired; the other metric "
            "compared the same way), with its interval. JIT phase times come from one "
            "separate, untimed `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` per server, condition and operator.",
            jv.noise_markdown(
                tables["jit_operators_noise"],
                tables["jit_operators_drift"],
                conds.filter(pl.col("role") == "baseline")["condition"][0],
                _fast(tables),
            ),
            *filter(None, [clusters_markdown(tables["jit_operators_paired"])]),
        ]
    )


def charts(tables) -> list[alt.TopLevelMixin]:
    red = tables["jit_operators_reduction"]
    summ = tables["jit_operators_summary"]
    jt = tables["jit_operators_jit_time"]
    if red.is_empty():
        return []
    order = red.sort("operator_order")["label"].unique(maintain_order=True).to_list()
    return [reduction_chart(red), jit_time_chart(jt), times_chart(summ.sort("server", "condition"), order)]


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from the run's tables (`Study.judge`, which stores them once)."""
    setup = tables["jit_operators_setup"]
    conds = tables["jit_operators_conditions"]
    paired_tables = (tables[f"jit_operators_{n}"] for n in ("paired", "overall", "noise"))
    return jv.findings_from(setup, *paired_tables, jv.study_condition(conds))


def answers(tables, f: pl.DataFrame) -> list[str]:
    """Plain sentences for the report's first screen: what JIT does to simple aggregates here."""
    from ...core.stats import findings as fnd

    rows = fnd.measured(f, "all_operators")
    if not rows:
        return []
    n = tables["jit_operators_setup"]["rows"].max() if "jit_operators_setup" in tables else None
    at = f" over {n:,.0f} rows" if n else ""
    return [
        f"JIT on simple aggregates{at}: {', '.join(fnd.shown(r) + ' on ' + r['server'] for r in rows)}"
        " (the study: 16–32 % faster)."
    ]

"""Report section of study S4 test 1 (JIT per operator), computed from the derived tables only; the verdicts are
the one rule's on the paired tables (`pglab.studies.jit_operators.verdicts`)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ...core import paired
from ...core.derived import read_table
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


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    return read_table(name, profile, root=root)


def _fast(profile: str, root: Path | None) -> bool:
    """Whether the comparisons were made in the fast mode (`paired.fast_compare`), not round by round."""
    return paired.is_fast(_read("jit_operators_paired", profile, root)["method"])


def _version(s: str | None) -> str:
    return (s or "unknown version").split(" on ")[0]


def _available(setup: pl.DataFrame) -> pl.DataFrame:
    return setup.filter(pl.col("jit_available") & pl.col("reason").is_null())


def clusters_markdown(pair: pl.DataFrame) -> str | None:
    """What each interval rests on when every server was measured on several clusters (params servers.clusters):
    None for a run of one cluster per server."""
    if "n_clusters" not in pair.columns or (pair["n_clusters"].max() or 1) < 2:
        return None
    parts = []
    for (server,), g in pair.group_by("server", maintain_order=True):
        sd = g["cluster_sd"].drop_nulls()
        per = (g["n_rounds"] // g["n_clusters"]).unique().sort().to_list()
        parts.append(
            f"{server}: {g['n_clusters'].max()} clusters × {'/'.join(map(str, per))} rounds"
            + (f", between-cluster sd {sd[0]:.1%}".replace("%", " %") if sd.len() else "")
        )
    return (
        "- **Clusters**: every server measured on several independently made and loaded clusters (own initdb, "
        "data directory and table; `<server>_c<k>` in the per-cluster tables), interleaved; each comparison is the "
        "geometric mean over its clusters, its interval the rounds' plus the between-cluster variance (how the "
        "clusters disagreed over the operators), the summary over all operators with the operators' variance: "
        + "; ".join(parts)
        + "."
    )


def method(profile: str, root: Path | None = None) -> str:
    setup = _read("jit_operators_setup", profile, root).sort("server")
    conds = _read("jit_operators_conditions", profile, root).sort("order")
    summ = _read("jit_operators_summary", profile, root)
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
            "Reduction = 1 − median(JIT) / median(off), 95 % bootstrap interval. JIT phase times come from one "
            "separate, untimed `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` per server, condition and operator.",
            jv.noise_markdown(
                _read("jit_operators_noise", profile, root),
                _read("jit_operators_drift", profile, root),
                conds.filter(pl.col("role") == "baseline")["condition"][0],
                _fast(profile, root),
            ),
            *filter(None, [clusters_markdown(_read("jit_operators_paired", profile, root))]),
        ]
    )


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    red = _read("jit_operators_reduction", profile, root)
    summ = _read("jit_operators_summary", profile, root)
    jt = _read("jit_operators_jit_time", profile, root)
    if red.is_empty():
        return []
    order = red.sort("operator_order")["label"].unique(maintain_order=True).to_list()
    return [reduction_chart(red), jit_time_chart(jt), times_chart(summ.sort("server", "condition"), order)]


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from the run's tables (`Study.judge`, which stores them once)."""
    profile, root = tables.profile, tables.root
    setup = _read("jit_operators_setup", profile, root)
    conds = _read("jit_operators_conditions", profile, root)
    paired_tables = (_read(f"jit_operators_{n}", profile, root) for n in ("paired", "overall", "noise"))
    return jv.findings_from(setup, *paired_tables, jv.study_condition(conds))


def answers(tables, f: pl.DataFrame) -> list[str]:
    """Plain sentences for the report's first screen: what JIT does to simple aggregates here."""
    from ...core import findings as fnd

    rows = fnd.measured(f, "all_operators")
    if not rows:
        return []
    n = tables["jit_operators_setup"]["rows"].max() if "jit_operators_setup" in tables else None
    at = f" over {n:,.0f} rows" if n else ""
    return [
        f"JIT on simple aggregates{at}: {', '.join(fnd.shown(r) + ' on ' + r['server'] for r in rows)}"
        " (the study: 16–32 % faster)."
    ]

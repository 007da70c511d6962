"""Charts of the JIT-per-operator study (altair, SVG through `charts.setup()`), used by the stage's notebook
and by the report section alike. Each takes a derived table and aggregates nothing further."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts

PHASE_LABELS = {
    "generation_ms": "generation",
    "inlining_ms": "inlining",
    "optimization_ms": "optimization",
    "emission_ms": "emission",
}
SAVED = "saved by compiled code"
METRIC_TITLES = {"cpu": "backend CPU time", "wall": "client wall time"}
PARTS = [*PHASE_LABELS.values(), SAVED]
PART_COLORS = ["#9ecae1", "#4292c6", "#08306b", "#9e9ac8", "#31a354"]


def _x(df: pl.DataFrame, order: list[str] | None = None) -> alt.X:
    order = order or df.sort("operator_order")["label"].unique(maintain_order=True).to_list()
    # upright at -90: at -30 the neighbours "count" and "count(*)" overlap in a 330 px panel
    return alt.X("label:N", sort=order, title=None, axis=alt.Axis(labelAngle=-90, labelLimit=0))


def _metric(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(time=pl.col("metric").replace_strict(METRIC_TITLES))


def _metric_column() -> alt.Column:
    return alt.Column("time:N", title=None, sort=list(METRIC_TITLES.values()))


def reduction_chart(reduction: pl.DataFrame) -> alt.FacetChart:
    """Time reduction with JIT per operator (the findings' paired ratio with its interval) per JIT condition, in
    CPU and wall time; the study's figure as a black tick. Above 0 = JIT faster."""
    d = (
        _metric(reduction.filter(pl.col("ratio").is_not_null()))
        .select(
            "server",
            "time",
            "condition",
            "operator",
            "label",
            "operator_order",
            "reduction_pct",
            "reduction_ci_low",
            "reduction_ci_high",
            "study_pct",
            "n_rounds",
            "coverage",
            "median",
            "median_baseline",
        )
        .sort("server", "time", "condition", "operator_order")
    )
    x = _x(d)
    tip = [
        "server:N",
        "time:N",
        "condition:N",
        "label:N",
        *charts.tips(".1f", "reduction_pct", "reduction_ci_low", "reduction_ci_high"),
        alt.Tooltip("median_baseline:Q", title="median off (ms)", format=".2f"),
        alt.Tooltip("median:Q", title="median JIT (ms)", format=".2f"),
        "study_pct:Q",
        alt.Tooltip("n_rounds:Q", title="rounds"),
        alt.Tooltip("coverage:Q", format=".0%"),
    ]
    zero = alt.Chart().mark_rule(color="gray", strokeDash=[4, 3]).encode(y=alt.datum(0))
    ci, pts = charts.interval_marks(
        alt.Chart().encode(x=x, xOffset="server:N", color="server:N"),
        alt.Y("reduction_ci_low:Q", title="time reduction with JIT, % (interval)"),
        "reduction_ci_high",
        "reduction_pct",
        size=50,
        color=alt.Color("server:N", title="server"),
        tooltip=tip,
    )
    study = (
        alt.Chart()
        .mark_tick(color="black", thickness=2, size=18)
        .encode(x=x, y="study_pct:Q", tooltip=["label:N", alt.Tooltip("study_pct:Q", title="study S4 (%)")])
    )
    # one row per JIT condition, each with its own scale: a forced optimisation can cost several times the
    # query and would flatten the other condition's points
    return (
        alt.layer(zero, ci, pts, study)
        .properties(width=330, height=180)
        .facet(row=alt.Row("condition:N", title=None, header=charts.header()), column=_metric_column(), data=d)
        .resolve_scale(y="independent")
        .properties(
            title="JIT time reduction per operator: ours (points, paired, interval) and the study's (black ticks)"
        )
    )


def times_chart(summary: pl.DataFrame, order: list[str] | None = None) -> alt.FacetChart:
    """Median time per operator and condition with min-max of the timed runs, CPU and wall time."""
    d = _metric(summary).select(
        "server", "time", "condition", "operator", "label", "n", "median", "min", "max", "ci_low", "ci_high"
    )
    x = _x(d, order or d["label"].unique(maintain_order=True).to_list())
    tip = [
        "server:N",
        "time:N",
        "condition:N",
        "label:N",
        "n:Q",
        *charts.tips(".2f", "median", "min", "max", "ci_low", "ci_high"),
    ]
    base = alt.Chart().encode(x=x, xOffset="condition:N", color="condition:N")
    color = alt.Color("condition:N", title="condition")
    rng, med = charts.interval_marks(
        base, alt.Y("min:Q", title="ms (median, min-max)"), "max", "median", stroke=None, color=color, tooltip=tip
    )
    return (
        alt.layer(rng, med)
        .properties(width=330, height=200)
        .facet(row=alt.Row("server:N", title=None), column=_metric_column(), data=d)
        .properties(title="Time per query")
    )


def jit_time_long(jit_time: pl.DataFrame) -> pl.DataFrame:
    """The stacked bars' rows: per cell, the four JIT phases (one bar) and what the compiled code saved
    (the other bar)."""
    keys = ["server", "metric", "condition", "operator", "label", "operator_order"]
    phases = (
        jit_time.select(*keys, *PHASE_LABELS)
        .unpivot(index=keys, on=list(PHASE_LABELS), variable_name="part", value_name="ms")
        .with_columns(part=pl.col("part").replace_strict(PHASE_LABELS), bar=pl.lit("JIT compilation"))
    )
    saved = jit_time.select(
        *keys,
        pl.lit(SAVED).alias("part"),
        pl.col("compiled_code_saved_ms").alias("ms"),
        pl.lit("saved by compiled code").alias("bar"),
    )
    net = jit_time.select(*keys, pl.col("saved_ms").alias("net_saved_ms"), "jit_total_ms")
    return (
        pl.concat([phases, saved.select(phases.columns)])
        .join(net, on=keys, how="left")
        .with_columns(part_order=pl.col("part").replace_strict({p: i for i, p in enumerate(PARTS)}))
        .sort("server", "condition", "operator_order", "bar", "part_order")
    )


def jit_time_chart(jit_time: pl.DataFrame) -> alt.FacetChart:
    """Where JIT time goes: per operator, a bar of the JIT phases (EXPLAIN ANALYZE) beside a bar of the
    execution time the compiled code saved (median off - median JIT + JIT total). The saving is net
    positive where the green bar is taller than the blue stack."""
    d = jit_time_long(jit_time)
    x = _x(d)
    tip = [
        "server:N",
        "metric:N",
        "condition:N",
        "label:N",
        "part:N",
        alt.Tooltip("ms:Q", format=".2f"),
        alt.Tooltip("jit_total_ms:Q", title="JIT total (ms)", format=".2f"),
        alt.Tooltip("net_saved_ms:Q", title="net saved (ms)", format=".2f"),
    ]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x,
            xOffset=alt.XOffset("bar:N", sort=["JIT compilation", "saved by compiled code"]),
            y=alt.Y("ms:Q", title="ms", stack="zero"),
            color=alt.Color("part:N", title=None, scale=alt.Scale(domain=PARTS, range=PART_COLORS)),
            order=alt.Order("part_order:Q"),
            tooltip=tip,
        )
    )
    return (
        alt.layer(bars)
        .properties(width=460, height=200)
        .facet(
            row=alt.Row("server:N", title=None),
            column=alt.Column("condition:N", title=None, header=charts.header()),
            data=d,
        )
        .properties(title="Where JIT time goes: compilation phases (left bar) vs execution time saved (right bar)")
    )

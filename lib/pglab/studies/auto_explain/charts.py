"""Charts and display tables of the auto_explain report (altair, rendered as SVG by `charts.setup()`)."""

from __future__ import annotations

import json

import altair as alt
import polars as pl

from ...core import charts
from .params import AutoExplainParams


def conditions_table(params: AutoExplainParams) -> pl.DataFrame:
    """The conditions as params define them: settings per connection, items, what the log must show."""
    rows = []
    for name, c in params.conditions.items():
        rows.append(
            {
                "condition": name,
                "label": c.label or name,
                "auto_explain": "loaded" if c.load else "not loaded",
                "settings": ", ".join(f"{k.removeprefix('auto_explain.')}={v}" for k, v in c.settings.items()) or "—",
                "items": ", ".join(params.items_of(name)),
                "plans in the log": c.expected_plans,
            }
        )
    return pl.from_dicts(rows)


def items_table(params: AutoExplainParams) -> pl.DataFrame:
    return pl.from_dicts(
        [
            {
                "item": k,
                "label": i.label or k,
                "script": i.sql,
                "session settings": json.dumps(i.settings) if i.settings else "—",
                "transactions (-t)": params.run.transactions.get(k),
            }
            for k, i in params.items.items()
        ]
    )


def _per_condition(
    d: pl.DataFrame, x: alt.X, high: str, value: str, study: str, title: str, tooltip: list, **marks
) -> alt.FacetChart:
    """Per condition and server a rule over `x` … `high` and a point at `value`, the study's own figure (column
    `study`) as a black tick, one panel per item; `tooltip` after server, item and label; `marks`: interval_marks'
    stroke and size."""
    order = d.sort("condition_order")["label"].unique(maintain_order=True).to_list()
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    base = alt.Chart().encode(y=y, yOffset="server:N", color="server:N")
    color, tooltip = alt.Color("server:N", title="server"), ["server", "item", "label", *tooltip]
    rule, point = charts.interval_marks(base, x, high, value, color=color, tooltip=tooltip, **marks)
    tick = alt.Chart().transform_filter(f"datum.{study} != null").mark_tick(color="black", thickness=2, size=14)
    one = [alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(1.0))] if value == "ratio" else []
    # layers without data of their own: the facet hands each panel its item's rows
    return (
        alt.layer(*one, rule, point, tick.encode(x=f"{study}:Q", y=y))
        .properties(width=240, height=alt.Step(16))
        .facet(data=d, column=alt.Column("item:N", title=None))
        .resolve_scale(x="independent")
        .properties(title=title)
    )


def overhead_chart(ratios: pl.DataFrame, comparison: str = "overhead") -> alt.FacetChart:
    """Ratio to the baseline with its interval per condition (95 % where the rounds allow it, else what they
    cover), one colour per server, one panel per item; the study's own ratio as a black tick."""
    d = ratios.filter((pl.col("comparison") == comparison) & pl.col("ratio").is_not_null())
    cover = d["coverage"].drop_nulls() if "coverage" in d.columns else pl.Series([], dtype=pl.Float64)
    what = f"{cover.min():.0%} interval" if cover.len() and cover.min() == cover.max() else "interval: see its method"
    d = d.select("server", "item", "label", "condition_order", "ratio", "ci_low", "ci_high", "coverage", "study_ratio")
    title = f"latency ratio to baseline ({what})".replace("%", " %")
    return _per_condition(
        d,
        alt.X("ci_low:Q", title=title, scale=alt.Scale(zero=False)),
        "ci_high",
        "ratio",
        "study_ratio",
        "auto_explain overhead per condition (black tick: the study)",
        [*charts.tips(".3f", "ratio", "ci_low", "ci_high"), *charts.tips(".0%", "coverage")],
        size=45,
    )


def latency_chart(summary: pl.DataFrame) -> alt.FacetChart:
    """Median latency with min–max per condition and server, one panel per item."""
    d = summary.filter(pl.col("median").is_not_null()).select(
        "server", "item", "label", "condition_order", "n", "median", "min", "max", "study_ms"
    )
    # few ticks: a 240 px panel of a narrow range otherwise crowds its labels into each other
    axis = alt.Axis(tickCount=5, labelOverlap="greedy")
    return _per_condition(
        d,
        alt.X("min:Q", title="latency average, ms (median, min–max)", scale=alt.Scale(zero=False), axis=axis),
        "max",
        "median",
        "study_ms",
        "Latency per run (black tick: the study, PostgreSQL 14.1)",
        [*charts.tips(".4f", "median", "min", "max"), "n", *charts.tips(".3f", "study_ms")],
        stroke=None,
        size=40,
    )

"""Charts and display tables of the auto_explain report (altair, rendered as SVG by `charts.setup()`)."""

from __future__ import annotations

import json

import altair as alt
import polars as pl

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


def _facet(layers: list, d: pl.DataFrame, title: str) -> alt.FacetChart:
    # layers without data of their own: the facet hands each panel its item's rows
    return (
        alt.layer(*layers)
        .properties(width=240, height=alt.Step(16))
        .facet(data=d, column=alt.Column("item:N", title=None))
        .resolve_scale(x="independent")
        .properties(title=title)
    )


def _y(d: pl.DataFrame) -> alt.Y:
    order = d.sort("condition_order")["label"].unique(maintain_order=True).to_list()
    return alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))


def overhead_chart(ratios: pl.DataFrame, comparison: str = "overhead") -> alt.FacetChart:
    """Ratio to the baseline with its interval per condition (95 % where the rounds allow it, else what they
    cover), one colour per server, one panel per item; the study's own ratio as a black tick."""
    d = ratios.filter((pl.col("comparison") == comparison) & pl.col("ratio").is_not_null())
    cover = d["coverage"].drop_nulls() if "coverage" in d.columns else pl.Series([], dtype=pl.Float64)
    what = f"{cover.min():.0%} interval" if cover.len() and cover.min() == cover.max() else "interval: see its method"
    d = d.select("server", "item", "label", "condition_order", "ratio", "ci_low", "ci_high", "coverage", "study_ratio")
    y = _y(d)
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(1.0))
    bars = (
        alt.Chart()
        .mark_rule(strokeWidth=2)
        .encode(
            x=alt.X(
                "ci_low:Q", title=f"latency ratio to baseline ({what})".replace("%", " %"), scale=alt.Scale(zero=False)
            ),
            x2="ci_high:Q",
            y=y,
            yOffset="server:N",
            color=alt.Color("server:N", title="server"),
        )
    )
    points = (
        alt.Chart()
        .mark_point(filled=True, size=45)
        .encode(
            x="ratio:Q",
            y=y,
            yOffset="server:N",
            color="server:N",
            tooltip=[
                "server",
                "item",
                "label",
                alt.Tooltip("ratio:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
                alt.Tooltip("coverage:Q", format=".0%"),
            ],
        )
    )
    study = (
        alt.Chart()
        .transform_filter("datum.study_ratio != null")
        .mark_tick(color="black", thickness=2, size=14)
        .encode(x="study_ratio:Q", y=y)
    )
    return _facet([one, bars, points, study], d, "auto_explain overhead per condition (black tick: the study)")


def latency_chart(summary: pl.DataFrame) -> alt.FacetChart:
    """Median latency with min–max per condition and server, one panel per item."""
    d = summary.filter(pl.col("median").is_not_null()).select(
        "server", "item", "label", "condition_order", "n", "median", "min", "max", "study_ms"
    )
    y = _y(d)
    span = (
        alt.Chart()
        .mark_rule()
        .encode(
            # few ticks: a 240 px panel of a narrow range otherwise crowds its labels into each other
            x=alt.X(
                "min:Q",
                title="latency average, ms (median, min–max)",
                scale=alt.Scale(zero=False),
                axis=alt.Axis(tickCount=5, labelOverlap="greedy"),
            ),
            x2="max:Q",
            y=y,
            yOffset="server:N",
            color=alt.Color("server:N", title="server"),
        )
    )
    med = (
        alt.Chart()
        .mark_point(filled=True, size=40)
        .encode(
            x="median:Q",
            y=y,
            yOffset="server:N",
            color="server:N",
            tooltip=[
                "server",
                "item",
                "label",
                alt.Tooltip("median:Q", format=".4f"),
                alt.Tooltip("min:Q", format=".4f"),
                alt.Tooltip("max:Q", format=".4f"),
                "n",
                alt.Tooltip("study_ms:Q", format=".3f"),
            ],
        )
    )
    study = (
        alt.Chart()
        .transform_filter("datum.study_ms != null")
        .mark_tick(color="black", thickness=2, size=14)
        .encode(x="study_ms:Q", y=y)
    )
    return _facet([span, med, study], d, "Latency per run (black tick: the study, PostgreSQL 14.1)")

"""Charts of the parallel index builds, from the derived tables (the notebook and the report draw the same)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts

_KEY = [alt.Tooltip("server:N"), alt.Tooltip("label:N", title="key")]  # every tooltip's first lines


def _workers(df: pl.DataFrame) -> alt.X:
    """The worker counts as ticks, exactly: a quantitative axis over 0-2 otherwise ticks every 0.5 ("0 1 1 2 2")."""
    counts = sorted({int(w) for w in df["workers"].drop_nulls()})
    return alt.X("workers:Q", title="max_parallel_maintenance_workers", axis=alt.Axis(values=counts, format="d"))


def time_chart(summary: pl.DataFrame) -> alt.FacetChart:
    """Median seconds per worker count (min–max bars), with the ideal t0 / (workers + 1) dashed."""
    df = summary.select(
        "server", "label", "key_columns", "workers", "n", "median", "min", "max", "t0", "ideal_s", "launched_max"
    ).sort("server", "key_columns", "workers")
    tip = [
        *_KEY,
        alt.Tooltip("workers:Q"),
        *charts.tips(".3f", "median", "min", "max"),
        alt.Tooltip("ideal_s:Q", title="ideal", format=".3f"),
        alt.Tooltip("launched_max:Q", title="workers launched"),
        alt.Tooltip("n:Q"),
    ]
    base = alt.Chart().encode(x=_workers(df), color=alt.Color("server:N", title="server"))
    measured = base.mark_line(point=True).encode(y=alt.Y("median:Q", title="seconds (median, min–max)"), tooltip=tip)
    spread = base.mark_rule().encode(y="min:Q", y2="max:Q")
    ideal = base.mark_line(strokeDash=[4, 3], opacity=0.6).encode(y="ideal_s:Q", tooltip=tip)
    return (
        alt.layer(spread, measured, ideal, data=df)
        .properties(width=170, height=150)
        .facet(
            column=alt.Column("label:N", title=None, sort=sorted(set(df["label"]))),
        )
        .resolve_scale(y="independent")
        .properties(title="CREATE INDEX on lineorder: time vs workers (dashed: t0 / (workers + 1))")
    )


def speedup_chart(speedup: pl.DataFrame) -> alt.FacetChart:
    """Speed-up over the serial build with its interval (the findings' paired comparison); grey: workers + 1
    (dashed) and the same capped at the machine's cores (dotted)."""
    df = speedup.select(
        "server", "label", "key_columns", "workers", "speedup", "ci_low", "ci_high", "coverage", "ideal", "ceiling"
    ).sort("server", "key_columns", "workers")
    tip = [
        *_KEY,
        alt.Tooltip("workers:Q"),
        alt.Tooltip("speedup:Q", format=".2f"),
        alt.Tooltip("ci_low:Q", title="interval low", format=".2f"),
        alt.Tooltip("ci_high:Q", title="interval high", format=".2f"),
        alt.Tooltip("coverage:Q", format=".0%"),
        alt.Tooltip("ideal:Q", title="workers + 1"),
    ]
    base = alt.Chart().encode(x=_workers(df))
    col = alt.Color("label:N", title="index key")
    points = base.mark_line(point=True).encode(
        y=alt.Y("speedup:Q", title="speed-up over 0 workers"), color=col, tooltip=tip
    )
    ci = base.mark_rule().encode(y="ci_low:Q", y2="ci_high:Q", color=col)
    ideal = base.mark_line(strokeDash=[4, 3], color="gray").encode(y="ideal:Q", detail="label:N")
    ceiling = base.mark_line(strokeDash=[1, 2], color="black").encode(y="ceiling:Q", detail="label:N")
    return (
        alt.layer(ideal, ceiling, ci, points, data=df)
        .properties(width=260, height=200)
        .facet(column=alt.Column("server:N", title=None))
        .properties(title="Speed-up (paired, interval); dashed: workers + 1, dotted: capped at the cores")
    )


def size_chart(summary: pl.DataFrame) -> alt.HConcatChart:
    """Per key: the size of the index built and the serial build time (the study's explanation of the time)."""
    df = (
        summary.filter(pl.col("workers") == 0)
        .select("server", "label", "key_columns", "n", "median", "min", "max", "index_mib")
        .sort("server", "key_columns")
    )
    tip = [
        *_KEY,
        alt.Tooltip("index_mib:Q", title="index MiB", format=".1f"),
        alt.Tooltip("median:Q", title="median s", format=".3f"),
        *charts.tips(".3f", "min", "max"),
        alt.Tooltip("n:Q"),
    ]
    x = alt.X("label:N", title=None, sort=sorted(set(df["label"])), axis=alt.Axis(labelAngle=0))
    base = alt.Chart(df).encode(x=x, xOffset="server:N", color=alt.Color("server:N"), tooltip=tip)
    size = (
        base.mark_bar()
        .encode(y=alt.Y("index_mib:Q", title="index size (MiB)"))
        .properties(width=220, height=180, title="Index size")
    )
    rule, point = charts.interval_marks(
        base, alt.Y("min:Q", title="seconds (median, min–max)"), "max", "median", stroke=None, size=50
    )
    time = (rule + point).properties(width=220, height=180, title="Serial build time")
    return alt.hconcat(size, time).properties(title="Index key: size of the index and serial build time")

"""Study S5's charts: time and speed-up against the workers, the study's figures beside ours (the report section
and notebook 70 show them)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts
from .params import STUDY_PARALLEL_S, STUDY_SERIAL_S, STUDY_SPEEDUP, STUDY_WORKERS_PLANNED


def time_chart(summary: pl.DataFrame) -> alt.Chart:
    """Median seconds against max_parallel_workers_per_gather (0 = serial), min–max as a bar."""
    base = alt.Chart(summary).encode(
        x=alt.X("workers:O", title="max_parallel_workers_per_gather (0 = serial)", axis=alt.Axis(labelAngle=0)),
        color=alt.Color("server:N", title="server"),
        xOffset="server:N",
        tooltip=["server", "condition", "n", *charts.tips(".4f", "median", "min", "max", "ci_low", "ci_high")],
    )
    rule, point = charts.interval_marks(
        base, alt.Y("min:Q", title="seconds (median, min–max)"), "max", "median", size=60
    )
    return (rule + point).properties(title="count(*), avg(x) over the partitions: time against workers")


def speedup_chart(speedup: pl.DataFrame, cores: int | None = None) -> alt.LayerChart:
    """Speed-up over serial with its interval (the findings' paired comparison) per worker count; the study's single
    point in black."""
    names = sorted(set(speedup["server"]))
    # servers side by side at each worker count, so that their intervals do not hide each other
    offset = {n: (i - (len(names) - 1) / 2) * 0.08 for i, n in enumerate(names)}
    ours = speedup.select("server", "workers", "speedup", "speedup_ci_low", "speedup_ci_high", "coverage", "n_rounds")
    ours = ours.with_columns(x=pl.col("workers") + pl.col("server").replace_strict(offset, return_dtype=pl.Float64))
    study = pl.DataFrame(
        {
            "x": [float(STUDY_WORKERS_PLANNED)],
            "speedup": [STUDY_SPEEDUP],
            "label": [f"study: {STUDY_SERIAL_S} s → {STUDY_PARALLEL_S} s"],
            "detail": [f"PostgreSQL 11, {STUDY_WORKERS_PLANNED} workers planned, cold cache, 3 NVMe"],
        }
    )
    x = alt.X(
        "x:Q", title="max_parallel_workers_per_gather", scale=alt.Scale(domainMin=0), axis=alt.Axis(tickMinStep=1)
    )
    base = alt.Chart(ours).encode(
        x=x,
        color=alt.Color("server:N", title="server"),
        tooltip=[
            "server",
            "workers",
            alt.Tooltip("speedup:Q", format=".2f"),
            alt.Tooltip("speedup_ci_low:Q", format=".2f", title="interval low"),
            alt.Tooltip("speedup_ci_high:Q", format=".2f", title="interval high"),
            alt.Tooltip("coverage:Q", format=".0%"),
            alt.Tooltip("n_rounds:Q", title="rounds"),
        ],
    )
    marks = alt.Chart(study).encode(x="x:Q", y="speedup:Q", tooltip=["label", "detail"])
    layers = [
        alt.Chart(pl.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 3], color="gray").encode(y="y:Q"),
        base.mark_rule(strokeWidth=2).encode(
            y=alt.Y("speedup_ci_low:Q", title="speed-up over serial (paired, interval)"), y2="speedup_ci_high:Q"
        ),
        base.mark_line(point=True).encode(y="speedup:Q"),
        marks.mark_point(shape="square", filled=True, size=90, color="black"),
        marks.mark_text(align="right", dx=-8, fontSize=11).encode(text="label"),
    ]
    if cores:
        layers.insert(
            1,
            alt.Chart(pl.DataFrame({"y": [float(cores)], "label": [f"{cores} cores"]}))
            .mark_rule(strokeDash=[1, 3], color="firebrick")
            .encode(y="y:Q", tooltip=["label"]),
        )
    title = "Speed-up over serial (black: the study)" + (f"; dotted red: this machine's {cores} cores" if cores else "")
    return alt.layer(*layers).properties(title=title)

"""Charts of the pgbench stage (altair; rendered as SVG by `charts.setup()`). Every point is a median
over repetitions with its min-max range, as the studies charted; the tables beside them give the 95 % CI."""

from __future__ import annotations

import altair as alt
import polars as pl

_SERVER = alt.Color("server:N", title="server")
_INT = alt.Axis(format="d", tickMinStep=1)


def _median_range(summary: pl.DataFrame, x: str, x_title: str, y_title: str, facet: str, facet_title: str):
    base = alt.Chart(summary.drop_nulls("median")).encode(x=alt.X(f"{x}:N", title=x_title), color=_SERVER)
    points = base.mark_point(filled=True, size=70).encode(
        y=alt.Y("median:Q", title=y_title, scale=alt.Scale(zero=False)),
        tooltip=[x, facet, "n", "n_missing", "median", "min", "max", "ci_low", "ci_high"],
    )
    rules = base.mark_rule(strokeWidth=2).encode(y="min:Q", y2="max:Q")
    return (rules + points).properties(width=160, height=220).facet(
        column=alt.Column(f"{facet}:O", title=facet_title)
    ).resolve_scale(y="independent")  # fmt: skip


def load_time(summary: pl.DataFrame):
    return _median_range(summary, "server", "server", "load time, s (median, min-max)", "scale", "scale factor")


def select_only(summary: pl.DataFrame):
    return _median_range(summary, "server", "server", "select-only tps (median, min-max)", "scale", "scale factor")


def load_steps(steps: pl.DataFrame):
    """Median seconds of each step of pgbench -i (13+ prints the breakdown), stacked."""
    med = steps.group_by("server", "scale", "step").agg(pl.col("seconds").median())
    return alt.Chart(med).mark_bar().encode(
        x=alt.X("server:N", title=None), y=alt.Y("seconds:Q", title="median seconds", stack=True),
        color=alt.Color("step:N", title="pgbench -i step"), tooltip=["server", "scale", "step", "seconds"],
    ).properties(width=120, height=200).facet(column=alt.Column("scale:O", title="scale factor")).resolve_scale(
        y="independent"
    )  # fmt: skip


def scaling(summary: pl.DataFrame):
    data = summary.drop_nulls("median")
    ticks = sorted(data["clients"].unique().to_list())
    base = alt.Chart(data).encode(
        x=alt.X("clients:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=ticks), title="clients (-c)"),
        color=_SERVER,
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", title="tps (median, min-max band)"),
        tooltip=["mode", "clients", "n", "median", "min", "max", "ci_low", "ci_high"],
    )
    band = base.mark_area(opacity=0.2).encode(y="min:Q", y2="max:Q")
    return (band + line).properties(width=300, height=240).facet(
        column=alt.Column("mode:N", title="workload")
    ).resolve_scale(y="independent")  # fmt: skip


def degradation(summary: pl.DataFrame, runs: pl.DataFrame):
    """tps of each run of the no-vacuum series: every run (points), median over series repetitions (line)
    and their min-max (band, visible when the series was repeated)."""
    data = runs.drop_nulls("tps").join(
        summary.select("server", "scale", "run", "median", "min", "max"), on=["server", "scale", "run"], how="left"
    )  # one data set for every layer: altair facets only layers that share it
    base = alt.Chart(data).encode(x=alt.X("run:Q", title="run of the series", axis=_INT), color=_SERVER)
    band = base.mark_area(opacity=0.2).encode(y="min:Q", y2="max:Q")
    line = base.mark_line().encode(y=alt.Y("median:Q", title="tps", scale=alt.Scale(zero=False)))
    pts = base.mark_point(size=30).encode(
        y="tps:Q", tooltip=["server", "scale", "series", "run", "tps", "latency_avg_ms"]
    )
    return alt.layer(band, line, pts).properties(width=300, height=240).facet(
        column=alt.Column("scale:O", title="scale factor")
    ).resolve_scale(y="independent")  # fmt: skip


def growth(sizes: pl.DataFrame):
    """Database and data-directory size after the fresh load (run 0) and after every run of the series."""
    cols = [c for c in ("db_bytes", "datadir_bytes") if sizes[c].drop_nulls().len()]
    long = sizes.filter(pl.col("series") == 0).unpivot(
        index=["server", "scale", "run"], on=cols, variable_name="what", value_name="bytes"
    ).with_columns((pl.col("bytes") / 2**20).alias("MiB"), pl.col("what").replace(
        {"db_bytes": "database (pg_database_size)", "datadir_bytes": "data directory (du)"}
    ))  # fmt: skip
    return alt.Chart(long.drop_nulls("MiB")).mark_line(point=True).encode(
        x=alt.X("run:Q", title="run (0 = after the load)", axis=_INT), y=alt.Y("MiB:Q", scale=alt.Scale(zero=False)),
        color=_SERVER, tooltip=["server", "scale", "run", "what", "MiB"],
    ).properties(width=220, height=180).facet(
        column=alt.Column("scale:O", title="scale factor"), row=alt.Row("what:N", title=None)
    ).resolve_scale(y="independent")  # fmt: skip


def timeseries(ts: pl.DataFrame, experiment: str):
    """Per-interval tps within each run (aggregate logs): a ramp-up or a checkpoint dip shows here.
    The partial first and last interval of each run are left out."""
    data = ts.filter((pl.col("experiment") == experiment) & ~pl.col("partial"))
    if data.height > 4000:  # altair's 5,000-row limit: keep the first runs
        data = data.head(4000)
    detail = "item:N" if experiment == "pgbench_series" else "repetition:N"
    return alt.Chart(data).mark_line(opacity=0.6).encode(
        x=alt.X("t_s:Q", title="seconds into the run"), y=alt.Y("tps:Q", title="tps per interval"),
        color=_SERVER, detail=detail, tooltip=["server", "condition", "item", "repetition", "t_s", "tps"],
    ).properties(width=300, height=200).facet(column=alt.Column("condition:N", title=None))  # fmt: skip

"""Charts of the pgbench stage (altair; rendered as SVG by `charts.setup()`). Every point is a median
over repetitions with its min-max range, as the studies charted; the tables beside them give the 95 % CI."""

from __future__ import annotations

import math

import altair as alt
import polars as pl

from ...core import charts

# full-strength legend swatches: nine servers' pale symbols could not be told apart
_SERVER = alt.Color("server:N", title="server", legend=alt.Legend(symbolOpacity=1, symbolType="circle"))
_INT = alt.Axis(format="d", tickMinStep=1)


def _panels(chart, column: str, title: str, width: int, height: int) -> alt.FacetChart:
    """One panel per value of `column`, each with a y scale of its own."""
    return (
        chart.properties(width=width, height=height)
        .facet(column=alt.Column(column, title=title))
        .resolve_scale(y="independent")
    )


def _median_range(summary: pl.DataFrame, x: str, x_title: str, y_title: str, facet: str, facet_title: str):
    base = alt.Chart(summary.drop_nulls("median")).encode(x=alt.X(f"{x}:N", title=x_title), color=_SERVER)
    points = base.mark_point(filled=True, size=70).encode(
        y=alt.Y("median:Q", title=y_title, scale=alt.Scale(zero=False)),
        tooltip=[x, facet, "n", "n_missing", "median", "min", "max", "ci_low", "ci_high"],
    )
    rules = base.mark_rule(strokeWidth=2).encode(y="min:Q", y2="max:Q")
    return _panels(rules + points, f"{facet}:O", facet_title, 160, 220)


def load_time(summary: pl.DataFrame):
    return _median_range(summary, "server", "server", "load time, s (median, min-max)", "scale", "scale factor")


def select_only(summary: pl.DataFrame):
    return _median_range(summary, "server", "server", "select-only tps (median, min-max)", "scale", "scale factor")


def load_steps(steps: pl.DataFrame):
    """Median seconds of each step of pgbench -i (13+ prints the breakdown), stacked."""
    med = steps.group_by("server", "scale", "step").agg(pl.col("seconds").median()).sort("server", "scale", "step")
    bars = alt.Chart(med).mark_bar()
    return _panels(
        bars.encode(
            x=alt.X("server:N", title=None),
            y=alt.Y("seconds:Q", title="median seconds", stack=True),
            color=alt.Color("step:N", title="pgbench -i step"),
            tooltip=["server", "scale", "step", "seconds"],
        ),
        "scale:O",
        "scale factor",
        120,
        200,
    )


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
    return _panels(band + line, "mode:N", "workload", 300, 240)


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
    return _panels(alt.layer(band, line, pts), "scale:O", "scale factor", 300, 240)


def timeseries(ts: pl.DataFrame, experiment: str):
    """Per-interval tps within each run (aggregate logs): a ramp-up or a checkpoint dip shows here.
    The partial first and last interval of each run are left out."""
    data = ts.filter((pl.col("experiment") == experiment) & ~pl.col("partial"))
    if data.height > 4000:  # altair's 5,000-row limit: keep the first runs
        data = data.head(4000)
    detail = "item:N" if experiment == "pgbench_series" else "repetition:N"
    return (
        alt.Chart(data)
        .mark_line(opacity=0.6)
        .encode(
            x=alt.X("t_s:Q", title="seconds into the run"),
            y=alt.Y("tps:Q", title="tps per interval"),
            color=_SERVER,
            detail=detail,
            tooltip=["server", "condition", "item", "repetition", "t_s", "tps"],
        )
        .properties(width=300, height=200)
        .facet(column=alt.Column("condition:N", title=None))
    )


def version_curve(curve: pl.DataFrame):
    """Our medians by major version relative to the oldest server (interval as whiskers) beside S3's readings
    for 7.3 … 9.1 (relative to 7.3), on one version axis: throughput in one panel, load speed in another (one
    measure per axis), S3's readings numbered on the chart and written out beneath it (no rotated text)."""
    from . import reference as ref

    rows, oldest = [], None
    for (what, scale), g in curve.drop_nulls(["median", "major"]).group_by("what", "scale", maintain_order=True):
        first = g.sort("major").row(0, named=True)
        base, oldest = first["median"], oldest or str(first["major"])
        inv = what.startswith("load")  # a shorter load is better: shown as speed, 1 / time
        for r in g.iter_rows(named=True):

            def rel(x, base=base, inv=inv):
                return None if not x else (base / x if inv else x / base)  # no interval from a single run

            lo, hi = (rel(r["high"]), rel(r["low"])) if inv else (rel(r["low"]), rel(r["high"]))
            rows.append(
                {
                    "version": str(r["major"]),
                    "relative": rel(r["median"]),
                    "low": lo,
                    "high": hi,
                    "panel": "load speed (1 / load time)" if inv else "throughput (tps)",
                    "series": ("load speed" if inv else what) + f", scale {scale}",
                    "interval": r["method"],
                    "median": r["median"],
                }
            )
    schema = {
        "version": pl.String,
        "relative": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
        "panel": pl.String,
        "series": pl.String,
        "interval": pl.String,
        "median": pl.Float64,
    }
    ours = pl.from_dicts(rows, schema=schema)
    order = ref.version_order(ours["version"].to_list())
    x = alt.X(
        "version:O", sort=order, scale=alt.Scale(domain=order), title="PostgreSQL version", axis=alt.Axis(labelAngle=0)
    )
    st = (
        ref.readings()
        .with_row_index("n", offset=1)
        .with_columns(pl.col("relative").fill_null(1.0).alias("at"), pl.col("n").cast(pl.String).alias("mark"))
    )
    panels = []
    for panel in ("throughput (tps)", "load speed (1 / load time)"):
        mine = ours.filter(pl.col("panel") == panel)
        if not mine.height:
            continue
        throughput = panel.startswith("throughput")
        y = alt.Y(
            "relative:Q",
            title=[f"{panel}, relative", f"(ours: {oldest} = 1" + ("; S3: 7.3 = 1)" if throughput else ")")],
        )
        mine_x = (
            x
            if throughput
            else alt.X(
                "version:O", sort=order[len(ref.VERSIONS) :], title="PostgreSQL version", axis=alt.Axis(labelAngle=0)
            )
        )  # S3 has no load figures
        b = alt.Chart(mine).encode(x=mine_x, color=alt.Color("series:N", title="ours", legend=alt.Legend(labelLimit=0)))
        layers = [
            b.mark_line(point=True).encode(y=y, tooltip=["series", "version", "relative", "median", "interval"]),
            b.mark_rule().encode(y="low:Q", y2="high:Q"),
        ]
        if throughput:  # S3's readings are about tps
            s3 = alt.Chart(st).encode(x=x, y=alt.Y("at:Q"))
            layers += [
                s3.mark_point(shape="triangle-up", size=90, color="black", filled=True).encode(tooltip=["label"]),
                s3.mark_text(dy=-12, fontSize=11, fontWeight="bold", color="black").encode(text="mark:N"),
            ]
        panels.append(alt.layer(*layers).properties(width=520, height=220, title=panel))
    notes = (
        alt.Chart(st.with_columns((pl.col("mark") + pl.lit("  ") + pl.col("label")).alias("note")))
        .mark_text(align="left", fontSize=11)
        .encode(x=alt.value(0), y=alt.Y("n:O", axis=None), text="note:N")
        .properties(
            width=520, height=alt.Step(16), title="S3's readings (▲: a figure in its text; numbered on the chart)"
        )
    )
    return alt.vconcat(*panels, notes).properties(
        title="S3's versions (7.3 … 9.1, readings of its text) and ours (medians, whiskers: their interval)"
    )


def db_size(sizes: pl.DataFrame):
    """The pgbench database's own size (pg_database_size, no other database, no WAL) after the fresh load and
    after the last run of the no-vacuum series, per server."""
    s = sizes.drop_nulls("db_bytes").sort("run")
    ends = s.group_by("server", "scale", "series", maintain_order=True).agg(
        pl.col("db_bytes").first().alias("after the load"), pl.col("db_bytes").last().alias("after the series")
    )
    long = ends.filter(pl.col("series") == 0).unpivot(
        index=["server", "scale"], on=["after the load", "after the series"], variable_name="when", value_name="bytes"
    )
    # a fixed row order: the stored chart must come out byte-identical on every render
    long = long.with_columns((pl.col("bytes") / 2**20).round(1).alias("MiB")).sort("server", "scale", "when")
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("when:N", title=None, sort=["after the load", "after the series"]),
            y=alt.Y("MiB:Q"),
            color=alt.Color("when:N", legend=None),
            column=alt.Column("server:N", title="pg_database_size of the pgbench database, by server"),
            tooltip=["server", "scale", "when", "MiB"],
        )
        .properties(width=70, height=160)
    )


def _run_label() -> pl.Expr:
    return pl.concat_str(
        [
            pl.col("experiment").str.strip_prefix("pgbench_"),
            "condition",
            "item",
            pl.lit("r") + pl.col("repetition").cast(pl.String),
        ],
        separator=" ",
    )


def timeline(tl: pl.DataFrame):
    """Every second of every measured run relative to the run's own median second (1 = its usual pace, so select-only
    and TPC-B share an axis), one panel per server, one line per run coloured by experiment; a red triangle on the
    second the run's checkpoint began. A dip there is the checkpoint's I/O; a dip elsewhere has another cause (the
    same run's pgbench_system says whether the machine was busy)."""
    data = tl.with_columns(_run_label().alias("run_label"), pl.col("experiment").str.strip_prefix("pgbench_"))
    # the run's median over its whole seconds (over all of them when it has none: a 1 s run)
    whole = pl.col("tps").filter(~pl.col("partial")).median().over("run_label")
    median = pl.when(whole.is_not_null()).then(whole).otherwise(pl.col("tps").median().over("run_label"))
    data = data.with_columns((pl.col("tps") / median).round(3).alias("relative")).select(
        "server",
        "experiment",
        "run_label",
        "second",
        pl.col("tps").round(1),
        "relative",
        "latency_p95_ms",
        "partial",
        "checkpoint",
    )
    data = data.sort("server", "run_label", "second")  # a fixed row order: the stored chart is the same every render
    if data.height > 4000:  # altair's 5,000-row limit: keep the first runs of each server
        data = data.head(4000)
    base = alt.Chart(data).encode(
        x=alt.X("second:Q", title="second of the run", axis=_INT),
        y=alt.Y("relative:Q", title="tps / the run's median second"),
        tooltip=["server", "run_label", "second", "tps", "relative", "latency_p95_ms", "partial", "checkpoint"],
    )
    lines = base.mark_line(opacity=0.5, strokeWidth=1).encode(
        color=alt.Color("experiment:N", title="experiment"), detail="run_label:N"
    )
    return charts.checkpoint_timeline(base, lines, 80, 220, 150, 3, "Every second of every measured run")


def latency(lat: pl.DataFrame):
    """Per cell of select-only and the scale-up: median tps (left) beside p50 / p95 / p99 / max latency with each
    percentile's interval over the rounds (right, log scale). A cell with a checkpoint or a steal / iowait flag in
    one of its runs is drawn in red on the left, the flag in the tooltip."""
    data = (
        lat.filter(pl.col("experiment").is_in(["pgbench_select_only", "pgbench_scaling"]))
        .with_columns(
            pl.concat_str(["server", "condition", "item"], separator=" · ").alias("cell"),
            pl.when(pl.col("flagged_runs") > 0)
            .then(pl.lit("steal / iowait"))
            .when(pl.col("checkpoint_runs") > 0)
            .then(pl.lit("checkpoint"))
            .otherwise(pl.lit("none"))
            .alias("flag"),
        )
        .sort("experiment", "condition", "item", "server")
    )
    order = data["cell"].to_list()
    y = alt.Y("cell:N", sort=order, title=None)
    tps = (
        alt.Chart(data)
        .mark_point(filled=True, size=60)
        .encode(
            # 200 px cannot hold "10,000 … 60,000" side by side: SI labels (10k), four ticks
            x=alt.X("tps_median:Q", title="tps (median of rounds)", axis=alt.Axis(format="~s", tickCount=4)),
            y=y,
            color=alt.Color(
                "flag:N",
                scale=alt.Scale(
                    domain=["none", "checkpoint", "steal / iowait"], range=["#4c78a8", "#d62728", "#ff7f0e"]
                ),
                title="a run of the cell had",
            ),
            tooltip=["cell", "tps_median", "n_rounds", "checkpoint_runs", "flagged_runs", "system_flags"],
        )
        .properties(width=200, height=alt.Step(14))
    )
    long = data.unpivot(
        index=["cell"], on=["p50_ms", "p95_ms", "p99_ms", "max_ms"], variable_name="percentile", value_name="ms"
    ).with_columns(pl.col("percentile").str.strip_suffix("_ms"))
    bands = pl.concat(
        [
            data.select(
                "cell",
                pl.lit(p).alias("percentile"),
                pl.col(f"{p}_low_ms").alias("low"),
                pl.col(f"{p}_high_ms").alias("high"),
            )
            for p in ("p50", "p95", "p99")
        ]
    ).drop_nulls(["low", "high"])
    colour = alt.Color("percentile:N", sort=["p50", "p95", "p99", "max"], title="latency")
    # a log axis over 0.01-100 ms labels 2 and 5 between the decades, too close on 320 px: decades only
    ms = long["ms"].drop_nulls().filter(long["ms"].drop_nulls() > 0)
    lo, hi = (math.floor(math.log10(ms.min())), math.ceil(math.log10(ms.max()))) if ms.len() else (0, 0)
    axis = alt.Axis(values=[10.0**k for k in range(lo, hi + 1)], format="~g")
    x = alt.X("ms:Q", scale=alt.Scale(type="log"), axis=axis, title="latency, ms (log; rule: interval over rounds)")
    points = (
        alt.Chart(long)
        .mark_point(filled=True, size=50)
        .encode(x=x, y=y, color=colour, tooltip=["cell", "percentile", "ms"])
    )
    rules = (
        alt.Chart(bands)
        .mark_rule(strokeWidth=2, opacity=0.6)
        .encode(x=alt.X("low:Q", scale=alt.Scale(type="log")), x2="high:Q", y=y, color=colour)
    )
    right = alt.layer(rules, points).properties(width=320, height=alt.Step(14))
    return (
        alt.hconcat(tps, right)
        .resolve_scale(color="independent")
        .properties(title="Throughput beside its latency percentiles, per cell")
    )


def buffers(runs: pl.DataFrame):
    """S3's mechanism on one server: select-only tps under each shared_buffers (smallest first), every round's run
    (points) and the median with the min-max of the rounds (rule), one panel per scale."""
    data = runs.drop_nulls("tps").select("server", "scale", "shared_buffers", "shared_buffers_bytes", "round", "tps")
    summary = data.group_by("server", "scale", "shared_buffers", "shared_buffers_bytes").agg(
        pl.col("tps").median().alias("median"), pl.col("tps").min().alias("min"), pl.col("tps").max().alias("max")
    )
    data = data.join(summary, on=["server", "scale", "shared_buffers", "shared_buffers_bytes"], how="left").sort(
        "scale", "shared_buffers_bytes", "round"
    )  # one data set for every layer: altair facets only layers that share it; a fixed order, the same chart
    order = data.unique("shared_buffers", maintain_order=True)["shared_buffers"].to_list()
    base = alt.Chart(data).encode(x=alt.X("shared_buffers:N", sort=order, title="shared_buffers"), color=_SERVER)
    pts = base.mark_point(size=30, opacity=0.6).encode(
        y=alt.Y("tps:Q", title="select-only tps (rounds; median, min-max)", scale=alt.Scale(zero=False)),
        tooltip=["server", "scale", "shared_buffers", "round", "tps"],
    )
    rule = base.mark_rule(strokeWidth=2).encode(y="min:Q", y2="max:Q")
    med = base.mark_tick(thickness=3, size=24).encode(y="median:Q", tooltip=["shared_buffers", "median", "min", "max"])
    return _panels(alt.layer(rule, med, pts), "scale:O", "scale factor (data in the OS cache)", 160, 220)

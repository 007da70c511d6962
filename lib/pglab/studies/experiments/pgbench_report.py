"""A pgbench experiment's evidence in the report (issue 60), from the derived tables alone (`pgbench_tables`): per
condition tps and p50 / p95 / p99 / max latency with what the server counted, a per-second timeline with the
checkpoints marked, and tps and latency against clients when clients vary."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts
from .params import AA_SUFFIX, CLIENTS, PROTOCOL, RATE, SCALE, THREADS

# what the server counted per run, as the report shows it (median over a condition's rounds)
COUNTERS = {
    ("database", "xact_commit"): "commits",
    ("database", "blks_hit"): "blocks hit",
    ("database", "blks_read"): "blocks read",
    ("database", "temp_bytes"): "temp bytes",
    ("wal", "wal_bytes"): "WAL bytes",
    ("checkpointer", "checkpoints_req"): "checkpoints req.",
    ("checkpointer", "checkpoints_timed"): "checkpoints timed",
}


def _interval(lo, hi) -> str:
    return f" [{lo:.3g}–{hi:.3g}]" if lo is not None and hi is not None else ""


def per_condition(lat: pl.DataFrame, counters: pl.DataFrame) -> pl.DataFrame:
    """One row per (server, condition): the pgbench options, median tps, latency percentiles (ms, each with its
    interval over the rounds), runs with a checkpoint inside, and the server counters' medians per run."""
    rows = []
    for r in lat.sort("server", "condition").iter_rows(named=True):
        row = {
            "server": r["server"],
            "condition": r["condition"],
            "clients": r[CLIENTS],
            "threads": r[THREADS],
            "scale": r[SCALE],
            "rate": r[RATE],
            "protocol": r[PROTOCOL],
            "tps": round(r["tps_median"]) if r["tps_median"] is not None else None,
        }
        for p in ("p50", "p95", "p99"):
            v = r[f"{p}_ms"]
            row[f"{p} ms"] = f"{v:.3g}{_interval(r[f'{p}_low_ms'], r[f'{p}_high_ms'])}" if v is not None else None
        row["max ms"] = round(r["max_ms"], 3) if r["max_ms"] is not None else None
        row["runs with a checkpoint"] = f"{r['checkpoint_runs']} of {r['n_rounds']}"
        rows.append(row)
    df = pl.from_dicts(rows) if rows else pl.DataFrame()
    if df.is_empty() or counters.is_empty():
        return df
    wanted = pl.DataFrame(
        [{"view": v, "counter": c, "label": label} for (v, c), label in COUNTERS.items()],
        schema={"view": pl.String, "counter": pl.String, "label": pl.String},
    )
    med = (
        counters.join(wanted, on=["view", "counter"])
        .group_by("server", "condition", "label")
        .agg(pl.col("delta").median())
        .pivot(on="label", index=["server", "condition"], values="delta")
    )
    shown = [x for x in COUNTERS.values() if x in med.columns]  # counts and bytes: whole numbers
    med = med.select("server", "condition", *(pl.col(x).round().cast(pl.Int64) for x in shown))
    return df.join(med, on=["server", "condition"], how="left")


def timeline_chart(tl: pl.DataFrame, title: str) -> alt.FacetChart:
    """tps in every second of every measured run, one line per run coloured by condition, one panel per server; a red
    triangle on the second a checkpoint began."""
    data = (
        tl.filter(~pl.col("partial"))  # a run's first and last part-seconds read low by construction
        .with_columns(run=pl.concat_str([pl.col("condition"), pl.lit(" r"), pl.col("repetition").cast(pl.String)]))
        .select("server", "condition", "run", "second", pl.col("tps").round(1), "latency_p95_ms", "checkpoint")
        .sort("server", "condition", "run", "second")  # a fixed row order: the stored chart renders the same
    )
    base = alt.Chart(data).encode(
        x=alt.X("second:O", title="second of the run", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("tps:Q", title="tps in that second"),
        tooltip=["server", "run", "second", "tps", alt.Tooltip("latency_p95_ms:Q", format=".3f"), "checkpoint"],
    )
    lines = base.mark_line(opacity=0.6, strokeWidth=1, point=True).encode(
        color=alt.Color("condition:N", title="condition"), detail="run:N"
    )
    return charts.checkpoint_timeline(base, lines, 90, 300, 170, 2, title)


def clients_chart(lat: pl.DataFrame, title: str) -> alt.HConcatChart:
    """Median tps (left) and p50 / p95 / p99 latency (right, log scale) against clients, a line per server (and per
    value of any other pgbench option that varies), the baseline's A/A copy left out."""
    data = lat.filter(~pl.col("condition").str.ends_with(AA_SUFFIX))
    others = [k for k in (THREADS, SCALE, RATE, PROTOCOL) if data[k].n_unique() > 1]
    series = [pl.col("server")] + [pl.lit(f"{k}=") + pl.col(k).cast(pl.String) for k in others]
    data = data.with_columns(series=pl.concat_str(series, separator=", ")).sort("series", CLIENTS)
    x = alt.X(f"{CLIENTS}:Q", title="clients", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format="d"))

    def lines(df: pl.DataFrame, y: alt.Y, title: str, tooltip: list, **encoding) -> alt.Chart:
        """A line per series against clients."""
        color, tooltip = alt.Color("series:N", title=None), ["series", CLIENTS, *tooltip]
        chart = alt.Chart(df).mark_line(point=True).encode(x=x, y=y, color=color, tooltip=tooltip, **encoding)
        return chart.properties(width=260, height=200, title=title)

    tps_y = alt.Y("tps_median:Q", title="tps (median of rounds)")
    tps = lines(
        data.select("series", CLIENTS, "tps_median"), tps_y, "tps against clients", charts.tips(".1f", "tps_median")
    )
    long = data.unpivot(
        on=["p50_ms", "p95_ms", "p99_ms"], index=["series", CLIENTS], variable_name="percentile", value_name="ms"
    ).with_columns(pl.col("percentile").str.strip_suffix("_ms"))
    latency = lines(
        long,
        alt.Y("ms:Q", title="latency, ms (log)", scale=alt.Scale(type="log")),
        "latency against clients",
        ["percentile", *charts.tips(".3f", "ms")],
        strokeDash=alt.StrokeDash(
            "percentile:N", sort=["p50", "p95", "p99"], title="percentile", legend=alt.Legend(symbolType="stroke")
        ),
    )
    return alt.hconcat(tps, latency).properties(title=title)


def section(name: str, t) -> list:
    """What to display for experiment `name` beside its comparisons (Markdown, tables, charts); none when it ran no
    pgbench or its tables are absent."""
    from IPython.display import Markdown

    if "experiments_latency" not in t:
        return []
    lat = t["experiments_latency"].filter(experiment=name)
    if lat.is_empty():
        return []
    counters = t["experiments_server_counters"].filter(experiment=name)
    tl = t["experiments_timeline"].filter(experiment=name)
    out = [
        Markdown(
            "**pgbench per condition.** tps: the median over the rounds; latency: p50 / p95 / p99 over every "
            "transaction of the rounds, in ms, with [the interval over the rounds], and the slowest one; runs with "
            "a checkpoint inside; what the server counted in a run (median over the rounds: pg_stat_database, "
            "pg_stat_wal, the checkpointer). Per run: `experiments_telemetry`, `experiments_server_counters`; per "
            "second: `experiments_timeline`."
        ),
        charts.table(per_condition(lat, counters)),
    ]
    if lat[CLIENTS].n_unique() > 1:
        out.append(clients_chart(lat, f"{name}: tps and latency against clients"))
    if tl.height:
        out.append(timeline_chart(tl, f"{name}: every second of every measured run"))
    return out

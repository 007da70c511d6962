"""The views of the SSB study (S1, with S4's SSB tests) as altair charts drawn from the derived tables
`data/derived/<profile>/ssb_*.csv`, so that notebook 20 and the report draw the very same charts.

Every time is a median over repetitions, its bar min–max (as the studies charted); a ratio is the paired one the
claims judge (ssb_paired's, in the fast mode or per round), its bar that comparison's interval at the coverage it
states; every point has a tooltip."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts
from . import reference as ref

MODES = ["serial", "parallel", "parallel_jit"]
_SERVER = alt.Color("server:N", title="server")
_QUERY = alt.X("query:N", title=None, sort=list(ref.QUERIES))


def _tip(col: str, title: str | None = None, fmt: str = ".3f") -> alt.Tooltip:
    return alt.Tooltip(f"{col}:Q", title=title or col, format=fmt)


def _intervals(data: pl.DataFrame, low: str, high: str, value: str, title: str, size: int, tooltip: list):
    """Per query and server a rule over `low` … `high` and a point at `value`."""
    base = alt.Chart(data).encode(x=_QUERY, color=_SERVER, xOffset="server:N")
    return charts.interval_marks(base, alt.Y(f"{low}:Q", title=title), high, value, size=size, tooltip=tooltip)


def _paired(data: pl.DataFrame, name: str, title: str, fmt: str, baseline: str, mode: str, unit: str = ""):
    """Per query and server a paired figure (`name`, e.g. speedup) as a point on its interval, with both medians
    and the interval's coverage in the tooltip (and S4's figure, where the data carries it)."""
    low, high, value = f"{name}_low{unit}", f"{name}_high{unit}", f"{name}{unit}"
    tip = [
        "server",
        "query",
        alt.Tooltip("n_rounds:Q", title="rounds"),
        _tip("median_baseline", f"{baseline} median s"),
    ]
    tip += [_tip("median", f"{mode} median s"), _tip(value, "speed-up" if name == "speedup" else "reduction %", fmt)]
    tip += [_tip(low, "interval low", fmt), _tip(high, "interval high", fmt), _tip("coverage", "coverage", ".0%")]
    if "s4_jit_reduction_pct" in data.columns:
        tip.append(_tip("s4_jit_reduction_pct", "S4 reduction %", ".1f"))
    return _intervals(data, low, high, value, title, 60, tip)


def _with_sf(data: pl.DataFrame, sf: dict[str, float] | None) -> pl.DataFrame:
    """A `data` column, "SSB SF 1", from each server's scale factor (`sf`: server -> SF); None where not known."""
    sf = sf or {}
    return data.with_columns(
        data=pl.col("server").replace_strict({k: f"SSB SF {v:g}" for k, v in sf.items()}, default=None)
    )


def times(summary: pl.DataFrame, sf: dict[str, float] | None = None) -> alt.FacetChart:
    """Seconds per query (median, min–max bar) by server, one row of panels per mode (table ssb_summary); where
    the servers hold different scale factors (`sf`: server -> SF), one column of panels per scale factor, each
    headed by it: seconds at SF 1 and SF 10 on one axis would read as a version difference."""
    data = _with_sf(
        summary.drop_nulls("median").select(
            "server", "mode", "query", "n", "n_missing", "median", "min", "max", "ci_low", "ci_high"
        ),
        sf,
    )
    split = data["data"].drop_nulls().n_unique() > 1
    tip = ["server", "mode", "query", "n", "n_missing", _tip("median"), _tip("min"), _tip("max")]
    bars, points = _intervals(
        data,
        "min",
        "max",
        "median",
        "seconds (median, min–max)",
        50,
        [*tip, _tip("ci_low", "95 % CI low"), _tip("ci_high", "95 % CI high")],
    )
    modes = [m for m in MODES if m in set(data["mode"])] + sorted(set(data["mode"]) - set(MODES))
    facets = {"row": alt.Row("mode:N", title=None, sort=modes, header=charts.header())}
    if split:
        facets["column"] = alt.Column("data:N", title=None, header=charts.header())
    return (
        (bars + points)
        .properties(width=360 if split else 520, height=170)
        .facet(**facets)
        .resolve_scale(y="independent", x="independent" if split else "shared")
        .properties(title="Seconds per query by server and mode" + (", per SSB scale factor" if split else ""))
    )


def _paired_frame(paired: pl.DataFrame, mode: str, name: str, unit: str, f, keys: list[str]) -> pl.DataFrame:
    """`mode`'s rows of a paired table with `f` of their ratio as <name><unit> and of its interval's ends as
    <name>_low<unit>, <name>_high<unit> (f falls as the ratio rises: the high end gives the low one)."""
    value, low, high = f"{name}{unit}", f"{name}_low{unit}", f"{name}_high{unit}"
    d = paired.filter(pl.col("mode") == mode).drop_nulls("ratio")
    d = d.with_columns(**{value: f(pl.col("ratio")), low: f(pl.col("ci_high")), high: f(pl.col("ci_low"))})
    return d.select(*keys, "query", "n_rounds", "median", "median_baseline", value, low, high, "coverage")


def speedup_frame(speedup: pl.DataFrame, mode: str = "parallel") -> pl.DataFrame:
    """Table ssb_speedup turned around: speed-up = serial / `mode` time, with its interval (ssb_paired's)."""
    return _paired_frame(speedup, mode, "speedup", "", lambda r: 1 / r, ["server", "mode"]).sort("server", "query")


def speedup(
    speedup: pl.DataFrame, mode: str = "parallel", ceiling: float | None = None, sf: dict[str, float] | None = None
) -> alt.LayerChart | alt.VConcatChart:
    """Parallel speed-up over serial per query with its interval (table ssb_speedup); a dashed line at
    `ceiling` (workers + the leader, at most the machine's cores) and a grey line at 1 (no gain). Where the
    servers hold different scale factors (`sf`: server -> SF), one chart per scale factor, titled by it."""
    data = _with_sf(speedup_frame(speedup, mode), sf)
    scales = sorted(data["data"].drop_nulls().unique(), key=lambda x: float(x.rsplit(" ", 1)[-1]))
    if len(scales) > 1:
        return alt.vconcat(
            *[_speedup(data.filter(pl.col("data") == x), mode, ceiling, f" — {x}") for x in scales]
        ).resolve_scale(color="shared")
    return _speedup(data, mode, ceiling, f" — {scales[0]}" if scales else "")


def _speedup(data: pl.DataFrame, mode: str, ceiling: float | None, scale: str) -> alt.LayerChart:
    bars, points = _paired(data, "speedup", "speed-up over serial (×, interval)", ".2f", "serial", mode)
    refs = pl.DataFrame({"y": [1.0], "what": ["no gain"]})
    if ceiling is not None:
        refs = pl.concat([refs, pl.DataFrame({"y": [float(ceiling)], "what": ["ceiling"]})])
    lines = (
        alt.Chart(refs)
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(y="y:Q", tooltip=["what", alt.Tooltip("y:Q", title="speed-up", format=".2f")])
    )
    title = f"Speed-up of {mode} over serial (paired, with its interval){scale}" + (
        f"; dashed: ceiling {ceiling:g}×" if ceiling else ""
    )
    return alt.layer(lines, bars, points).properties(width=520, height=220, title=title)


def jit_frame(jit: pl.DataFrame) -> pl.DataFrame:
    """Table ssb_jit as reduction = 1 − (parallel + JIT) / parallel in percent, beside S4's reduction."""
    mode = jit["mode"][0] if jit.height else "parallel_jit"  # the claims' JIT mode (paired_tables.jit_mode)
    d = _paired_frame(jit, mode, "reduction", "_pct", lambda r: (1 - r.cast(pl.Float64)) * 100, ["server"])
    return d.join(ref.s4_jit_table(), on="query", how="left").sort("server", "query")


def jit(jit: pl.DataFrame) -> alt.LayerChart:
    """JIT time reduction per query with its interval (table ssb_jit), S4's reductions as black ticks."""
    data = jit_frame(jit)
    bars, points = _paired(
        data, "reduction", "time reduction by JIT, % (interval)", ".1f", "parallel", "parallel + JIT", "_pct"
    )
    s4 = (
        alt.Chart(ref.s4_jit_table())
        .mark_tick(color="black", thickness=2, size=18)
        .encode(
            x=_QUERY,
            y="s4_jit_reduction_pct:Q",
            tooltip=["query", alt.Tooltip("s4_jit_reduction_pct:Q", title="S4 reduction % (v11, 2018)", format=".1f")],
        )
    )
    zero = alt.Chart(pl.DataFrame({"y": [0.0]})).mark_rule(color="gray").encode(y="y:Q")
    return alt.layer(zero, bars, points, s4).properties(
        width=520, height=220, title="JIT: time reduction over parallel per query (black ticks: study S4)"
    )


def workers_frame(plans: pl.DataFrame, study_plans: pl.DataFrame | None = None) -> pl.DataFrame:
    """Workers allowed / planned / launched at the top Gather of each plan (table ssb_plans), plus the plans
    made (not run) with the study's allowance (table ssb_plans_study_workers) as one more condition."""
    top = (
        plans.filter(pl.col("mode") != "serial", pl.col("gather_id").is_not_null())
        .sort("server", "mode", "query", "gather_id")
        .group_by("server", "mode", "query", maintain_order=True)
        .first()
        .select(
            "server",
            "mode",
            "query",
            "allowed_workers",
            "workers_planned",
            pl.col("workers_launched").cast(pl.Int64),
            "leftmost_relation",
        )
        .with_columns(condition=pl.format("{} run, {} allowed", "mode", "allowed_workers"))
    )
    frames = [top]
    if study_plans is not None and not study_plans.is_empty():
        frames.append(
            study_plans.select(
                "server",
                pl.lit("plan only").alias("mode"),
                "query",
                "allowed_workers",
                "workers_planned",
                pl.lit(None, dtype=pl.Int64).alias("workers_launched"),
                "leftmost_relation",
            ).with_columns(condition=pl.format("plan only, {} allowed", "allowed_workers"))
        )
    return pl.concat(frames, how="vertical_relaxed").sort("condition", "server", "query")


def workers(plans: pl.DataFrame, study_plans: pl.DataFrame | None = None) -> alt.FacetChart:
    """Workers planned (filled) and launched (open) per query and server against the allowance (dashed), for
    the timed parallel runs and for the plans made with the study's 5 allowed workers."""
    data = workers_frame(plans, study_plans)
    tip = [
        "server",
        "condition",
        "query",
        "allowed_workers",
        "workers_planned",
        "workers_launched",
        "leftmost_relation",
    ]
    base = alt.Chart().encode(x=_QUERY, color=_SERVER, xOffset="server:N")
    planned = base.mark_point(filled=True, size=60).encode(
        y=alt.Y("workers_planned:Q", title="workers", axis=alt.Axis(tickMinStep=1)),
        tooltip=tip,
    )
    launched = base.mark_point(size=160, shape="square").encode(y="workers_launched:Q", tooltip=tip)
    allowed = (
        alt.Chart()
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(y="max(allowed_workers):Q", tooltip=[alt.Tooltip("max(allowed_workers):Q", title="allowed")])
    )
    return (
        alt.layer(allowed, planned, launched, data=data)
        .properties(width=520, height=130)
        .facet(row=alt.Row("condition:N", title=None, header=charts.header()))
        .properties(title="Workers per Gather: allowed (dashed), planned (filled), launched (open square)")
    )


def sweep(sweep_summary: pl.DataFrame, cores: int | None = None) -> alt.FacetChart:
    """Median seconds against max_parallel_workers_per_gather (min–max bars) per query (table
    ssb_sweep_summary), and dotted the ideal t(0) / (workers + 1), or t(0) / min(workers + 1, cores) when
    the machine's `cores` are given: more processes than cores cannot run at once."""
    data = sweep_summary.drop_nulls("median").sort("server", "query", "workers")
    if cores:
        data = data.with_columns(ideal=pl.col("t0") / pl.min_horizontal(pl.col("workers") + 1, pl.lit(cores)))
    ideal_title = f"ideal t0/min(k+1, {cores})" if cores else "ideal t0/(k+1)"
    tip = ["server", "query", "workers", _tip("median"), _tip("min"), _tip("max"), _tip("ideal", ideal_title)]
    base = alt.Chart().encode(x=alt.X("workers:O", title="max_parallel_workers_per_gather"), color=_SERVER)
    line = base.mark_line(point=True).encode(y=alt.Y("median:Q", title="seconds"), tooltip=tip)
    bars = base.mark_rule().encode(y="min:Q", y2="max:Q")
    ideal = base.mark_line(strokeDash=[2, 2], opacity=0.7).encode(y="ideal:Q")
    title = f"Time against workers (dotted: {ideal_title.removeprefix('ideal ')})"
    return (
        alt.layer(ideal, bars, line, data=data)
        .properties(width=150, height=110)
        .facet(facet=alt.Facet("query:N", sort=list(ref.QUERIES), title=None), columns=5)
        .resolve_scale(y="independent")
        .properties(title=title)
    )

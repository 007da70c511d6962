"""Display set-up for the report: one altair theme, charts that render with no network, and polars tables
shown whole rather than cut to ten rows.

Each chart is displayed as two representations of the same Vega-Lite spec: a static SVG made by vl-convert
(no network, no random ids: what a code host, nbconvert's HTML and nbval see) and the spec itself under the
Vega-Lite mime type, which JupyterLab's built-in Vega extension renders interactively offline: tooltips, and zoom
and pan where both axes are continuous (`with_zoom`)."""

from __future__ import annotations

import json
import math
from html import escape

import altair as alt
import polars as pl
from altair.utils.mimebundle import spec_to_mimebundle
from altair.vegalite.v6.display import VEGA_VERSION, VEGAEMBED_VERSION, VEGALITE_VERSION

# JupyterLab 4 registers its Vega renderer for Vega-Lite v3-v5 mime types; it reads the spec it is handed,
# so the v5 type is the one it picks up (checked in a browser by tests/test_lab.py).
LAB_MIME = "application/vnd.vegalite.v5+json"


@alt.theme.register("pglab", enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "view": {"continuousWidth": 420, "continuousHeight": 260},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#e6e6e6"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "title": {"fontSize": 13, "anchor": "start"},
            "range": {"category": {"scheme": "tableau10"}},
        }
    }


_NO_ZOOM_MARKS = {"bar", "rect", "text", "arc", "boxplot", "errorbar", "errorband", "image"}
_CONTINUOUS = {"quantitative", "temporal"}


def _mark(unit: dict) -> str:
    m = unit.get("mark")
    return m.get("type", "") if isinstance(m, dict) else str(m or "")


def _zoomable(unit: dict) -> bool:
    enc = unit.get("encoding", {})
    return _mark(unit) not in _NO_ZOOM_MARKS and all(
        isinstance(enc.get(ch), dict) and enc[ch].get("type") in _CONTINUOUS for ch in ("x", "y")
    )


def _zoom_view(spec: dict, name: str) -> dict:
    """One view (a unit or a layer of units) with a scale-bound interval, or unchanged where none fits."""
    zoom = {"name": name, "select": {"type": "interval", "encodings": ["x", "y"]}, "bind": "scales"}
    if "params" in spec:
        return spec
    if "layer" in spec:
        layers = list(spec["layer"])
        if any("params" in u or "layer" in u for u in layers):
            return spec
        for i, u in enumerate(layers):
            if _zoomable(u):
                layers[i] = {**u, "params": [zoom]}
                return {**spec, "layer": layers}
        return spec
    return {**spec, "params": [zoom]} if _zoomable(spec) else spec


def with_zoom(spec: dict) -> dict:
    """The spec with zoom and pan (scroll, drag; double-click resets) where both axes are continuous: a chart, the
    first such layer of a layered one (the layers share their scales), each panel of a facet, each chart of a
    concatenation. Charts with a selection of their own are left as they are: a bound interval could fight it."""
    if "params" in spec or "repeat" in spec:
        return spec
    if "facet" in spec and isinstance(spec.get("spec"), dict):
        inner = _zoom_view(spec["spec"], "pglab_zoom")
        return spec if inner is spec["spec"] else {**spec, "spec": inner}
    for key in ("hconcat", "vconcat", "concat"):
        if key in spec:
            parts = [_zoom_view(c, f"pglab_zoom_{i}") for i, c in enumerate(spec[key])]
            changed = any(p is not c for p, c in zip(parts, spec[key], strict=True))
            return {**spec, key: parts} if changed else spec
    return _zoom_view(spec, "pglab_zoom")


def _render(spec: dict, **metadata) -> tuple[dict, dict]:
    svg = spec_to_mimebundle(
        spec,
        format="svg",
        mode="vega-lite",
        vega_version=VEGA_VERSION,
        vegaembed_version=VEGAEMBED_VERSION,
        vegalite_version=VEGALITE_VERSION,
    )
    # the static SVG is drawn from the spec as written; JupyterLab gets zoom and pan where the axes allow them
    bundle = {
        **svg,
        LAB_MIME: with_zoom(spec),
        "text/plain": "<altair chart: static SVG here, interactive in JupyterLab>",
    }
    # in JupyterLab: the export menu (PNG / SVG) on every chart, so it can be saved and pasted elsewhere; no links out
    actions = {"export": True, "source": False, "compiled": False, "editor": False}
    return bundle, {LAB_MIME: {"embed_options": {"actions": actions}}}


alt.renderers.register("pglab", _render)


def setup() -> None:
    alt.renderers.enable("pglab")
    pl.Config.set_tbl_rows(60)
    pl.Config.set_tbl_width_chars(160)
    pl.Config.set_fmt_str_lengths(60)


def table(df: pl.DataFrame, floats: str = "{:.3g}"):
    """A small table as Markdown: reads cleanly in JupyterLab, on a code host and in the HTML report
    (polars' own HTML quotes every string and cuts long tables)."""
    from IPython.display import Markdown

    def cell(v) -> str:
        if v is None:
            return "—"
        text = floats.format(v) if isinstance(v, float) else str(v)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.iter_rows()]
    return Markdown("\n".join(lines))


# -- the shapes the studies' charts share -----------------------------------------------------------------------------


def tips(fmt: str, *cols: str) -> list[alt.Tooltip]:
    """Tooltips of quantitative columns, all in one number format."""
    return [alt.Tooltip(f"{c}:Q", format=fmt) for c in cols]


def interval_marks(
    base, axis: alt.X | alt.Y, high: str, value: str, stroke=2, size=alt.Undefined, color=alt.Undefined, **point
):
    """A rule over each interval (from `axis`'s field to `high`) and a filled point at `value` (with the encodings
    `point`): the marks of every chart of medians with their min–max and of ratios with their interval. `color` is
    the rule's, where it carries the legend's title."""
    ch = "x" if isinstance(axis, alt.X) else "y"
    rule = base.mark_rule(**({"strokeWidth": stroke} if stroke else {})).encode(
        **{ch: axis, f"{ch}2": f"{high}:Q"}, color=color
    )
    return rule, base.mark_point(filled=True, size=size).encode(**{ch: f"{value}:Q"}, **point)


def log_ratio_chart(
    data, y: alt.Y, color: alt.Color, x_title: str, reach: float, tooltip: list, size: int, title: str, **encoding
) -> alt.LayerChart:
    """Ratios (`ratio`) with their intervals (`lo` … `hi`) on a log scale symmetric about 1 (clipped at `reach`),
    one row per `y`, a dashed rule at 1 (no change)."""
    scale = alt.Scale(type="log", domain=[1 / reach, reach], clamp=True, nice=False)  # nice: powers of 10
    base = alt.Chart(data).encode(y=y, color=color, **encoding)
    interval, point = interval_marks(
        base, alt.X("lo:Q", scale=scale, title=x_title), "hi", "ratio", size=size, tooltip=tooltip
    )
    one = alt.Chart(pl.DataFrame({"one": [1.0]})).mark_rule(strokeDash=[4, 3], color="#555").encode(x="one:Q")
    return alt.layer(interval, point, one).properties(width=420, title=title)


def checkpoint_timeline(
    base: alt.Chart, lines: alt.Chart, size: int, width: int, height: int, columns: int, title: str
):
    """Every second of every run (`lines`, drawn from `base`) with a red triangle on each second a checkpoint began,
    one panel per server."""
    red = "#d62728"
    marks = base.transform_filter("datum.checkpoint").mark_point(
        shape="triangle-down", size=size, filled=True, color=red
    )
    return (
        alt.layer(lines, marks.encode())
        .properties(width=width, height=height)
        .facet(facet=alt.Facet("server:N", title=None), columns=columns)
        .properties(title=f"{title} (▼ red: a checkpoint began in that second)")
    )


# -- the summary's ratio strips: one tiny inline SVG per claim row, drawn by hand ------------------------------------
# (a Vega-Lite render costs ~0.3 s; fifty of them would triple the report's time, and one chart beside an HTML
# table cannot stay aligned with rows whose height the browser decides)

STRIP_W, STRIP_H = 200, 18
STUDY_COLOR, OURS_COLOR = "#222222", "#1f77b4"


def ratio_domain(values, pad: float = 1.25) -> tuple[float, float]:
    """A log-scale domain covering every positive value and 1, padded, at least 0.5 … 2."""
    vs = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    lo, hi = min([0.5, *vs]) / pad, max([2.0, *vs]) * pad
    return max(lo, 1e-3), min(hi, 1e3)


def _x(v: float, domain: tuple[float, float]) -> float:
    lo, hi = (math.log(d) for d in domain)
    if not v > 0 or math.isnan(v):  # no place on a log scale: pinned to the low edge
        v = domain[0]
    v = min(max(v, domain[0]), domain[1])  # a value outside is pinned to the edge, not dropped
    return 4 + (STRIP_W - 8) * (math.log(v) - lo) / (hi - lo)


def _ticks(domain: tuple[float, float]) -> list[float]:
    return [t for t in (0.01, 0.1, 0.2, 0.5, 1, 2, 5, 10, 100) if domain[0] <= t <= domain[1]]


def ratio_strip_svg(
    study: float | None,
    ours: list[tuple[float, float | None, float | None]],
    domain: tuple[float, float],
    title: str = "",
) -> str:
    """The study's ratio as a black dot, each of our estimates as a blue diamond with its interval bar (one
    per server, stacked), on a log scale; faint lines at the axis ticks, a darker one at 1 (no effect)."""
    n = max(len(ours), 1)
    h = max(STRIP_H, 14 * n + 4)  # a row per server, so that their bars do not overlap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{STRIP_W}" height="{h}" role="img" '
        f'viewBox="0 0 {STRIP_W} {h}" class="ratio-strip">'
    ]
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    for t in _ticks(domain):
        color = "#999999" if t == 1 else "#e3e3e3"
        parts.append(
            f'<line x1="{_x(t, domain):.1f}" x2="{_x(t, domain):.1f}" y1="0" y2="{h}" '
            f'stroke="{color}" stroke-width="1"/>'
        )
    for i, (value, low, high) in enumerate(ours):
        y = 2 + (i + 0.5) * (h - 4) / n
        if low is not None and high is not None:
            parts.append(
                f'<line x1="{_x(low, domain):.1f}" x2="{_x(high, domain):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{OURS_COLOR}" stroke-width="2"/>'
            )
        if value is not None:
            x = _x(value, domain)
            parts.append(
                f'<path d="M{x:.1f} {y - 4:.1f}L{x + 4:.1f} {y:.1f}L{x:.1f} {y + 4:.1f}L{x - 4:.1f} '
                f'{y:.1f}Z" fill="{OURS_COLOR}"/>'
            )
    if study is not None:  # last, white-edged: still seen where one of ours lies on it
        parts.append(
            f'<circle cx="{_x(study, domain):.1f}" cy="{h / 2:.1f}" r="3.5" fill="{STUDY_COLOR}" '
            'stroke="#ffffff" stroke-width="1"/>'
        )
    return "".join(parts) + "</svg>"


def ratio_axis_svg(domain: tuple[float, float]) -> str:
    """The strips' shared axis: tick labels (0.5×, 1×, 2× …) for the table header."""
    labels = "".join(
        f'<text x="{_x(t, domain):.1f}" y="12" text-anchor="middle" font-size="10" fill="#555555">{t:g}×</text>'
        for t in _ticks(domain)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{STRIP_W}" height="16" viewBox="0 0 {STRIP_W} 16" '
        f'class="ratio-axis">{labels}</svg>'
    )


# -- plain words for the ids a facet shows ----------------------------------------------------------------------------

WORDS = {
    "serial": "serial",
    "parallel": "parallel",
    "parallel_aa": "parallel, A/A copy",
    "parallel_jit": "parallel + JIT (default thresholds)",
    "parallel_jit_forced": "parallel + JIT (forced thresholds)",
    "on": "JIT on (default thresholds)",
    "on_optimized": "JIT on, inlining and optimisation forced",
    "off": "JIT off",
}


def header(words: dict[str, str] | None = None) -> alt.Header:
    """A facet header that shows plain words for the ids it knows (WORDS, or `words`), the id itself otherwise."""
    mapping = json.dumps(words or WORDS)
    return alt.Header(labelExpr=f"({mapping})[datum.value] || datum.value", labelLimit=0)

"""Display set-up for the report: one altair theme, charts that render with no network, and polars tables
shown whole rather than cut to ten rows.

Each chart is displayed as two representations of the same Vega-Lite spec: a static SVG made by vl-convert
(no network, no random ids: what a code host, nbconvert's HTML and nbval see) and the spec itself under the
Vega-Lite mime type, which JupyterLab's built-in Vega extension renders interactively (tooltips) offline."""

from __future__ import annotations

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


def _render(spec: dict, **metadata) -> tuple[dict, dict]:
    svg = spec_to_mimebundle(
        spec, format="svg", mode="vega-lite", vega_version=VEGA_VERSION, vegaembed_version=VEGAEMBED_VERSION,
        vegalite_version=VEGALITE_VERSION,
    )  # fmt: skip
    bundle = {**svg, LAB_MIME: spec, "text/plain": "<altair chart: static SVG here, interactive in JupyterLab>"}
    return bundle, {LAB_MIME: {"embed_options": {"actions": False}}}


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

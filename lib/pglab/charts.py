"""Display set-up for the report: altair charts that render offline (SVG through vl-convert: no network,
no random ids) and polars tables shown whole rather than cut to ten rows."""

from __future__ import annotations

import altair as alt
import polars as pl


@alt.theme.register("pglab", enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "view": {"continuousWidth": 420, "continuousHeight": 260},
            "axis": {"labelFontSize": 11, "titleFontSize": 12},
            "legend": {"labelFontSize": 11},
        }
    }


def setup() -> None:
    alt.renderers.enable("svg")
    pl.Config.set_tbl_rows(60)
    pl.Config.set_tbl_width_chars(160)
    pl.Config.set_fmt_str_lengths(60)

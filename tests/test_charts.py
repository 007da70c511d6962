"""Charts in JupyterLab zoom and pan where both axes are continuous (`charts.with_zoom`); the static SVG beside
them, what the HTML report and a code host show, is drawn from the spec as written."""

from __future__ import annotations

import altair as alt
import polars as pl
import vl_convert as vlc

from pglab.core import charts

DATA = pl.DataFrame({"workers": [0, 1, 2], "seconds": [3.0, 1.6, 1.1], "server": ["pg18"] * 3})


def _params(spec: dict) -> list:
    return [p for unit in [spec, *spec.get("layer", []), spec.get("spec", {})] for p in unit.get("params", [])]


def test_continuous_axes_zoom_and_categorical_ones_do_not():
    line = alt.Chart(DATA).mark_line().encode(x="workers:Q", y="seconds:Q")
    bars = alt.Chart(DATA).mark_bar().encode(x="server:N", y="seconds:Q")
    for chart in (line, line + line.mark_point(), line.facet("server:N")):
        spec = charts.with_zoom(chart.to_dict())
        assert [p["bind"] for p in _params(spec)] == ["scales"], spec
        vlc.vegalite_to_svg(spec)  # a valid spec: Vega-Lite compiles and draws it
    assert charts.with_zoom(bars.to_dict()) == bars.to_dict()
    own = line.add_params(alt.selection_point())
    assert charts.with_zoom(own.to_dict()) == own.to_dict()  # a chart's own selection is left alone


def test_the_static_picture_is_drawn_without_the_zoom():
    line = alt.Chart(DATA).mark_line().encode(x="workers:Q", y="seconds:Q")
    bundle, _ = charts._render(line.to_dict())
    assert "pglab_zoom" in str(bundle[charts.LAB_MIME]) and "pglab_zoom" not in bundle["image/svg+xml"]
    assert bundle["image/svg+xml"] == vlc.vegalite_to_svg(line.to_dict())


def test_a_kit_process_skips_the_iri_grammar_and_still_validates_charts():
    """`import pglab` keeps jsonschema from building rfc3987_syntax's parsers (2 s of every notebook kernel and
    CLI process); altair's schema validation still runs and still refuses a bad spec."""
    import subprocess
    import sys

    code = (
        "import sys, altair as alt, polars as pl\n"
        "alt.Chart(pl.DataFrame({'x': [1]})).mark_point().encode(x='x:Q').to_dict()\n"
        "try:\n"
        "    alt.Chart(pl.DataFrame({'x': [1]})).mark_point().encode(x=alt.X('x:Q', bin='yes')).to_dict()\n"
        "except Exception as e:\n"
        "    print(type(e).__name__)\n"
        "print(sys.modules.get('rfc3987_syntax', 'absent'))\n"
    )
    out = subprocess.run([sys.executable, "-c", "import pglab\n" + code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["SchemaValidationError", "None"], out.stdout + out.stderr

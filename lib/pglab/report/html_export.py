"""The report as one self-contained HTML file: the executed report notebook through nbconvert, with a
template (html_template/pglab_report) that fetches nothing from the network, so the file opens anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

TEMPLATES = Path(__file__).resolve().parent / "html_template"
# anything the page would fetch: a src/href to another host, or a CSS @import
_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//|@import\s+url\(\s*["']?(?:https?:)?//""", re.I)


def external_references(html: str) -> list[str]:
    """What in `html` would need the network (empty for a self-contained page)."""
    return [html[max(0, m.start() - 40) : m.end() + 60] for m in _EXTERNAL.finditer(html)]


def write_html(notebook: Path, out: Path) -> Path:
    exporter = HTMLExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="pglab_report")
    exporter.exclude_input = True  # the code stays in the notebook; the HTML is the reader's copy
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    found = external_references(body)
    if found:
        raise RuntimeError(f"{out.name} would need the network: {found[:3]}")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(out)
    return out

"""A study section's evidence for reading: each claim folded into an HTML `<details>` whose visible line is the
claim and its one verdict, opening to each server's verdict, numbers and evidence; the section's method folded
the same way; the noise floor of its A/A control, or the plain statement that the run had none.

Text from the findings is Markdown (backticks, emphasis): rendered with mistune (nbconvert's own Markdown
library) so that JupyterLab and the HTML report show the same thing."""

from __future__ import annotations

from html import escape

import mistune
import polars as pl

from ..core.stats import findings as fnd
from ..core.stats import verdicts as v
from ..core.stats.stats import ratio_with_interval
from .summary import anchor, claims, verdict_html

_md = mistune.create_markdown(escape=True)  # the findings' text is data: any HTML in it is shown, not run

STYLE = """<style>
details.pglab-claim { margin: 4px 0; border-left: 3px solid #ddd; padding-left: 8px; }
details.pglab-claim > summary { cursor: pointer; }
details.pglab-claim ul { margin: 4px 0 8px 0; }
details.pglab-method > summary { cursor: pointer; font-weight: 600; }
</style>"""


def md_html(text: str) -> str:
    return _md(text).strip()


def folded(title: str, markdown: str) -> str:
    """A folded block: `title` visible, the Markdown inside."""
    return STYLE + f'<details class="pglab-method"><summary>{escape(title)}</summary>{md_html(markdown)}</details>'


def _inline(text: str) -> str:
    """Markdown of one paragraph without its <p> (for a summary line or a list item)."""
    html = md_html(text)
    return html[3:-4] if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1 else html


def _server_item(r: dict) -> str:
    numbers = ""
    figure = ratio_with_interval(r["our_value"], r["our_low"], r["our_high"]) if r["our_value"] is not None else None
    if figure and figure not in r["evidence"]:  # most verdicts' evidence opens with our figure: not twice
        numbers = f" Ours {figure}" + (f" ({escape(r['interval'])})" if r["interval"] else "") + "."
    return f"<li>{escape(r['server'])}: {verdict_html(r['verdict'])}.{numbers} {_inline(r['evidence'])}</li>"


def findings_html(f: pl.DataFrame) -> str:
    """One `<details>` per claim: summary = the claim (the study's words) and its one verdict; inside, the
    study's figure, and per server the verdict, our number with its interval and the evidence."""
    if f.is_empty():
        return "<p><i>No findings.</i></p>"
    out = [STYLE]
    for c in claims(f).iter_rows(named=True):
        rows = f.filter((pl.col("study") == c["study"]) & (pl.col("finding") == c["finding"]))
        theirs = (
            f"<p>The study’s figure: {escape(fnd.value_text(c['study_value'], c['unit']))}.</p>"
            if c["study_value"] is not None
            else ""
        )
        mixed = (
            " <i>(the servers disagree: undetermined overall)</i>"
            if c["verdict"] == v.UNDETERMINED and len(set(rows["verdict"]) - set(v.UNTESTED)) > 1
            else ""
        )
        items = "".join(_server_item(r) for r in rows.iter_rows(named=True))
        out.append(
            f'<details class="pglab-claim" id="{anchor(c["study"], c["finding"])}"><summary>'
            f"{escape(c['study'])} · {_inline(c['claim'])} — {verdict_html(c['verdict'])}{mixed}</summary>"
            f"{theirs}<ul>{items}</ul><p style='font-size:11px;color:#777'>finding "
            f"<code>{escape(c['finding'])}</code></p></details>"
        )
    return "".join(out)


def noise_markdown(noise: pl.DataFrame | None) -> str:
    """The section's noise floor from its A/A control (`<study>_noise`, `core.stats.noise.SCHEMA`), or that this run
    had none (None)."""
    if noise is None or noise.is_empty():
        return (
            "**Noise floor.** No A/A control in this run: how far two measurements of the same thing stray "
            "on this machine was not measured for this study, so its verdicts rest on their intervals alone."
        )
    lines = [
        "**Noise floor** (A/A control: one condition measured twice under two labels; an effect within "
        "the floor cannot support a claim, and about 5 % of A/A intervals should exclude 1):",
        "",
        "| study | server | metric | A/A pairs | false-difference rate | floor | method |",
        "|---|---|---|--:|--:|--:|---|",
    ]

    def pct(x) -> str:
        return "—" if x is None else f"{x:.1%}".replace("%", " %")

    for r in noise.iter_rows(named=True):
        floor = "—" if r.get("floor") is None else "±" + pct(r["floor"])
        lines.append(
            f"| {r.get('study', '—')} | {r.get('server', '—')} | {r.get('metric', '—')} | "
            f"{r.get('n_pairs', '—')} | {pct(r.get('false_difference_rate'))} | {floor} | "
            f"{str(r.get('method', '—')).replace('|', '/')} |"
        )
    return "\n".join(lines)

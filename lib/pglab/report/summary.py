"""The report's first screen: one row per study claim — the claim in the study's words, the study's figure and
ours with its interval, one verdict per claim (`verdicts.claim_verdicts`, the per-server breakdown folded) and a
ratio strip — then the findings at a glance (`verdicts.tally`), the untested claims kept apart.

Tables are HTML (with their own small style block) so that the report's HTML and JupyterLab show the same thing;
every text is escaped."""

from __future__ import annotations

import re
from html import escape

import polars as pl

from ..core import charts
from ..core.stats import findings as fnd
from ..core.stats import verdicts as v
from ..core.stats.between_runs import pooled_basis
from ..core.stats.stats import ratio_with_interval

COLORS = {
    v.SUPPORTED: "#2e7d32",
    v.CONTRADICTED: "#c62828",
    v.DIRECTION_ONLY: "#ef6c00",
    v.MIXED: "#6a1b9a",
    v.UNDETERMINED: "#616161",
    v.NOT_COMPARABLE: "#8d6e63",
    v.NOT_TESTABLE: "#9e9e9e",
    v.NOT_RUN: "#9e9e9e",
}
# the class doubled: JupyterLab's own table rules (right-aligned cells) are one class more specific than ".x td"
STYLE = """<style>
table.pglab-sum.pglab-sum { border-collapse: collapse; font-size: 13px; width: 100%; table-layout: fixed;
  margin: 0; }
.pglab-sum.pglab-sum th, .pglab-sum.pglab-sum td { padding: 2px 6px; border-bottom: 1px solid #eee;
  text-align: left; vertical-align: middle; line-height: 1.35; }
.pglab-sum.pglab-sum th { font-weight: 600; border-bottom: 1px solid #bbb; }
.pglab-sum.pglab-sum td.claim { white-space: normal; overflow-wrap: anywhere; }
.pglab-sum.pglab-sum td.claim a { color: inherit; text-decoration: none; }
.pglab-sum.pglab-sum td.num { white-space: nowrap; font-variant-numeric: tabular-nums; font-size: 12px; }
.pglab-sum.pglab-sum .apart { border-left: 2px solid #bbb; }
.pglab-sum.pglab-sum details summary { cursor: pointer; white-space: nowrap; }
.pglab-sum.pglab-sum details div { font-size: 11px; color: #444; white-space: normal; }
.pglab-verdict { font-weight: 600; white-space: nowrap; }
.pglab-untested { font-style: italic; font-weight: normal; }
</style>"""


def anchor(study: str, finding: str) -> str:
    """The id of a claim's folded findings in its study section (the summary's rows link there)."""
    return "claim-" + re.sub(r"[^A-Za-z0-9_.-]", "-", f"{study}-{finding}")


def verdict_html(label: str) -> str:
    cls = "pglab-verdict" + (" pglab-untested" if label in v.UNTESTED else "")
    return f'<span class="{cls}" style="color:{COLORS.get(label, "#000")}">{escape(label)}</span>'


def claims(findings: pl.DataFrame) -> pl.DataFrame:
    """One row per claim: claim_verdicts' columns plus the claim's words, the study's figure and ours per server
    (a list of dicts server, value, low, high, interval; only servers with a number)."""
    cv = v.claim_verdicts(findings)
    unit = pl.col("unit") if "unit" in findings.columns else pl.lit(None, pl.String).alias("unit")
    words = findings.group_by("study", "finding", maintain_order=True).agg(
        pl.col("claim").first(),
        pl.col("study_value").drop_nulls().first(),
        unit.drop_nulls().first(),
        pl.struct(server="server", value="our_value", low="our_low", high="our_high", interval="interval")
        .filter(pl.col("our_value").is_not_null())
        .alias("ours"),
    )
    words = words.with_columns(claim=pl.Series("claim", _distinct(words), dtype=pl.String))
    return cv.join(words, on=["study", "finding"], how="left", maintain_order="left")


def _distinct(words: pl.DataFrame) -> list[str | None]:
    """Each claim's words as a row shows them: without the study's own name in front (the row names its study:
    "S1 · S1: ..." said it twice), and where two findings of a study share the same words (one claim tested at
    scales 1 and 10), what tells them apart from their finding names ("scale 1", "scale 10")."""
    out = []
    for study, claim in zip(words["study"], words["claim"], strict=True):
        if claim is not None and study and claim.startswith((f"{study}: ", f"{study} ")):
            claim = claim[len(study) :].lstrip(":").lstrip()  # "S1: JIT helped" and "S4 test 2: ..." alike
        out.append(claim)
    keys = list(zip(words["study"], out, strict=True))
    for i, finding in enumerate(words["finding"]):
        twins = [j for j, k in enumerate(keys) if k == keys[i] and j != i]
        if out[i] is None or not twins:
            continue
        mine = finding.split("_")
        common = min(_common_prefix(mine, words["finding"][j].split("_")) for j in twins)
        # the differing tail, with the word before it when that is its name ("scale" of scale_10)
        start = common - 1 if common and not mine[common - 1].isdigit() and mine[common:][:1] != [] else common
        tail = " ".join(mine[start:]) or finding
        out[i] = f"{out[i]} — {tail}"
    return out


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _ours_cell(ours: list[dict]) -> str:
    if not ours:
        return "—"
    one = len(ours) == 1
    lines = [
        ("" if one else f"{escape(o['server'])} ") + ratio_with_interval(o["value"], o["low"], o["high"]) for o in ours
    ]
    tip = "; ".join(f"{o['server']}: {o['interval'] or 'no interval'}" for o in ours)
    return f'<span title="{escape(tip)}">' + "<br>".join(lines) + "</span>"


def _verdict_cell(row: dict) -> str:
    if row["servers"] <= 1:
        return f'<span title="{escape(row["breakdown"])}">{verdict_html(row["verdict"])}</span>'
    parts = "<br>".join(escape(p) for p in row["breakdown"].split("; "))
    return f"<details><summary>{verdict_html(row['verdict'])}</summary><div>{parts}</div></details>"


def summary_html(findings: pl.DataFrame) -> str:
    """The summary table: study, claim (one line, the full text on hover, a link to its evidence), the study's
    figure, ours, the verdict and the ratio strip (the study's figure beside ours, log scale)."""
    rows = claims(findings)
    # a claim's quantity (ns per row) is shown in its unit, kept off the ratio strip and its domain
    numbers = [
        x for x, u in zip(rows["study_value"], rows["unit"], strict=True) if x is not None and fnd.on_ratio_scale(u)
    ]
    for ours in rows["ours"]:
        numbers += [x for o in ours for x in (o["value"], o["low"], o["high"])]
    domain = charts.ratio_domain(numbers)
    head = (
        '<tr><th style="width:3em">study</th><th>the study’s claim</th><th style="width:4.5em">theirs</th>'
        '<th style="width:14em">ours [interval]</th><th style="width:10em">verdict</th>'
        f'<th style="width:{charts.STRIP_W + 12}px">{charts.ratio_axis_svg(domain)}</th></tr>'
    )
    body = []
    for r in rows.iter_rows(named=True):
        ours = [(o["value"], o["low"], o["high"]) for o in r["ours"]]
        theirs = r["study_value"] if fnd.on_ratio_scale(r["unit"]) else None
        theirs_text = escape(fnd.value_text(r["study_value"], r["unit"]) or "—")
        tip = f"study {ratio_with_interval(theirs)}; ours " + ", ".join(ratio_with_interval(*o) for o in ours)
        strip = charts.ratio_strip_svg(theirs, ours, domain, tip) if theirs is not None or ours else ""
        body.append(
            f"<tr><td>{escape(r['study'])}</td>"
            f'<td class="claim" title="{escape(r["claim"])}"><a href="#{anchor(r["study"], r["finding"])}">'
            f'{escape(r["claim"])}</a></td><td class="num">{theirs_text}</td>'
            f'<td class="num">{_ours_cell(r["ours"])}</td><td>{_verdict_cell(r)}</td><td>{strip}</td></tr>'
        )
    # one line above the rows it explains (under all 58 nobody finds it), short enough that the first screen still
    # shows the table begin
    legend = (
        "<p style='font-size:11px;line-height:14px;color:#555;margin:2px 0'>Ratios are B / A as each claim states "
        "them (0.5× = half the time). Strip: ● the study, ◆ ours with its interval, log scale, grey line 1× = no "
        "effect; ▸ folds per-server verdicts.</p>"
    )
    table = f'<table class="pglab-sum">{head}{"".join(body)}</table>'
    return STYLE + legend + table  # the key before the rows it explains, not under all of them


def resting(ours: list[dict]) -> str:
    """One sentence for the headline: what the intervals of `ours` (the summary's figures, each with its
    interval text) rest on, on the first screen and not only in each figure's hover."""
    pooled = [b for o in ours if (b := pooled_basis(o["interval"]))]
    if not pooled:
        return ""
    clusters = sorted({b[0] for b in pooled})
    rounds = sorted({n for b in pooled for n in b[1:]})
    k = "–".join(map(str, dict.fromkeys([clusters[0], clusters[-1]])))
    n = "–".join(map(str, dict.fromkeys([rounds[0], rounds[-1]])))
    figures = f"{len(pooled)} of {len(ours)} figure{'s' if len(ours) > 1 else ''}"
    # the re-run floor (`between_runs.floor_interval`), as pool_clusters names it in the method
    runs = [int(m[1]) for o in ours if (m := _FLOOR.search(o["interval"] or ""))]
    # a quantity of a later design rests on fewer archived runs than the rest (`cluster_priors.HostKind.runs_of`)
    over = "–".join(map(str, dict.fromkeys([min(runs), max(runs)]))) if runs else ""
    floor = f"than its figure moved over {over} archived runs" if runs else ""
    if floor:
        floor = f", none narrower {floor}" if len(runs) == len(pooled) else f", {len(runs)} of them no narrower {floor}"
    return f"Intervals are across runs: {k} fresh clusters × {n} rounds per server{floor} ({figures})."


_FLOOR = re.compile(r"no narrower than the figure's spread over (\d+) archived runs")


def headline(t: pl.DataFrame) -> str:
    """One sentence from the overall tally row: how many claims, how many tested and how they came out."""
    a = t.filter(pl.col("study") == "all").row(0, named=True)
    total = a["tested"] + sum(a[u] for u in v.UNTESTED)
    tested = ", ".join(f"{a[c]} {c}" for c in t.columns[2:] if c not in v.UNTESTED and a[c])
    apart = ", ".join(f"{a[u]} {u}" for u in v.UNTESTED if a[u] or u != v.NOT_COMPARABLE)
    return f"**{total} claims**, **{a['tested']} tested here**: {tested or 'none'}. Not tested: {apart}."


def glance_html(t: pl.DataFrame) -> str:
    """The tally as a table, the untested columns set apart by a rule, the overall row last and bold."""
    apart = v.UNTESTED
    first_apart = next(c for c in t.columns if c in apart)

    def cell(tag: str, c: str, text: str) -> str:
        return f"<{tag}{' class=apart' if c == first_apart else ''}>{text}</{tag}>"

    head = "<tr>" + "".join(cell("th", c, escape(c)) for c in t.columns) + "</tr>"
    body = []
    for r in t.iter_rows(named=True):
        style = ' style="font-weight:600"' if r["study"] == "all" else ""
        body.append(f"<tr{style}>" + "".join(cell("td", c, escape(str(r[c]))) for c in t.columns) + "</tr>")
    explain = (
        "<p style='font-size:12px;color:#555'>Claims, not findings: a claim tested on several servers "
        "counts once: the servers’ common verdict; <i>mixed</i> when they decided opposite ways; <i>direction "
        "only</i> when all decided the claimed way, not all within the tolerance; else <i>undetermined</i>. "
        "<i>tested</i> counts the claims with a verdict from data; <i>not comparable</i> (servers built "
        "otherwise than in their version), <i>not testable here</i> and <i>not run</i>, right of the rule, "
        "are not part of it.</p>"
    )
    table = f'<table class="pglab-sum" style="width:auto;table-layout:auto">{head}{"".join(body)}</table>'
    return STYLE + table + explain


def answers_markdown(answers: list[str]) -> str:
    return "**In brief, on this machine:**\n\n" + "\n".join(f"- {a}" for a in answers) if answers else ""


def show(findings: pl.DataFrame, answers: list[str] = ()) -> None:
    """The report's opening: the headline sentence, the plain answers (`Study.answers`), then the summary table."""
    from IPython.display import HTML, Markdown, display

    rows = claims(findings)
    figures = [o for ours in rows["ours"] for o in ours]
    display(Markdown(" ".join(filter(None, (headline(v.tally(rows)), resting(figures))))))
    if answers:
        display(Markdown(answers_markdown(list(answers))))
    display(HTML(summary_html(findings)))


def show_glance(findings: pl.DataFrame) -> None:
    from IPython.display import HTML, display

    display(HTML(glance_html(v.tally(claims(findings)))))

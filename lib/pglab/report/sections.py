"""The report's study sections, in the order of the studies S1 … S5 (docs/studies.md), each a `<name>_report` module
with TITLE, TABLES, method(), charts() and findings() that read `data/derived/<profile>/` only; optional
question(), discussion(profile, root) and NOISE_TABLE override the defaults (report_setups, `<prefix>_noise`).

`show()` renders one section in a notebook; a section whose tables this profile lacks says so instead."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import polars as pl

from . import evidence as report_evidence, setups as report_setups
from .. import studies
from ..core import derived
from ..core import findings as fnd

SECTIONS = (
    "ssb_report",  # S1 (and S4's SSB tests)
    "auto_explain_report",  # S2
    "pgbench_report",  # S3 (and S4's client scaling)
    "jit_operators_report",  # S4, test 1
    "parallel_index_report",  # S4, test C
    "partitioning_report",  # S5
)

# The source studies, short citations (the full ones, with what each measured, are in docs/studies.md)
STUDIES = {
    "S1": "SSB with parallel query and JIT, PostgreSQL 16.6 vs 17.2 (PostgreSQL Advent Calendar 2024, 24 December)",
    "S2": (
        "「PostgreSQL の auto_explain のパフォーマンスへの影響」, \"The performance impact of PostgreSQL's "
        'auto_explain" (blog 「ぱと隊長日誌」, Pato-taichō nisshi)'
    ),
    "S3": "pgbench on nine versions, 7.3 … 9.1 (PostgreSQL Advent Calendar, year not stated, about 2011)",
    "S4": "PostgreSQL Enterprise Consortium WG1, results of fiscal 2018 (`https://pgecons-sec-tech.github.io/tech-report/`)",
    "S5": (
        '「PostgreSQL v11新機能先取り:Hash-PartitioningとParallel-Append」, "PostgreSQL v11 new features, an early '
        'look: hash partitioning and Parallel Append" (PostgreSQL Advent Calendar 2017 on Qiita)'
    ),
}
# the studies each section sets beside our data
SECTION_STUDIES = {
    "ssb_report": ("S1", "S4"),
    "auto_explain_report": ("S2",),
    "pgbench_report": ("S3", "S4"),
    "jit_operators_report": ("S4",),
    "parallel_index_report": ("S4",),
    "partitioning_report": ("S5",),
}


def sources_markdown(name: str) -> str:
    """The section's source studies, each as "S<n>, see docs/studies.md" with its title."""
    cites = " ".join(f"{s}: {STUDIES[s]}." for s in SECTION_STUDIES[name])
    return f"**Source.** {cites} See `docs/studies.md`."


def section(name: str) -> ModuleType:
    """The section's module, found through the study registry (pglab.studies): the report imports no study."""
    return studies.report_section(name)


def missing_tables(mod: ModuleType, profile: str, root: Path | None = None) -> list[str]:
    d = derived.profile_dir(profile, root)
    return [t for t in mod.TABLES if not (d / f"{t}.csv").exists()]


def all_findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    """Every available section's findings in one table (the report's summary)."""
    frames = [fnd.table([])]
    for name in SECTIONS:
        mod = section(name)
        if not missing_tables(mod, profile, root):
            frames.append(mod.findings(profile, root))
    return pl.concat(frames).sort("study", "finding", "server", maintain_order=True)


def question(name: str) -> str:
    """The section's question: the module's own `question()` when it has one, else report_setups'."""
    mod = section(name)
    return mod.question() if hasattr(mod, "question") else report_setups.question(name)


def discussion(name: str, profile: str, root: Path | None = None) -> str:
    """What differs from the study's setup and why it matters (Markdown): the module's own `discussion()` when
    it has one, else the study's setup beside ours from report_setups."""
    mod = section(name)
    if hasattr(mod, "discussion"):
        return mod.discussion(profile, root)
    return report_setups.discussion(name, profile, root)


def noise_table(name: str, profile: str, root: Path | None = None) -> pl.DataFrame | None:
    """The section's A/A control (`<prefix>_noise`: study, server, metric, n_pairs, false_difference_rate,
    floor, method), or None when this run has none."""
    table = getattr(section(name), "NOISE_TABLE", name.removesuffix("_report") + "_noise")
    if not (derived.profile_dir(profile, root) / f"{table}.csv").exists():
        return None
    return derived.read_table(table, profile, root)


def skipped_markdown(name: str, profile: str, root: Path | None = None) -> str | None:
    """The servers this study's notebooks skipped, with the reasons (`<prefix>*_skipped` tables: an external
    server without allow_destructive, a build without JIT, ...), or None when none was."""
    prefix = name.removesuffix("_report")
    rows = []
    for f in sorted(derived.profile_dir(profile, root).glob(f"{prefix}*_skipped.csv")):
        rows += derived.read_table(f.stem, profile, root).iter_rows(named=True)
    if not rows:
        return None
    lines = [f"- {r['server']}, {r['experiment']}: {r['reason']}" for r in rows]
    return "**Servers skipped.**\n\n" + "\n".join(lines)


def show(name: str, profile: str, root: Path | None = None) -> None:
    """Display one section: its question and sources, how it was measured (folded), its charts, its findings
    (one folded block per claim), its noise floor, and what differs from the study's setup."""
    from IPython.display import HTML, Markdown, display

    mod = section(name)
    missing = missing_tables(mod, profile, root)
    skips = skipped_markdown(name, profile, root)
    if missing:
        display(Markdown(f"*Not run in profile `{profile}`: no derived table {', '.join(missing)}.*"))
        if skips:
            display(Markdown(skips))
        return
    display(Markdown(f"**The question.** {question(name)}\n\n{sources_markdown(name)}"))
    display(HTML(report_evidence.folded("How it was measured", mod.method(profile, root))))
    for chart in mod.charts(profile, root):
        display(chart)
    display(Markdown("**Findings.** One per claim of the study: open it for each server's verdict and evidence."))
    display(HTML(report_evidence.findings_html(mod.findings(profile, root))))
    display(Markdown(report_evidence.noise_markdown(noise_table(name, profile, root))))
    if skips:
        display(Markdown(skips))
    display(Markdown("**What differs from the study.**\n\n" + discussion(name, profile, root)))

"""The report's study sections, one per Study of pglab.studies in the order of the source studies S1 … S5
(docs/studies.md): its Section's question and setup, and its method, charts and findings, read from
`data/derived/<profile>/` only (a `Tables` mapping).

`show()` renders one section in a notebook; a section whose tables this profile lacks says so instead."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..core.derived import Tables
from ..core.run import system_sampler
from ..core.stats import findings as fnd
from ..studies import STUDIES, Study, report_order
from . import evidence as report_evidence
from . import setups as report_setups

# The source studies, short citations (the full ones, with what each measured, are in docs/studies.md). In English
# only: S2's and S5's original titles are Japanese, which a reader's machine without a CJK font draws as empty boxes
# (the kit's own test machine among them); the report says they are Japanese and docs/studies.md keeps the originals.
SOURCES = {
    "S1": "SSB with parallel query and JIT, PostgreSQL 16.6 vs 17.2 (PostgreSQL Advent Calendar 2024, 24 December)",
    "S2": (
        '"The performance impact of PostgreSQL\'s auto_explain" (in Japanese; blog Pato-taichō nisshi, the '
        "original title in docs/studies.md)"
    ),
    "S3": "pgbench on nine versions, 7.3 … 9.1 (PostgreSQL Advent Calendar, year not stated, about 2011)",
    "S4": "PostgreSQL Enterprise Consortium WG1, results of fiscal 2018 (`https://pgecons-sec-tech.github.io/tech-report/`)",
    "S5": (
        '"PostgreSQL v11 new features, an early look: hash partitioning and Parallel Append" (in Japanese; '
        "PostgreSQL Advent Calendar 2017 on Qiita, the original title in docs/studies.md)"
    ),
}


def sources_markdown(study: Study) -> str:
    """The section's source studies, each as "S<n>, see docs/studies.md" with its title."""
    cites = " ".join(f"{s}: {SOURCES[s]}." for s in study.section.sources)
    return f"**Source.** {cites} See `docs/studies.md`."


def missing_tables(study: Study, tables: Tables) -> list[str]:
    return [t for t in study.report_tables if t not in tables]


def all_findings(profile: str, root: Path | None = None, stages=STUDIES) -> pl.DataFrame:
    """Every available section's findings in one table (the report's summary)."""
    frames = [fnd.table([])]
    tables = Tables(profile, root)
    for study in report_order(stages):
        if not missing_tables(study, tables):
            frames.append(study.findings(tables))
    return pl.concat(frames).sort("study", "finding", "server", maintain_order=True)


def answers(profile: str, root: Path | None = None, stages=STUDIES) -> list[str]:
    """The studies' plain sentences (`Study.answers`) in report order, for the first screen."""
    tables = Tables(profile, root)
    return [a for study in report_order(stages) if not missing_tables(study, tables) for a in study.answers(tables)]


def skipped_markdown(study: Study, tables: Tables) -> str | None:
    """The servers this study's notebooks skipped, with the reasons (`<name>*_skipped` tables: an external
    server without allow_destructive, a build without JIT, ...), or None when none was."""
    rows = []
    for name in sorted(t for t in tables if t.startswith(study.name) and t.endswith("_skipped")):
        rows += tables[name].iter_rows(named=True)
    if not rows:
        return None
    lines = [f"- {r['server']}, {r['experiment']}: {r['reason']}" for r in rows]
    return "**Servers skipped.**\n\n" + "\n".join(lines)


def show(study: Study, profile: str, root: Path | None = None) -> None:
    """Display one section: its question and sources, how it was measured (folded), its charts, its findings
    (one folded block per claim), its noise floor, and what differs from the study's setup."""
    from IPython.display import HTML, Markdown, display

    tables = Tables(profile, root)
    missing = missing_tables(study, tables)
    skips = skipped_markdown(study, tables)
    if missing:
        display(Markdown(f"*Not run in profile `{profile}`: no derived table {', '.join(missing)}.*"))
        if skips:
            display(Markdown(skips))
        return
    display(Markdown(f"**The question.** {study.section.question}\n\n{sources_markdown(study)}"))
    display(HTML(report_evidence.folded("How it was measured", study.method(tables))))
    for chart in study.charts(tables):
        display(chart)
    display(Markdown("**Findings.** One per claim of the study: open it for each server's verdict and evidence."))
    display(HTML(report_evidence.findings_html(study.findings(tables))))
    display(Markdown(report_evidence.noise_markdown(tables.get(f"{study.name}_noise"))))
    machine = system_sampler.stage_markdown(tables.get(f"{study.name}_machine"))
    if machine:
        display(Markdown(machine))
    if skips:
        display(Markdown(skips))
    display(Markdown("**What differs from the study.**\n\n" + report_setups.discussion(study.section, profile, root)))


def show_experiments(profile: str, root: Path | None = None) -> None:
    """The user's own experiments of this run (params `experiments:`), after the studies; nothing when it had none."""
    from IPython.display import Markdown, display

    from ..studies.experiments import report as experiments_report

    tables = Tables(profile, root)
    if "experiments_setup" not in tables or tables["experiments_setup"].is_empty():
        return
    env = tables.get("environment_servers")
    display(Markdown("## Your own experiments\n\nThe `experiments:` of the params file (docs/experiments.md)."))
    experiments_report.show_all(tables, env)

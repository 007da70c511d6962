"""The report's study sections, in the order of the studies S1 … S5 (docs/studies.md), each a `<name>_report` module
with TITLE, TABLES, method(), charts() and findings() that read `data/derived/<profile>/` only.

`show()` renders one section in a notebook; a section whose tables this profile lacks says so instead."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import polars as pl

from . import derived
from . import findings as fnd

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
        'auto_explain" (blog 「ぱと隊長日誌」)'
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
    return importlib.import_module(f"pglab.{name}")


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


def verdict_counts(f: pl.DataFrame) -> pl.DataFrame:
    """Findings per study and verdict, the verdicts as columns in the vocabulary's order."""
    counts = f.group_by("study", "verdict").len().pivot(on="verdict", index="study", values="len")
    cols = [v for v in fnd.VERDICTS if v in counts.columns]
    return counts.select("study", *[pl.col(c).fill_null(0) for c in cols]).sort("study")


def show(name: str, profile: str, root: Path | None = None) -> None:
    """Display one section: how it was measured, its charts, its findings beside the study's."""
    from IPython.display import Markdown, display

    mod = section(name)
    missing = missing_tables(mod, profile, root)
    if missing:
        display(Markdown(f"*Not run in profile `{profile}`: no derived table {', '.join(missing)}.*"))
        return
    display(Markdown(sources_markdown(name)))
    display(Markdown("**How it was measured.**\n\n" + mod.method(profile, root)))
    for chart in mod.charts(profile, root):
        display(chart)
    display(Markdown(fnd.markdown(mod.findings(profile, root))))

"""The report's study sections, in the order of shared/reference/studies.md, each a `<name>_report` module
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
    display(Markdown("**How it was measured.**\n\n" + mod.method(profile, root)))
    for chart in mod.charts(profile, root):
        display(chart)
    display(Markdown(fnd.markdown(mod.findings(profile, root))))

"""Report section of study S1 (SSB: parallel query, JIT, versions) with study S4's SSB tests (JIT per query,
parallel query tests A and B), computed from the derived tables only: no server, no raw store. Every claim goes
through the one rule of `pglab.core.verdicts` with paired ratios (the fast mode by default, else per round), the
A/A noise floor and the ceiling flag (`pglab.studies.ssb.verdicts`)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ...core.findings import table as findings_table
from . import report_text, verdicts
from .report_data import TABLES

__all__ = ["TABLES", "charts", "findings", "method"]


def method(profile: str, root: Path | None = None) -> str:
    return report_text.method(profile, root)


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    return report_text.charts(profile, root)


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    return findings_table(verdicts.findings_rows(profile, root))

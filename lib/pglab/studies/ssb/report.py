"""Report section of study S1 (SSB: parallel query, JIT, versions) with study S4's SSB tests (JIT per query,
parallel query tests A and B), computed from the derived tables only: no server, no raw store.

Two kinds of dataset are read:

* Runs with the paired analysis (a `ssb_noise` table, issue 16): every claim goes through the one rule of
  `pglab.core.verdicts` with paired ratios (the fast mode by default, else per round), the A/A noise floor and the
  ceiling flag
  (`pglab.studies.ssb.findings`, `pglab.studies.ssb.report_new`).
* Datasets derived before it (no `ssb_noise`): read exactly as they were, by the rule of that time
  (`pglab.studies.ssb.legacy_parallel`, `pglab.studies.ssb.legacy_other`), so that a committed report still reproduces.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ...core import derived
from ...core.findings import table as findings_table
from . import report_text
from .report_data import TABLES, _Data

__all__ = ["TABLES", "TITLE", "charts", "findings", "method"]

TITLE = "S1 · SSB: parallel query, JIT and versions (with S4's SSB tests)"


def paired_run(profile: str, root: Path | None = None) -> bool:
    """Whether the profile's data come from a run with the paired analysis (it has the noise floor table)."""
    return (derived.profile_dir(profile, root) / "ssb_noise.csv").exists()


def method(profile: str, root: Path | None = None) -> str:
    text = report_text.method(profile, root)
    if paired_run(profile, root):
        from . import report_new

        text += "\n" + report_new.method_lines(profile, root)
    return text


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    return report_text.charts(profile, root)


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    if paired_run(profile, root):
        from . import findings as new

        return findings_table(new.findings_rows(profile, root))
    from . import legacy_other

    return findings_table(legacy_other.findings_rows(_Data(profile, root)))

"""S4 test C: parallel CREATE INDEX with 0 to N maintenance workers.

params (the study's params section), build (one index build), run (server work, resumable), derive
(raw -> tables), verdicts, charts, report (the report section)."""

from __future__ import annotations

from ...core.stats.verdicts import Regime
from ..base import Section, Study, prefixed

STUDY = Study(
    name="parallel_index",
    notebook="60_parallel_index",
    tables=prefixed(
        "parallel_index",
        "skipped builds summary speedup paired paired_suite size_paired noise drift setup measurements",
    ),
    section=Section(
        title="S4 · Parallel B-tree index build (test C)",
        sources=("S4",),
        question=(
            "Does a parallel B-tree build on lineorder get faster with more maintenance workers, and longer for "
            "larger indexes? (S4 test C)"
        ),
        theirs={
            "scale": "SSB SF 100 `lineorder` (≈ 600 M rows)",
            "cores": "many-core server",
            "versions": "11",
            "cache": "not stated",
        },
        ours_scale=("parallel_index_setup", "lineorder_rows", "`lineorder` of {} rows"),
        ours_cache="the table prewarmed",
        why=(
            "A sort's parallel gain needs cores: with as many workers as cores the leader and the workers compete, so"
            " 'close to 1/N' can only show up to this machine's core count; a smaller index sorts in memory."
        ),
    ),
    regimes=(
        Regime(
            ("time_falls", "near_inverse"),
            "parallel_index_setup",
            "lineorder_rows",
            1e6,
            "rows",
            "below a million rows a build takes milliseconds, dominated by fixed costs (worker start-up, the "
            "final merge) rather than the sort the workers share (S4 built on SF 100)",
        ),
    ),
)

"""S4 test 1: JIT per operator (scans, sorts, aggregates, joins) with JIT on and off.

params (the study's params section), run (server work, resumable), derive (raw -> tables), verdicts, charts,
report (the report section)."""

from __future__ import annotations

from ...core.stats.verdicts import Regime
from ..base import Section, Study, prefixed

STUDY = Study(
    name="jit_operators",
    notebook="50_jit_operators",
    tables=prefixed(
        "jit_operators",
        "skipped setup conditions settings runs summary reduction results plans jit_time paired overall noise "
        "drift findings measurements",
    ),
    section=Section(
        title="S4 · JIT per operator",
        sources=("S4",),
        question="How much time does JIT compilation save per aggregate operator? (S4 test 1)",
        theirs={
            "scale": "SSB SF 100 `lineorder` (≈ 600 M rows)",
            "cores": "36 (Xeon Gold 6140)",
            "versions": "11",
            "cache": "pg_prewarm",
        },
        ours_scale=("jit_operators_setup", "rows", "{} rows"),
        ours_cache="pg_prewarm, serial plans (no parallel workers)",
        why=(
            "JIT's saving is a share of the per-row work, and its compile cost is fixed: on a table this much smaller"
            " the fixed cost weighs more, so our savings can be smaller than 20–30 % without contradicting the "
            "mechanism. A server built without LLVM cannot test the claims at all."
        ),
    ),
    regimes=(
        Regime(
            ("*",),
            "jit_operators_setup",
            "rows",
            1e6,
            "rows",
            "below a million rows compiling a query (tens of milliseconds) weighs as much as the execution it "
            "speeds up",
        ),
    ),
)

"""S5: hash partitioning and Parallel Append (PostgreSQL 11), partitioned against plain tables.

params (the study's params section), prepare (tables and partitions), run (server work, resumable), derive
(raw -> tables) with plans, verdicts, report (the report section)."""

from __future__ import annotations

from ...core.stats.verdicts import Regime
from ..base import Section, Study, prefixed

STUDY = Study(
    name="partitioning",
    notebook="70_partitioning",
    tables=prefixed(
        "partitioning",
        "skipped setup partitions executions summary speedup results plans gathers planner paired noise drift "
        "measurements",
    ),
    section=Section(
        title="S5 · Hash partitioning and Parallel Append",
        sources=("S5",),
        question="Do hash partitioning and Parallel Append speed up a full scan spread over several drives? (S5)",
        theirs={
            "scale": "600,000,000 rows, 6 partitions of ≈ 8 GB",
            "cores": "not stated (7 workers planned)",
            "versions": "11 development build",
            "cache": "OS cache dropped, minimal shared_buffers, 3 NVMe drives",
        },
        ours_scale=("partitioning_setup", "rows", "{} rows in 6 partitions"),
        ours_cache="warm: every partition pg_prewarm'ed",
        why=(
            "The study's gain came from reading three drives at once (cold cache); ours is CPU-bound in a warm cache,"
            " so the speed-up is capped by this machine's cores, not by drive bandwidth: the claim about drives "
            "cannot be tested here, the plan shape and the spread of rows can."
        ),
    ),
    regimes=(
        Regime(
            ("cpu_speedup",),
            "partitioning_setup",
            "rows",
            1e6,
            "rows",
            "below a million rows the parallel plan's worker start-up weighs as much as the scan it splits (the "
            "study: 600 M rows)",
        ),
    ),
)

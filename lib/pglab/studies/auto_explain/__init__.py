"""S2: the overhead of auto_explain on pgbench's select-only and custom scripts, with the log as proof.

params (the study's params section), prepare (server setup), run (server work, resumable) with logcheck,
derive (raw -> tables), verdicts (the claims under the one rule), charts, report (the report section)."""

from __future__ import annotations

from ..base import Section, Study, prefixed

STUDY = Study(
    name="auto_explain",
    notebook="40_auto_explain",
    tables=prefixed(
        "auto_explain",
        "skipped latencies summary ratios study log_checks log_summary plans timer servers noise drift "
        "evidence measurements",
    ),
    section=Section(
        title="S2 · auto_explain overhead with pgbench",
        sources=("S2",),
        question=(
            "What do loading auto_explain and its settings (log_analyze, log_timing, logging every plan) cost, for a "
            "one-row and a million-row query? (S2)"
        ),
        theirs={
            "scale": "1,000,000 rows in `tab1`, 5,000,000 / 50,000 pgbench transactions",
            "cores": "4 virtual CPUs (Hyper-V guest on a Core i5-6600)",
            "versions": "14.1",
            "cache": "the table in shared_buffers of 2 GB; log to a SATA SSD",
        },
        ours_scale=None,
        ours_cache=(
            "the table prewarmed, shared_buffers as the params file sets it; the server log on this machine's disk"
        ),
        why=(
            "The overhead of log_analyze is the clock read per row and node: its size depends on this machine's timer"
            " (shown under the environment) more than on the version; a Hyper-V guest's clock is slower, so the "
            "study's ANALYZE cost may be larger than ours. Fewer transactions than the study's widen our intervals."
        ),
    ),
)

"""S3 (pgbench on nine versions) and S4's client scaling: pgbench init, select-only, scaling and series; S3's
explanation of its select-only ranking (small shared_buffers) tested on one server: buffers.

params (the study's params section), run (server work, resumable) with bench (one pgbench run), buffers (the
buffers experiment) and prepare (its databases and their sizes), derive (raw -> tables) with paired_tables,
reference, charts, verdicts, report (the report section)."""

from __future__ import annotations

from ...core.stats.builds import Comparison
from ..base import Section, Study, prefixed

STUDY = Study(
    name="pgbench",
    notebook="30_pgbench",
    tables=prefixed(
        "pgbench",
        "skipped runs init init_steps select_only scaling series series_sizes buffers init_summary "
        "select_only_summary scaling_summary series_summary buffers_summary series_trend timeseries "
        "settings servers paired noise drift no_vacuum version_curve buffers_paired measurements timeline latency "
        "server_counters system telemetry",
    ),
    section=Section(
        title="S3 · pgbench across versions and scales (with S4's client scaling)",
        sources=("S3", "S4"),
        question=(
            "How did pgbench throughput change across versions; does it degrade without vacuum; how does it scale "
            "with clients? (S3; S4 scale-up)"
        ),
        theirs={
            "scale": "pgbench scale 1, 10 and 100 (S3); the WG's benchmark (S4)",
            "cores": "a Core 2 Quad, 4 cores (S3); 72 cores (S4)",
            "versions": "7.3 … 9.1 (S3); 10 and 11 (S4)",
            "cache": "every setting at its default, OS cache (S3)",
        },
        ours_scale=("pgbench_init", "scale", "pgbench scale {}"),
        ours_cache="explicit settings from the params file, the same on every server (not each version's defaults)",
        why=(
            "S3 compared versions whose defaults differed; we give every server the same explicit settings, so a "
            "difference here is the engine's, not its defaults' — and only between servers built alike (compiler, "
            "optimisation, assertions: else *not comparable*, the difference named). Versions 7.3 … 9.1 are not "
            "run: HOT (8.3) and the old degradation cannot be seen, and on few cores the client scaling of a 72-core "
            "server cannot either."
        ),
    ),
    # the version claims: each server over the baseline pgbench_paired names (the oldest); the no-vacuum series
    # compares the runs of one server, not servers
    comparisons=(
        Comparison(
            ("load_time_*", "select_only_scale_*", "tpcb_versions_*", "scaleup_*"),
            baseline=("pgbench_paired", "baseline"),
        ),
    ),
)

"""S1 (and S4's SSB tests): SSB queries with parallel query and JIT across PostgreSQL versions.

params (the study's params section), run (server work, resumable), derive (raw -> tables) with paired_tables,
reference (the studies' published figures), report_data (the derived tables the section and verdicts read), charts,
verdicts (the claims under the one rule), report (the report section: method, charts, findings)."""

from __future__ import annotations

from ...core.stats.builds import Comparison
from ...core.stats.verdicts import Regime
from ..base import Section, Study, prefixed

STUDY = Study(
    name="ssb",
    notebook="20_ssb",
    tables=prefixed(
        "ssb",
        "skipped executions summary speedup jit plans checksums availability sweep fingerprints paired "
        "versions_paired aa noise drift sweep_paired answers plans_study_workers plans_scaled versions "
        "sweep_summary jit_io jit_executions measurements",
    ),
    section=Section(
        title="S1 · SSB: parallel query, JIT and versions (with S4's SSB tests)",
        sources=("S1", "S4"),
        question=(
            "Is a newer version faster on the Star Schema Benchmark, with and without parallel query; does JIT help; "
            "does q4.3 get fewer workers than allowed? (S1; S4 tests 2, A and B)"
        ),
        theirs={
            "scale": "SSB SF 70 (S1, `lineorder` 41 GB); SF 100 (S4, ≈ 60 GB)",
            "cores": "8 cores / 16 threads (S1); 36 cores (S4 JIT), many-core server (S4 parallel)",
            "versions": "16.6 and 17.2 (S1); 9.5, 9.6, 10 and 11 (S4)",
            "cache": "pg_prewarm into shared_buffers of 48 GB (S1); pg_prewarm (S4)",
        },
        ours_scale=("ssb_load", "sf", "SSB SF {}"),
        ours_cache="pg_prewarm into shared_buffers (warm), every server alike",
        why=(
            "At a small scale factor a query runs in tens of milliseconds, where fixed costs (planning, starting "
            "workers, JIT compilation) weigh far more than at SF 70: speed-ups and JIT gains shrink, and with few "
            "cores a 5-worker speed-up cannot be reached. Versions other than the study's answer 'is newer faster' "
            "for today's versions, not for 16.6 vs 17.2."
        ),
    ),
    regimes=(
        Regime(
            ("jit_*",),
            "ssb_load",
            "sf",
            10,
            "SF",
            "below SF 10 the plans cost less than the default inlining and optimisation thresholds (500,000), so JIT "
            "only compiles, unoptimised, and its compile time weighs against sub-second executions (S1 ran SF 70, "
            "S4 SF 100)",
            # what answers both at SF 1 (methodology rule 17): inlining and optimisation forced, judged net of
            # each execution's compile; the JIT claims take that mode where the run measured it (jit_mode)
            met_by=("ssb_paired", "mode", ("parallel_jit_forced_net",)),  # paired_tables.JIT_CLAIM_MODES[0]
        ),
        Regime(
            ("parallel_speedup", "newer_version_*", "parallel_a", "parallel_b*"),
            "ssb_load",
            "sf",
            1,
            "SF",
            "below SF 1 a query runs in milliseconds, where planning, worker start-up and round trips weigh what "
            "scanning weighs at SF 70",
        ),
    ),
    # "is newer faster": the server column names the pair, "pg17 vs pg16"
    comparisons=(Comparison(("newer_version_*",)),),
)

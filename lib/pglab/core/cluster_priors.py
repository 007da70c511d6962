"""What archived fresh runs say before a run: the between-cluster priors (what a run's between-cluster variance is
shrunk toward, `between_runs.moderate`) and the re-run spreads (how narrow a pooled interval may be,
`between_runs.floor_interval`).

Each server is measured on two clusters per run, so its between-cluster variance rests on one draw however many
comparisons feed it, and over three fresh runs the same server's estimate swung from 0 % to 8 % and back
(docs/verdicts.md); the intervals, and the verdicts near a zone's edge, swung with it. A prior from archived
runs keeps one run's 0 % or 15 % from being taken at face value.

And a run's interval measures its own hour: over the three runs below, a quiet run's JIT ratios read ±2 % where
the noisier two read ±6-12 %, the figure itself moved ~2 % between runs, and four verdicts near a zone's edge were
decided in the quiet run only. SPREADS is how far each table's figures moved between those runs; no pooled interval
is narrower than that allows, whatever its own hour.

PRIORS: {(table, base server): sd (log scale)}: the root mean of the variances the archived fresh runs `RUNS`
estimated. SPREADS: {table: (sd of a figure's log across RUNS, df)}, pooled over the table's comparisons on every
server that two or more runs hold, A/A copies left out (their two sides share the hour: they take no floor either).
The df counts the comparisons as independent, which overstates it (a run's shift is common to them); it only sets the
floor's t quantile. auto_explain's quantities share one spread (35 %): serial ns per row moved ~10 % between the runs,
the parallel ones 2-3×, so it is wide for the former. `make stability ARCHIVES=...` prints both from any set of runs
(`calibration.priors_text`, `calibration.spreads_text`). Measured on the default profile's servers on a 2-core VM
(clock reads ~30 ns); a server not listed (another profile's) keeps its run's own estimate and no floor. "*": one
value shared by every server of the table (pgbench's, per experiment). Fixed before the runs that test it (rule 12):
the three runs below are of the previous design."""

from __future__ import annotations

from .between_runs import Prior

RUNS = ("default-20261127-105829", "default-20261127-142442", "default-20261128-020725")

# each run's own sd in the comment, in the order of RUNS
PRIORS = {
    ("auto_explain_quantities", "pg15"): 0.1368,  # 0.0%, 23.7%, 0.0%
    ("auto_explain_quantities", "pg18"): 0.1094,  # 13.8%, 2.2%, 12.8%
    ("auto_explain_ratios", "pg15"): 0.1223,  # 6.7%, 12.4%, 15.8%
    ("auto_explain_ratios", "pg18"): 0.0893,  # 9.7%, 0.0%, 12.0%
    ("jit_operators_overall", "pg15"): 0.0018,  # 0.0%, 0.0%, 0.3%
    ("jit_operators_paired", "pg15"): 0.0018,  # 0.0%, 0.0%, 0.3%
    ("parallel_index_paired", "pg15"): 0.0465,  # 0.0%, 0.0%, 8.1%
    ("parallel_index_paired", "pg18"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("parallel_index_paired_suite", "pg15"): 0.0465,  # 0.0%, 0.0%, 8.1%
    ("parallel_index_paired_suite", "pg18"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("parallel_index_size_paired", "pg15"): 0.0465,  # 0.0%, 0.0%, 8.1%
    ("parallel_index_size_paired", "pg18"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("partitioning_paired", "pg15"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("partitioning_paired", "pg18"): 0.0610,  # 0.0%, 10.6%, 0.0%
    ("pgbench_no_vacuum", "*"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("pgbench_paired:load time", "*"): 0.0365,  # 0.0%, 6.3%, 0.0%
    ("pgbench_paired:scale-up tps", "*"): 0.0155,  # 0.0%, 0.0%, 2.7%
    ("pgbench_paired:select-only tps", "*"): 0.0273,  # 4.7%, 0.0%, 0.0%
    ("pgbench_paired:series tps", "*"): 0.0213,  # 0.0%, 3.7%, 0.0%
    ("ssb_paired", "pg15"): 0.0651,  # 0.0%, 7.5%, 8.5%
    ("ssb_paired", "pg16"): 0.0193,  # 3.0%, 0.5%, 1.4%
    ("ssb_paired", "pg17"): 0.0030,  # 0.5%, 0.0%, 0.0%
    ("ssb_paired", "pg18llvm"): 0.1138,  # 0.0%, 19.2%, 4.3%
    ("ssb_sweep_paired", "pg16"): 0.0628,  # 1.9%, 0.0%, 10.7%
    ("ssb_sweep_paired", "pg17"): 0.0401,  # 0.0%, 6.9%, 0.0%
    ("ssb_versions_paired", "pg17"): 0.0292,  # 0.0%, 4.7%, 1.8%
}

SPREADS = {
    "auto_explain_quantities": (0.3484, 9),
    "auto_explain_ratios": (0.0726, 64),
    "jit_operators_overall": (0.0064, 4),
    "jit_operators_paired": (0.0200, 36),
    "parallel_index_paired": (0.0737, 8),
    "parallel_index_paired_suite": (0.0279, 4),
    "parallel_index_size_paired": (0.0684, 4),
    "partitioning_paired": (0.0597, 16),
    "pgbench_no_vacuum": (0.1521, 12),
    "pgbench_paired:load time": (0.0818, 10),
    "pgbench_paired:scale-up tps": (0.0467, 4),
    "pgbench_paired:select-only tps": (0.0302, 10),
    "pgbench_paired:series tps": (0.0458, 10),
    "ssb_paired": (0.0671, 120),
    "ssb_sweep_paired": (0.0679, 24),
    "ssb_versions_paired": (0.0441, 60),
}


def _prior(table: str, sd: float) -> Prior:
    spread, df = SPREADS.get(table, (0.0, 0))
    return Prior(sd, len(RUNS), spread, df, len(RUNS) if df else 0)


def priors(table: str) -> dict[str, Prior]:
    """{base server: Prior} of a table's per-server variances, each with the table's spread (none declared: {})."""
    return {s: _prior(table, sd) for (t, s), sd in PRIORS.items() if t == table and s != "*"}


def shared(table: str) -> Prior | None:
    """The Prior of a table's one variance shared by every server ("*"), with its spread, or None."""
    sd = PRIORS.get((table, "*"))
    return None if sd is None else _prior(table, sd)

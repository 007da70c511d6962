"""What archived fresh runs say before a run: the between-cluster priors (what a run's between-cluster variance is
shrunk toward, `between_runs.moderate`) and the re-run spreads (how narrow a pooled interval may be,
`between_runs.floor_interval`).

Each server is measured on two clusters per run, so its between-cluster variance rests on one draw however many
comparisons feed it, and over three fresh runs the same server's estimate swung from 0 % to 8 % and back
(docs/verdicts.md); the intervals, and the verdicts near a zone's edge, swung with it. A prior from archived
runs keeps one run's 0 % or 15 % from being taken at face value.

And a run's interval measures its own hour: over three fresh runs, a quiet run's JIT ratios read ±2 % where the
noisier two read ±6-12 %, the figure itself moved ~2 % between runs, and four verdicts near a zone's edge were
decided in the quiet run only. SPREADS is how far each table's figures moved between the runs below; no pooled
interval is narrower than that allows, whatever its own hour.

PRIORS: {(table, base server): sd (log scale)}: the root mean of the variances the archived fresh runs `RUNS`
estimated. SPREADS: {table: (sd of a figure's log across RUNS, df)}, pooled over the table's comparisons on every
server that two or more runs hold, A/A copies left out (their two sides share the hour: they take no floor either).
The df counts the comparisons as independent, which overstates it (a run's shift is common to them); it only sets the
floor's t quantile. auto_explain's quantities share one spread (20 %): serial ns per row moves less between runs
than the parallel ones, so it is wide for the former. `make stability ARCHIVES=...` prints both from any set of runs
(`calibration.priors_text`, `calibration.spreads_text`).

RUNS are the six fresh default runs of 27-28 Nov whose measuring code is the same (only scoring changed between
them): three on a host whose clock reads cost ~30 ns, three on one boot of a ~21 ns host. This VM lands on either
kind, and a figure can differ between the kinds by more than one kind's runs spread (JIT's cut of simple
aggregates: ~8 % on the ~30 ns kind, ~5 % on the other), so a re-run on the other kind is a re-run a reader faces
too; the six together are the spread a verdict has to survive. Measured on the default profile's servers on a
2-core VM; a server not listed (another profile's) keeps its run's own estimate and no floor. "*": one value shared
by every server of the table (pgbench's, per experiment). Fixed before the runs that test it (rule 12): none of RUNS
tests it."""

from __future__ import annotations

from .between_runs import Prior

RUNS = (
    "default-20261127-105829",
    "default-20261127-142442",
    "default-20261128-020725",
    "default-20261128-092635",
    "default-20261128-115426",
    "default-20261128-144556",
)

# each run's own sd in the comment, in the order of RUNS
PRIORS = {
    ("auto_explain_quantities", "pg15"): 0.0968,  # 0.0%, 23.7%, 0.0%, 0.0%, 0.0%, 0.4%
    ("auto_explain_quantities", "pg18"): 0.0776,  # 13.8%, 2.2%, 12.8%, 0.0%, 0.0%, 1.4%
    ("auto_explain_ratios", "pg15"): 0.1659,  # 6.7%, 12.4%, 15.8%, 0.0%, 6.0%, 34.2%
    ("auto_explain_ratios", "pg18"): 0.0634,  # 9.7%, 0.0%, 12.0%, 0.0%, 1.3%, 0.0%
    ("jit_operators_overall", "pg15"): 0.0077,  # 0.0%, 0.0%, 0.3%, 0.7%, 1.3%, 1.1%
    ("jit_operators_paired", "pg15"): 0.0077,  # 0.0%, 0.0%, 0.3%, 0.7%, 1.3%, 1.1%
    ("parallel_index_paired", "pg15"): 0.0576,  # 0.0%, 0.0%, 8.1%, 11.0%, 1.8%, 3.2%
    ("parallel_index_paired", "pg18"): 0.0071,  # 0.0%, 0.0%, 0.0%, 0.6%, 1.6%, 0.0%
    ("parallel_index_paired_suite", "pg15"): 0.0576,  # 0.0%, 0.0%, 8.1%, 11.0%, 1.8%, 3.2%
    ("parallel_index_paired_suite", "pg18"): 0.0071,  # 0.0%, 0.0%, 0.0%, 0.6%, 1.6%, 0.0%
    ("parallel_index_size_paired", "pg15"): 0.0576,  # 0.0%, 0.0%, 8.1%, 11.0%, 1.8%, 3.2%
    ("parallel_index_size_paired", "pg18"): 0.0071,  # 0.0%, 0.0%, 0.0%, 0.6%, 1.6%, 0.0%
    ("partitioning_paired", "pg15"): 0.0063,  # 0.0%, 0.0%, 0.0%, 0.0%, 1.5%, 0.0%
    ("partitioning_paired", "pg18"): 0.0456,  # 0.0%, 10.6%, 0.0%, 1.0%, 2.8%, 2.0%
    ("pgbench_no_vacuum", "*"): 0.0000,  # 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%
    ("pgbench_paired:load time", "*"): 0.0355,  # 0.0%, 6.3%, 0.0%, 0.0%, 3.2%, 5.0%
    ("pgbench_paired:scale-up tps", "*"): 0.0110,  # 0.0%, 0.0%, 2.7%, 0.0%, 0.0%, 0.0%
    ("pgbench_paired:select-only tps", "*"): 0.0204,  # 4.7%, 0.0%, 0.0%, 1.6%, 0.0%, 0.0%
    ("pgbench_paired:series tps", "*"): 0.0151,  # 0.0%, 3.7%, 0.0%, 0.0%, 0.0%, 0.0%
    ("ssb_paired", "pg15"): 0.0486,  # 0.0%, 7.5%, 8.5%, 0.0%, 3.8%, 0.0%
    ("ssb_paired", "pg16"): 0.0217,  # 3.0%, 0.5%, 1.4%, 0.7%, 3.7%, 1.6%
    ("ssb_paired", "pg17"): 0.0124,  # 0.5%, 0.0%, 0.0%, 1.1%, 1.8%, 2.1%
    ("ssb_paired", "pg18llvm"): 0.0856,  # 0.0%, 19.2%, 4.3%, 2.0%, 4.2%, 5.4%
    ("ssb_sweep_paired", "pg16"): 0.0458,  # 1.9%, 0.0%, 10.7%, 1.3%, 0.3%, 2.4%
    ("ssb_sweep_paired", "pg17"): 0.0360,  # 0.0%, 6.9%, 0.0%, 0.5%, 4.6%, 2.8%
    ("ssb_versions_paired", "pg17"): 0.0287,  # 0.0%, 4.7%, 1.8%, 2.8%, 3.5%, 1.9%
}

SPREADS = {
    "auto_explain_quantities": (0.1992, 35),
    "auto_explain_ratios": (0.1863, 160),
    "jit_operators_overall": (0.0289, 10),
    "jit_operators_paired": (0.0356, 90),
    "parallel_index_paired": (0.0732, 20),
    "parallel_index_paired_suite": (0.0535, 10),
    "parallel_index_size_paired": (0.0556, 10),
    "partitioning_paired": (0.0416, 40),
    "pgbench_no_vacuum": (0.1108, 30),
    "pgbench_paired:load time": (0.0680, 25),
    "pgbench_paired:scale-up tps": (0.0440, 10),
    "pgbench_paired:select-only tps": (0.0355, 25),
    "pgbench_paired:series tps": (0.0328, 25),
    "ssb_paired": (0.0611, 300),
    "ssb_sweep_paired": (0.0531, 60),
    "ssb_versions_paired": (0.0381, 150),
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

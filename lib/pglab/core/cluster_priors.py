"""The between-cluster priors: what a run's between-cluster variance is shrunk toward (`between_runs.moderate`).

Each server is measured on two clusters per run, so its between-cluster variance rests on one draw however many
comparisons feed it, and over three fresh runs the same server's estimate swung from 0 % to 8 % and back
(docs/verdicts.md); the intervals, and the verdicts near a zone's edge, swung with it. A prior from archived
runs keeps one run's 0 % or 15 % from being taken at face value.

PRIORS: {(table, base server): sd (log scale)}: the root mean of the variances the archived fresh runs `RUNS`
estimated (`make stability ARCHIVES=...` prints these from any set of runs: `calibration.priors_text`). Measured on
the default profile's servers on a 2-core VM; a server not listed (another profile's) keeps its run's own
estimate. "*": one variance shared by every server of the table (pgbench's, per experiment). Fixed before the runs
that test it (rule 12): the three runs below are of the previous design, scored with the run's own estimate."""

from __future__ import annotations

from .between_runs import Prior

RUNS = ("default-20261126-233504", "default-20261127-021431", "default-20261127-051404")

# each run's own sd in the comment, in the order of RUNS
PRIORS = {
    ("auto_explain_quantities", "pg15"): 0.0910,  # 0.0%, 2.2%, 15.6%
    ("auto_explain_quantities", "pg18"): 0.0104,  # 0.0%, 0.0%, 1.8%
    ("auto_explain_ratios", "pg15"): 0.0040,  # 0.7%, 0.0%, 0.0%
    ("auto_explain_ratios", "pg18"): 0.0000,  # 0.0%, 0.0%, 0.0%
    ("jit_operators_paired", "pg15"): 0.0068,  # 0.3%, 0.2%, 1.1%
    ("parallel_index_paired", "pg15"): 0.0478,  # 0.5%, 8.3%, 0.0%
    ("parallel_index_paired", "pg18"): 0.0151,  # 2.4%, 0.5%, 0.8%
    ("partitioning_paired", "pg15"): 0.0118,  # 1.8%, 0.9%, 0.0%
    ("partitioning_paired", "pg18"): 0.0057,  # 0.0%, 0.0%, 1.0%
    ("pgbench_no_vacuum", "*"): 0.0466,  # 0.0%, 8.1%, 0.0%
    ("pgbench_paired:load time", "*"): 0.0152,  # 2.5%, 1.0%, 0.0%
    ("pgbench_paired:scale-up tps", "*"): 0.0130,  # 0.0%, 0.0%, 2.3%
    ("pgbench_paired:select-only tps", "*"): 0.0184,  # 2.6%, 0.0%, 1.9%
    ("pgbench_paired:series tps", "*"): 0.0177,  # 1.7%, 0.0%, 2.5%
    ("ssb_paired", "pg15"): 0.0417,  # 5.2%, 0.0%, 5.0%
    ("ssb_paired", "pg16"): 0.0132,  # 1.0%, 1.8%, 1.0%
    ("ssb_paired", "pg17"): 0.0158,  # 1.0%, 1.0%, 2.3%
    ("ssb_paired", "pg18llvm"): 0.0575,  # 7.5%, 0.0%, 6.5%
    ("ssb_sweep_paired", "pg16"): 0.0132,  # 1.2%, 1.3%, 1.4%
    ("ssb_sweep_paired", "pg17"): 0.0175,  # 0.3%, 0.0%, 3.0%
    ("ssb_versions_paired", "pg17"): 0.0149,  # 1.2%, 1.5%, 1.7%
}


def priors(table: str) -> dict[str, Prior]:
    """{base server: Prior} of a table's per-server variances (none declared: {})."""
    return {s: Prior(sd, len(RUNS)) for (t, s), sd in PRIORS.items() if t == table and s != "*"}


def shared(table: str) -> Prior | None:
    """The Prior of a table's one variance shared by every server ("*"), or None."""
    sd = PRIORS.get((table, "*"))
    return None if sd is None else Prior(sd, len(RUNS))

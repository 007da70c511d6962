"""What archived fresh runs say before a run, per host kind (methodology rule 15, `hosts`): the between-cluster
priors (what a run's between-cluster variance is shrunk toward, `between_runs.moderate`) and the re-run spreads (how
narrow a pooled interval may be, `between_runs.floor_interval`).

Each server is measured on two clusters per run, so its between-cluster variance rests on one draw however many
comparisons feed it, and over three fresh runs the same server's estimate swung from 0 % to 8 % and back; a prior
from archived runs keeps one run's 0 % or 15 % from being taken at face value. And a run's interval measures its own
hour: a quiet run's ±2 % missed where the other runs put the same figure, so no pooled interval is narrower than the
figure's spread over archived runs of the same kind allows.

Per kind, because the kind moves a figure more than a kind's re-runs do: over the archived runs JIT's per-operator
spread is 2.0 % within the ~32 ns EPYC kind and 1.4 % within the ~21 ns Xeon kind, 3.6 % over both; SSB's 6.6 % and
3.4 % against 6.1 %. A spread measured on another kind never widens this run's interval: KINDS holds one entry per
kind of archived runs (`calibration.kinds_text`, printed by `make stability ARCHIVES=...`), and a run is judged with
its own kind's (`kind_of`: CPU model, clock source, clock read within ×/÷ 1.12 of its runs' reads,
`HostKind.covers`). On a kind with no archived run (a
user's own machine) the interval rests on the run's own clusters, shrunk toward PRIORS (every kind's runs pooled,
declared) with no re-run floor, and its method says so.

KINDS' runs: the fresh default runs whose measuring code is the same (scoring changed between them): three on an
AMD EPYC host whose clock reads cost ~32 ns (27-28 Nov); on the Xeon kind eleven over three boots, five of 28 Nov
and six of 192f7e1's design on 7 Dec (NOV_XEON, LATER_XEON). A kind's spread is what a re-run on another day sees,
so it pools its boots: JIT's per-operator figure moved 1.4 % between the five runs of 28 Nov's boot and 2.2 % over
all eleven. Quantities a later design measures differently (S2's interleaved conditions, SSB's forced JIT at SF 1)
take their own runs of that design, once three exist on the kind (`HostKind.runs_of`); until then DECLARED or LIKE.
The reference run is among LATER_XEON: in sample for its kind's priors, as every kind's newest archived run is.
Artefact rounds (`core.artefacts`) are left out of every figure. A prior or spread per (table, base server), "*":
one value shared by every server of the table (pgbench's, per experiment); the spread per table, pooled over its
comparisons on every server, A/A copies left out. A table whose rows are of several designs is keyed per quantity
(SPLIT: "ssb_paired:jit" is S1's default JIT, the archived runs' SF-10 block). Fixed before the runs
that test it (rule 12)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import hosts
from .between_runs import Prior


@dataclass(frozen=True)
class HostKind:
    """What the archived fresh runs of one host kind (`hosts.Host.same_kind`: CPU model, clock source, clock read
    cost within ×/÷ 1.12 of `host`'s) say: their between-cluster priors {(table, base server): sd, log scale} and
    re-run spreads {table: (sd of a figure's log across the runs, df)}."""

    host: hosts.Host
    runs: tuple[str, ...]
    priors: dict[tuple[str, str], float]
    spreads: dict[str, tuple[float, int]]
    # a quantity of a later design, measured by other runs of this kind than `runs`: {quantity: its runs}
    runs_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the lowest and highest clock read of all those runs (None: host's alone): the kind's band reaches ×/÷ 1.12
    # beyond them, so that the runs of one boot, whose reads scatter by a few per cent, are never split between
    # a kind and none (7 Dec: 18.4, 18.6 and 18.8 ns, against a centre of 20.8 whose band ended at 18.6)
    clocks: tuple[float, float] | None = None

    def runs_for(self, quantity: str) -> tuple[str, ...]:
        return self.runs_of.get(quantity, self.runs)

    def covers(self, other: hosts.Host | None) -> bool:
        """Whether a host is of this kind: its CPU model and clock source, its clock read within the band."""
        if other is None or (self.host.cpu_model, self.host.clocksource) != (other.cpu_model, other.clocksource):
            return False
        lo, hi = self.clocks or (self.host.clock_ns, self.host.clock_ns)
        return lo / hosts.CLOCK_TOLERANCE <= other.clock_ns <= hi * hosts.CLOCK_TOLERANCE


# The Xeon kind's runs: five fresh default runs on one boot of 28 Nov, and the six fresh default runs of 192f7e1's
# design (S2 interleaved with its limit item's CPUs split, SSB's forced JIT at SF 1) on two boots of 7 Dec (10:58 UTC,
# 18.2-18.8 ns clock reads: C-F; 20:13 UTC, 20.3-20.8 ns: J, K). The later design's own quantities take its six
# alone, the earlier design's (S2 in blocks, S1's default JIT at SF 10) the five; every other quantity is measured
# alike in both and takes all eleven.
NOV_XEON = (
    "default-20261128-092635",
    "default-20261128-115426",
    "default-20261128-144556",
    "default-20261128-175248",
    "default-20261128-204037",
)
LATER_XEON = (
    "default-20261207-115750",
    "default-20261207-125146",
    "default-20261207-141652",
    "default-20261207-162248",
    "default-20261207-204254",
    "default-20261207-213214",
)

KINDS = [
    HostKind(
        host=hosts.Host("AMD EPYC", "tsc", 32.3),
        runs=("default-20261127-105829", "default-20261127-142442", "default-20261128-020725"),
        clocks=(32.09, 32.555),
        priors={
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
            ("ssb_paired", "pg16"): 0.0193,  # 3.0%, 0.5%, 1.4%
            ("ssb_paired", "pg17"): 0.0030,  # 0.5%, 0.0%, 0.0%
            ("ssb_paired:jit", "pg15"): 0.0651,  # 0.0%, 7.5%, 8.5%
            ("ssb_paired:jit", "pg18llvm"): 0.1138,  # 0.0%, 19.2%, 4.3%
            ("ssb_sweep_paired", "pg16"): 0.0628,  # 1.9%, 0.0%, 10.7%
            ("ssb_sweep_paired", "pg17"): 0.0401,  # 0.0%, 6.9%, 0.0%
            ("ssb_versions_paired", "pg17"): 0.0292,  # 0.0%, 4.7%, 1.8%
            # the suites, each its own quantity (SUITES)
            ("ssb_paired:jit:suite", "pg15"): 0.0306,  # 0.0%, 0.0%, 5.3%
            ("ssb_paired:jit:suite", "pg18llvm"): 0.0229,  # 1.9%, 3.5%, 0.0%
            ("ssb_paired:suite", "pg16"): 0.0396,  # 0.0%, 6.9%, 0.0%
            ("ssb_paired:suite", "pg17"): 0.0167,  # 0.0%, 2.9%, 0.0%
            ("ssb_sweep_paired:suite", "pg16"): 0.0394,  # 0.0%, 4.6%, 5.0%
            ("ssb_sweep_paired:suite", "pg17"): 0.0488,  # 0.0%, 8.0%, 2.8%
            ("ssb_versions_paired:suite", "pg17"): 0.0309,  # 1.2%, 5.2%, 0.0%
        },
        spreads={
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
            "ssb_paired": (0.0552, 60),
            "ssb_paired:jit": (0.0772, 60),
            "ssb_sweep_paired": (0.0679, 24),
            "ssb_versions_paired": (0.0441, 60),
            "ssb_paired:jit:suite": (0.0581, 4),
            "ssb_paired:suite": (0.0205, 4),
            "ssb_sweep_paired:suite": (0.0560, 8),
            "ssb_versions_paired:suite": (0.0202, 4),
        },
    ),
    HostKind(
        host=hosts.Host("Intel(R) Xeon(R) Processor", "tsc", 20.4),
        runs=NOV_XEON + LATER_XEON,
        clocks=(18.19, 21.22),  # 20.4-21.2 ns on 28 Nov, 18.2-18.8 and 20.3-20.8 on the two boots of 7 Dec
        # each run's own sd in the comment, in the order of runs (of runs_of for a quantity only some runs hold)
        priors={
            ("auto_explain_quantities", "pg15"): 0.0018,  # 0.0%, 0.0%, 0.4%, 0.0%, 0.0%
            ("auto_explain_quantities", "pg18"): 0.0067,  # 0.0%, 0.0%, 1.4%, 0.5%, 0.1%
            ("auto_explain_quantities:interleaved", "pg15"): 0.0112,  # 0.0%, 1.0%, 2.3%, 0.0%, 1.1%, 0.0%
            ("auto_explain_quantities:interleaved", "pg18"): 0.0089,  # 0.0%, 0.4%, 0.4%, 0.0%, 2.1%, 0.0%
            ("auto_explain_ratios", "pg15"): 0.1551,  # 0.0%, 6.0%, 34.2%, 0.0%, 0.0%
            ("auto_explain_ratios", "pg18"): 0.0063,  # 0.0%, 1.3%, 0.0%, 0.3%, 0.4%
            ("auto_explain_ratios:interleaved", "pg15"): 0.0057,  # 0.3%, 0.9%, 0.6%, 0.5%, 0.5%, 0.4%
            ("auto_explain_ratios:interleaved", "pg18"): 0.0043,  # 0.2%, 0.4%, 0.7%, 0.2%, 0.0%, 0.6%
            (
                "jit_operators_overall",
                "pg15",
            ): 0.0093,  # 0.7%, 1.3%, 1.1%, 1.3%, 1.2%, 0.5%, 0.7%, 0.9%, 0.0%, 1.2%, 0.2%
            (
                "jit_operators_paired",
                "pg15",
            ): 0.0093,  # 0.7%, 1.3%, 1.1%, 1.3%, 1.2%, 0.5%, 0.7%, 0.9%, 0.0%, 1.2%, 0.2%
            (
                "parallel_index_paired",
                "pg15",
            ): 0.0369,  # 11.0%, 1.8%, 3.2%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 3.9%, 0.5%
            (
                "parallel_index_paired",
                "pg18",
            ): 0.0148,  # 0.6%, 1.6%, 0.0%, 0.0%, 0.0%, 0.2%, 1.4%, 4.4%, 0.0%, 0.0%, 0.1%
            (
                "parallel_index_paired_suite",
                "pg15",
            ): 0.0369,  # 11.0%, 1.8%, 3.2%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 3.9%, 0.5%
            (
                "parallel_index_paired_suite",
                "pg18",
            ): 0.0148,  # 0.6%, 1.6%, 0.0%, 0.0%, 0.0%, 0.2%, 1.4%, 4.4%, 0.0%, 0.0%, 0.1%
            (
                "parallel_index_size_paired",
                "pg15",
            ): 0.0369,  # 11.0%, 1.8%, 3.2%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 3.9%, 0.5%
            (
                "parallel_index_size_paired",
                "pg18",
            ): 0.0148,  # 0.6%, 1.6%, 0.0%, 0.0%, 0.0%, 0.2%, 1.4%, 4.4%, 0.0%, 0.0%, 0.1%
            ("partitioning_paired", "pg15"): 0.0112,  # 0.0%, 1.5%, 0.0%, 0.0%, 0.0%, 0.0%, 0.8%, 0.0%, 0.0%, 0.0%, 3.3%
            ("partitioning_paired", "pg18"): 0.0141,  # 1.0%, 2.8%, 2.0%, 0.0%, 0.0%, 0.0%, 1.1%, 2.4%, 0.0%, 1.5%, 0.0%
            ("pgbench_no_vacuum", "*"): 0.0180,  # 0.0%, 0.0%, 0.0%, 3.5%, 0.0%, 4.1%, 0.0%, 0.0%, 2.1%, 1.6%, 0.0%
            (
                "pgbench_paired:load time",
                "*",
            ): 0.0699,  # 0.0%, 3.2%, 5.0%, 0.0%, 1.9%, 0.0%, 10.5%, 0.0%, 8.1%, 2.0%, 17.8%
            (
                "pgbench_paired:scale-up tps",
                "*",
            ): 0.0436,  # 0.0%, 0.0%, 0.0%, 0.0%, 0.0%, 4.8%, 4.5%, 11.8%, 0.0%, 5.0%, 1.1%
            (
                "pgbench_paired:select-only tps",
                "*",
            ): 0.0236,  # 1.6%, 0.0%, 0.0%, 0.0%, 3.1%, 0.0%, 2.2%, 0.0%, 1.9%, 0.0%, 6.4%
            (
                "pgbench_paired:series tps",
                "*",
            ): 0.0078,  # 0.0%, 0.0%, 0.0%, 0.0%, 0.5%, 1.3%, 0.0%, 0.0%, 0.0%, 2.2%, 0.0%
            ("ssb_paired", "pg16"): 0.0221,  # 0.7%, 3.7%, 1.6%, 0.5%, 1.5%, 0.5%, 1.8%, 1.1%, 3.6%, 1.7%, 3.7%
            ("ssb_paired", "pg17"): 0.0195,  # 1.1%, 1.8%, 2.1%, 1.0%, 1.9%, 0.8%, 1.5%, 2.6%, 1.5%, 2.2%, 3.3%
            ("ssb_paired:jit", "pg15"): 0.0334,  # 0.0%, 3.8%, 0.0%, 6.4%, 0.0%
            ("ssb_paired:jit", "pg18llvm"): 0.0370,  # 2.0%, 4.2%, 5.4%, 1.4%, 4.0%
            ("ssb_paired:jit:suite", "pg15"): 0.0057,  # 0.0%, 0.0%, 1.3%, 0.0%, 0.0%
            ("ssb_paired:jit:suite", "pg18llvm"): 0.0095,  # 2.1%, 0.0%, 0.0%, 0.0%, 0.0%
            ("ssb_paired:jit_forced", "pg15"): 0.0257,  # 4.7%, 0.8%, 1.6%, 2.9%, 1.5%, 2.0%
            ("ssb_paired:jit_forced", "pg18llvm"): 0.0212,  # 1.3%, 1.4%, 3.5%, 2.2%, 0.7%, 2.4%
            ("ssb_paired:jit_forced:suite", "pg15"): 0.0158,  # 2.5%, 0.4%, 1.2%, 2.5%, 0.8%, 0.2%
            ("ssb_paired:jit_forced:suite", "pg18llvm"): 0.0098,  # 1.2%, 0.0%, 0.6%, 1.8%, 0.0%, 0.8%
            ("ssb_paired:suite", "pg16"): 0.0048,  # 0.1%, 0.0%, 0.5%, 0.2%, 0.0%, 0.7%, 0.0%, 0.0%, 0.8%, 0.4%, 1.0%
            ("ssb_paired:suite", "pg17"): 0.0076,  # 0.0%, 1.6%, 1.2%, 0.0%, 0.3%, 0.0%, 1.2%, 0.0%, 0.0%, 0.6%, 0.6%
            ("ssb_sweep_paired", "pg16"): 0.0190,  # 1.3%, 0.3%, 2.4%, 0.8%, 3.0%, 1.3%, 0.0%, 0.6%, 1.9%, 2.3%, 3.5%
            ("ssb_sweep_paired", "pg17"): 0.0214,  # 0.5%, 4.6%, 2.8%, 0.0%, 0.0%, 0.0%, 0.0%, 0.7%, 1.8%, 3.3%, 2.4%
            (
                "ssb_sweep_paired:suite",
                "pg16",
            ): 0.0136,  # 1.0%, 0.0%, 0.4%, 0.3%, 2.4%, 0.8%, 0.0%, 0.0%, 1.3%, 2.1%, 2.5%
            (
                "ssb_sweep_paired:suite",
                "pg17",
            ): 0.0163,  # 0.0%, 3.0%, 2.3%, 0.0%, 0.0%, 0.0%, 0.6%, 0.0%, 1.5%, 1.4%, 3.2%
            ("ssb_versions_paired", "pg17"): 0.0226,  # 2.8%, 3.5%, 1.9%, 1.1%, 1.7%, 0.6%, 1.9%, 0.9%, 1.9%, 1.7%, 4.1%
            (
                "ssb_versions_paired:suite",
                "pg17",
            ): 0.0109,  # 1.2%, 0.3%, 0.8%, 0.6%, 0.0%, 0.4%, 1.0%, 0.8%, 1.1%, 0.5%, 2.7%
        },
        # over the three boots: a re-run on another day moves a figure more than a re-run within one boot does
        # (JIT per operator: 1.4 % over 28 Nov's five, 2.2 % over all eleven)
        spreads={
            "auto_explain_quantities": (0.1045, 40),
            "auto_explain_quantities:interleaved": (0.0411, 50),
            "auto_explain_ratios": (0.1371, 128),
            "auto_explain_ratios:interleaved": (0.0095, 160),
            "jit_operators_overall": (0.0201, 20),
            "jit_operators_paired": (0.0221, 180),
            "parallel_index_paired": (0.0431, 40),
            "parallel_index_paired_suite": (0.0348, 20),
            "parallel_index_size_paired": (0.0556, 20),
            "partitioning_paired": (0.0311, 80),
            "pgbench_no_vacuum": (0.0519, 60),
            "pgbench_paired:load time": (0.0440, 50),
            "pgbench_paired:scale-up tps": (0.0367, 20),
            "pgbench_paired:select-only tps": (0.0212, 50),
            "pgbench_paired:series tps": (0.0153, 50),
            "ssb_paired": (0.0258, 280),
            "ssb_paired:jit": (0.0410, 112),
            "ssb_paired:jit:suite": (0.0226, 8),
            "ssb_paired:jit_forced": (0.0253, 280),
            "ssb_paired:jit_forced:suite": (0.0127, 20),
            "ssb_paired:suite": (0.0187, 20),
            "ssb_sweep_paired": (0.0239, 80),
            "ssb_sweep_paired:suite": (0.0177, 40),
            "ssb_versions_paired": (0.0233, 280),
            "ssb_versions_paired:suite": (0.0133, 20),
        },
        runs_of={
            **{
                q: NOV_XEON
                for q in ("auto_explain_quantities", "auto_explain_ratios", "ssb_paired:jit", "ssb_paired:jit:suite")
            },
            **{
                q: LATER_XEON
                for q in (
                    "auto_explain_quantities:interleaved",
                    "auto_explain_ratios:interleaved",
                    "ssb_paired:jit_forced",
                    "ssb_paired:jit_forced:suite",
                )
            },
        },
    ),
]

# The declared prior on a kind no archived run was made on: six runs of both kinds pooled (27-28 Nov: 105829, 142442,
# 020725 on the EPYC kind, 092635, 115426, 144556 on the Xeon kind); each run's own sd in the comment, in that order.
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
    ("ssb_paired", "pg16"): 0.0217,  # 3.0%, 0.5%, 1.4%, 0.7%, 3.7%, 1.6%
    ("ssb_paired", "pg17"): 0.0124,  # 0.5%, 0.0%, 0.0%, 1.1%, 1.8%, 2.1%
    ("ssb_paired:jit", "pg15"): 0.0486,  # 0.0%, 7.5%, 8.5%, 0.0%, 3.8%, 0.0%
    ("ssb_paired:jit", "pg18llvm"): 0.0856,  # 0.0%, 19.2%, 4.3%, 2.0%, 4.2%, 5.4%
    ("ssb_sweep_paired", "pg16"): 0.0458,  # 1.9%, 0.0%, 10.7%, 1.3%, 0.3%, 2.4%
    ("ssb_sweep_paired", "pg17"): 0.0360,  # 0.0%, 6.9%, 0.0%, 0.5%, 4.6%, 2.8%
    ("ssb_versions_paired", "pg17"): 0.0287,  # 0.0%, 4.7%, 1.8%, 2.8%, 3.5%, 1.9%
}
PRIOR_RUNS = 6

OTHER_KIND = "no archived run of this host kind: no re-run floor, the prior of archived runs on other kinds"

# A table whose rows measure different quantities, told apart by a column: each its own prior and spread (rule 15:
# an uncertainty belongs to its quantity). SSB's JIT comparisons are measured in a block of their own: S1's default
# JIT ("parallel_jit", SF 10 from disk in the archived runs) and the forced JIT of the SF-1 block (bbd1ffc), beside
# the parallel-over-serial rows of the versions' SF-1 rounds. By the value's prefix, the longest first.
SPLIT = {
    "ssb_paired": ("mode", (("parallel_jit_forced", ":jit_forced"), ("parallel_jit", ":jit"))),
    "auto_explain_ratios": ("design", (("interleaved", ":interleaved"),)),
}

# A quantity no archived run measured under its design on a server, on this kind: shrunk toward the prior of a like
# quantity of the same kind (its servers' variances pooled), with no re-run floor (no run of its design has been
# re-run), and said so. The SF-1 forced JIT block (one database at a time, in memory, at SSB's SF 1 as the versions'
# rounds are), and S1's default JIT on a server the archived runs had no JIT for.
LIKE = {"ssb_paired:jit_forced": "ssb_paired", "ssb_paired:jit": "ssb_paired"}
LIKE_NOTE = "no archived run of this design on this server: the prior of {like}'s servers on this kind, no re-run floor"

# A design no archived run on a kind has measured: its between-cluster prior declared before its first runs
# (rule 12), no re-run floor, said in its note; it gives way to a kind's own entries once archived runs of the
# design are in KINDS (the Xeon kind's since 7 Dec). S2's interleaved runs (the conditions that load auto_explain
# in one pgbench run per server, item and round): a cluster effect on a ratio of two conditions measured
# transaction by transaction in one run is of the order of the other within-block pairs' (JIT per operator: 0.2 %
# on the ~32 ns EPYC kind, 1.2 % on the Xeon kind); the design's pilot (d38dbd9, ~33 ns EPYC boot, one run) found
# 1.4 % and 0.6 % for the ratios, 2.2 % and 0.0 % for the quantities per row. Declared with room above both,
# weighed as three runs.
DECLARED = {
    "auto_explain_ratios:interleaved": 0.02,
    "auto_explain_quantities:interleaved": 0.04,
}
DECLARED_RUNS = 3
DECLARED_NOTE = "no archived run of this design on this host kind: a declared prior of {sd:.0f} %, no re-run floor"


# A sum over a table's comparisons is a quantity of its own (rule 15): SSB's suite, every query's time in a round
# summed, is what S4's parallel claims and S1's version claims judge. Its queries' own cluster shifts and re-run
# moves partly cancel in it, so the per-query spread is not its uncertainty. Its rows (the column holding the
# value) take ":suite" after their SPLIT name; a kind without archived suite figures gives them their per-query
# quantity's prior and floor, as before (`priors`). q1.x (three queries) stays with the queries.
SUITES = {t: ("query", "all") for t in ("ssb_paired", "ssb_sweep_paired", "ssb_versions_paired")}
SUITE = ":suite"


def quantity(table: str, value: str | None = None, item: str | None = None) -> str:
    """The prior's name of a row of `table` whose SPLIT column holds `value` ("ssb_paired:jit_forced") and whose
    SUITES column holds `item` (the suite: "ssb_paired:jit_forced:suite")."""
    _, prefixes = SPLIT.get(table, ("", ()))
    name = table + next((suffix for p, suffix in prefixes if value and value.startswith(p)), "")
    return name + SUITE if table in SUITES and item == SUITES[table][1] else name


def quantity_expr(table: str, columns):
    """`quantity` as a polars expression over a frame of `table`'s rows with `columns` (a literal where the table is
    not split, or the frame lacks the column it is split by)."""
    import polars as pl

    col, prefixes = SPLIT.get(table, ("", ()))
    expr = pl.lit(table)
    if col in columns:
        for p, suffix in reversed(prefixes):  # the longest prefix last: it wins
            expr = pl.when(pl.col(col).cast(pl.String).str.starts_with(p)).then(pl.lit(table + suffix)).otherwise(expr)
    item_col, item = SUITES.get(table, ("", ""))
    if item_col in columns:
        expr = pl.when(pl.col(item_col).cast(pl.String) == item).then(expr + pl.lit(SUITE)).otherwise(expr)
    return expr


def is_suite(quantity_name: str) -> bool:
    return quantity_name.endswith(SUITE)


def own_quantity(quantity_name: str) -> str:
    """The quantity a row is pooled and judged as on the current host kind: a suite with archived suite figures on
    this kind is its own, one without is pooled with its queries (their variance rows, prior and floor)."""
    if not is_suite(quantity_name):
        return quantity_name
    _, values = _current()
    return quantity_name if any(t == quantity_name for t, _ in values) else quantity_name.removesuffix(SUITE)


def _prior(table: str, sd: float, kind: HostKind | None) -> Prior:
    if kind is None:
        return Prior(sd, PRIOR_RUNS, note=OTHER_KIND)
    spread, df = kind.spreads.get(table, (0.0, 0))
    runs = len(kind.runs_for(table))
    return Prior(sd, runs, spread, df, runs if df else 0)


def kind_of(measured_on: hosts.Host | None) -> HostKind | None:
    """The archived kind a host is of, or None (no archived run of its kind)."""
    return next((k for k in KINDS if k.covers(measured_on)), None)


def _current() -> tuple[HostKind | None, dict[tuple[str, str], float]]:
    kind = kind_of(hosts.current())
    return kind, (kind.priors if kind else PRIORS)


class Priors(dict):
    """{base server: Prior}, and `default`: the Prior of a server with no entry of its own (None: none)."""

    default: Prior | None = None


def priors(table: str) -> Priors:
    """{base server: Prior} of a table's per-server variances on the current host kind (`hosts.using`), each with
    the kind's spread for the table (none declared: empty). A quantity of DECLARED with no entry on the kind gets
    `default`: its declared prior. For a quantity of LIKE, a server without an entry of its own (every server,
    where no archived run measured the quantity's design) gets `default`: the like quantity's servers pooled (root
    mean of their variances), with no re-run floor, said in its note."""
    kind, values = _current()
    out = Priors({s: _prior(table, sd, kind) for (t, s), sd in values.items() if t == table and s != "*"})
    if not out and is_suite(table):  # no archived suite figure on this kind: its queries' prior and floor
        return priors(table.removesuffix(SUITE))
    if not out and table in DECLARED:
        sd = DECLARED[table]
        out.default = Prior(sd, DECLARED_RUNS, note=DECLARED_NOTE.format(sd=100 * sd))
        return out
    like = [sd for (t, s), sd in values.items() if t == LIKE.get(table) and s != "*"]
    if like:
        runs = len(kind.runs_for(LIKE[table])) if kind else PRIOR_RUNS
        note = LIKE_NOTE.format(like=LIKE[table])
        out.default = Prior(
            math.sqrt(sum(sd**2 for sd in like) / len(like)), runs, note=note if kind else f"{OTHER_KIND}; {note}"
        )
    return out


def shared(table: str) -> Prior | None:
    """The Prior of a table's one variance shared by every server ("*") on the current host kind, or None."""
    kind, values = _current()
    sd = values.get((table, "*"))
    return None if sd is None else _prior(table, sd, kind)

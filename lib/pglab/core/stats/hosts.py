"""A run's host kind (methodology rule 15): the CPU model, the clock source and the cost of a clock read.

Between host kinds a figure moves 2-4× more than between re-runs on one kind (JIT's per-operator cut: 5.4 %
between the archived runs' two kinds, ~1.25 % within one), so a prior or a re-run floor measured on one kind says
nothing of this run's uncertainty on another: `cluster_priors.KINDS` keys them by kind, and the kind a derive or a
judge works for is the run's own (`using`), read from what the run recorded (`of_store`, `of_tables`), never from
the machine that derives. Two hosts are of one kind when CPU model and clock source are the same and their clock
reads (pg_test_timing's per-loop cost, the median over the run's servers) are within `CLOCK_TOLERANCE` of each
other: the archived runs read 20.4-21.7 ns on one kind and 32.1-32.6 ns (medians) on the other, a third kind 26 ns;
a fixed band would cut through one of them.

    with hosts.using(hosts.of_store(store)):   # Study.derive, Study.judge
        priors = cluster_priors.priors("ssb_paired")
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

import polars as pl

CLOCK_TOLERANCE = 1.12  # clock reads within ×/÷ 1.12: one kind (21 vs 26 vs 32 ns are three)


@dataclass(frozen=True)
class Host:
    cpu_model: str
    clocksource: str
    clock_ns: float

    @property
    def label(self) -> str:
        """'Intel(R) Xeon(R) Processor · tsc · 21 ns'."""
        return f"{self.cpu_model} · {self.clocksource} · {self.clock_ns:.0f} ns"

    def same_kind(self, other: Host | None) -> bool:
        return (
            other is not None
            and (self.cpu_model, self.clocksource) == (other.cpu_model, other.clocksource)
            and abs(math.log(self.clock_ns / other.clock_ns)) <= math.log(CLOCK_TOLERANCE)
        )


_CURRENT: ContextVar[Host | None] = ContextVar("pglab_host", default=None)


def host(cpu_model: str | None, clocksource: str | None, clock_ns: float | None) -> Host | None:
    """The host as a run recorded it; None when the CPU model or the clock read cost is unknown."""
    if not cpu_model or clock_ns is None or not clock_ns > 0:  # NaN or 0: not measured
        return None
    return Host(cpu_model.strip(), (clocksource or "unknown clock").strip(), float(clock_ns))


def of_frames(machine: pl.DataFrame | None, timing: pl.DataFrame | None) -> Host | None:
    """The kind from the environment's tables: environment_machine (key, value) and environment_timing
    (server, per_loop_ns)."""
    if machine is None or timing is None or machine.is_empty() or "per_loop_ns" not in timing.columns:
        return None
    m = dict(machine.select(pl.col("key").cast(pl.String), pl.col("value").cast(pl.String)).iter_rows())
    ns = timing["per_loop_ns"].cast(pl.Float64, strict=False).drop_nulls()
    return host(m.get("cpu_model"), m.get("clocksource"), float(ns.median()) if ns.len() else None)


def of_store(store) -> Host | None:
    """The kind a run recorded in its raw store (00_environment's capture); None for a run without one."""
    from .. import raw_frames

    return of_frames(
        raw_frames.read(store, "environment/environment_machine.json"),
        raw_frames.read(store, "environment/environment_timing.json"),
    )


def of_tables(tables) -> Host | None:
    """The kind of the run whose derived tables these are (a `derived.Tables` or any mapping of frames)."""
    if "environment_machine" not in tables or "environment_timing" not in tables:
        return None
    return of_frames(tables["environment_machine"], tables["environment_timing"])


def current() -> Host | None:
    """The host the figures being derived or judged were measured on (None: unknown)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(measured_on: Host | None) -> Iterator[Host | None]:
    """Derive or judge for a run measured on `measured_on` (nested uses restore the outer one)."""
    token = _CURRENT.set(measured_on)
    try:
        yield measured_on
    finally:
        _CURRENT.reset(token)

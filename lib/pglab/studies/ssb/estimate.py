"""The SSB study's part of `make report`'s time estimate (pglab.report.estimate, reached through the registry):
which (server, mode) cells one round of run_modes times, and the worker counts of the sweep, by the study's
own rules (experiment.availability, experiment.workers), so that the report imports no study."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...core.servers import Server
from .experiment import version_server, workers
from .params import JIT_MODES, SsbParams


def round_cells(servers: list[Server], q: SsbParams, jit: Callable[[Server], bool]) -> list[tuple[str, int]]:
    """(mode, number of queries) of every available (server, mode) of one round of run_modes, in run order."""
    out = []
    for i, s in enumerate(servers):
        for m in q.modes:
            if (m in JIT_MODES and not jit(s)) or (m == "serial" and not version_server(s, q)):
                continue
            if m == "parallel_aa" and not (q.aa_servers == "all" or i == 0):
                continue
            out.append((m, len(q.mode_query_ids(m))))
    return out


def sweep_counts(q: SsbParams) -> Iterable[int]:
    """The worker counts of the sweep: ssb.worker_sweep, or 0 … the parallel modes' workers."""
    return q.worker_sweep if q.worker_sweep is not None else range(workers(q) + 1)

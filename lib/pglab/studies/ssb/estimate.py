"""Notebooks 20 and 10's time for `make report`'s estimate (Study.estimate_s): which (server, mode) cells one
round of run_modes times, and the worker counts of the sweep, by the study's own rules (run.availability,
run.workers), and what the JIT block adds per server (run.run_jit_block: its database read into memory, a restart
to preload pg_stat_statements)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...core import replicas
from ...core.run.estimate import COST, jit, servers_for
from ...core.servers.servers import Server
from .params import JIT_MODES, SsbParams
from .run import jit_block, scale_groups, scales, version_server, workers

# the JIT block's warming of one server's database (pg_prewarm 'read' of what the OS cache lacks, then 'buffer' for
# shared_buffers), per unit of SF: 0.67 GB at ~450 MB/s when none of it is cached (the rate the reference run's disk
# gave its SF 10 queries: 961 GB in 36 minutes)
WARM_S_PER_SF = 1.5


def round_cells(
    servers: list[Server], q: SsbParams, jit: Callable[[Server], bool], aa_first: bool = True
) -> list[tuple[str, int]]:
    """(mode, number of queries) of every available (server, mode) of one round of run_modes, in run order;
    `aa_first`: the A/A control on the first server (the ssb.sf group's; the JIT group at jit_sf has none)."""
    out = []
    bases = replicas.base_names([s.name for s in servers])  # the first server: every cluster of it
    first = bases[servers[0].name] if servers and aa_first else None
    for s in servers:
        for m in q.modes:
            if (m in JIT_MODES and not jit(s)) or (m == "serial" and not version_server(s, q)):
                continue
            if m == "parallel_aa" and not (q.aa_servers == "all" or bases[s.name] == first):
                continue
            out.append((m, len(q.mode_query_ids(m))))
    return out


def sweep_counts(q: SsbParams) -> Iterable[int]:
    """The worker counts of the sweep: ssb.worker_sweep, or 0 … the parallel modes' workers."""
    return q.worker_sweep if q.worker_sweep is not None else range(workers(q) + 1)


def _query_s(kind: str, sf: float) -> float:
    return COST[kind] * sf ** COST["ssb_sf_power"]


def estimate_s(p, base: list[Server]) -> float:
    q, servers = p.ssb, servers_for(p, "ssb", base)
    total = COST["server"] * len(servers)
    at_sf: list[Server] = []
    # each scale's rounds of run_modes, as run.availability decides
    for i, (sf, reps, warm, group) in enumerate(scale_groups(servers, q)):
        serial, parallel = _query_s("ssb_serial", sf), _query_s("ssb_parallel", sf)
        round_s = 0.0
        for m, n_queries in round_cells(group, q, jit, aa_first=i == 0):
            extra = COST["ssb_jit_forced"] if m == "parallel_jit_forced" else 0
            round_s += (serial if m == "serial" else parallel + extra) * n_queries
        total += round_s * (reps + warm + COST["ssb_plans"])
        if jit_block(group, q):  # one server at a time, each warmed (and restarted once for pg_stat_statements)
            total += sum(warm_s(q, sf, any(m in JIT_MODES for m in q.modes) and jit(s)) for s in group)
        at_sf = at_sf if jit_block(group, q) else group
    serial, parallel = _query_s("ssb_serial", q.sf), _query_s("ssb_parallel", q.sf)
    sweep = sum(serial if k == 0 else parallel for k in sweep_counts(q)) * len(q.sweep_query_ids()) * len(at_sf)
    return total + sweep * (q.sweep_repetitions + q.warmups)


def warm_s(q: SsbParams, sf: float, restart: bool = True) -> float:
    """One server of the JIT block before its warm-up rounds: its database read into memory, and the restart that
    preloads pg_stat_statements where it runs a JIT mode."""
    return WARM_S_PER_SF * sf + (COST["server"] if restart else 0.0)


def load_s(p, base: list[Server]) -> float:
    """Notebook 10: generate and load the dataset on every SSB server, each at its scale (run.scales)."""
    servers = servers_for(p, "ssb", base)
    return sum(COST["server"] + COST["ssb_load"] * sf for sf in scales(servers, p.ssb).values())

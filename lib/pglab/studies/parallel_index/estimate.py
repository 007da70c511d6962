"""Notebook 60's time: CREATE INDEX on SSB lineorder (loaded here where notebook 10 did not), for the estimate."""

from __future__ import annotations

from ...core.run.estimate import COST, servers_for
from ...core.servers.servers import Server


def estimate_s(p, base: list[Server]) -> float:
    pi, servers = p.parallel_index, servers_for(p, "parallel_index", base)
    # the SSB dataset is loaded here on servers notebook 10 did not load it on
    loaded = {s.name for s in servers_for(p, "ssb", base)}
    load = sum(COST["ssb_load"] * p.ssb.sf for s in servers if s.name not in loaded)
    conds = len(pi.workers()) + (1 if pi.aa_control else 0)
    cells = len(pi.column_sets()) * conds
    warm = cells if pi.warmup_cells == "all" else len(pi.column_sets())  # largest_workers: one per key
    builds = (cells * pi.repetitions + warm * pi.warmups) * len(servers)
    return COST["server"] * len(servers) + load + builds * COST["index_build"] * p.ssb.sf

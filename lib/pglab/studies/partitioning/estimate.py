"""Notebook 70's time: loading the table and counting over it, for make report's estimate."""

from __future__ import annotations

from ...core.run.estimate import COST, servers_for
from ...core.servers.servers import Server


def estimate_s(p, base: list[Server]) -> float:
    t, servers = p.partitioning, servers_for(p, "partitioning", base)
    queries = len(t.timed_conditions()) * (t.repetitions + t.warmups)
    per_server = COST["server"] + t.rows * (COST["part_load_row"] + queries * COST["part_row"])
    return per_server * len(servers)

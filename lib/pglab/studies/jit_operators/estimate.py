"""Notebook 50's time: serial aggregates over jit_ops, for make report's estimate."""

from __future__ import annotations

from ...core.run.estimate import COST, jit, servers_for
from ...core.servers.servers import Server


def _on(value) -> bool:
    return str(value).lower() in ("true", "on", "1", "yes")


def estimate_s(p, base: list[Server]) -> float:
    j, servers = p.jit_operators, servers_for(p, "jit_operators", base)
    with_jit = [s for s in servers if jit(s) or s.install is None]  # an external server may have JIT
    per_exec = sum(
        j.rows * COST["jit_row"] + (COST["jit_compile"] if _on(j.session_settings(c).get("jit")) else 0)
        for c in j.measured_conditions()
    ) * len(j.operators)
    # the timed rounds, and about one more for the plans and the result checks
    per_server = j.rows * COST["jit_table_row"] + per_exec * (j.repetitions * j.executions + j.warmups + 1)
    return COST["server"] * len(servers) + per_server * len(with_jit)

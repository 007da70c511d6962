"""Notebook 40's time: pgbench -c 1 runs of one-statement scripts on tab1, for make report's estimate."""

from __future__ import annotations

from ...core.run.estimate import COST, servers_for
from ...core.servers.servers import Server


def estimate_s(p, base: list[Server]) -> float:
    a, servers = p.auto_explain, servers_for(p, "auto_explain", base)
    r = a.run

    def txn_s(item: str) -> float:
        # LIMIT 1 reads one row whatever the table's size; the study's other statements read all of tab1
        one_row = "limit" in a.items[item].sql.lower()
        return COST["ae_txn"] + (0 if one_row else COST["ae_row"] * a.rows)

    measured = warmup = 0.0  # per server and round
    for cond, item in a.cells():
        t = txn_s(item)
        txns = r.transactions.get(item, 1) if r.mode == "transactions" else r.duration_s / t
        logged = txns if a.conditions[cond].expected_plans == "every" else 0
        measured += COST["ae_run"] + txns * t + logged * COST["ae_logged_plan"]
        warmup += COST["ae_run"] + (r.warmup_duration_s or txns * t)
    loads = {c.load for c in a.conditions.values()}
    restart = (COST["ae_restart"] + r.settle_s) if a.loading == "shared_preload" and len(loads) > 1 else 0.0
    per_server = (
        COST["server"] + COST["ae_setup"] + r.repetitions * (measured + restart) + r.warmups * (warmup + restart)
    )
    return per_server * len(servers)

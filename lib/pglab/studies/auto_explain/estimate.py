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
    state = {c: a.conditions[c].load for c in a.conditions}  # a batch: the conditions of one load state and item
    for item in a.items:
        t = txn_s(item)
        for load in (True, False):
            conds = [c for c, i in a.cells() if i == item and state[c] == load]
            if not conds:
                continue
            k, m = len(conds), r.queries_per_set
            txns = r.transactions.get(item, 1) if r.mode == "transactions" else r.duration_s / t
            if k > 1:  # interleaved: whole SET blocks of m queries, a SET statement per setting the batch changes
                blocks = -(-txns // m) if r.mode == "transactions" else txns / m
                names = {s for c in conds for s in a.conditions[c].settings}
                txns = blocks * m
                measured += k * blocks * len(names) * COST["ae_set"]
            logged = sum(txns for c in conds if a.conditions[c].expected_plans == "every")
            measured += COST["ae_run"] + k * txns * t + logged * COST["ae_logged_plan"]
            warmup += COST["ae_run"] + (r.warmup_duration_s * k if r.warmup_duration_s else k * txns * t)
    loads = {c.load for c in a.conditions.values()}
    restart = (COST["ae_restart"] + r.settle_s) if a.loading == "shared_preload" and len(loads) > 1 else 0.0
    per_server = (
        COST["server"] + COST["ae_setup"] + r.repetitions * (measured + restart) + r.warmups * (warmup + restart)
    )
    return per_server * len(servers)

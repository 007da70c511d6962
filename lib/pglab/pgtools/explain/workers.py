"""Parallel workers per Gather, with the scan that drives it.

PostgreSQL plans a Gather's worker count from the parallel scan at the outer (leftmost) end of the plan
below it: the largest table there gets the most workers. So when a join order puts a small table
outermost (SSB q4.3 with `customer`), fewer workers are planned than allowed; leftmost_relation shows
which table that was.
"""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from .model import GATHER_TYPES

GATHER_COLUMNS = {
    "gather_id": pl.Int64,
    "node_type": pl.String,
    "subplan_name": pl.String,
    "workers_planned": pl.Int64,
    "workers_launched": pl.Int64,
    "nodes_below": pl.Int64,
    "leftmost_node_type": pl.String,
    "leftmost_relation": pl.String,
}


def gather_frame(nodes: pl.DataFrame) -> pl.DataFrame:
    rows = nodes.sort("node_id").to_dicts()
    children = defaultdict(list)
    for row in rows:
        # InitPlans / SubPlans run in their own right, not as the outer input
        if row["parent_id"] is not None and row["parent_relationship"] not in ("InitPlan", "SubPlan"):
            children[row["parent_id"]].append(row)
    out = []
    for gather in rows:
        if gather["node_type"] not in GATHER_TYPES:
            continue
        leftmost = gather
        while children[leftmost["node_id"]]:
            leftmost = children[leftmost["node_id"]][0]
            if leftmost["relation"] is not None:
                break
        out.append(
            {
                "gather_id": gather["node_id"],
                "node_type": gather["node_type"],
                "subplan_name": gather["subplan_name"],
                "workers_planned": gather["workers_planned"],
                "workers_launched": gather["workers_launched"],
                "nodes_below": sum(row["gather_id"] == gather["node_id"] for row in rows),
                "leftmost_node_type": None if leftmost is gather else leftmost["node_type"],
                "leftmost_relation": leftmost["relation"],
            }
        )
    return pl.DataFrame(out, schema=GATHER_COLUMNS)

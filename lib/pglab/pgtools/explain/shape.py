"""Plan fingerprint: a short hash of the plan's shape, the part `EXPLAIN (COSTS OFF)` shows.

In: node types and the tree (pre-order with depths), strategy / partial mode / join type / operation,
backward index scans, parallel-aware and async flags, relation / index / CTE / function names without
schema, sort and group keys with column qualifiers removed, InitPlan / SubPlan / CTE placement, workers
planned. Out: costs, rows, times, buffers, workers launched, memory, aliases, filters and outputs.
Schemas and qualifiers go because VERBOSE (and only VERBOSE) prints them, so the fingerprint of a
VERBOSE ANALYZE JSON plan equals that of the plain COSTS OFF text of the same plan.
"""

from __future__ import annotations

import hashlib
import json
import re

import polars as pl

# "tab1.c1" -> "c1", '"My Table".c1' -> "c1"; numbers ("1.5") keep their dot
_QUALIFIER = re.compile(r'(?:"(?:[^"]|"")+"|\b[A-Za-z_][A-Za-z0-9_$]*)\.(?=["A-Za-z_])')
_NUMBERED_SUBPLAN = re.compile(r"(InitPlan|SubPlan) \d+")


def _unqualified(name: str | None, schema: str | None) -> str | None:
    if name is not None and schema and name.startswith(schema + "."):
        return name[len(schema) + 1 :]
    return name


def _keys(keys: str | None) -> str | None:
    return None if keys is None else _QUALIFIER.sub("", keys)


def _subplan(name: str | None) -> str | None:
    # "InitPlan 2 (returns $3)" in 15, "InitPlan 2" in 17: numbering and "returns" are not shape
    if name is None:
        return None
    m = _NUMBERED_SUBPLAN.match(name)
    return m.group(1) if m else name


def shape_rows(nodes: pl.DataFrame) -> list[tuple]:
    """The canonical shape: one tuple per node in pre-order."""
    return [
        (
            n["depth"],
            n["node_type"],
            _subplan(n["subplan_name"]),
            n["strategy"],
            n["partial_mode"],
            n["join_type"],
            n["operation"],
            n["scan_direction"] == "Backward",
            bool(n["parallel_aware"]),
            bool(n["async_capable"]),
            _unqualified(n["relation"], n["schema"]),
            n["index_name"],
            n["cte_name"],
            _unqualified(n["function_name"], n["schema"]),
            _keys(n["sort_key"]),
            _keys(n["group_key"]),
            n["workers_planned"],
        )
        for n in nodes.sort("node_id").iter_rows(named=True)
    ]


def shape_fingerprint(nodes: pl.DataFrame) -> str:
    payload = json.dumps(shape_rows(nodes), separators=(",", ":"))
    return hashlib.sha1(payload.encode()).hexdigest()[:16]

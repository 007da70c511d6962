"""The normalised node table both parsers fill, and the parsed-plan record.

One row per plan node in pre-order (InitPlans, outer, inner, members, SubPlans: PostgreSQL's own printing
order, the same in JSON and text). Column meanings:

- node_id, parent_id, depth: pre-order index, parent's node_id (null for the root), nesting depth (root 0).
- node_type: JSON "Node Type" (text names are mapped to it: "Parallel Seq Scan" -> "Seq Scan" with
  parallel_aware, "Finalize HashAggregate" -> "Aggregate" with strategy "Hashed" and partial_mode
  "Finalize", "Hash Left Join" -> "Hash Join" with join_type "Left", "Insert on t" -> "ModifyTable").
- parent_relationship: Outer / Inner / Member / Subquery / InitPlan / SubPlan (child / children under a
  Custom Scan); subplan_name: "InitPlan 1 (returns $0)", "SubPlan 2", "CTE name" (null for other nodes).
- schema, relation: relation is schema-qualified ("public.tab1") when VERBOSE printed the schema, then
  schema holds it; names are unquoted. alias: the range-table alias (defaults to the object's name).
- index_name, cte_name, function_name (qualified like relation), operation (ModifyTable / Foreign Scan
  "Operation", or the SetOp "Command"), strategy, partial_mode, join_type, scan_direction (index scans).
- parallel_aware, async_capable (null where the JSON lacks it, PostgreSQL < 14).
- plan_rows, plan_width, startup_cost, total_cost: null with COSTS OFF.
- actual_rows (per loop, fractional from 18), actual_loops, actual_startup_ms, actual_total_ms: null
  without ANALYZE; times null with TIMING OFF; a never-executed node has loops 0 and rows 0.
- shared_ and local_{hit,read,dirtied,written}_blocks, temp_{read,written}_blocks: null without BUFFERS.
- workers_planned, workers_launched: on Gather / Gather Merge only (launched only with ANALYZE).
- gather_id: node_id of the nearest Gather / Gather Merge above the node (null when none).
- sort_key, group_key: keys as printed, ", "-joined; several key lines (grouping sets) are "; "-joined,
  grouping sets as "Group Key: a, b; Hash Key: c".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .jit import JIT_KEYS
from .shape import shape_fingerprint

BUFFER_COLUMNS = [
    f"{scope}_{kind}_blocks" for scope in ("shared", "local") for kind in ("hit", "read", "dirtied", "written")
] + ["temp_read_blocks", "temp_written_blocks"]

COLUMNS: dict[str, pl.DataType] = {
    "node_id": pl.Int64,
    "parent_id": pl.Int64,
    "depth": pl.Int64,
    "node_type": pl.String,
    "parent_relationship": pl.String,
    "subplan_name": pl.String,
    "schema": pl.String,
    "relation": pl.String,
    "alias": pl.String,
    "index_name": pl.String,
    "cte_name": pl.String,
    "function_name": pl.String,
    "operation": pl.String,
    "strategy": pl.String,
    "partial_mode": pl.String,
    "join_type": pl.String,
    "scan_direction": pl.String,
    "parallel_aware": pl.Boolean,
    "async_capable": pl.Boolean,
    "plan_rows": pl.Float64,
    "plan_width": pl.Int64,
    "startup_cost": pl.Float64,
    "total_cost": pl.Float64,
    "actual_rows": pl.Float64,
    "actual_loops": pl.Int64,
    "actual_startup_ms": pl.Float64,
    "actual_total_ms": pl.Float64,
    **dict.fromkeys(BUFFER_COLUMNS, pl.Int64),
    "workers_planned": pl.Int64,
    "workers_launched": pl.Int64,
    "gather_id": pl.Int64,
    "sort_key": pl.String,
    "group_key": pl.String,
}

GATHER_TYPES = ("Gather", "Gather Merge")

WORKER_JIT_COLUMNS: dict[str, pl.DataType] = {
    "node_id": pl.Int64,
    "worker": pl.Int64,
    "functions": pl.Int64,
    **{key: pl.Boolean for key in JIT_KEYS[1:5]},
    **{key: pl.Float64 for key in JIT_KEYS[5:]},
}


# what a node did with memory, from ANALYZE (JSON only; the text parser leaves the frame empty): a Sort's method
# ("quicksort", "top-N heapsort", "external merge") and space (Memory / Disk, kB), a Hash's buckets and batches
# (batches > 1, or more than planned: it spilled), a HashAggregate's batches and disk use (13+), peak memory (kB)
MEMORY_COLUMNS: dict[str, pl.DataType] = {
    "node_id": pl.Int64,
    "node_type": pl.String,
    "sort_method": pl.String,
    "sort_space_type": pl.String,
    "sort_space_kb": pl.Int64,
    "hash_buckets": pl.Int64,
    "hash_batches": pl.Int64,
    "original_hash_batches": pl.Int64,
    "hashagg_batches": pl.Int64,
    "disk_usage_kb": pl.Int64,
    "peak_memory_kb": pl.Int64,
}


def new_node() -> dict:
    return dict.fromkeys(COLUMNS)


def _coerce(value, dtype):
    # JSON gives ints where the table wants floats (and the reverse for loops); polars is strict about it
    if value is None:
        return None
    if dtype == pl.Float64:
        return float(value)
    if dtype == pl.Int64:
        return int(value)
    return value


def node_frame(nodes: list[dict]) -> pl.DataFrame:
    """Build the node table from pre-order node dicts (node_id, parent_id, depth already set)."""
    for node in nodes:
        parent = nodes[node["parent_id"]] if node["parent_id"] is not None else None
        if parent is None:
            node["gather_id"] = None
        elif parent["node_type"] in GATHER_TYPES:
            node["gather_id"] = parent["node_id"]
        else:
            node["gather_id"] = parent["gather_id"]
    rows = [{name: _coerce(node.get(name), dtype) for name, dtype in COLUMNS.items()} for node in nodes]
    return pl.DataFrame(rows, schema=COLUMNS)


def worker_jit_frame(rows: list[dict]) -> pl.DataFrame:
    rows = [{name: _coerce(row.get(name), dtype) for name, dtype in WORKER_JIT_COLUMNS.items()} for row in rows]
    return pl.DataFrame(rows, schema=WORKER_JIT_COLUMNS)


def memory_frame(rows: list[dict]) -> pl.DataFrame:
    rows = [{name: _coerce(row.get(name), dtype) for name, dtype in MEMORY_COLUMNS.items()} for row in rows]
    return pl.DataFrame(rows, schema=MEMORY_COLUMNS)


@dataclass(frozen=True, eq=False)  # eq would compare DataFrames, which has no truth value
class ParsedPlan:
    """A parsed EXPLAIN: the node table plus plan-level figures.

    jit: the plan's JIT summary (keys jit.JIT_KEYS; null timings without ANALYZE) or None when the plan
    shows no JIT block. worker_jit: per-worker JIT blocks (VERBOSE), one row per (node_id, worker).
    planning_buffers: buffers used by planning (13+, BUFFERS), keyed like the node table's buffer columns.
    query_text / duration_ms: from auto_explain's header or JSON "Query Text" when present.
    memory: per node that reports it (sorts, hashes, hash aggregates; JSON with ANALYZE), MEMORY_COLUMNS.
    """

    nodes: pl.DataFrame
    format: str
    planning_ms: float | None = None
    execution_ms: float | None = None
    jit: dict | None = None
    worker_jit: pl.DataFrame = field(default_factory=lambda: worker_jit_frame([]))
    memory: pl.DataFrame = field(default_factory=lambda: memory_frame([]))
    planning_buffers: dict | None = None
    query_text: str | None = None
    duration_ms: float | None = None
    fingerprint: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "fingerprint", shape_fingerprint(self.nodes))

    @property
    def root(self) -> dict:
        return self.nodes.row(0, named=True)

    def summary(self) -> pl.DataFrame:
        """One row: format, fingerprint, node count, planning / execution / auto_explain ms, the root node's
        buffers (the whole execution: a node's counts include its children and its parallel workers),
        planning buffers (planning_*), and the JIT summary (jit_*)."""
        root = self.root
        row = {
            "format": self.format,
            "fingerprint": self.fingerprint,
            "node_count": self.nodes.height,
            "planning_ms": self.planning_ms,
            "execution_ms": self.execution_ms,
            "duration_ms": self.duration_ms,
            **{name: root[name] for name in BUFFER_COLUMNS},
            **{f"planning_{name}": (self.planning_buffers or {}).get(name) for name in BUFFER_COLUMNS},
            **{f"jit_{key}": (self.jit or {}).get(key) for key in JIT_KEYS},
        }
        schema = {
            "format": pl.String,
            "fingerprint": pl.String,
            "node_count": pl.Int64,
            "planning_ms": pl.Float64,
            "execution_ms": pl.Float64,
            "duration_ms": pl.Float64,
            **dict.fromkeys(BUFFER_COLUMNS, pl.Int64),
            **dict.fromkeys((f"planning_{name}" for name in BUFFER_COLUMNS), pl.Int64),
            **{f"jit_{key}": dtype for key, dtype in WORKER_JIT_COLUMNS.items() if key in JIT_KEYS},
        }
        return pl.DataFrame([row], schema=schema)

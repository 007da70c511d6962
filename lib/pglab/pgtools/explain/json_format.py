"""EXPLAIN (FORMAT JSON) -> node table. Works from the keys PostgreSQL 11-18 print; keys a version lacks
leave their column null, unknown keys are ignored."""

from __future__ import annotations

import json

from .errors import ExplainParseError
from .jit import jit_from_json
from .model import BUFFER_COLUMNS, ParsedPlan, memory_frame, new_node, node_frame, worker_jit_frame
from .source import Source

# JSON key -> node-table column, for plain copies
_TEXT_KEYS = {
    "Node Type": "node_type",
    "Parent Relationship": "parent_relationship",
    "Subplan Name": "subplan_name",
    "Alias": "alias",
    "Index Name": "index_name",
    "CTE Name": "cte_name",
    "Strategy": "strategy",
    "Partial Mode": "partial_mode",
    "Join Type": "join_type",
    "Scan Direction": "scan_direction",
    "Operation": "operation",
    "Command": "operation",  # SetOp
}
_BOOL_KEYS = {"Parallel Aware": "parallel_aware", "Async Capable": "async_capable"}
_NUMBER_KEYS = {
    "Plan Rows": "plan_rows",
    "Plan Width": "plan_width",
    "Startup Cost": "startup_cost",
    "Total Cost": "total_cost",
    "Actual Rows": "actual_rows",
    "Actual Loops": "actual_loops",
    "Actual Startup Time": "actual_startup_ms",
    "Actual Total Time": "actual_total_ms",
    "Workers Planned": "workers_planned",
    "Workers Launched": "workers_launched",
}
_MEMORY_KEYS = {
    "Sort Method": "sort_method",
    "Sort Space Type": "sort_space_type",
    "Sort Space Used": "sort_space_kb",
    "Hash Buckets": "hash_buckets",
    "Hash Batches": "hash_batches",
    "Original Hash Batches": "original_hash_batches",
    "HashAgg Batches": "hashagg_batches",
    "Disk Usage": "disk_usage_kb",
    "Peak Memory Usage": "peak_memory_kb",
}
BUFFER_KEYS = {column: column.replace("_", " ").title() for column in BUFFER_COLUMNS}  # "Shared Hit Blocks"


def load_json(source: Source):
    try:
        return json.loads(source.text)
    except json.JSONDecodeError as e:
        # line numbers of the original input, also when a header was stripped above the JSON
        lineno = source.lines[e.lineno - 1][0] if e.lineno <= len(source.lines) else e.lineno
        raise ExplainParseError(f"invalid JSON plan at line {lineno}, column {e.colno}: {e.msg}") from None


def parse_json_object(doc, duration_ms: float | None = None) -> ParsedPlan:
    if isinstance(doc, list):
        if len(doc) != 1 or not isinstance(doc[0], dict):
            raise ExplainParseError(f"expected a JSON list holding one plan object, got {len(doc)} items")
        doc = doc[0]
    if not isinstance(doc, dict) or not isinstance(doc.get("Plan"), dict):
        keys = list(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise ExplainParseError(f"JSON plan has no 'Plan' object (found {keys})")
    nodes: list[dict] = []
    worker_jit: list[dict] = []
    memory: list[dict] = []
    _walk(doc["Plan"], "Plan", None, 0, nodes, worker_jit, memory)
    planning = doc.get("Planning")
    return ParsedPlan(
        nodes=node_frame(nodes),
        format="json",
        planning_ms=_number(doc, "Planning Time", "plan"),
        execution_ms=_number(doc, "Execution Time", "plan"),
        jit=jit_from_json(doc["JIT"]) if "JIT" in doc else None,
        worker_jit=worker_jit_frame(worker_jit),
        memory=memory_frame(memory),
        planning_buffers=_buffers(planning, "Planning") if isinstance(planning, dict) else None,
        query_text=doc.get("Query Text"),
        duration_ms=duration_ms,
    )


def _number(obj: dict, key: str, path: str):
    value = obj.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ExplainParseError(f"{path}: {key!r} should be a number, got {value!r}")
    return value


def _buffers(obj: dict, path: str) -> dict | None:
    if "Shared Hit Blocks" not in obj:
        return None
    return {column: _number(obj, key, path) for column, key in BUFFER_KEYS.items()}


def _qualified(name: str | None, schema: str | None) -> str | None:
    return f"{schema}.{name}" if name is not None and schema is not None else name


def _walk(
    obj, path: str, parent: dict | None, depth: int, nodes: list[dict], worker_jit: list[dict], memory: list[dict]
) -> None:
    if not isinstance(obj, dict) or not isinstance(obj.get("Node Type"), str):
        raise ExplainParseError(f"{path}: a plan node needs a 'Node Type' string, got {str(obj)[:80]!r}")
    node = new_node()
    node.update(node_id=len(nodes), parent_id=None if parent is None else parent["node_id"], depth=depth)
    for key, column in _TEXT_KEYS.items():
        if key in obj:
            node[column] = obj[key]
    for key, column in _BOOL_KEYS.items():
        if key in obj and not isinstance(obj[key], bool):
            raise ExplainParseError(f"{path}: {key!r} should be true/false, got {obj[key]!r}")
        node[column] = obj.get(key)
    for key, column in _NUMBER_KEYS.items():
        node[column] = _number(obj, key, path)
    node.update(_buffers(obj, path) or {})
    # "Schema" qualifies whichever object the node names (VERBOSE only)
    node["schema"] = obj.get("Schema")
    node["relation"] = _qualified(obj.get("Relation Name"), node["schema"])
    node["function_name"] = _qualified(obj.get("Function Name"), node["schema"])
    node["sort_key"], node["group_key"] = _keys(obj, path)
    nodes.append(node)
    used = {column: obj[key] for key, column in _MEMORY_KEYS.items() if key in obj}
    if used:
        for column in ("sort_method", "sort_space_type"):
            if column in used and not isinstance(used[column], str):
                raise ExplainParseError(f"{path}: {column} should be a string, got {used[column]!r}")
        for key, column in _MEMORY_KEYS.items():
            if column in used and column not in ("sort_method", "sort_space_type"):
                _number(obj, key, path)
        memory.append({"node_id": node["node_id"], "node_type": node["node_type"], **used})

    workers = obj.get("Workers", [])
    for worker in workers if isinstance(workers, list) else []:
        if isinstance(worker, dict) and "JIT" in worker:
            number = worker.get("Worker Number")
            jit = jit_from_json(worker["JIT"], f"{path}.Workers[{number}].JIT")
            worker_jit.append({"node_id": node["node_id"], "worker": number, **jit})
    if isinstance(obj.get("JIT"), dict):  # 11/12 VERBOSE: per-worker JIT directly in the node
        block = obj["JIT"]
        worker_jit.append(
            {
                "node_id": node["node_id"],
                "worker": block.get("Worker Number"),
                **jit_from_json(block, f"{path}.JIT"),
            }
        )

    children = obj.get("Plans", [])
    if not isinstance(children, list):
        raise ExplainParseError(f"{path}.Plans: expected a list, got {type(children).__name__}")
    for i, child in enumerate(children):
        _walk(child, f"{path}.Plans[{i}]", node, depth + 1, nodes, worker_jit, memory)


def _join(keys, where: str) -> str:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ExplainParseError(f"{where}: expected a list of strings, got {keys!r}")
    return ", ".join(keys)


def _keys(obj: dict, path: str) -> tuple[str | None, str | None]:
    """sort_key and group_key as the text format prints them (see model's column notes)."""
    sorts = [_join(obj["Sort Key"], f"{path}.Sort Key")] if "Sort Key" in obj else []
    groups: list[tuple[str, str]] = []
    if "Group Key" in obj:
        groups.append(("Group Key", _join(obj["Group Key"], f"{path}.Group Key")))
    for gset in obj.get("Grouping Sets", []):
        if "Sort Key" in gset:
            sorts.append(_join(gset["Sort Key"], f"{path}.Grouping Sets.Sort Key"))
        for kind in ("Hash Key", "Group Key"):
            for keys in gset.get(kind + "s", []):
                groups.append((kind, _join(keys, f"{path}.Grouping Sets.{kind}s") or "()"))
    return "; ".join(sorts) or None, group_key_text(groups)


def group_key_text(groups: list[tuple[str, str]]) -> str | None:
    if not groups:
        return None
    if len(groups) == 1 and groups[0][0] == "Group Key":
        return groups[0][1]
    return "; ".join(f"{kind}: {keys}" for kind, keys in groups)

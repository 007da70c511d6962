"""EXPLAIN text format -> the same node table as the JSON parser (fields the text lacks stay null).

Node names are read by text_nodes (which documents the mapping to JSON node types).

Other children: Member under Append / Merge Append / BitmapAnd / BitmapOr, Subquery under Subquery
Scan, child(ren) under Custom Scan, else Outer then Inner. (ModifyTable's child is "Member" in JSON up
to PostgreSQL 13 and "Outer" from 14; the text cannot tell the version and says Outer.)

Text leaves out what JSON prints as zero: with ANALYZE and BUFFERS, a node without a "Buffers:" line gets
0 blocks; "(never executed)" gets rows 0, loops 0 and (when other nodes show times) times 0.

Not parsed: a plan whose property values span lines (a string constant holding a newline), and
per-worker details other than JIT (their Buffers / Sort Method lines are skipped).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from .errors import ExplainParseError
from .jit import jit_from_text
from .json_format import group_key_text
from .model import BUFFER_COLUMNS, ParsedPlan, new_node, node_frame, worker_jit_frame
from .source import Source
from .text_nodes import NODE_LINE, parse_name

_MEMBER_PARENTS = {"Append", "Merge Append", "BitmapAnd", "BitmapOr"}
_LABEL = re.compile(r"(?:InitPlan \d+(?: \(returns .*\))?|SubPlan \d+|CTE \S.*)")


@dataclass
class _Line:
    number: int
    col: int
    text: str
    children: list[_Line] = field(default_factory=list)


@dataclass
class _Open:
    """A node or subplan label whose children may still follow: they start at child_col."""

    child_col: int
    node: dict  # for a label, the node it hangs under
    line: _Line
    label: str | None = None
    used: bool = False


def _fail(line: _Line, message: str):
    raise ExplainParseError(f"line {line.number}: {message}: {line.text.strip()[:120]!r}")


def _read_lines(source: Source) -> list[_Line]:
    lines = []
    for number, raw in source.lines:
        text = raw.lstrip(" ")
        if not text:
            continue
        if text[0] == "\t":
            raise ExplainParseError(f"line {number}: tab in the indentation; text plans are indented with spaces")
        lines.append(_Line(number, len(raw) - len(text), text))
    return lines


def _split_query_text(lines: list[_Line]) -> tuple[str | None, list[_Line]]:
    """auto_explain puts "Query Text: ..." (maybe many lines) and "Query Parameters: ..." above the plan."""
    if not lines or not lines[0].text.startswith("Query Text:"):
        return None, lines
    col = lines[0].col
    query = [lines[0].text[len("Query Text:") :].strip()]
    for i, line in enumerate(lines[1:], 1):
        if line.col == col and line.text.startswith("Query Parameters:"):
            continue
        if line.col == col and (m := NODE_LINE.fullmatch(line.text)) and (m["startup_cost"] or m["rows"]):
            return "\n".join(query), lines[i:]
        query.append(" " * (line.col - col) + line.text)
    raise ExplainParseError(f"line {lines[0].number}: 'Query Text' is not followed by a plan")


def _parse_node(line: _Line, text: str, root: bool) -> tuple[dict, bool]:
    """Node fields from a node line (without its "->"), and whether it says "(never executed)"."""
    m = NODE_LINE.fullmatch(text)
    try:
        fields = parse_name(m["name"].strip() if m else "")
    except ValueError as e:
        _fail(line, f"{e} (is this an EXPLAIN plan at all?)" if root else str(e))
    if m["startup_cost"]:
        fields.update(
            startup_cost=float(m["startup_cost"]),
            total_cost=float(m["total_cost"]),
            plan_rows=float(m["plan_rows"]),
            plan_width=int(m["plan_width"]),
        )
    if m["rows"]:
        fields.update(actual_rows=float(m["rows"]), actual_loops=int(m["loops"]))
        if m["t0"]:
            fields.update(actual_startup_ms=float(m["t0"]), actual_total_ms=float(m["t1"]))
    return fields, bool(m["never"])


def _tree(lines: list[_Line]) -> list[_Line]:
    """Nest lines by indentation: a line owns the deeper lines that follow it."""
    roots: list[_Line] = []
    stack: list[_Line] = []
    for line in lines:
        line.children = []
        while stack and stack[-1].col >= line.col:
            stack.pop()
        (stack[-1].children if stack else roots).append(line)
        stack.append(line)
    return roots


def _walk(lines: list[_Line]):
    for line in lines:
        yield line
        yield from _walk(line.children)


_BUFFER_PART = re.compile(r"(shared|local|temp)((?: [a-z]+=\d+)+)")
_WORKER = re.compile(r"Worker (\d+):.*")
_WORKER_JIT_11_12 = re.compile(r"JIT for worker (\d+):")  # 11 and 12; newer: "Worker N:" with a "JIT:" child


def _buffers(line: _Line) -> dict:
    counts = {}
    for part in line.text.partition(":")[2].strip().split(", "):
        m = _BUFFER_PART.fullmatch(part)
        if not m:
            _fail(line, f"unreadable buffer counts {part!r}")
        for pair in m[2].split():
            kind, value = pair.split("=")
            column = f"{m[1]}_{kind}_blocks"
            if column not in BUFFER_COLUMNS:
                _fail(line, f"unknown buffer counter {m[1]} {kind}")
            counts[column] = int(value)
    return counts


def _ms(line: _Line) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?) ms", line.text.partition(":")[2])
    if not m:
        _fail(line, "expected a time in ms")
    return float(m[1])


def _jit_lines(line: _Line) -> list[tuple[int, str]]:
    if not line.children:
        _fail(line, "JIT block without its Functions / Options lines")
    return [(child.number, child.text) for child in line.children]


def _apply_details(node: dict, lines: list[_Line], detail_col: int, worker_jit: list[dict]) -> bool:
    """Fill node columns from its detail lines; return whether a Buffers line was seen."""
    sorts: list[str] = []
    groups: list[tuple[str, str]] = []
    saw_buffers = False
    for line in lines:
        if ":" not in line.text:
            _fail(line, "expected a 'Label: value' detail line")
    for item in _tree(lines):
        if item.col != detail_col:
            _fail(item, f"detail line at column {item.col}, its node's details are at column {detail_col}")
        key, _, value = item.text.partition(":")
        if m := _WORKER.fullmatch(item.text):
            for child in item.children:
                if child.text == "JIT:":
                    worker_jit.append(
                        {"node_id": node["node_id"], "worker": int(m[1]), **jit_from_text(_jit_lines(child))}
                    )
        elif m := _WORKER_JIT_11_12.fullmatch(item.text):
            worker_jit.append({"node_id": node["node_id"], "worker": int(m[1]), **jit_from_text(_jit_lines(item))})
        elif key in ("Workers Planned", "Workers Launched"):
            if not value.strip().isdigit():
                _fail(item, "expected a worker count")
            node[key.lower().replace(" ", "_")] = int(value)
        elif key == "Buffers":
            node.update(_buffers(item))
            saw_buffers = True
        else:
            # grouping sets nest "Group Key" lines under their "Sort Key"
            for line in _walk([item]):
                key, _, value = line.text.partition(":")
                if key == "Sort Key":
                    sorts.append(value.strip())
                elif key in ("Group Key", "Hash Key"):
                    groups.append((key, value.strip()))
    node["sort_key"] = "; ".join(sorts) or None
    node["group_key"] = group_key_text(groups)
    return saw_buffers


def _summary(lines: list[_Line]) -> dict:
    """Plan-level lines after the tree: Planning / Execution Time, Planning: Buffers, JIT, Triggers, ..."""
    out: dict = {"planning_ms": None, "execution_ms": None, "jit": None, "planning_buffers": None}
    for item in _tree(lines):
        key, sep, value = item.text.partition(":")
        if not sep:
            _fail(item, "unexpected line after the plan tree")
        label = key.lower()
        if label == "planning time":
            out["planning_ms"] = _ms(item)
        elif label in ("execution time", "total runtime"):  # "Total runtime" up to 9.3
            out["execution_ms"] = _ms(item)
        elif key == "Planning" and not value.strip():
            for child in item.children:
                if child.text.startswith("Buffers:"):
                    out["planning_buffers"] = dict.fromkeys(BUFFER_COLUMNS, 0) | _buffers(child)
        elif key == "JIT" and not value.strip():
            out["jit"] = jit_from_text(_jit_lines(item))
    return out


def _holder(stack: list[_Open], line: _Line) -> _Open:
    """The open node or label a line at line.col hangs under; closes deeper ones."""
    while stack and stack[-1].child_col > line.col:
        done = stack.pop()
        if done.label and not done.used:
            _fail(done.line, "subplan label without a plan node below it")
    if not stack or stack[-1].child_col != line.col:
        expected = f"column {stack[-1].child_col}" if stack else "the root's detail column"
        _fail(line, f"indentation (column {line.col}) lines up with no open plan node (expected {expected})")
    return stack[-1]


def parse_text_source(source: Source) -> ParsedPlan:
    query_text, lines = _split_query_text(_read_lines(source))
    if not lines:
        raise ExplainParseError("no plan lines")
    first = lines[0]
    if first.text.startswith("->"):
        _fail(first, "a plan starts with its root node, not with a '->' child line")
    root_col = first.col
    nodes: list[dict] = []
    node_lines: dict[int, _Line] = {}
    detail_cols: dict[int, int] = {}  # a node's detail lines start 2 right of its name
    details: dict[int, list[_Line]] = defaultdict(list)
    never: set[int] = set()
    summary: list[_Line] = []
    stack: list[_Open] = []

    def add_node(line: _Line, text: str, name_col: int, holder: _Open | None) -> dict:
        node = new_node()
        fields, never_executed = _parse_node(line, text, root=holder is None)
        node.update(fields, node_id=len(nodes))
        if holder is not None:
            node.update(parent_id=holder.node["node_id"], depth=holder.node["depth"] + 1)
            if holder.label:
                kind = "SubPlan" if holder.label.startswith("SubPlan") else "InitPlan"  # CTEs are InitPlans
                node.update(subplan_name=holder.label, parent_relationship=kind)
        else:
            node["depth"] = 0
        if never_executed:
            never.add(node["node_id"])
        nodes.append(node)
        node_lines[node["node_id"]] = line
        detail_cols[node["node_id"]] = name_col + 2
        stack.append(_Open(name_col + 2, node, line))
        return node

    current: dict | None = add_node(first, first.text, root_col, None)
    for line in lines[1:]:
        if line.col < root_col:
            _fail(line, f"indented left of the plan's first line (column {line.col} < {root_col})")
        if line.text.startswith("->"):
            if summary:
                _fail(line, "plan node after the plan's closing lines (Planning Time, JIT, ...)")
            holder = _holder(stack, line)
            if holder.label:
                if holder.used:
                    _fail(line, f"second plan under the subplan label at line {holder.line.number}")
                holder.used = True
            name_col = line.col + re.match(r"->\s*", line.text).end()
            current = add_node(line, line.text[name_col - line.col :], name_col, holder)
        elif not summary and line.col > root_col and _LABEL.fullmatch(line.text):
            holder = _holder(stack, line)
            if holder.label:
                _fail(line, f"subplan label directly under the label at line {holder.line.number}")
            stack.append(_Open(line.col + 2, holder.node, line, label=line.text))
            current = None
        elif summary or line.col == root_col:
            summary.append(line)
        elif current is None:
            _fail(line, "expected a '->' plan node under the subplan label")
        else:
            detail_col = detail_cols[current["node_id"]]
            if line.col < detail_col:
                _fail(
                    line,
                    f"indentation (column {line.col}) fits no node: the node at line "
                    f"{node_lines[current['node_id']].number} has its details at column {detail_col}",
                )
            details[current["node_id"]].append(line)
    for open_ in stack:
        if open_.label and not open_.used:
            _fail(open_.line, "subplan label without a plan node below it")

    worker_jit: list[dict] = []
    saw_buffers = False
    for node in nodes:
        saw_buffers |= _apply_details(node, details[node["node_id"]], detail_cols[node["node_id"]], worker_jit)
    _fill_omitted(nodes, never, saw_buffers)
    _relationships(nodes, node_lines)
    return ParsedPlan(
        nodes=node_frame(nodes),
        format="text",
        worker_jit=worker_jit_frame(worker_jit),
        query_text=query_text,
        duration_ms=source.duration_ms,
        **_summary(summary),
    )


def _fill_omitted(nodes: list[dict], never: set[int], saw_buffers: bool) -> None:
    """Put back the zeros the text format leaves out (JSON prints them)."""
    analyzed = bool(never) or any(n["actual_loops"] is not None for n in nodes)
    timed = any(n["actual_total_ms"] is not None for n in nodes)
    for node in nodes:
        if node["node_id"] in never:
            node.update(actual_rows=0.0, actual_loops=0)
            if timed:
                node.update(actual_startup_ms=0.0, actual_total_ms=0.0)
        if analyzed and saw_buffers:
            for column in BUFFER_COLUMNS:
                if node[column] is None:
                    node[column] = 0


def _relationships(nodes: list[dict], node_lines: dict[int, _Line]) -> None:
    children = defaultdict(list)
    for node in nodes:
        if node["parent_id"] is not None and node["parent_relationship"] is None:
            children[node["parent_id"]].append(node)
    for parent_id, plain in children.items():
        parent_type = nodes[parent_id]["node_type"]
        if parent_type in _MEMBER_PARENTS:
            names = ["Member"] * len(plain)
        elif parent_type == "Subquery Scan":
            names = ["Subquery"] * len(plain)
        elif parent_type == "Custom Scan":
            names = ["child" if len(plain) == 1 else "children"] * len(plain)
        else:
            if len(plain) > 2:
                _fail(node_lines[plain[2]["node_id"]], f"a {parent_type} node has at most two child plans")
            names = ["Outer", "Inner"]
        for node, name in zip(plain, names, strict=False):
            node["parent_relationship"] = name

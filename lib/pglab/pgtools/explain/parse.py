"""Entry points: parse a plan in whatever form it arrives, or just fingerprint it."""

from __future__ import annotations

import polars as pl

from .errors import ExplainParseError
from .json_format import load_json, parse_json_object
from .model import ParsedPlan
from .shape import shape_fingerprint
from .source import Source, read_source
from .text_format import parse_text_source
from .workers import gather_frame


def parse_plan(plan) -> ParsedPlan:
    """Parse EXPLAIN output, JSON or text, detected from the input (see `source` for the forms taken)."""
    if isinstance(plan, ParsedPlan):
        return plan
    source = read_source(plan)
    if isinstance(source, Source) and not source.is_json():
        return parse_text_source(source)
    return _parse_json(source)


def _parse_json(source) -> ParsedPlan:
    duration = None
    if isinstance(source, Source):
        duration = source.duration_ms
        source = load_json(source)
    # a jsonlog line: the auto_explain entry is its "message", JSON or text in turn
    if isinstance(source, dict) and "Plan" not in source and isinstance(source.get("message"), str):
        return parse_plan(source["message"])
    return parse_json_object(source, duration)


def parse_json_plan(plan) -> ParsedPlan:
    """Parse EXPLAIN (FORMAT JSON): psycopg's list-of-one-dict, the dict, or the JSON string."""
    source = read_source(plan)
    if isinstance(source, Source) and not source.is_json():
        first = source.lines[0]
        raise ExplainParseError(f"line {first[0]}: not a JSON plan (starts with {first[1].strip()[:40]!r})")
    parsed = _parse_json(source)
    if parsed.format != "json":
        raise ExplainParseError("the JSON log line holds a text plan; use parse_plan or parse_text_plan")
    return parsed


def parse_text_plan(plan) -> ParsedPlan:
    """Parse the text format: a string, bytes, lines, or psycopg rows of lines."""
    source = read_source(plan)
    if not isinstance(source, Source):
        raise ExplainParseError("got a JSON plan object; use parse_json_plan or parse_plan")
    if source.is_json():
        # a jsonlog line wrapping a text plan is still text
        doc = load_json(source)
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return parse_text_plan(doc["message"])
        raise ExplainParseError(f"line {source.lines[0][0]}: this is a JSON plan; use parse_json_plan")
    return parse_text_source(source)


def fingerprint(plan) -> str:
    """16 hex chars of sha1 over the plan's shape; accepts anything parse_plan does, a ParsedPlan, or a
    node table."""
    if isinstance(plan, pl.DataFrame):
        return shape_fingerprint(plan)
    return parse_plan(plan).fingerprint


def gather_workers(parsed) -> pl.DataFrame:
    """One row per Gather / Gather Merge: gather_id, node_type, subplan_name, workers_planned,
    workers_launched, nodes_below, leftmost_node_type, leftmost_relation (the outer scan driving it)."""
    return gather_frame(parse_plan(parsed).nodes)

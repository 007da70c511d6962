"""EXPLAIN output -> a tidy polars node table, plan-level figures, JIT block and a shape fingerprint.

    plan = parse_plan(cur.execute("EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) ...").fetchone()[0])
    plan.nodes            # one row per node, columns in model.COLUMNS (documented in model)
    plan.planning_ms, plan.execution_ms, plan.jit, plan.fingerprint, plan.format, plan.summary()
    plan.memory           # sorts / hashes / hash aggregates: method, batches, Memory or Disk kB (JSON, ANALYZE)
    gather_workers(plan)  # workers planned / launched per Gather and the scan driving it

JSON (PostgreSQL 11-18) and text (what psql shows, what auto_explain logs) give the same columns; see
text_format for how text node names map to JSON node types, shape for what the fingerprint covers.
"""

from .errors import ExplainParseError
from .jit import JIT_KEYS
from .model import COLUMNS, MEMORY_COLUMNS, ParsedPlan
from .parse import fingerprint, gather_workers, parse_json_plan, parse_plan, parse_text_plan
from .shape import shape_rows

__all__ = [
    "COLUMNS",
    "JIT_KEYS",
    "MEMORY_COLUMNS",
    "ExplainParseError",
    "ParsedPlan",
    "fingerprint",
    "gather_workers",
    "parse_json_plan",
    "parse_plan",
    "parse_text_plan",
    "shape_rows",
]

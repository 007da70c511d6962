"""The EXPLAIN parser against real PostgreSQL 15 / 18 plans and hand-written older formats (no database)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from pglab.pgtools.explain import (
    COLUMNS,
    JIT_KEYS,
    ExplainParseError,
    ParsedPlan,
    fingerprint,
    gather_workers,
    parse_json_plan,
    parse_plan,
    parse_text_plan,
)

FIXTURES = Path(__file__).parent / "fixtures" / "explain"
SERVERS = ("pg15", "pg18")
CASES = (
    "count",
    "count_serial",
    "count_1worker",
    "star",
    "append",
    "subplans",
    "joins",
    "setop",
    "rollup",
    "rollup_sorted",
)
# columns that must agree between the text and the JSON of one plan; the two come from separate executions,
# so measured values (times, per-loop rows, buffers) may differ and only their presence is compared
SHAPE_COLUMNS = [
    c
    for c in COLUMNS
    if not c.endswith("_blocks")
    and c not in ("actual_rows", "actual_loops", "actual_startup_ms", "actual_total_ms", "workers_launched")
]
MEASURED_COLUMNS = [c for c in COLUMNS if c not in SHAPE_COLUMNS]


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def load(name: str) -> ParsedPlan:
    path = FIXTURES / name
    # JSON as psycopg returns it (decoded), text as a string
    return parse_plan(json.loads(path.read_text()) if path.suffix == ".json" else path.read_text())


def col(plan: ParsedPlan, name: str) -> list:
    return plan.nodes[name].to_list()


# --- structure --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
def test_parallel_count_structure(server):
    plan = load(f"{server}_count.json")
    assert plan.format == "json"
    assert list(plan.nodes.columns) == list(COLUMNS)
    assert col(plan, "node_type") == ["Aggregate", "Gather", "Aggregate", "Seq Scan"]
    assert col(plan, "partial_mode") == ["Finalize", None, "Partial", None]
    assert col(plan, "node_id") == [0, 1, 2, 3]
    assert col(plan, "parent_id") == [None, 0, 1, 2]
    assert col(plan, "depth") == [0, 1, 2, 3]
    assert col(plan, "parent_relationship") == [None, "Outer", "Outer", "Outer"]
    assert col(plan, "parallel_aware") == [False, False, False, True]
    assert col(plan, "relation") == [None, None, None, "public.tab1"]
    assert col(plan, "schema")[3] == "public" and col(plan, "alias")[3] == "tab1"
    assert col(plan, "workers_planned") == [None, 2, None, None]
    assert col(plan, "workers_launched") == [None, 2, None, None]
    assert col(plan, "gather_id") == [None, None, 1, 1]
    assert col(plan, "actual_loops") == [1, 1, 3, 3]
    assert col(plan, "plan_rows")[3] == 416667
    # 18 prints per-loop rows with decimals
    assert col(plan, "actual_rows")[3] == pytest.approx(333333.33 if server == "pg18" else 333333)
    assert plan.planning_ms > 0 and plan.execution_ms > 0


@pytest.mark.parametrize("server", SERVERS)
def test_subplans_ctes_and_never_executed(server):
    plan = load(f"{server}_subplans.txt")
    assert plan.format == "text" and plan.nodes.height == 14
    names = [n for n in col(plan, "subplan_name") if n]
    returns = {"pg15": [" (returns $3)", " (returns $6)"], "pg18": ["", ""]}[server]
    assert names == ["CTE am", f"InitPlan 2{returns[0]}", f"InitPlan 4{returns[1]}", "SubPlan 3"]
    rel = dict(zip(col(plan, "subplan_name"), col(plan, "parent_relationship"), strict=True))
    assert rel["CTE am"] == "InitPlan" and rel["SubPlan 3"] == "SubPlan"
    nodes = plan.nodes
    cte = nodes.filter(pl.col("node_type") == "CTE Scan").row(0, named=True)
    assert (cte["cte_name"], cte["alias"], cte["parent_id"], cte["depth"]) == ("am", "am", 0, 1)
    index = nodes.filter(pl.col("node_type") == "Index Only Scan").row(0, named=True)
    assert (index["index_name"], index["relation"], index["alias"]) == (
        "supplier_city",
        "public.supplier",
        "s",
    )
    assert index["actual_loops"] == 11 and index["scan_direction"] == "Forward"
    subplan = nodes.filter(pl.col("subplan_name") == "SubPlan 3").row(0, named=True)
    assert subplan["parent_id"] == cte["node_id"] and index["parent_id"] == subplan["node_id"]
    # the InitPlan behind CASE never runs: four "(never executed)" nodes, with JSON's zeros filled in
    never = nodes.filter(pl.col("actual_loops") == 0)
    assert never["node_id"].to_list() == [7, 8, 9, 10]
    assert never["actual_rows"].to_list() == [0.0] * 4 and never["actual_total_ms"].to_list() == [0.0] * 4
    assert never["shared_hit_blocks"].to_list() == [0] * 4
    assert never["gather_id"].to_list() == [None, None, 8, 8]


@pytest.mark.parametrize("server", SERVERS)
def test_parallel_append_members(server):
    plan = load(f"{server}_append.json")
    scans = plan.nodes.filter(pl.col("node_type") == "Seq Scan")
    assert scans["relation"].to_list() == ["public.pt_0", "public.pt_1", "public.pt_2"]
    assert scans["alias"].to_list() == ["pt_1", "pt_2", "pt_3"]
    assert scans["parent_relationship"].to_list() == ["Member"] * 3
    append = plan.nodes.filter(pl.col("node_type") == "Append").row(0, named=True)
    assert append["parallel_aware"] and scans["parent_id"].to_list() == [append["node_id"]] * 3
    assert scans["gather_id"].to_list() == [1, 1, 1]


def test_joins_aggregates_and_setops():
    joins = load("pg15_joins.txt")
    assert col(joins, "node_type") == ["Aggregate", "Nested Loop", "Seq Scan", "Index Scan"]
    assert col(joins, "strategy")[0] == "Hashed" and col(joins, "group_key")[0] == "c.c_city"
    assert col(joins, "join_type")[1] == "Left"
    assert col(joins, "parent_relationship") == [None, "Outer", "Outer", "Inner"]
    assert col(joins, "alias")[2:] == ["c", "s"]
    assert joins.planning_buffers["shared_hit_blocks"] == 6
    star = load("pg18_star.txt")
    hash_joins = star.nodes.filter(pl.col("node_type") == "Hash Join")
    assert hash_joins.height == 4 and hash_joins["parallel_aware"].all()
    assert set(hash_joins["join_type"]) == {"Inner"}
    assert col(star, "sort_key")[2] == "date.d_year, supplier.s_city, part.p_brand1"
    setop = load("pg15_setop.txt")
    row = setop.nodes.filter(pl.col("node_type") == "SetOp").row(0, named=True)
    assert (row["strategy"], row["operation"]) == ("Hashed", "Except")
    func = setop.nodes.filter(pl.col("node_type") == "Function Scan").row(0, named=True)
    assert (func["function_name"], func["schema"], func["alias"]) == (
        "pg_catalog.generate_series",
        "pg_catalog",
        "g",
    )
    assert set(col(setop, "alias")) >= {"*SELECT* 1", "*SELECT* 2", "*VALUES*"}
    assert col(load("pg18_setop.txt"), "strategy")[1] == "Sorted"


@pytest.mark.parametrize("fmt", ["json", "txt"])
def test_grouping_sets_keys(fmt):
    hashed = load(f"pg15_rollup.{fmt}")
    assert col(hashed, "strategy")[0] == "Mixed"
    assert col(hashed, "group_key")[0] == (
        "Hash Key: customer.c_region, customer.c_city; Hash Key: customer.c_region; "
        "Hash Key: customer.c_city; Group Key: ()"
    )
    sorted_ = load(f"pg15_rollup_sorted.{fmt}")
    assert col(sorted_, "group_key")[0] == (
        "Group Key: customer.c_region, customer.c_city; Group Key: customer.c_region; Group Key: (); "
        "Group Key: customer.c_city"
    )
    assert col(sorted_, "sort_key")[:2] == ["customer.c_city", "customer.c_region, customer.c_city"]


# --- text and JSON agree ----------------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("case", [*CASES, "count_timing_off"])
def test_text_and_json_give_the_same_table(server, case):
    from_json = load(f"{server}_{case}.json")
    from_text = load(f"{server}_{case}.txt")
    assert from_json.nodes.height == from_text.nodes.height
    for name in SHAPE_COLUMNS:
        assert from_text.nodes[name].to_list() == from_json.nodes[name].to_list(), name
    for name in MEASURED_COLUMNS:
        assert from_text.nodes[name].is_null().to_list() == from_json.nodes[name].is_null().to_list(), name
    assert from_text.fingerprint == from_json.fingerprint
    assert (from_text.jit is None) == (from_json.jit is None)
    assert from_text.worker_jit.height == from_json.worker_jit.height


@pytest.mark.parametrize("server", SERVERS)
def test_plain_explain_has_no_measurements(server):
    for plan in (load(f"{server}_star_plain.json"), load(f"{server}_star_plain.txt")):
        assert plan.nodes["actual_loops"].null_count() == plan.nodes.height
        assert plan.nodes["shared_hit_blocks"].null_count() == plan.nodes.height
        assert plan.nodes["workers_launched"].null_count() == plan.nodes.height
        assert plan.nodes.filter(pl.col("node_type") == "Gather Merge")["workers_planned"].to_list() == [2]
        assert plan.execution_ms is None
    costs_off = load(f"{server}_star_costs_off.txt")
    assert costs_off.nodes["total_cost"].null_count() == costs_off.nodes.height


def test_timing_off_keeps_rows_without_times():
    plan = load("pg18_count_timing_off.txt")
    assert plan.nodes["actual_total_ms"].null_count() == 4
    assert col(plan, "actual_rows") == [1.0, 3.0, 1.0, pytest.approx(333333.33)]
    assert plan.nodes["shared_hit_blocks"].null_count() == 0


# --- workers ----------------------------------------------------------------------------------------------


def test_workers_planned_and_launched():
    for name in ("pg15_count_1worker.json", "pg15_count_1worker.txt", "pg18_count_1worker.json"):
        gathers = gather_workers(load(name))
        assert gathers.select("gather_id", "workers_planned", "workers_launched").rows() == [(1, 2, 1)], name
    plain = gather_workers(read("pg15_count_1worker_plain.txt"))
    assert plain["workers_launched"].to_list() == [None]


def test_gather_workers_names_the_driving_scan():
    star = gather_workers(load("pg15_star.json"))
    assert star.rows(named=True) == [
        {
            "gather_id": 1,
            "node_type": "Gather Merge",
            "subplan_name": None,
            "workers_planned": 2,
            "workers_launched": 2,
            "nodes_below": 14,
            "leftmost_node_type": "Seq Scan",
            "leftmost_relation": "public.date",
        }
    ]
    # three Gathers, each under its own InitPlan / CTE; the never-run one launched none
    sub = gather_workers(load("pg15_subplans.txt"))
    assert sub["subplan_name"].to_list() == ["CTE am", None, None]
    assert sub["leftmost_relation"].to_list() == ["public.customer", "public.date", "public.tab1"]
    assert sub["workers_launched"].to_list() == [2, 2, 0]
    assert gather_workers(load("pg18_count_serial.json")).height == 0


# --- JIT --------------------------------------------------------------------------------------------------


def test_jit_pg15_json_and_text():
    from_json = load("pg15_count.json")
    assert from_json.jit == {
        "functions": 11,
        "inlining": True,
        "optimization": True,
        "expressions": True,
        "deforming": True,
        "generation_ms": 0.543,
        "deform_ms": None,
        "inlining_ms": 190.449,
        "optimization_ms": 55.406,
        "emission_ms": 43.808,
        "total_ms": 290.206,
    }
    from_text = load("pg15_count.txt")
    assert from_text.jit["functions"] == 11 and from_text.jit["total_ms"] == 290.098
    assert from_text.jit["generation_ms"] == 0.656 and from_text.jit["deform_ms"] is None
    # per-worker blocks (VERBOSE) sit on the node under the Gather
    for plan in (from_json, from_text):
        assert plan.worker_jit.select("node_id", "worker", "functions").rows() == [(2, 0, 3), (2, 1, 3)]
    assert load("pg18_count.json").jit is None and load("pg18_count.txt").jit is None


def test_jit_without_timing():
    for name in ("pg15_count_plain.json", "pg15_count_plain.txt", "pg15_count_timing_off.txt"):
        jit = load(name).jit
        assert jit["functions"] > 0 and jit["deforming"] is True, name
        assert [jit[k] for k in JIT_KEYS if k.endswith("_ms")] == [None] * 6, name


@pytest.mark.parametrize("fmt", ["json", "txt"])
def test_jit_old_format_generation_is_a_number(fmt):
    plan = load(f"handwritten_pg11_jit.{fmt}")
    assert plan.jit == {
        "functions": 8,
        "inlining": True,
        "optimization": True,
        "expressions": True,
        "deforming": True,
        "generation_ms": 1.234,
        "deform_ms": None,
        "inlining_ms": 6.5,
        "optimization_ms": 25.25,
        "emission_ms": 17.75,
        "total_ms": 50.734,
    }
    workers = plan.worker_jit.row(0, named=True)
    assert (workers["node_id"], workers["worker"], workers["total_ms"]) == (2, 0, 23.823)
    assert col(plan, "workers_launched")[1] == 1
    assert col(plan, "async_capable")[3] is (None if fmt == "json" else False)
    assert plan.fingerprint == load("pg15_count.json").fingerprint


@pytest.mark.parametrize("fmt", ["json", "txt"])
def test_jit_new_format_generation_has_deform(fmt):
    plan = load(f"handwritten_pg17_jit.{fmt}")
    source = load(f"pg15_count.{fmt}").jit
    assert plan.jit["generation_ms"] == source["generation_ms"]
    assert plan.jit["deform_ms"] == pytest.approx(source["generation_ms"] / 4, abs=0.001)
    assert plan.jit["total_ms"] == source["total_ms"]
    assert plan.worker_jit["deform_ms"].null_count() == 0


def test_jit_errors():
    options = dict.fromkeys(("Inlining", "Optimization", "Expressions", "Deforming"), False)
    block = {"Functions": 1, "Options": options, "Timing": {"Generation": {"Total": 1.0}}}
    with pytest.raises(ExplainParseError, match=r"JIT\.Timing\.Generation\.Deform: expected a number"):
        parse_plan({"Plan": {"Node Type": "Result"}, "JIT": block})
    with pytest.raises(ExplainParseError, match=r"line 4: unrecognised JIT line"):
        parse_plan("Result\nJIT:\n  Functions: 3\n  Options: Inlining maybe")


# --- fingerprint ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("case", CASES)
def test_fingerprint_ignores_analyze_format_and_verbose(server, case):
    suffixes = (".json", ".txt", "_costs_off.txt", "_plain.json", "_plain.txt")
    prints = {f"{server}_{case}{s}": fingerprint(read(f"{server}_{case}{s}")) for s in suffixes}
    assert len(set(prints.values())) == 1, prints
    assert re.fullmatch(r"[0-9a-f]{16}", next(iter(prints.values())))


def test_fingerprint_sees_shape_changes():
    serial, parallel = fingerprint(read("pg15_count_serial.json")), fingerprint(read("pg15_count.json"))
    assert serial != parallel
    base = read("pg15_star_costs_off.txt")
    same = fingerprint(base)
    assert fingerprint(load("pg15_star.json")) == same
    # costs, aliases and schemas are not shape; join types, relations, workers and sort keys are
    assert fingerprint(read("pg15_star_plain.txt").replace("rows=25", "rows=99999")) == same
    assert fingerprint(base.replace("on customer", "on public.customer c")) == same
    for changed in (
        base.replace("Parallel Hash Join", "Parallel Hash Left Join", 1),
        base.replace("on customer", "on clients"),
        base.replace("Workers Planned: 2", "Workers Planned: 3"),
        base.replace("Sort Key: date.d_year, supplier.s_city", "Sort Key: supplier.s_city, date.d_year"),
        base.replace("Parallel Seq Scan on part", "Seq Scan on part"),
    ):
        assert changed != base and fingerprint(changed) != same
    # 15 prints "InitPlan 2 (returns $3)", 18 "InitPlan 2": the same shape either way
    assert fingerprint(read("pg15_subplans.json")) == fingerprint(read("pg18_subplans.txt"))
    assert fingerprint(load("pg15_count.json").nodes) == parallel


# --- input forms ------------------------------------------------------------------------------------------


def test_input_forms():
    text = read("pg15_count.txt")
    reference = parse_plan(text)
    rows = [(line,) for line in text.splitlines()]  # psycopg: cur.fetchall() of a text EXPLAIN
    for variant in (rows, text.splitlines(), text.encode(), read("handwritten_pg17_jit.txt")):
        assert parse_text_plan(variant).nodes["node_type"].equals(reference.nodes["node_type"])
    doc = json.loads(read("pg15_count.json"))
    for variant in (doc, doc[0], (doc,), [(doc,)], read("pg15_count.json")):
        assert parse_json_plan(variant).fingerprint == reference.fingerprint
    # psql's header and footer around a pasted plan, and its "+" marks on the lines of a JSON value
    assert load("handwritten_pg11_jit.txt").nodes.height == 4
    lines = read("pg15_count.json").rstrip().split("\n")
    pasted = [" QUERY PLAN", "-" * 60, *(f" {line:<58}+" for line in lines[:-1]), f" {lines[-1]}", "(1 row)"]
    assert parse_plan("\n".join(pasted)).fingerprint == reference.fingerprint
    assert parse_plan(reference) is reference


@pytest.mark.parametrize("name", ["pg15_autoexplain.log", "pg15_autoexplain_json.log", "pg18_autoexplain.log"])
def test_auto_explain_log_entries(name):
    plan = load(name)
    assert plan.format == ("json" if "json" in name else "text")
    header = re.search(r"duration: ([\d.]+) ms", read(name))
    assert plan.duration_ms == float(header[1])
    assert plan.query_text.startswith("WITH am AS MATERIALIZED") and plan.query_text.endswith("ORDER BY am.c_city")
    assert plan.query_text.count("\n") == 5
    assert plan.nodes.height == 14 and col(plan, "relation")[2] == "customer"
    assert plan.fingerprint == load(name.split("_")[0] + "_subplans.json").fingerprint


def test_auto_explain_in_a_jsonlog_line():
    entry = "duration: 5.500 ms  plan:\n" + read("pg18_subplans.txt")
    line = json.dumps({"timestamp": "2026-01-01 00:00:00 UTC", "error_severity": "LOG", "message": entry})
    plan = parse_plan(line)
    assert plan.format == "text" and plan.duration_ms == 5.5 and plan.nodes.height == 14
    assert parse_text_plan(line).fingerprint == plan.fingerprint
    with pytest.raises(ExplainParseError, match="text plan"):
        parse_json_plan(line)


def test_summary_row():
    plan = load("pg15_joins.json")
    summary = plan.summary()
    assert summary.height == 1
    row = summary.row(0, named=True)
    assert row["format"] == "json" and row["fingerprint"] == plan.fingerprint and row["node_count"] == 4
    assert row["shared_hit_blocks"] == plan.root["shared_hit_blocks"] > 0
    assert row["planning_shared_hit_blocks"] == plan.planning_buffers["shared_hit_blocks"]
    assert row["jit_functions"] == plan.jit["functions"] and row["jit_total_ms"] == plan.jit["total_ms"]
    assert load("pg18_joins.txt").summary()["jit_functions"].to_list() == [None]


# --- errors -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, message",
    [
        ("malformed_truncated.json", r"invalid JSON plan at line 81, column \d+"),
        ("malformed_random.txt", r"line 1: unknown plan node type \(is this an EXPLAIN plan at all\?\)"),
        ("malformed_node_line.txt", r"line 4: unknown plan node type: '->  Partial Frobnicate"),
        ("malformed_indent.txt", r"line 5: indentation \(column 11\) lines up with no open plan node"),
    ],
)
def test_malformed_fixtures(name, message):
    with pytest.raises(ExplainParseError, match=message):
        parse_plan(read(name))


@pytest.mark.parametrize(
    "plan, message",
    [
        ("", "empty input"),
        ("Sort\n  InitPlan 1 (returns $0)\n  ->  Seq Scan on t", r"line 2: subplan label without a plan"),
        (
            "Sort\n  ->  Seq Scan on t\n  ->  Seq Scan on u\n  ->  Seq Scan on v",
            r"line 4: .* at most two child",
        ),
        ("Seq Scan on t\n  Filter (x)", r"line 2: expected a 'Label: value' detail line"),
        ("Seq Scan on t\n    Filter: x", r"line 2: detail line at column 4"),
        (
            "Limit\n  ->  Seq Scan on t\nPlanning Time: 0.1 ms\n  ->  Seq Scan on u",
            r"line 4: plan node after",
        ),
        ("  ->  Seq Scan on t", r"line 1: a plan starts with its root node"),
        ("Seq Scan on t\n  Buffers: shared hot=3", r"line 2: unknown buffer counter"),
        ("Seq Scan on t\nPlanning Time: soon", r"line 2: expected a time in ms"),
        ('[{"Plan": {"Node Type": "Result", "Plans": [{"Plans": []}]}}]', r"Plan\.Plans\[0\]: .*'Node Type'"),
        ('{"Plan": {"Node Type": "Result", "Plan Rows": "many"}}', r"Plan: 'Plan Rows' should be a number"),
        ('{"Query Text": "select 1"}', r"no 'Plan' object"),
        ([], r"empty input"),
        ("[]", r"list holding one plan"),
        ('[{"Plan": {"Node Type": "Result"}}, {}]', r"got 2 items"),
        (42, r"got int"),
    ],
)
def test_errors_name_the_place(plan, message):
    with pytest.raises(ExplainParseError, match=message):
        parse_plan(plan)


def test_format_specific_entry_points_refuse_the_other_format():
    with pytest.raises(ExplainParseError, match="not a JSON plan"):
        parse_json_plan(read("pg15_count.txt"))
    with pytest.raises(ExplainParseError, match="use parse_json_plan"):
        parse_text_plan(read("pg15_count.json"))
    with pytest.raises(ExplainParseError, match="use parse_json_plan"):
        parse_text_plan(json.loads(read("pg15_count.json")))

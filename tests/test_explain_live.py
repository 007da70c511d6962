"""The EXPLAIN parser on plans captured now from the kit's own servers (every install found), not only
on stored fixtures: a new server version that changes its output shows up here."""

import polars as pl
import pytest

from pglab.pgtools.explain import ExplainParseError, gather_workers, parse_plan

SETUP = """
DROP TABLE IF EXISTS t_explain;
CREATE TABLE t_explain AS SELECT g AS id, g % 100 AS k FROM generate_series(1, 200000) g;
ANALYZE t_explain;
"""
QUERY = "SELECT k, count(*) FROM t_explain WHERE id > 10 GROUP BY k ORDER BY k"
FORCE_PARALLEL = {
    "parallel_setup_cost": 0,
    "parallel_tuple_cost": 0,
    "min_parallel_table_scan_size": 0,
    "max_parallel_workers_per_gather": 2,
}
COLUMNS = ["node_type", "relation", "depth", "parent_id", "workers_planned", "workers_launched", "actual_rows"]


@pytest.fixture(scope="module")
def conn(cluster):
    with cluster.connect() as c:
        c.execute(SETUP)
    with cluster.connect(settings=FORCE_PARALLEL) as c:
        yield c


def test_json_and_text_of_a_live_parallel_plan_agree(conn):
    js = parse_plan(conn.execute("EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) " + QUERY).fetchone()[0])
    tx = parse_plan("\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS, VERBOSE) " + QUERY)))
    assert js.format == "json" and tx.format == "text"
    assert js.nodes.select(COLUMNS).drop("actual_rows").equals(tx.nodes.select(COLUMNS).drop("actual_rows"))
    gathers = gather_workers(js)
    assert gathers.height == 1 and gathers["workers_planned"][0] == 2
    assert 0 <= gathers["workers_launched"][0] <= 2
    assert gathers["leftmost_relation"][0].endswith("t_explain")
    assert js.execution_ms > 0 and js.planning_ms > 0


def test_fingerprint_follows_the_shape_only(conn, cluster):
    costs_off = "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + QUERY))
    analyzed = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + QUERY).fetchone()[0]
    assert parse_plan(costs_off).fingerprint == parse_plan(analyzed).fingerprint
    with cluster.connect(settings={"max_parallel_workers_per_gather": 0}) as serial:
        serial_fp = parse_plan("\n".join(r[0] for r in serial.execute("EXPLAIN (COSTS OFF) " + QUERY))).fingerprint
    assert serial_fp != parse_plan(costs_off).fingerprint


def test_jit_block_is_parsed_where_the_build_has_jit(cluster):
    if not cluster.install.jit:
        pytest.skip(f"{cluster.install.name} has no llvmjit")
    with cluster.connect(
        settings={"jit": True, "jit_above_cost": 0, "jit_inline_above_cost": 0, "jit_optimize_above_cost": 0}
    ) as c:
        plan = parse_plan(c.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(id) FROM t_explain").fetchone()[0])
    assert plan.jit["functions"] > 0 and plan.jit["total_ms"] > 0
    assert plan.jit["inlining"] is True and plan.jit["optimization"] is True


def test_a_truncated_live_plan_is_refused(conn):
    text = "\n".join(r[0] for r in conn.execute("EXPLAIN " + QUERY))
    with pytest.raises(ExplainParseError):
        parse_plan(text[: len(text) // 2] + "\n  ->  garbage (((")
    assert isinstance(parse_plan(text).nodes, pl.DataFrame)


def test_the_one_plan_capture(conn):
    """db.explain_json and db.plan_shape, what the studies' plan captures call: ANALYZE (runs the statement) or
    plan-only, a trailing ';' taken off, and a failing statement recorded (record_error) or raised."""
    import psycopg

    from pglab.core.servers.db import explain_json, plan_shape

    analyzed = explain_json(conn, QUERY + ";", verbose=True)
    planned = explain_json(conn, QUERY, analyze=False)
    assert "Execution Time" in analyzed[0] and "Execution Time" not in planned[0]
    assert gather_workers(parse_plan(planned))["workers_planned"][0] == 2
    assert "Gather" in plan_shape(conn, QUERY) and "cost=" not in plan_shape(conn, QUERY)
    failed = explain_json(conn, "SELECT * FROM no_such_table", record_error=True)
    assert list(failed) == ["error"] and "no_such_table" in failed["error"]
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on
    with pytest.raises(psycopg.errors.UndefinedTable):
        explain_json(conn, "SELECT * FROM no_such_table")

"""`<stage>_measurements` (issue 14): every stage's raw measurements with the same leading columns."""

import polars as pl

from pglab.core.run import measurements
from pglab.core.store import RunStore

LEADING = ["run", "server", "study", "condition", "round", "metric", "value", "unit"]


def test_one_shape_for_every_record_and_a_cpu_metric_beside_the_time(tmp_path):
    store = RunStore("quick-20260101-000000", tmp_path)
    store.record("pg15", "jit_operators", "off", "avg", 0, 0.2, "s", warmup=True, round=0, cpu_ms=199.0)
    store.record("pg15", "jit_operators", "on", "avg", 0, 0.18, "s", round=1, cpu_ms=179.5)
    store.record("pg15", "jit_operators", "on", "sum", 0, None, "s", round=1, error="timeout")
    store.record("pg18", "pgbench_select_only", "s10", "select-only", 0, 5123.4, "tps", round=1)
    store.record("pg18", "pgbench_init", "s10", "init", 0, 2.5, "s")  # a load has no round
    jit = measurements.table(store, "jit_operators", ["jit_operators"])
    assert jit.columns[: len(LEADING)] == LEADING and jit.schema == pl.Schema(measurements.SCHEMA)
    assert jit.select("condition", "item", "metric", "value", "unit", "warmup").rows() == [
        ("off", "avg", "time", 0.2, "s", True),
        ("off", "avg", "cpu time", 199.0, "ms", True),
        ("on", "avg", "time", 0.18, "s", False),
        ("on", "avg", "cpu time", 179.5, "ms", False),
        ("on", "sum", "time", None, "s", False),
        ("on", "sum", "cpu time", None, "ms", False),
    ]
    pgb = measurements.table(store, "pgbench", ["pgbench_init", "pgbench_select_only", "pgbench_scaling"])
    assert pgb.select("experiment", "metric", "unit", "round").rows() == [
        ("pgbench_init", "time", "s", None),
        ("pgbench_select_only", "throughput", "tps", 1),
    ]
    assert set(pgb["run"]) == {"quick-20260101-000000"} and set(pgb["study"]) == {"pgbench"}
    assert measurements.table(store, "partitioning", ["partitioning"]) is None

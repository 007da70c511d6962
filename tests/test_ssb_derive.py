"""ssb_measurements holds the loads notebook 10 made and no other: a later study (the index builds) loads SSB at
SF 1 into pg15, which notebook 10 loaded at SF 10, after notebook 20 wrote the table, and `pglab derive` must give
what the notebook wrote (the reference's re-derivation had 12 rows more). No server: the raw store alone."""

from pglab.core.run import measurements
from pglab.core.store import RunStore
from pglab.datasets.ssb import stage
from pglab.datasets.ssb.load import LoadResult
from pglab.studies.ssb import derive


def _load(run_id: str, server: str, sf: float) -> LoadResult:
    dataset = {"sf": sf, "seed": 1, "generator_version": 2, "flavor": "dbgen"}
    tables = [{"table": "date", "rows": 2556, "seconds": 0.01, "table_bytes": 344064}]
    return LoadResult(server, f"ssb_sf{sf:g}", dataset, False, "copy_freeze", tables, 0.02, 0.01, run_id=run_id)


def test_measurements_keep_notebook_10s_loads_and_not_a_later_studys(tmp_path):
    store = RunStore("default-20261128-000000", root=tmp_path)
    mine = [_load(store.run_id, "pg15", 10), _load(store.run_id, "pg16", 1)]
    for r in mine:  # notebook 10: the measurement and its row of the load table
        stage.record_load(store, r)
    derive.record_load(store, mine)
    for r in (_load(store.run_id, "pg15", 1), _load(store.run_id, "pg18", 1)):  # the index builds' own loads
        stage.record_load(store, r)

    every = measurements.table(store, "ssb", [stage.EXP_LOAD])
    assert every.height == 8  # four loads, each a table and "all"
    kept = derive.own_loads(store, every)
    got = sorted(set(zip(kept["server"], kept["condition"], strict=True)))
    assert got == [("pg15", "sf=10,seed=1,copy_freeze"), ("pg16", "sf=1,seed=1,copy_freeze")]

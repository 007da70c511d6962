"""The SSB loader on real servers: row counts, integrity, the dataset record, skip / replace, safety on
external servers, and the filter factors of the 13 queries measured on loaded data."""

import psycopg
import pytest

from pglab import params
from pglab.core.servers import servers
from pglab.core.servers.servers import DestructiveStepRefused, Server
from pglab.datasets import ssb
from pglab.datasets.ssb import selectivity as ssb_selectivity
from pglab.datasets.ssb.load import current_dataset, database_name, load

SF = 0.01


@pytest.fixture(scope="module")
def server(cluster):
    srv = Server(cluster.name, install=cluster.install, cluster=cluster)
    res = load(srv, SF, 7, prewarm=True)
    assert not res.skipped or current_dataset(srv, database_name(SF)) == ssb.dataset_id(SF, 7)
    return srv


def test_tables_hold_the_generated_rows(server):
    with server.connect(database_name(SF)) as conn:
        for table in ssb.TABLES:
            n = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            if table == "lineorder":
                assert 4 * ssb.order_count(SF) * 0.9 < n < 4 * ssb.order_count(SF) * 1.1
                assert n == ssb.row_count("lineorder", SF, 7)
            else:
                assert n == ssb.row_count(table, SF)


def test_every_lineorder_key_exists_in_its_dimension(server):
    checks = {
        "customer": "NOT EXISTS (SELECT 1 FROM customer WHERE c_custkey = lo_custkey)",
        "part": "NOT EXISTS (SELECT 1 FROM part WHERE p_partkey = lo_partkey)",
        "supplier": "NOT EXISTS (SELECT 1 FROM supplier WHERE s_suppkey = lo_suppkey)",
        "date": "NOT EXISTS (SELECT 1 FROM date WHERE d_datekey = lo_orderdate)",
        "commit date": "NOT EXISTS (SELECT 1 FROM date WHERE d_datekey = lo_commitdate)",
    }
    with server.connect(database_name(SF)) as conn:
        for name, cond in checks.items():
            orphans = conn.execute(f"SELECT count(*) FROM lineorder WHERE {cond}").fetchone()[0]
            assert orphans == 0, f"{orphans} lineorder rows point to no {name}"


def test_loaded_filter_factors_match_the_rules(server):
    sel = ssb_selectivity.measure(server, SF, "pg_ssb_run", list(ssb.QUERY_IDS))
    print(sel.select("query", "passing_rows", "measured", "expected_given_dims", "expected", "tolerance"))
    assert sel.height == 13
    bad = sel.filter(~sel["within_tolerance"])
    assert bad.is_empty(), bad


def test_same_dataset_is_skipped_and_another_replaces_it(server):
    again = load(server, SF, 7, prewarm=False)
    assert again.skipped
    other = load(server, SF, 8, prewarm=False)
    assert not other.skipped and current_dataset(server, database_name(SF))["seed"] == 8
    with server.connect(database_name(SF)) as conn:
        n = conn.execute("SELECT count(*) FROM lineorder").fetchone()[0]
    assert n == ssb.row_count("lineorder", SF, 8)
    load(server, SF, 7, prewarm=False)  # back, for the other tests of this module


def _rows_and_revenue(blocks) -> tuple[int, int]:
    """Rows and sum(lo_revenue), the 13th column, of generated COPY text blocks."""
    lines = [ln for _, b in blocks for ln in b.splitlines()]
    return len(lines), sum(int(ln.split(b"\t")[12]) for ln in lines)


def test_the_flavor_is_part_of_the_dataset_and_another_flavor_replaces_it(server):
    spec = load(server, SF, 7, prewarm=False, flavor="spec")  # same SF and seed, the other generator
    assert not spec.skipped and current_dataset(server, database_name(SF)) == ssb.dataset_id(SF, 7, "spec")
    want = {f: _rows_and_revenue(ssb.iter_blocks("lineorder", SF, 7, flavor=f)) for f in ssb.FLAVORS}
    assert want["spec"] != want["dbgen"]

    def held() -> tuple[int, int]:
        with server.connect(database_name(SF)) as conn:
            return tuple(conn.execute("SELECT count(*), sum(lo_revenue) FROM lineorder").fetchone())

    assert held() == want["spec"]  # what the spec generator makes, not dbgen's rows
    assert load(server, SF, 7, prewarm=False, flavor="spec").skipped
    back = load(server, SF, 7, prewarm=False)  # dbgen, the default: loaded anew, for the other tests
    assert not back.skipped and current_dataset(server, database_name(SF)) == ssb.dataset_id(SF, 7)
    assert held() == want["dbgen"]


def test_external_server_needs_allow_destructive(tmp_path, cluster, server):
    f = tmp_path / "ext.yaml"
    f.write_text(f"servers: {{use: [ext], external: [{{name: ext, dsn: '{cluster.conninfo()}'}}]}}\n")
    ext = servers.select(params.load(f))[0]
    with pytest.raises(DestructiveStepRefused):
        load(ext, SF, 9, prewarm=False)  # would drop the kit's ssb database through the dsn: refused
    assert current_dataset(ext, database_name(SF))["seed"] == 7
    # loading what it already holds needs no destruction and is allowed
    assert load(ext, SF, 7, prewarm=False).skipped


def test_an_interrupted_load_is_not_taken_for_a_complete_one(server, embedded):
    """The dataset record is written in the same transaction as the last table: a load cut short leaves
    no record, so the next load starts over instead of skipping."""
    with server.connect(database_name(SF)) as conn:
        conn.execute("DELETE FROM pglab_dataset")
    assert current_dataset(server, database_name(SF)) is None
    assert not load(server, SF, 7, prewarm=False).skipped


def test_missing_database_means_no_dataset(server):
    assert current_dataset(server, "ssb_sf_no_such") is None
    with pytest.raises(psycopg.OperationalError):
        server.connect("ssb_sf_no_such")


def _last_analyze(server, table="lineorder"):
    with server.connect(database_name(SF)) as conn:
        return conn.execute("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = %s", (table,)).fetchone()[0]


def test_rows_come_from_the_load_not_from_estimates(server):
    """Rows as each COPY reported them, kept with the dataset: a skipped load reports the same counts."""
    fresh = load(server, SF, 7, prewarm=False, force=True)
    expected = {t: ssb.row_count(t, SF, 7) if t == "lineorder" else ssb.row_count(t, SF) for t in ssb.TABLES}
    assert {t["table"]: t["rows"] for t in fresh.tables} == expected
    with server.connect(database_name(SF)) as conn:
        conn.execute("UPDATE pg_class SET reltuples = 0 WHERE relname = 'lineorder'")  # a wrong estimate
    again = load(server, SF, 7, prewarm=False)
    assert again.skipped and {t["table"]: t["rows"] for t in again.tables} == expected
    load(server, SF, 7, prewarm=False, force=True)  # real statistics back for the other tests


def test_a_load_cut_before_its_analyze_is_only_analysed_on_resume(server):
    """Marked complete only after VACUUM (ANALYZE): a load interrupted in between keeps its tables and COPY
    times, and the next load runs the ANALYZE it missed instead of skipping it."""
    first = load(server, SF, 7, prewarm=False, force=True, run_id="run-a")
    with server.connect(database_name(SF)) as conn:
        conn.execute("UPDATE pglab_dataset SET complete = false")
        conn.execute("SELECT pg_stat_reset()")  # forget the ANALYZE, as if it had never run
    assert current_dataset(server, database_name(SF)) is None
    assert _last_analyze(server) is None
    resumed = load(server, SF, 7, prewarm=False, run_id="run-b")
    assert not resumed.skipped and resumed.run_id == "run-a"  # the COPY times are run-a's
    assert [t["seconds"] for t in resumed.tables] == [t["seconds"] for t in first.tables]
    assert _last_analyze(server) is not None
    assert current_dataset(server, database_name(SF)) == ssb.dataset_id(SF, 7)
    assert load(server, SF, 7, prewarm=False).skipped


def test_each_load_is_recorded_by_the_run_that_made_it_even_after_a_crash(server, tmp_path):
    """A run killed between a server's load and its record records it on the rerun (the database keeps the
    run id with the figures); another run finding the dataset there records nothing."""
    from pglab.core.store import RunStore
    from pglab.datasets.ssb import stage as ssb_stage
    from pglab.studies.ssb.params import SsbParams

    load(server, SF, 7, prewarm=False, force=True, run_id="crashed-run")  # loaded, then killed: no record
    p = SsbParams(sf=SF, seed=7, prewarm=False)
    store = RunStore("crashed-run", root=tmp_path)
    res = ssb_stage.load_all([server], p, store)
    assert res[0].skipped
    recs = store.records("ssb_load")
    assert sorted(recs["item"]) == sorted([*ssb.TABLES, "all"]) and recs["value"].null_count() == 0
    lineorder = recs.filter(recs["item"] == "lineorder")
    assert lineorder["rows"][0] == ssb.row_count("lineorder", SF, 7)
    ssb_stage.load_all([server], p, store)  # again: nothing twice
    assert store.records("ssb_load").height == recs.height
    other = RunStore("another-run", root=tmp_path)
    ssb_stage.load_all([server], p, other)
    assert other.records("ssb_load").is_empty()


def test_an_external_server_that_may_not_load_is_a_recorded_skip(tmp_path, cluster, server):
    from pglab.core.run import outcomes
    from pglab.core.store import RunStore
    from pglab.datasets.ssb import stage as ssb_stage
    from pglab.studies.ssb.params import SsbParams

    f = tmp_path / "ext.yaml"
    f.write_text(f"servers: {{use: [ext], external: [{{name: ext, dsn: '{cluster.conninfo()}'}}]}}\n")
    ext = servers.select(params.load(f))[0]
    store = RunStore("skip-run", root=tmp_path)
    res = ssb_stage.load_all([ext], SsbParams(sf=SF, seed=9, prewarm=False), store)
    assert res[0].refused and ssb_stage.holding([ext], res) == []
    skips = outcomes.skipped(store, ["ssb_load"])
    assert skips["server"].to_list() == ["ext"] and "allow_destructive" in skips["reason"][0]
    assert current_dataset(ext, database_name(SF))["seed"] == 7  # untouched

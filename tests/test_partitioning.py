"""Study S5 (hash partitioning and Parallel Append) on every install, small: the plans' shapes read from the
parsed EXPLAIN (Parallel Append under Gather in parallel, an Append of Seq Scans serially), identical data on
every server by checksum, results that agree across servers and worker counts, the tablespaces option, and
the report section on the derived tables of this run."""

import json
import shutil
import uuid

import polars as pl
import pytest
import yaml
from psycopg import sql

from pglab import params
from pglab.core import derived
from pglab.core.config import ExternalServer
from pglab.core.derived import Tables
from pglab.core.run import session
from pglab.core.servers.osuser import server_user
from pglab.core.servers.servers import Server, select
from pglab.core.stats import findings
from pglab.core.store import RunStore
from pglab.params import ParamsError
from pglab.pgtools import environment
from pglab.pgtools.explain import parse_plan
from pglab.studies.partitioning import derive as pres
from pglab.studies.partitioning import plans as pplans
from pglab.studies.partitioning import report as report
from pglab.studies.partitioning.params import PartitioningParams
from pglab.studies.partitioning.prepare import Prepared, TablespaceRefused, layout, prepare_all
from pglab.studies.partitioning.run import (
    DataChanged,
    check_locations,
    check_same_data,
    plan_path,
    run_stage,
    store_setup,
)

ROWS = 300_000  # six partitions of ~4 MB: still planned in parallel, loaded in about a second
PROFILE = "pytest-part"
DECOY_TABLESPACE = "pglabxpartx0"  # what LIKE 'pglab_part_%' matches too ('_' is a wildcard): not the kit's


def _plant_decoys(x: Server, dbname: str) -> None:
    """Objects the stage must leave alone: a table t in the schema named after the connecting role (first on
    the default search_path) and a tablespace whose name only looks like the kit's. public.t is dropped so
    that the stage runs its drop / create / load path."""
    d = x.cluster.path / "decoy_ts"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    x.cluster.run_as.chown(d)
    with x.connect() as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        if not conn.execute("SELECT 1 FROM pg_tablespace WHERE spcname = %s", (DECOY_TABLESPACE,)).fetchone():
            conn.execute(
                sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                    sql.Identifier(DECOY_TABLESPACE), sql.Literal(str(d))
                )
            )
    with x.connect(dbname) as conn:
        user = sql.Identifier(conn.info.user)
        conn.execute("DROP TABLE IF EXISTS public.t")
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(user))
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {}.t (decoy int)").format(user))


def _decoys_left(x: Server, dbname: str) -> dict:
    """Whether the decoys survived, then remove them."""
    with x.connect(dbname) as conn:
        table = conn.execute("SELECT to_regclass(format('%I.t', current_user)) IS NOT NULL").fetchone()[0]
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(conn.info.user)))
    with x.connect() as conn:
        ts = conn.execute("SELECT count(*) FROM pg_tablespace WHERE spcname = %s", (DECOY_TABLESPACE,)).fetchone()[0]
        conn.execute(sql.SQL("DROP TABLESPACE IF EXISTS {}").format(sql.Identifier(DECOY_TABLESPACE)))
    shutil.rmtree(x.cluster.path / "decoy_ts", ignore_errors=True)
    return {"table": table, "tablespace": ts == 1}


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("part")
    # max_worker_processes too low for 2 workers (+2 spare): the stage must raise it, and put it back after
    doc = {
        "profile": PROFILE,
        "settings": {"shared_buffers": "128MB", "jit": False, "max_worker_processes": 3},
        "partitioning": {
            "rows": ROWS,
            "max_workers": 2,
            "repetitions": 2,
            "warmups": 1,
            "tablespaces": {"enabled": True},
        },
    }
    f = tmp / "part.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    # fresh: never resume an old run
    s = session.begin(params.load(str(f)), run_id=f"pytest-part-{uuid.uuid4().hex[:8]}")
    s.start()
    root = tmp / "derived"
    try:
        for x in s.servers:
            _plant_decoys(x, s.params.partitioning.database)
        result = run_stage(s)
        after, decoys = {}, {}
        for x in s.servers:
            with x.connect() as conn:
                after[x.name] = int(conn.execute("SHOW max_worker_processes").fetchone()[0])
            decoys[x.name] = _decoys_left(x, s.params.partitioning.database)
        tables = pres.tables(s.store, s.params.partitioning, result.servers, result.seen["preps"])
        derived.write(tables, PROFILE, root=root)
        servers = pl.from_dicts([environment.server(x)[0] for x in s.servers], infer_schema_length=None)
        derived.write_table(servers, "environment_servers", PROFILE, root=root)
        clusters = {x.name: x.cluster for x in s.servers}
    finally:
        s.close()
    return s, result, tables, root, clusters, after | {"decoys": decoys}


def test_plan_shapes_from_the_parsed_plans(stage):
    s, result, tables, _, _, _ = stage
    plans = tables["partitioning_plans"]
    assert plans.height == len(s.servers) * 3 and plans["error"].null_count() == plans.height
    serial = plans.filter(allowed_workers=0)
    parallel = plans.filter(pl.col("allowed_workers") > 0)
    assert serial["append_of_seq_scans"].all() and not serial["parallel_append_under_gather"].any()
    assert (serial["gathers"] == 0).all() and (serial["seq_scans"] == 6).all()
    assert parallel["parallel_append_under_gather"].all() and not parallel["append_of_seq_scans"].any()
    assert (parallel["parallel_seq_scans"] == 6).all()
    # workers planned per Gather, and as PostgreSQL's rule predicts from the partition sizes
    assert parallel["workers_planned"].to_list() == parallel["allowed_workers"].to_list()
    assert parallel["workers_planned"].to_list() == parallel["predicted_workers"].to_list()
    assert (parallel["workers_launched"] >= 1).all()
    assert tables["partitioning_gathers"].height == parallel.height
    # the checks read the node tree: the serial plan fails the parallel check and the reverse
    for server in result.servers:
        doc = s.store.artifact_path(plan_path(server, "serial") + ".json").read_text()
        nodes = parse_plan(json.loads(doc)["plan"]).nodes
        assert pplans.check(nodes, 6)["append_of_seq_scans"] and not pplans.check(nodes, 7)["append_of_seq_scans"]
    planner = tables["partitioning_planner"]
    assert (planner["workers_planned"] == 3).all() and (planner["predicted_workers"] == 3).all()
    assert (planner["study_predicted_workers"] == 7).all()
    # the plan-only EXPLAIN with the scan threshold scaled to our partitions: the planner follows the rule there too
    for r in planner.iter_rows(named=True):
        pages = [r["max_partition_pages"]] * r["partitions"]
        assert r["scaled_threshold_pages"] >= 1
        assert r["scaled_workers_planned"] == pplans.append_workers(pages, r["scaled_threshold_pages"], 100), r


def test_worker_limits_raised_for_the_stage_then_reset(stage):
    s, _, tables, _, _, after = stage
    setup = tables["partitioning_setup"]
    assert set(setup["configure_status"]) == {"restarted"}
    assert (setup["max_worker_processes"] == 4).all() and set(setup["configured"]) == {'{"max_worker_processes": 4}'}
    assert {k: v for k, v in after.items() if k != "decoys"} == {x.name: 3 for x in s.servers}


def test_only_the_kits_own_table_and_tablespaces_are_dropped(stage):
    s, result, tables, _, _, after = stage
    # the load ran (public.t was dropped before the stage), yet "$user".t and the look-alike tablespace are there
    assert set(tables["partitioning_setup"]["loaded_now"]) == {True}
    assert after["decoys"] == {x.name: {"table": True, "tablespace": True} for x in s.servers}
    # and the timed query read public.t, not the decoy first on the search_path
    assert set(tables["partitioning_executions"]["count"]) != {0}


def test_warm_cache(stage):
    _, _, tables, _, _, _ = stage
    pages = tables["partitioning_partitions"].group_by("server").agg(pl.col("pages").sum())
    prewarmed = tables["partitioning_setup"].select("server", "prewarmed_blocks").join(pages, on="server")
    assert (prewarmed["prewarmed_blocks"] == prewarmed["pages"]).all()  # every block of every partition
    assert (tables["partitioning_plans"]["shared_read_blocks"] == 0).all()  # all from shared buffers


def test_identical_data_on_every_server(stage):
    s, _, tables, _, _, _ = stage
    setup = tables["partitioning_setup"]
    assert setup["skipped"].null_count() == setup.height == len(s.servers)
    assert (setup["rows"] == ROWS).all() and setup["data_checksum"].n_unique() == 1
    parts = tables["partitioning_partitions"]
    per_partition = parts.group_by("partition").agg(pl.col("checksum").n_unique(), pl.col("rows").n_unique())
    assert (per_partition["checksum"] == 1).all() and (per_partition["rows"] == 1).all()
    assert parts.filter(server=s.servers[0].name)["rows"].sum() == ROWS
    assert (setup["prewarmed_blocks"] > 0).all() and setup["fits_in_shared_buffers"].all()


def test_results_agree_across_servers_and_worker_counts(stage):
    s, _, tables, _, _, _ = stage
    execs = tables["partitioning_executions"]
    assert execs.height == len(s.servers) * 4 * (2 + 1) and execs["error"].null_count() == execs.height
    assert execs["count"].n_unique() == 1 and 0.45 * ROWS < execs["count"][0] < 0.55 * ROWS
    avg = execs["avg"]
    assert (avg.max() - avg.min()) / avg.mean() < 1e-9 and 45 < avg.mean() < 55


def test_tablespaces_put_each_partition_in_its_own_directory(stage):
    _, _, tables, _, clusters, _ = stage
    uid = server_user().uid
    for server, cluster in clusters.items():
        parts = tables["partitioning_partitions"].filter(server=server).sort("remainder")
        assert parts["tablespace"].n_unique() == parts["location"].n_unique() == 6
        for r in parts.iter_rows(named=True):
            loc = cluster.path / "tablespaces" / f"part_{r['remainder']}"
            assert r["location"] == str(loc) and loc.stat().st_uid == uid
            data_file = (cluster.data / r["filepath"]).resolve()
            assert data_file.is_relative_to(loc) and data_file.stat().st_size == r["bytes"] > 0


def test_tablespaces_refused_on_an_external_server_unless_named(tmp_path):
    p = PartitioningParams(tablespaces={"enabled": True})
    ext = Server(
        name="lab", external=ExternalServer(name="lab", dsn="host=/nonexistent dbname=x", allow_destructive=True)
    )
    with pytest.raises(TablespaceRefused, match=r"partitioning\.tablespaces\.locations\.lab"):
        prepare_all([ext], p)  # refused before any connection is tried
    named = PartitioningParams(tablespaces={"enabled": True, "locations": {"lab": ["/a", "/b", "/c"]}})
    places = layout(ext, named)
    assert [x.location for x in places] == ["/a", "/b", "/c", "/a", "/b", "/c"]  # the study's 3 for 6
    assert len({x.tablespace for x in places}) == 3
    assert {x.tablespace for x in layout(ext, PartitioningParams())} == {None}


def test_a_resumed_run_refuses_other_data(tmp_path):
    store = RunStore("resume", root=tmp_path)
    store_setup(store, Prepared("pg18", data_checksum="aaaa", rows=1000))
    check_same_data(store, Prepared("pg18", data_checksum="aaaa", rows=1000))  # the same data: fine
    with pytest.raises(DataChanged, match="Start a new run"):
        check_same_data(store, Prepared("pg18", data_checksum="bbbb", rows=2000))


@pytest.mark.parametrize(
    "section, expected",
    [
        ({"rows": 10}, r"partitioning.rows: .*greater than or equal to 1000"),
        ({"workers": 2}, r"partitioning.workers: unknown key"),
        (
            {"tablespaces": {"enabled": True, "locations": {"pg18": ["rel/dir"]}}},
            r"partitioning.tablespaces.locations: expected absolute directories",
        ),
        ({"seed": 2}, r"partitioning.seed: .*less than or equal to 1"),
        ({"database": "postgres"}, r"partitioning.database: expected a database of the kit's own"),
        ({"database": "template1"}, r"partitioning.database: expected a database of the kit's own"),
    ],
)
def test_params_errors(tmp_path, section, expected):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"partitioning": section}))
    with pytest.raises(ParamsError, match=expected):
        params.load(f, check_servers=False)


def test_tablespace_locations_name_known_servers(tmp_path, installs):
    def session_with(locations: dict, use="all") -> session.Session:
        f = tmp_path / "loc.yaml"
        tablespaces = {"enabled": True, "locations": locations}
        f.write_text(yaml.safe_dump({"servers": {"use": use}, "partitioning": {"tablespaces": tablespaces}}))
        p = params.load(f, check_servers=False)
        return session.Session(params=p, store=RunStore("loc", root=tmp_path), servers=select(p, installs))

    names = sorted(i.name for i in installs)
    s = session_with({"pg99": ["/a"]})
    with pytest.raises(
        ParamsError,
        match=rf"loc\.yaml: partitioning\.tablespaces\.locations: expected server "
        rf"names among \{names}; got unknown \['pg99'\]",
    ):
        run_stage(s)  # refused before any server is touched (none of them is running)
    # servers.use narrows the servers, not the names params may speak of
    check_locations(s := session_with({n: ["/a"] for n in names}, use=[names[0]]), s.params.partitioning)


def test_report_section_on_the_derived_tables(stage):
    s, _, _, root, _, _ = stage
    f = report.findings(Tables(PROFILE, root))
    assert set(f["verdict"]) <= set(findings.VERDICTS) and f.height > 0
    assert f["study"].unique().to_list() == ["S5"]
    by = {(r["finding"], r["server"]): r["verdict"] for r in f.iter_rows(named=True)}
    for x in s.servers:
        for finding in ("serial_plan", "parallel_plan", "workers_planned", "even_spread"):
            assert by[(finding, x.name)] == findings.SUPPORTED, (finding, x.name)
        assert by[("speedup", x.name)] == findings.NOT_TESTABLE  # the study's 5.7×: three drives, cold
        assert ("cpu_speedup", x.name) in by
    assert by[("results_agree", "all")] == findings.SUPPORTED
    assert by[("io_parallelism", "all")] == findings.NOT_TESTABLE
    nz = derived.read_table("partitioning_noise", PROFILE, root=root)
    per = nz.filter(pl.col("server") != "all")  # "all": every server's pairs, the floor of one with too few
    assert sorted(per["server"]) == sorted(x.name for x in s.servers) and (per["n_pairs"] == 1).all(), nz
    assert nz.filter(server="all")["n_pairs"].to_list() == [len(s.servers)], nz
    assert "A/A control" in report.method(Tables(PROFILE, root))
    text = report.method(Tables(PROFILE, root))
    assert text == report.method(Tables(PROFILE, root)) and f.equals(report.findings(Tables(PROFILE, root)))
    for x in s.servers:
        assert f"{x.name} (PostgreSQL {x.install.major}." in text
    assert "identical on every server" in text
    charts = report.charts(Tables(PROFILE, root))
    assert 1 <= len(charts) <= 4
    for c in charts:
        c.to_dict()


def _synthetic_execs(parallel_factor: float, rounds: int = 12, jitter: float = 0.03) -> pl.DataFrame:
    """Known truth: serial 1 s, serial_aa the same, workers=2 at `parallel_factor` of it, each round's level
    moved by up to ±30 % (drift that pairing must cancel) and each value by ±jitter."""
    import random

    rng = random.Random(5)
    rows = []
    for r in range(rounds):
        level = 1 + 0.3 * rng.uniform(-1, 1)
        for cond, f in (("serial", 1.0), ("serial_aa", 1.0), ("workers=2", parallel_factor)):
            rows.append(
                {
                    "server": "pg18",
                    "condition": cond,
                    "round": r + 1,
                    "warmup": False,
                    "error": None,
                    "seconds": level * f * (1 + jitter * rng.uniform(-1, 1)),
                }
            )
    return pl.from_dicts(rows)


@pytest.mark.parametrize(
    "factor, cores, verdict, words",
    [
        (0.6, 2, findings.SUPPORTED, "is lower"),  # 1.67× on 2 cores: faster, within the ceiling
        (1.0, 2, findings.CONTRADICTED, "no noticeable effect"),  # no gain: a claim of a gain, refuted
        (1.3, 2, findings.CONTRADICTED, "shows the opposite"),  # slower in parallel
        (0.2, 2, findings.UNDETERMINED, "above the physical ceiling"),  # 5× on 2 cores: a measurement problem
    ],
)
def test_cpu_speedup_paired_with_the_ceiling_flag(factor, cores, verdict, words):
    from pglab.studies.partitioning import verdicts as pv

    t = pv.tables(_synthetic_execs(factor))
    nz = t["partitioning_noise"].filter(server="pg18").row(0, named=True)
    assert nz["n_pairs"] == 1 and nz["floor"] < 0.1  # the round-level drift of ±30 % cancels in the pairs
    plans = pl.DataFrame({"server": ["pg18"], "condition": ["workers=2"], "workers_planned": [2]})
    row = pv.cpu_speedup(t["partitioning_paired"], plans, t["partitioning_noise"], "pg18", cores)
    assert row["verdict"] == verdict and words in row["evidence"], row["evidence"]
    assert row["our_value"] == pytest.approx(factor, rel=0.05) and row["interval"].startswith("95 % bootstrap")

"""Parallel index build (study S4 test C) on real servers, SSB SF 0.05 (lineorder big enough for 2 workers):
every cell recorded with its warm-up, the workers the server planned and launched really observed (and told
apart), the index built with the asked-for key and gone afterwards, external servers refused, and the report
section working on the derived data of the run."""

import logging

import polars as pl
import pytest
from conftest import ssb_servers
from pydantic import ValidationError

from pglab import params
from pglab.core import derived
from pglab.core.config import ExternalServer
from pglab.core.derived import Tables
from pglab.core.servers.servers import DestructiveStepRefused, Server
from pglab.core.stats import findings as fnd
from pglab.core.store import RunStore
from pglab.datasets.ssb.load import database_name
from pglab.params import ParamsError
from pglab.studies.parallel_index import derive as pires
from pglab.studies.parallel_index import report as report
from pglab.studies.parallel_index import run as pirun
from pglab.studies.parallel_index.build import INDEX, build
from pglab.studies.parallel_index.params import ParallelIndexParams, build_memory, with_overrides
from pglab.studies.ssb.params import SsbParams

SSB = SsbParams(sf=0.05, seed=7, prewarm=False)
P = ParallelIndexParams(
    column_counts=[1, 4], worker_counts=[0, 2], maintenance_work_mem="96MB", repetitions=2, warmups=1, shuffle_seed=3
)
DB = database_name(SSB.sf)
KEY4 = ["lo_orderkey", "lo_custkey", "lo_partkey", "lo_suppkey"]


@pytest.fixture(scope="module")
def servers(installs):
    settings = {"shared_buffers": "128MB", "max_worker_processes": 8} | SSB.stage_settings
    with ssb_servers(installs, "pidx", SSB.sf, SSB.seed, settings) as out:
        yield out


@pytest.fixture(scope="module")
def run(servers, tmp_path_factory):
    store = RunStore("pidx", root=tmp_path_factory.mktemp("raw"))
    setup = pirun.setup(servers, SSB, P, store)
    ran = pirun.run(servers, SSB, P, store)
    return store, setup, ran


def _indexes(srv) -> list[str]:
    with srv.connect(DB) as conn:
        return [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'lineorder'")]


def test_every_cell_recorded_with_warmups_interleaved(run, servers):
    store, _, ran = run
    b = pires.builds(store)
    cells = len(servers) * 2 * 2
    aa = len(servers) * 2  # the A/A copy of each key's serial build, kept out of the builds table
    assert b.height == cells * (P.repetitions + P.warmups) and ran == (cells + aa) * (P.repetitions + P.warmups)
    assert b.filter("warmup").height == cells
    conds = set(store.records("parallel_index")["condition"])
    assert conds == {"workers=0", "workers=2", "workers=0_aa"}
    assert b["error"].is_null().all() and (b["seconds"] > 0).all()
    # round robin: every cell's repetition 0 is recorded before any repetition 1
    timed = store.records("parallel_index").filter(~pl.col("warmup")).sort("ts")
    assert set(timed["repetition"].head(cells + aa)) == {0}


def test_workers_observed_never_exceed_what_was_allowed(run):
    store, setup, _ = run
    b = pires.builds(store)
    assert b["planned_workers"].is_not_null().all() and b["launched_workers"].is_not_null().all()
    assert (b["launched_workers"] <= b["planned_workers"]).all()
    assert (b["planned_workers"] <= b["workers"]).all()
    serial = b.filter(pl.col("workers") == 0)
    assert (serial["planned_workers"] == 0).all() and (serial["launched_workers"] == 0).all()
    # lineorder at SF 0.05 is big enough for 2 workers, and the slots are free: all of them ran
    par = b.filter(pl.col("workers") == 2)
    assert (par["launched_workers"] == 2).all(), par
    # maintenance_work_mem of the session is what the sort got, shared among the 3 participants
    assert set(serial["participant_mem_kb"]) == {96 * 1024}
    assert set(par["participant_mem_kb"]) == {96 * 1024 // 3}
    assert set(setup["maintenance_work_mem"]) == {"96MB"} and set(setup["wal_level"]) == {"minimal"}
    # the serial sort fits in memory; a parallel one passes its runs to the leader through temporary files
    assert set(serial["sort"]) == {"internal sort"} and (serial["spill_kb"] == 0).all()
    assert set(par["sort"]) == {"parallel external sort"} and (par["spill_kb"] > 0).all()


def test_the_index_built_has_the_asked_for_key_and_is_gone_afterwards(run, servers):
    store, _, _ = run
    b = pires.builds(store)
    want = {1: "lo_orderkey", 4: ",".join(KEY4)}
    assert all(r["index_columns"] == want[r["key_columns"]] for r in b.iter_rows(named=True))
    for srv in servers:
        assert _indexes(srv) == []
    srv = servers[0]
    rec, _ = build(srv, DB, KEY4[:2], 1, "64MB", keep=True)
    try:
        defs = _indexes(srv)
        assert len(defs) == 1 and INDEX in defs[0] and defs[0].endswith("(lo_orderkey, lo_custkey)"), defs
        assert rec["value"] > 0 and rec["index_columns"] == "lo_orderkey,lo_custkey" and rec["index_bytes"] > 0
    finally:
        build(srv, DB, ["lo_orderkey"], 0, "64MB")  # drops the kept index first, and its own afterwards
    assert _indexes(srv) == []


def test_launched_is_observed_apart_from_planned(servers):
    # no worker slot for this session: the planner still asks for 2, none runs, the leader builds alone
    rec, obs = build(servers[0], DB, ["lo_orderkey"], 2, "96MB", extra_settings={"max_parallel_workers": 0})
    assert (obs.planned, obs.launched) == (2, 0), obs.messages
    assert rec["value"] > 0 and rec["index_columns"] == "lo_orderkey"


def test_an_external_server_is_refused_before_anything_changes(servers, tmp_path):
    srv = servers[0]
    ext = Server("ext", external=ExternalServer(name="ext", dsn=srv.conninfo(DB), allow_destructive=False))
    with pytest.raises(DestructiveStepRefused, match="allow_destructive"):
        pirun.prepare([ext], SSB, P)
    with pytest.raises(DestructiveStepRefused):
        build(ext, DB, ["lo_orderkey"], 0, "64MB")
    assert _indexes(srv) == []


def test_cleanup_spares_servers_it_may_not_touch_and_keeps_the_original_error(servers, tmp_path, caplog):
    srv = servers[0]
    # the kit's index on a kit cluster that params also reach as an external server without allow_destructive
    ext = Server("ext", external=ExternalServer(name="ext", dsn=srv.conninfo(DB), allow_destructive=False))
    gone = Server(
        "gone", external=ExternalServer(name="gone", dsn="host=/nonexistent port=1 dbname=x", allow_destructive=True)
    )
    build(srv, DB, ["lo_orderkey"], 0, "64MB", keep=True)
    try:
        # in the order listed (no shuffle): ext's build is refused first; the cleanup leaves ext alone, cannot
        # reach gone, logs that, and the refusal is what comes out
        p = ParallelIndexParams(column_counts=[1], worker_counts=[0], repetitions=1, warmups=0, shuffle_seed=None)
        with caplog.at_level(logging.WARNING, logger="pglab.studies.parallel_index.run"):
            with pytest.raises(DestructiveStepRefused, match="ext: refusing"):
                pirun.run([ext, gone], SSB, p, RunStore("pidx-cleanup", root=tmp_path))
        assert len(_indexes(srv)) == 1, "the cleanup dropped an index through a server it may not touch"
        assert any("gone: could not drop index" in r.getMessage() for r in caplog.records), caplog.text
        # a server that fails does not stop the cleanup of the next one
        pirun.drop_all([gone, srv], DB)
        assert _indexes(srv) == []
    finally:
        pirun.drop_all([srv], DB)


def test_max_workers_and_worker_counts_are_not_both_taken(tmp_path):
    with pytest.raises(ValidationError, match="max_workers, worker_counts: expected one of the two, not both"):
        ParallelIndexParams(max_workers=2, worker_counts=[0, 1])
    both = tmp_path / "both.yaml"
    both.write_text("parallel_index:\n  max_workers: 2\n  worker_counts: [0, 1]\n")
    with pytest.raises(ParamsError, match=r"both\.yaml: parallel_index: max_workers, worker_counts: expected one"):
        params.load(both, check_servers=False)
    # notebook 60 passes max_workers (None unless set) on top of the params' section
    counts = ParallelIndexParams(worker_counts=[0, 2])
    assert with_overrides(counts, max_workers=None, repetitions=5).workers() == [0, 2]
    assert with_overrides(ParallelIndexParams(), max_workers=3, repetitions=None).workers() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"max_workers=3 and params' parallel_index\.worker_counts \[0, 2\]"):
        with_overrides(counts, max_workers=3)


def test_params_name_the_file_the_key_and_the_expectation(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("parallel_index:\n  column_counts: [1, 5]\n")
    with pytest.raises(ParamsError, match=r"bad\.yaml: parallel_index: column_counts: expected distinct counts"):
        params.load(bad, check_servers=False)
    # a parallel build needs 32 MB per participant: 4 workers + the leader
    assert build_memory(ParallelIndexParams(worker_counts=[0, 4], maintenance_work_mem="128MB")) == "160MB"
    assert build_memory(ParallelIndexParams(worker_counts=[0, 4], maintenance_work_mem="1GB")) == "1GB"
    with pytest.raises(ValidationError, match="memory size"):
        ParallelIndexParams(maintenance_work_mem="lots")
    with pytest.raises(ValidationError, match="column_counts"):
        ParallelIndexParams(column_counts=[5])
    with pytest.raises(ValidationError, match="unknown"):
        ParallelIndexParams(key_columns=["lo_orderkey", "l_orderkey"])
    assert ParallelIndexParams(worker_counts=[2]).workers() == [0, 2]
    assert ParallelIndexParams(max_workers=3).workers() == [0, 1, 2, 3]


def test_report_section_on_the_runs_derived_data(run, servers, tmp_path):
    store, setup, _ = run
    tables = pires.tables(store, cores=2)
    derived.write(tables | {"parallel_index_setup": setup}, "t", root=tmp_path)
    spd = tables["parallel_index_speedup"]
    summ = tables["parallel_index_summary"]
    pair = tables["parallel_index_paired"]
    # the speed-up is the findings' paired ratio inverted, with its interval; the summary's medians beside it
    for r in spd.filter(pl.col("workers") > 0).iter_rows(named=True):
        s = summ.filter(server=r["server"], key_columns=r["key_columns"], workers=r["workers"]).row(0, named=True)
        p = pair.filter(server=r["server"], key_columns=r["key_columns"], workers=r["workers"]).row(0, named=True)
        assert r["speedup"] == pytest.approx(1 / p["ratio"]) and r["ci_low"] == pytest.approx(1 / p["high"])
        assert r["ci_low"] <= r["speedup"] <= r["ci_high"]
        assert (r["median_s"], r["t0_s"]) == pytest.approx((s["median"], s["t0"]))
    assert "verdict" not in spd.columns
    f = report.findings(Tables("t", tmp_path))
    assert set(f["verdict"]) <= set(fnd.VERDICTS)
    assert f.height == 3 * len(servers) and set(f["finding"]) == set(report.ORDER)
    nz = tables["parallel_index_noise"]
    per = nz.filter(pl.col("server") != "all")  # "all": every server's pairs, the floor of one with too few
    assert sorted(per["server"]) == sorted(x.name for x in servers) and (per["n_pairs"] == 2).all()
    assert nz.filter(server="all")["n_pairs"].to_list() == [2 * len(servers)]
    # this run built 1 and 4 key columns: the study's size step 2 -> 3 was not in it
    assert set(f.filter(pl.col("finding") == "size")["verdict"]) == {fnd.NOT_RUN}
    text = report.method(Tables("t", tmp_path))
    for srv in servers:
        assert f"{srv.name} (PostgreSQL {srv.install.major}." in text
    n = pires.builds(store).height
    assert f"{n} of {n} builds observed; launched < planned in 0" in text
    charts = report.charts(Tables("t", tmp_path))
    assert len(charts) == 3 and all(c.to_dict() for c in charts)
    assert report.findings(Tables("t", tmp_path)).equals(f) and report.method(Tables("t", tmp_path)) == text


def _synthetic_store(tmp_path, speedup: float, step: float, rounds: int = 12) -> RunStore:
    """Known truth: serial builds of 2 and 3 key columns at 2 s and 2 s × step, the A/A copy the same,
    2 workers at serial / speedup; each round's level moved by up to ±30 % (drift pairing must cancel)."""
    import random

    rng = random.Random(3)
    store = RunStore("synthetic", root=tmp_path)
    for r in range(rounds):
        level = 1 + 0.3 * rng.uniform(-1, 1)
        for k, base in ((2, 2.0), (3, 2.0 * step)):
            for cond, w, f in (("workers=0", 0, 1.0), ("workers=0_aa", 0, 1.0), ("workers=2", 2, 1 / speedup)):
                store.record(
                    "pg18",
                    "parallel_index",
                    cond,
                    f"columns={k}",
                    r,
                    level * base * f * (1 + 0.01 * rng.uniform(-1, 1)),
                    "s",
                    warmup=False,
                    round=r + 1,
                    workers=w,
                    key_columns=k,
                    index_bytes=k * 2**20,
                )
    return store


@pytest.mark.parametrize(
    "speedup, step, near, size",
    [
        (1.9, 1.5, fnd.SUPPORTED, fnd.SUPPORTED),  # near the ideal 2× on 2 cores; 3 columns take longer
        (1.25, 1.0, fnd.CONTRADICTED, fnd.CONTRADICTED),  # less than a third of the ideal 2×; no size effect at all
        (3.5, 0.7, fnd.UNDETERMINED, fnd.CONTRADICTED),  # above the ceiling of 2 cores: flagged; 3 columns faster
    ],
)
def test_paired_verdicts_on_synthetic_rounds(tmp_path, speedup, step, near, size):
    from pglab.studies.parallel_index import verdicts as piv

    store = _synthetic_store(tmp_path, speedup, step)
    t = piv.tables(store)
    nz = t["parallel_index_noise"].filter(server="pg18").row(0, named=True)
    assert nz["n_pairs"] == 2 and nz["floor"] < 0.05  # the ±30 % between rounds cancels in the pairs
    setup = pl.DataFrame({"server": ["pg18"], "cores": [2]})
    f = piv.findings_from(
        setup,
        pires.builds(store),
        t["parallel_index_paired_suite"],
        t["parallel_index_size_paired"],
        t["parallel_index_noise"],
    )
    by = {r["finding"]: r for r in f.iter_rows(named=True)}
    assert by["time_falls"]["verdict"] == fnd.SUPPORTED
    assert by["near_inverse"]["verdict"] == near, by["near_inverse"]["evidence"]
    assert by["size"]["verdict"] == size, by["size"]["evidence"]
    assert by["near_inverse"]["our_value"] == pytest.approx(1 / speedup, rel=0.02)
    if speedup > 2:
        assert "above the physical ceiling" in by["near_inverse"]["evidence"]
    assert "1.50× the size of 2" in by["size"]["evidence"]


def test_run_stage_does_what_notebook_60_did_and_resumes(servers, tmp_path):
    """STUDY.run on a session whose params carry a notebook's overrides (Session.override): setup, the builds,
    the index gone afterwards; run again, nothing is built twice."""
    from pglab.core.run.session import Session
    from pglab.studies.parallel_index import STUDY

    small = ParallelIndexParams(
        column_counts=[1], worker_counts=[0, 2], maintenance_work_mem="96MB", repetitions=1, warmups=0
    )
    s = Session(params=params.Params(), store=RunStore("pidx-stage", root=tmp_path), servers=list(servers))
    s.override([servers[0].name], ssb=SSB, parallel_index=small)
    result = STUDY.run(s)
    assert result.servers == [servers[0].name] and result.steps_run == 3  # workers 0, 2 and the A/A copy of 0
    assert result.seen["setup"]["server"].to_list() == [servers[0].name]
    assert pires.builds(s.store).height == 2 and _indexes(servers[0]) == []
    before = s.store.file.read_bytes()
    assert STUDY.run(s).steps_run == 0 and s.store.file.read_bytes() == before

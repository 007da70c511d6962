"""The SSB runner on real servers (SF 0.05: the smallest scale whose lineorder is big enough for parallel
plans): every cell recorded, answers agree, plans captured and parsed, JIT
recorded as unavailable where it is, errors recorded, and an interrupted run resumes."""

import polars as pl
import pytest
from conftest import ssb_servers

from pglab.core.store import RunStore
from pglab.studies.ssb import derive as ssb_derive
from pglab.studies.ssb import run as ssb_run
from pglab.studies.ssb.params import SsbParams

P = SsbParams(
    sf=0.05,
    seed=7,
    queries=["q1.1", "q4.3"],
    repetitions=2,
    warmups=1,
    workers=2,
    worker_sweep=[0, 2],
    sweep_repetitions=1,
    statement_timeout_s=30,
)


@pytest.fixture(scope="module")
def servers(installs):
    with ssb_servers(installs, "ssbx", P.sf, P.seed, {"max_worker_processes": 8}) as out:
        yield out


@pytest.fixture(scope="module")
def run(servers, tmp_path_factory):
    store = RunStore("ssbx", root=tmp_path_factory.mktemp("raw"))
    available = ssb_run.run_modes(servers, P, store)
    ssb_run.capture_plans(servers, P, store, available)
    ssb_run.run_sweep(servers, P, store)
    return store, available


def test_every_available_cell_is_recorded_with_warmups(run, servers):
    store, available = run
    execs = ssb_derive.executions(store)
    n_modes = available.filter("available").height
    assert execs.height == n_modes * len(P.query_ids()) * (P.repetitions + P.warmups)
    assert execs.filter("warmup").height == n_modes * len(P.query_ids()) * P.warmups
    assert execs["error"].is_null().all() and (execs["seconds"] > 0).all()
    # interleaved: the first timed round holds every cell before any second-round execution
    first_rounds = execs.filter(~pl.col("warmup")).sort("ts")["repetition"].head(n_modes * 2).to_list()
    assert set(first_rounds) == {0}


def test_jit_availability_follows_the_build(run, servers):
    _, available = run
    for s in servers:
        row = available.filter(server=s.name, mode="parallel_jit").row(0, named=True)
        assert row["available"] == s.install.jit, row
        if not s.install.jit:
            assert "llvmjit" in row["reason"]


def test_all_servers_and_modes_agree_on_every_answer(run):
    store, _ = run
    checks = ssb_derive.checksum_agreement(
        pl.concat(
            [
                ssb_derive.executions(store),
                ssb_derive.executions(store, ssb_run.SWEEP)
                .rename({"workers": "mode"})
                .with_columns(pl.col("mode").cast(pl.String)),
            ]
        )
    )
    assert checks.height == 2 and checks["agree"].all(), checks


def test_plans_show_gathers_only_in_parallel_modes_and_fingerprints_differ(run):
    store, available = run
    plans = ssb_derive.plans_table(P, store, available)
    serial = plans.filter(mode="serial")
    parallel = plans.filter(mode="parallel")
    assert serial["gather_id"].is_null().all()
    assert parallel["workers_planned"].is_not_null().all()
    assert (parallel["workers_planned"] <= 2).all()
    assert (parallel["workers_launched"] <= parallel["workers_planned"]).all()
    for (server, query), grp in plans.group_by("server", "query"):
        fps = dict(zip(grp["mode"], grp["fingerprint"], strict=False))
        assert fps["serial"] != fps["parallel"], (server, query)
    # JIT only compiles above jit_above_cost: at this scale a plan may have no JIT block (null), never 0
    jit = plans.filter(pl.col("jit_functions").is_not_null(), mode="parallel_jit")
    assert (jit["jit_functions"] > 0).all()
    assert plans.filter(pl.col("mode") != "parallel_jit")["jit_functions"].is_null().all()
    # the thresholds in force are recorded with every plan (the server defaults here)
    assert (plans["jit_above_cost"] == 100000).all()


def test_sweep_records_each_worker_count(run, servers):
    store, _ = run
    sweep = ssb_derive.executions(store, ssb_run.SWEEP)
    assert sorted(sweep["workers"].unique()) == [0, 2]
    assert sweep.filter(~pl.col("warmup")).height == len(servers) * 2 * len(P.query_ids()) * P.sweep_repetitions


def test_resuming_runs_nothing_again(run, servers):
    store, _ = run
    before = store.file.read_bytes()
    ssb_run.run_modes(servers, P, store)
    ssb_run.run_sweep(servers, P, store)
    assert store.file.read_bytes() == before


def test_a_timeout_is_recorded_not_dropped(servers, tmp_path):
    store = RunStore("timeouts", root=tmp_path)
    p = P.model_copy(update={"statement_timeout_s": 0.001, "modes": ["serial"], "repetitions": 1, "warmups": 0})
    ssb_run.run_modes(servers[:1], p, store)
    execs = ssb_derive.executions(store)
    assert execs.height == 2
    failed = execs.filter(pl.col("error").is_not_null())
    assert not failed.is_empty() and set(failed["sqlstate"]) == {"57014"} and failed["seconds"].is_null().all()


def test_plan_only_captures_plan_without_running(servers, tmp_path):
    """The study's and the scaled plan-only EXPLAINs (both through ssb_run.capture_plan_only): one artefact per server
    and query, planned and not executed, read back into their tables."""
    store = RunStore("planonly", root=tmp_path)
    study = ssb_run.capture_study_plans(servers, P, store, allowed=5)
    scaled = ssb_run.capture_scaled_plans(servers, P, store, allowed=5)
    for df in (study, scaled):
        assert df.height == len(servers) * len(P.query_ids()) and (df["allowed_workers"] == 5).all()
    for s in servers:
        for path in (ssb_run.study_plan_path(s.name, 5, "q4.3"), ssb_run.scaled_plan_path(s.name, 5, "q4.3")):
            doc = store.load_json(path)
            assert "Plan" in doc[0] and "Execution Time" not in doc[0], path


def test_run_stage_does_what_notebook_20_did_and_resumes(servers, tmp_path):
    """STUDY.run on a session whose params carry a notebook's overrides (Session.override): the dataset checked,
    the facts, every cell of the modes asked for, their plans, the sweep and the plan-only EXPLAINs recorded; run
    again, nothing is run twice. Last in this file: it gives the servers the SSB stage's settings."""
    from pglab.core.run.session import Session
    from pglab.params import Params
    from pglab.studies.ssb import STUDY

    s = Session(params=Params(), store=RunStore("stage", root=tmp_path), servers=list(servers))
    s.override([servers[0].name], ssb=P.model_dump() | {"modes": ["serial", "parallel"], "prewarm": False})
    assert [x.name for x in s.servers] == [servers[0].name] and s.params.ssb.modes == ["serial", "parallel"]
    result = STUDY.run(s)
    execs, sweep = ssb_derive.executions(s.store), ssb_derive.executions(s.store, ssb_run.SWEEP)
    assert result.servers == [servers[0].name] and result.steps_run == execs.height + sweep.height > 0
    assert set(execs["mode"]) == {"serial", "parallel"} and set(sweep["workers"]) == {0, 2}
    assert ssb_derive.read_facts(s.store)["ssb_params"]["modes"] == ["serial", "parallel"]
    tables = STUDY.derive(s.store, None)
    for name in ("ssb_plans", "ssb_plans_study_workers", "ssb_plans_scaled"):
        assert not tables[name].is_empty(), name
    assert tables["ssb_checksums"]["agree"].all()
    before = s.store.file.read_bytes()
    assert STUDY.run(s).steps_run == 0 and s.store.file.read_bytes() == before
    with pytest.raises(ValueError, match="not among this run's servers"):
        s.override(["nope"])


def test_jit_servers_run_at_their_own_scale_in_rounds_of_their_own(servers, tmp_path):
    """ssb.jit_sf: a server added for its JIT only (jit_installs; not among versions) holds SSB at that scale and
    runs its modes there in jit_repetitions rounds (the A/A control at ssb.sf only); the sweep and the plan-only
    EXPLAINs stay at ssb.sf on the version servers; answers are checked per scale; the regime reads each server's
    own scale."""
    from pglab.core.run.session import Session
    from pglab.params import Params
    from pglab.studies.ssb import STUDY

    jit = [s for s in servers if s.install.jit]
    plain = [s for s in servers if not s.install.jit]
    if not jit or not plain:
        pytest.skip("needs one install with llvmjit and one without (Debian's 15 and the wheel's 18 here)")
    j, v = jit[0], plain[0]
    s = Session(params=Params(), store=RunStore("jitsf", root=tmp_path), servers=[v, j])
    over = {"versions": [v.install.major], "jit_sf": 0.1, "jit_repetitions": 1, "prewarm": False, "aa_servers": "first"}
    s.override(
        [v.name, j.name], ssb=P.model_dump() | over | {"modes": ["serial", "parallel", "parallel_aa", "parallel_jit"]}
    )
    assert ssb_run.scales(s.servers, s.params.ssb) == {v.name: P.sf, j.name: 0.1}
    STUDY.run(s)
    t = STUDY.derive(s.store, None)
    loads = s.store.records("ssb_load")  # the loads this run made (the version server's was the fixture's)
    assert set(zip(loads["server"], loads["condition"].str.split(",").list.first(), strict=True)) == {
        (j.name, "sf=0.1")
    }
    assert ssb_derive.read_facts(s.store)["servers"][j.name]["dataset"]["sf"] == 0.1
    execs = ssb_derive.executions(s.store)
    timed = execs.filter(~pl.col("warmup"))
    assert set(timed.filter(server=j.name)["repetition"]) == {0}  # jit_repetitions: 1
    assert set(timed.filter(server=v.name)["repetition"]) == set(range(P.repetitions))
    assert set(execs.filter(server=j.name)["mode"]) == {"parallel", "parallel_jit"}  # the A/A at ssb.sf only
    assert set(execs.filter(server=v.name)["mode"]) == {"serial", "parallel", "parallel_aa"}
    assert set(ssb_derive.executions(s.store, ssb_run.SWEEP)["server"]) == {v.name}
    assert set(t["ssb_plans_scaled"]["server"]) == {v.name}
    checks = t["ssb_checksums"]
    assert set(checks["sf"]) == {P.sf, 0.1} and checks["agree"].all(), checks

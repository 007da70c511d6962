"""The SSB JIT block on real servers (methodology rule 17): the servers added for their JIT, at ssb.jit_sf, are
measured one database at a time, each read into memory and warmed up before its timed rounds, with the machine's
disk bytes read over those rounds and the database's size kept per server (ssb/jit_io/<server>.json), and
pg_stat_statements' JIT sums of every execution in a JIT mode kept with it. Here at SF 0.05 on two clusters of an
install with llvmjit and pg_stat_statements (Debian's 15 on the reference machine). Also: the LLVM a JIT build links
against is its build identity's."""

from dataclasses import replace

import polars as pl
import pytest
from conftest import INSTALLS

from pglab.core.servers.cluster import Cluster
from pglab.core.servers.servers import Server
from pglab.core.stats import verdicts as v
from pglab.core.store import RunStore
from pglab.datasets.ssb.load import database_name, load
from pglab.studies.ssb import derive as ssb_derive
from pglab.studies.ssb import estimate as ssb_estimate
from pglab.studies.ssb import jit_block
from pglab.studies.ssb import run as ssb_run
from pglab.studies.ssb.params import SsbParams
from pglab.studies.ssb.verdicts import compile_share, disk_flag

JIT_SF = 0.05
# the JIT servers are not among `versions`: they form the JIT block at jit_sf (no server at ssb.sf here)
P = SsbParams(
    sf=1,
    jit_sf=JIT_SF,
    seed=7,
    versions=[18],
    queries=["q1.1", "q4.3"],
    modes=["parallel", "parallel_jit", "parallel_jit_forced"],  # forced: at SF 0.05 no plan reaches the defaults
    jit_forced_queries=["q1.1"],
    jit_repetitions=2,
    jit_warmups=1,
    workers=2,
    statement_timeout_s=60,
    shuffle_seed=1,
)
JIT_INSTALL = next(
    (i for i in INSTALLS if i.jit and i.has("pg_stat_statements") and i.major >= 15 and i.major != 18), None
)
needs_jit = pytest.mark.skipif(
    JIT_INSTALL is None,
    reason="no install here with llvmjit and pg_stat_statements (PostgreSQL 15 on, not 18: the versions' major "
    "here): e.g. Debian's postgresql-15 (/usr/lib/postgresql/15/lib/llvmjit.so)",
)


@pytest.fixture(scope="module")
def jit_servers():
    """Two clusters of the JIT install (pg15, pg15_c2), SSB at jit_sf loaded in each, stopped however the tests end."""
    out = []
    try:
        for name in (JIT_INSTALL.name, f"{JIT_INSTALL.name}_c2"):
            srv = Server(
                name,
                install=JIT_INSTALL,
                cluster=Cluster(JIT_INSTALL, name=f"ssbjit-{name}"),
                settings={"max_worker_processes": 8, "shared_buffers": "128MB"},
            )
            srv.start()
            out.append(srv)
            load(srv, JIT_SF, P.seed, prewarm=False)
        yield out
    finally:
        for s in out:
            s.stop()


@pytest.fixture(scope="module")
def block(jit_servers, tmp_path_factory):
    store = RunStore("ssbjit", root=tmp_path_factory.mktemp("raw"))
    assert [sf for sf, *_ in ssb_run.scale_groups(jit_servers, P)] == [JIT_SF]
    assert ssb_run.jit_block(jit_servers, P)
    available = ssb_run.run_modes(jit_servers, P, store)
    return store, available


def _records(store: RunStore) -> pl.DataFrame:
    return store.records(ssb_run.EXPERIMENT).with_columns(pl.col("ts").str.to_datetime(time_zone="UTC"))


def test_block_order_takes_every_servers_first_cluster_first():
    names = ["pg15", "pg15_c2", "pg18llvm", "pg18llvm_c2"]
    ordered = jit_block.block_order([Server(n) for n in names])
    assert [s.name for s in ordered] == ["pg15", "pg18llvm", "pg15_c2", "pg18llvm_c2"]


def test_the_jit_servers_form_a_block_of_their_own_even_at_the_versions_scale():
    """The servers added for their JIT are measured apart (one database at a time, warmed, JIT counted) wherever
    ssb.jit_sf is set, also at ssb.sf itself; the versions' servers never are, nor any server without jit_sf."""
    inst = replace(INSTALLS[0], name="pgjit", source="debian", major=15, jit=True)
    jit = [Server("pgjit", install=inst), Server("pgjit_c2", install=inst)]
    versions = [Server("pg18", install=replace(INSTALLS[0], name="pg18", source="download", major=18, minor=1))]
    at_sf = P.model_copy(update={"jit_sf": P.sf, "builds": "download"})
    groups = ssb_run.scale_groups(versions + jit, at_sf)
    assert [(sf, [s.name for s in g]) for sf, _, _, g in groups] == [(1, ["pg18"]), (1, ["pgjit", "pgjit_c2"])]
    assert ssb_run.jit_block(jit, at_sf) and not ssb_run.jit_block(versions, at_sf)
    assert not ssb_run.jit_block(jit, at_sf.model_copy(update={"jit_sf": None}))
    assert [len(g) for *_, g in ssb_run.scale_groups(versions + jit, at_sf.model_copy(update={"jit_sf": None}))] == [3]


@needs_jit
def test_servers_are_measured_one_at_a_time_warm_up_first(block, jit_servers):
    store, available = block
    rec = _records(store)
    n_cells = sum(len(P.mode_query_ids(m)) for m in P.modes)
    spans = []
    for s in jit_servers:
        mine = rec.filter(server=s.name)
        warm, timed = mine.filter(pl.col("warmup")), mine.filter(~pl.col("warmup"))
        assert warm.height == n_cells * P.jit_warmups and timed.height >= n_cells * P.jit_repetitions
        assert warm["ts"].max() < timed["ts"].min(), s.name  # the warm-up rounds before any timed one
        # within the server's timed part, rounds stay interleaved: every cell of round r before any of r + 1
        first = timed.filter(~pl.col("remeasured").fill_null(False)) if "remeasured" in timed.columns else timed
        assert first.sort("ts")["repetition"].head(n_cells).to_list() == [0] * n_cells
        spans.append((mine["ts"].min(), mine["ts"].max()))
        assert set(mine["condition"]) == set(P.modes)
    spans.sort()
    # no server's steps fall within another's span: one database at a time, in block_order
    assert all(a_end < b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)), spans
    assert rec.sort("ts")["server"].head(1).item() == jit_servers[0].name


@needs_jit
def test_each_server_has_its_io_record(block, jit_servers):
    store, _ = block
    rec = _records(store)
    for s in jit_servers:
        io = store.load_json(jit_block.io_path(s.name))
        assert io["server"] == s.name and io["database"] == database_name(JIT_SF) and io["sf"] == JIT_SF
        with s.connect(database_name(JIT_SF)) as conn:
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        assert 0.9 * size <= io["database_bytes"] <= 1.1 * size
        assert io["disk_counter"] and io["disk_read_bytes"] >= 0 and io["warmup_disk_read_bytes"] >= 0
        assert io["read_share"] == pytest.approx(io["disk_read_bytes"] / io["database_bytes"])
        assert io["within_target"] == (io["read_share"] <= jit_block.IO_TARGET)
        assert io["target_share"] == jit_block.IO_TARGET and io["resumed"] is False
        timed = rec.filter(server=s.name).filter(~pl.col("warmup"))
        assert (
            io["timed_executions"] == timed.height
            and io["warmup_executions"] == rec.filter(server=s.name).height - timed.height
        )
        start, end = (
            pl.Series([io[k]]).str.to_datetime(time_zone="UTC").item() for k in ("timed_start_utc", "timed_end_utc")
        )
        assert start <= timed["ts"].min() and timed["ts"].max() <= end and io["timed_s"] > 0
        # the whole database read (the SSB tables: five relations with blocks) and what shared_buffers holds
        warm = io["warm"]
        assert warm["method"].startswith("pg_prewarm") and warm["relations"] >= 5 and warm["seconds"] > 0
        assert warm["read_blocks"] * 8192 == warm["relation_bytes"] <= io["database_bytes"]
        assert 0 < warm["buffer_blocks"] * 8192 <= jit_block.BUFFER_SHARE * warm["shared_buffers_bytes"]
        assert io["mem_available_bytes"] > 0 and io["jit_counters"] == "pg_stat_statements"


@needs_jit
def test_every_jit_execution_carries_its_jit_sums(block, jit_servers):
    store, _ = block
    rec = _records(store)
    jit = rec.filter(pl.col("condition").is_in(["parallel_jit", "parallel_jit_forced"]))
    assert jit.height > 0 and (jit["jit_calls"] == 1).all()  # each delta is one execution's
    for col in ("jit_functions", "jit_ms", "jit_generation_ms", "jit_inlining_ms", "jit_optimization_ms"):
        assert jit[col].is_not_null().all() and (jit[col] >= 0).all(), col
    parts = jit["jit_generation_ms"] + jit["jit_inlining_ms"] + jit["jit_optimization_ms"] + jit["jit_emission_ms"]
    assert ((jit["jit_ms"] - parts).abs() < 1e-3).all()
    # thresholds 0: every forced execution compiles, inlines and optimises; its compile time is milliseconds
    forced = jit.filter(condition="parallel_jit_forced")
    assert (forced["jit_functions"] > 0).all() and forced["jit_inlined"].all() and forced["jit_optimized"].all()
    assert (forced["jit_ms"] > 1).all() and (forced["jit_ms"] < forced["value"] * 1000).all()
    # the modes without JIT carry none
    plain = rec.filter(condition="parallel")
    assert "jit_functions" not in plain.columns or plain["jit_functions"].is_null().all()
    for s in jit_servers:
        note = store.load_json(jit_block.counters_path(s.name))
        assert note["source"] == "pg_stat_statements" and "leader" in note["scope"] and note["extension_version"]


@needs_jit
def test_the_leaders_jit_is_within_explains_total(block, jit_servers):
    """pg_stat_statements counts the leader's JIT; EXPLAIN ANALYZE's JIT block adds its workers': at most as many
    functions (the plans are captured as the stage does, after the timed rounds)."""
    store, available = block
    ssb_run.capture_plans(jit_servers, P, store, available)
    s = jit_servers[0]
    plan = store.load_json(f"ssb/plans/{s.name}/parallel_jit_forced/q1.1.json")[0]
    rec = _records(store).filter(server=s.name, condition="parallel_jit_forced")
    assert 0 < rec["jit_functions"].max() <= plan["JIT"]["Functions"]
    # the block's workers per Gather (ssb.jit_workers; null: cores - 1), not the versions' (ssb.workers, 2 here)
    in_force = store.load_json(f"ssb/plans/{s.name}/parallel_jit_forced/q1.1.settings.json")
    assert int(in_force["max_parallel_workers_per_gather"]) == ssb_run.jit_workers(P)
    derived = ssb_derive.plans_table(P, store, available).filter(server=s.name, mode="parallel_jit_forced")
    assert set(derived["allowed_workers"]) == {ssb_run.jit_workers(P)}


def test_the_jit_block_runs_a_core_for_the_leader_and_each_worker(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert ssb_run.jit_workers(P) == 1 and ssb_run.workers(P) == 2
    assert ssb_run.jit_workers(P.model_copy(update={"jit_workers": 3})) == 3
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert ssb_run.jit_workers(P) == 1


@needs_jit
def test_resuming_runs_nothing_again(block, jit_servers):
    store, _ = block
    before = store.file.read_bytes()
    ssb_run.run_modes(jit_servers, P, store)
    assert store.file.read_bytes() == before


@needs_jit
def test_without_pg_stat_statements_the_executions_carry_no_jit_fields(jit_servers, tmp_path, capsys):
    """A build without pg_stat_statements: no JIT fields, said once (printed, and noted in the store)."""
    s = jit_servers[0]
    bare = Server(s.name, install=replace(s.install, extensions=s.install.extensions | {"pg_stat_statements": False}))
    bare.cluster = s.cluster
    store = RunStore("nopgss", root=tmp_path)
    p = P.model_copy(update={"modes": ["parallel", "parallel_jit"], "queries": ["q1.1"], "jit_repetitions": 1})
    ssb_run.run_modes([bare], p, store)
    rec = store.records(ssb_run.EXPERIMENT)
    assert rec.height == 4 and not any(c.startswith("jit_") for c in rec.columns)
    note = store.load_json(jit_block.counters_path(s.name))
    assert note["source"] is None and "no pg_stat_statements" in note["reason"]
    assert capsys.readouterr().out.count("no JIT compile time per execution") == 1
    assert store.load_json(jit_block.io_path(s.name))["jit_counters"] is None


def test_the_estimate_counts_the_warming_of_each_jit_server(monkeypatch):
    """make report's estimate adds, per server of the JIT block, its database read into memory and the restart that
    preloads pg_stat_statements (an install with JIT made up: no server is started)."""
    from pglab.params import Params

    inst = replace(INSTALLS[0], name="pgjit", source="debian", major=15, jit=True)
    base = [Server("pgjit", install=inst), Server("pgjit_c2", install=inst)]
    p = Params().model_copy(update={"ssb": P})
    est = ssb_estimate.estimate_s(p, base)
    monkeypatch.setattr(ssb_estimate, "WARM_S_PER_SF", 0.0)
    assert est - ssb_estimate.estimate_s(p, base) == pytest.approx(2 * 1.5 * JIT_SF)
    assert ssb_estimate.warm_s(P, 10) == pytest.approx(1.0) and ssb_estimate.warm_s(P, 10, restart=False) == 0.0


# -- the LLVM a JIT build links against: its build identity --------------------------------------------------------


@needs_jit
def test_a_jit_install_records_the_llvm_it_links_against():
    from pglab.core.installs.installs import linked_llvm

    llvm, library = linked_llvm(JIT_INSTALL.lib_dir / "llvmjit.so")
    assert (
        llvm.startswith("LLVM ")
        and "libLLVM" in library
        and (JIT_INSTALL.llvm, JIT_INSTALL.llvm_library)
        == (
            llvm,
            library,
        )
    )
    major = llvm.split()[1].split(".")[0]
    assert major in library.rsplit("/", 1)[-1]
    assert linked_llvm(JIT_INSTALL.lib_dir / "no-such.so") == ("", "")


def test_two_jit_builds_are_alike_only_with_the_same_llvm():
    from pglab.core.stats import builds
    from pglab.pgtools.environment import build_identity

    version = "PostgreSQL 15.18 on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
    built = {"CFLAGS": "-O2", "CONFIGURE": "'--with-llvm' 'LLVM_CONFIG=/usr/bin/llvm-config-14'"}
    rec = {"debug_assertions": "off", "block_size": 8192, "wal_segment_size": "16MB", "data_checksums": "off"}
    configured = build_identity(version, built, rec)
    assert configured["build_llvm"] == "LLVM 14"  # no install at hand: the major configure names
    a = rec | {"server": "a"} | build_identity(version, built, rec, "LLVM 14.0.6")
    b = rec | {"server": "b"} | build_identity(version, built, rec, "LLVM 14.0.5")
    assert a["build_llvm"] == "LLVM 14.0.6" and "LLVM 14.0.6" in a["build"]
    assert builds.difference(a, dict(a, server="twin"), jit=True) is None
    assert builds.difference(a, b) is None  # LLVM is held equal only where JIT is compared
    assert builds.difference(a, b, jit=True) == "builds differ: LLVM LLVM 14.0.6 (a) vs LLVM 14.0.5 (b)"


def test_derive_keeps_each_servers_io_record(block, jit_servers):
    store, _ = block
    names = [s.name for s in jit_servers]
    io = ssb_derive.jit_io_table(store, names)
    assert sorted(io["server"]) == sorted(names) and io["database_bytes"].min() > 0
    for r in io.iter_rows(named=True):
        rec = store.load_json(jit_block.io_path(r["server"]))
        assert r["read_share"] == pytest.approx(rec["read_share"]) and r["timed_s"] > 0 and r["warm_s"] >= 0
    assert ssb_derive.jit_io_table(store, ["no_such_server"]).is_empty()


def test_a_cluster_over_the_disk_target_makes_its_servers_jit_claims_a_measurement_problem():
    io = pl.DataFrame(
        {
            "server": ["pg15", "pg15_c2", "pg18", "pg18_c2"],
            "database_bytes": [2**30] * 4,
            "read_share": [0.01, 0.12, 0.0, None],
            "target_share": [jit_block.IO_TARGET] * 4,
        }
    )
    flag = disk_flag(io, "pg15")
    assert flag is not None and "pg15_c2 read 12.0 %" in flag and "pg15 read" not in flag
    assert disk_flag(io, "pg18") is None and disk_flag(io.clear(), "pg15") is None
    claim = v.Claim("JIT helps", v.LOWER, 0.75, 0.1)
    clean = v.verdict(claim, v.Evidence(0.74, 0.72, 0.76, 10, 0.95, "paired"))
    flagged = v.verdict(claim, v.Evidence(0.74, 0.72, 0.76, 10, 0.95, "paired", (flag,)))
    assert clean.label == v.SUPPORTED and flagged.label == v.UNDETERMINED and "from disk" in flagged.reason


@needs_jit
def test_the_compile_share_comes_from_every_timed_jit_execution(block, jit_servers):
    store, _ = block
    je = ssb_derive.jit_executions(store)
    rec = _records(store).filter(pl.col("condition").is_in(["parallel_jit", "parallel_jit_forced"]), ~pl.col("warmup"))
    assert je.height == rec.height > 0 and (je["jit_ms"] < je["wall_ms"]).all()
    base = jit_servers[0].name.split("_c")[0]
    text = compile_share(je, base, "parallel_jit_forced", sorted(set(je["query"])))
    n = je.filter(mode="parallel_jit_forced").height
    assert text is not None and f"{n} executions" in text, text
    assert compile_share(je, "no_such_server", "parallel_jit", ["q1.1"]) is None
    assert compile_share(je.clear(), base, "parallel_jit", ["q1.1"]) is None


@needs_jit
def test_the_jit_claims_judge_each_execution_net_of_its_compile(block):
    """Each counted JIT execution again under <mode>_net, its wall time less the leader's compile time; ssb_paired
    compares it with parallel, and the JIT claims take it (forced first); a run without JIT counts is unchanged."""
    from pglab.studies.ssb import paired_tables as pt

    store, _ = block
    execs, je = ssb_derive.executions(store), ssb_derive.jit_executions(store)
    both = pt.with_net_of_compile(execs, je)
    net = both.filter(mode="parallel_jit_forced_net").sort("server", "query", "round")
    mine = je.filter(mode="parallel_jit_forced").sort("server", "query", "round")
    assert net.height == mine.height > 0 and both.height == execs.height + je.height
    assert net["seconds"].to_list() == pytest.approx(((mine["wall_ms"] - mine["jit_ms"]) / 1000).to_list())
    assert (net["seconds"] > 0).all() and not net["warmup"].any()
    assert pt.with_net_of_compile(execs, pl.DataFrame()) is execs and pt.with_net_of_compile(execs, None) is execs
    pair = pt.mode_comparisons(both)
    got = pair.filter(pl.col("mode") == "parallel_jit_forced_net", pl.col("baseline") == "parallel")
    assert set(got["query"]) >= set(P.mode_query_ids("parallel_jit_forced"))
    assert pt.jit_mode(pair) == "parallel_jit_forced_net"
    assert pt.jit_mode(pt.mode_comparisons(execs)) == "parallel_jit" and pt.jit_mode(pl.DataFrame()) == "parallel_jit"

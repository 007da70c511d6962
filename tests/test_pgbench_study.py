"""The pgbench stage (study S3, S4's scale-up) on real servers the kit starts: one tiny grid run once,
then what it recorded, resumed, refused and failed. Params errors of the `pgbench:` section."""

import time

import polars as pl
import pytest

from pglab import params
from pglab.core.run import outcomes, schedule, session
from pglab.params import ParamsError
from pglab.studies.pgbench import STUDY
from pglab.studies.pgbench import derive as pgbench_tables
from pglab.studies.pgbench.bench import Bench, threads_for
from pglab.studies.pgbench.params import ScalingParams
from pglab.studies.pgbench.run import EXP_INIT, EXP_SCALING, EXP_SELECT, EXP_SERIES, Stage

TINY = """
profile: pgbenchtest
settings: {shared_buffers: 128MB}
pgbench:
  scales: [1]
  aggregate_log_s: 1
  init: {repetitions: 2}
  select_only: {clients: 2, duration_s: 1, repetitions: 2, warmup_s: 1}
  series: {runs: 3, clients: 2, transactions: 20}
  scaling: {modes: [tpcb], max_clients: 2, duration_s: 1, repetitions: 1, warmup_s: 0}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    f = tmp_path_factory.mktemp("pgbench") / "tiny.yaml"
    f.write_text(TINY)
    run_id = f"pgbench-test-{time.time_ns()}"
    s = session.begin(params.load(str(f)), run_id)
    s.start()
    stage = Stage(s)
    ran = stage.run()
    yield {"file": f, "session": s, "stage": stage, "ran": ran, "df": pgbench_tables.records(s.store)}
    s.close()


def _count(df, experiment, warmup=False):
    return (
        df.filter((pl.col("experiment") == experiment) & (pl.col("warmup") == warmup))
        .group_by("server", "condition", "item")
        .len()
        .sort("server", "condition", "item")
    )


def test_every_cell_has_its_measurements(tiny):
    df, names = tiny["df"], sorted(x.name for x in tiny["session"].servers)
    assert len(names) >= 1
    # select-only: every cell twice per round, under "select-only" and the A/A control's "select-only-aa"
    assert tiny["ran"] == {
        "load": 2 * len(names),
        "select_only": 6 * len(names),
        "scaling": 2 * len(names),
        "series": 4 * len(names),
    }
    assert _count(df, EXP_INIT)["len"].to_list() == [2] * len(names)
    assert _count(df, EXP_SELECT)["len"].to_list() == [2] * 2 * len(names)
    assert _count(df, EXP_SELECT)["item"].to_list() == ["select-only", "select-only-aa"] * len(names)
    assert _count(df, EXP_SELECT, warmup=True)["len"].to_list() == [1] * 2 * len(names)
    assert _count(df, EXP_SCALING)["item"].to_list() == ["c1", "c2"] * len(names)
    series = _count(df, EXP_SERIES)
    assert series["item"].to_list() == ["init", "run01", "run02", "run03"] * len(names)
    assert set(series["len"]) == {1}


def test_runs_are_sane_and_say_how_they_were_made(tiny):
    df = tiny["df"]
    assert df["error"].null_count() == df.height, df.filter(pl.col("error").is_not_null())["error"].to_list()
    tps = df.filter(pl.col("unit") == "tps")
    assert tps.height == df.filter(pl.col("experiment") != EXP_INIT).height - len(tiny["session"].servers)
    assert (tps["value"] > 0).all() and (tps["latency_avg_ms"] > 0).all()
    assert (tps["transactions_processed"] > 0).all()
    j, log = threads_for(2, 0), "-M simple -l --aggregate-interval=1 --log-prefix=LOGDIR/agg"
    sel = df.filter((pl.col("experiment") == EXP_SELECT) & ~pl.col("warmup"))
    assert set(sel["command"]) == {f"pgbench -S -c 2 -j {j} -T 1 {log}"}
    series = df.filter((pl.col("experiment") == EXP_SERIES) & (pl.col("item") != "init"))
    assert set(series["command"]) == {f"pgbench -n -c 2 -j {j} -t 20 {log}"}
    assert (series["transactions_processed"] == 40).all()
    assert df["client_version"].n_unique() == 1  # one newest pgbench for every server
    store = tiny["session"].store
    for rel in df["stdout_file"].to_list() + df["stderr_file"].to_list():
        assert store.has_artifact(rel)
    out = store.artifact_path(sel["stdout_file"][0]).read_text()
    assert "select only" in out and "tps = " in out


def test_init_records_its_time_steps_and_sizes(tiny):
    init = tiny["df"].filter(pl.col("experiment") == EXP_INIT)
    assert (init["value"] > 0).all() and (init["init_total_s"] >= 0).all()
    assert (init["step_client_side_generate_s"].is_not_null()).all()
    assert (init["db_bytes_after"] > init["db_bytes_before"]).all()
    assert (init["databases_bytes_after"] > init["databases_bytes_before"]).all()
    assert (init["datadir_bytes_after"] > init["datadir_bytes_before"]).all()  # kit clusters: du of PGDATA
    assert (init["wal_written_bytes"] > 0).all()
    assert (init["tuples_generated"] == 100_000).all()
    store = tiny["session"].store
    assert "done in" in store.artifact_path(init["stderr_file"][0]).read_text()


def test_series_is_interleaved_and_grows(tiny):
    s = tiny["df"].filter(pl.col("experiment") == EXP_SERIES).sort("ts")
    # run k of every server before run k + 1 of any
    assert s["item"].to_list() == sorted(s["item"].to_list())
    for server, g in s.group_by("server"):
        g = g.sort("run")
        assert g["run"].to_list() == [0, 1, 2, 3]
        assert g["db_bytes_after"][-1] > g["db_bytes_after"][0], server  # dead tuples, history rows
        assert not g["resumed"][1:].any()


def test_derived_tables_and_summaries(tiny):
    st = tiny["stage"]
    t = pgbench_tables.build(st.store, st.session.profile, st.baseline(), write=True)
    n = len(tiny["session"].servers)
    sel = t["pgbench_select_only_summary"]
    assert sel.height == n and (sel["n"] == 2).all() and (sel["n_missing"] == 0).all()
    assert (sel["min"] <= sel["median"]).all() and (sel["median"] <= sel["max"]).all()
    assert t["pgbench_init_summary"]["n"].to_list() == [2] * n
    assert t["pgbench_series"].height == 3 * n and t["pgbench_series_sizes"].height == 4 * n
    assert t["pgbench_series_trend"].height == n
    assert sorted(t["pgbench_scaling_summary"]["clients"].to_list()) == sorted([1, 2] * n)
    ts = t["pgbench_timeseries"]
    assert ts.height > 0 and (ts["tps"] >= 0).all()
    settings = t["pgbench_settings"]
    assert settings.filter(pl.col("name") == "shared_buffers").height == n
    # the paired analysis: one A/A pair per server and the pooled row, drift and trend per server
    noise = t["pgbench_noise"]
    assert sorted(noise["server"]) == sorted([*(x.name for x in tiny["session"].servers), "all"])
    assert noise.filter(pl.col("server") == "all")["n_pairs"][0] == n
    assert t["pgbench_no_vacuum"].height == n and t["pgbench_servers"]["major"].null_count() == 0
    if n > 1:
        assert set(t["pgbench_paired"]["what"]) == {"load time", "select-only tps", "series tps", "scale-up tps"}
    for name, df in t.items():  # flat: every table can be written as CSV
        assert not any(dt.is_nested() for dt in df.schema.values()), name


def test_resuming_the_run_reruns_nothing(tiny):
    s = tiny["session"]
    lines = s.store.file.read_text().count("\n")
    again = session.begin(params.load(str(tiny["file"])), s.run_id)
    again.servers = s.servers  # the running servers; a resumed run starts nothing new
    assert Stage(again).run() == {"load": 0, "select_only": 0, "scaling": 0, "series": 0}
    assert s.store.file.read_text().count("\n") == lines


def test_notebook_30s_only_reaches_the_stage_through_the_session(tiny):
    """STUDY.run as notebook 30 calls it: `only` put on the session (Session.override) picks the experiments."""
    s = tiny["session"]
    again = session.begin(params.load(str(tiny["file"])), s.run_id)
    again.servers = s.servers
    result = STUDY.run(again.override(pgbench=dict(experiments=["series", "load"])))
    assert result.steps_run == 0 and result.servers == [x.name for x in s.servers]
    assert list(result.seen["stage"].timings) == [EXP_SERIES, EXP_INIT]  # the experiments asked for, in that order
    with pytest.raises(ValueError, match="experiments"):
        again.override(pgbench=dict(experiments=["vacuum"]))


def test_a_failing_pgbench_is_recorded_not_dropped(tiny):
    s = tiny["session"]
    srv = s.servers[0]
    bench = Bench(s.store, tiny["stage"].bench.installs)
    steps = schedule.plan([(srv.name, "bad-script", "f")], repetitions=1, warmups=0)

    def measure(st):
        return bench.run(
            srv, "pgbench_s1", ["-n", "-f", "bad.sql", "-t", 1], "custom/bad", scripts={"bad.sql": "\\set x (\n"}
        )

    assert schedule.run_steps(steps, s.store, "pgbench_custom", measure) == 1
    rec = s.store.records("pgbench_custom").row(0, named=True)
    assert rec["value"] is None and "syntax error" in rec["error"]
    assert "syntax error" in s.store.artifact_path(rec["stderr_file"]).read_text()


def test_external_server_without_allow_destructive_is_refused_the_load(tiny, tmp_path):
    kit = tiny["session"].servers[0]
    with kit.connect() as conn:
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = 'pgbench_s1'").fetchone()
    f = tmp_path / "ext.yaml"
    f.write_text(
        TINY.replace(
            "profile: pgbenchtest",
            f"profile: pgbenchtest\nservers:\n  use: [lab]\n  external:\n    - {{name: lab, dsn: '{kit.conninfo()}'}}",
        )
    )
    ext = session.begin(params.load(str(f)), f"pgbench-ext-{time.time_ns()}")
    stage = Stage(ext)
    assert stage.servers == [] and stage.skipped() == ["lab"]
    assert stage.load() == 0 and stage.select_only() == 0
    assert ext.store.records().is_empty()  # recorded skips, not failed runs
    skips = outcomes.skipped(ext.store, [EXP_INIT, EXP_SELECT, EXP_SCALING, EXP_SERIES])
    assert skips.height == 4 and set(skips["server"]) == {"lab"}
    assert all("allow_destructive" in r for r in skips["reason"])
    with kit.connect() as conn:  # nothing was dropped
        assert conn.execute("SELECT oid FROM pg_database WHERE datname = 'pgbench_s1'").fetchone() == oid


def _load(tmp_path, text):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return params.load(f, check_servers=False)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pgbench: {select_only: {clinets: 3}}\n", r"p.yaml: pgbench.select_only.clinets: unknown key"),
        ("pgbench: {scales: [0, 10]}\n", r"p.yaml: pgbench.scales: expected whole numbers >= 1; got 0"),
        ("pgbench: {scales: [10, 10]}\n", r"pgbench.scales: expected each scale factor once"),
        ("pgbench: {client: mine}\n", r"pgbench.client: Input should be 'newest' or 'own'; got 'mine'"),
        ("pgbench: {threads: many}\n", r"pgbench.threads: expected 'auto' or a whole number of threads >= 1"),
        ("pgbench: {series: {duration_s: 5}}\n", r"pgbench.series: expected exactly one of transactions"),
        ("pgbench: {scaling: {modes: [select]}}\n", r"pgbench.scaling.modes\[0\]: Input should be 'select-only'"),
        ("pgbench: {select_only: {duration_s: 0}}\n", r"pgbench.select_only.duration_s: .*greater than or equal to 1"),
        ("pgbench: {experiments: [load, vacuum]}\n", r"pgbench.experiments\[1\]: Input should be"),
    ],
)
def test_params_errors_name_file_key_and_expectation(tmp_path, text, expected):
    with pytest.raises(ParamsError, match=expected):
        _load(tmp_path, text)


def test_params_defaults_and_client_grid(tmp_path):
    p = _load(tmp_path, "pgbench: {threads: auto, scaling: {max_clients: 6}}\n").pgbench
    assert p.threads == 0 and p.scaling_scale == 10 and p.series_scales == [1, 10]
    assert ScalingParams(max_clients=6).client_counts() == [1, 2, 4, 6]
    assert ScalingParams(max_clients=1).client_counts() == [1]


def test_a_stage_that_measured_nothing_fails_naming_the_server(tiny, tmp_path):
    """Every run failing (here: a role that may not create the database) is a failure of the stage, never
    'done'; the message names the server and the first error, and holds no password."""
    kit = tiny["session"].servers[0]
    with kit.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS nocreate")
        conn.execute("CREATE ROLE nocreate LOGIN PASSWORD 'Pw-n0create-77'")
    dsn = f"host=127.0.0.1 port={kit.cluster.port} dbname=postgres user=nocreate password=Pw-n0create-77"
    f = tmp_path / "bad.yaml"
    f.write_text(
        TINY.replace(
            "profile: pgbenchtest",
            "profile: pgbenchtest\nservers:\n  use: [weak]\n  external:\n"
            f"    - {{name: weak, dsn: '{dsn}', allow_destructive: true}}",
        )
    )
    weak = session.begin(params.load(str(f)), f"pgbench-weak-{time.time_ns()}")
    with pytest.raises(outcomes.NothingMeasured, match=r"weak: all 2 pgbench_init measurements failed") as e:
        Stage(weak).load()
    assert "InsufficientPrivilege" in str(e.value) and "Pw-n0create-77" not in str(e.value)
    assert "Pw-n0create-77" not in weak.store.file.read_text()


def test_client_own_without_a_pgbench_falls_back_to_the_newest_with_a_note(installs, tmp_path):
    """A downloaded build carries the server alone: `client: own` uses the newest pgbench and says why."""
    from dataclasses import replace

    from pglab.core.servers.servers import Server
    from pglab.pgtools import pgbench

    server_only = replace(installs[0], name="bare", bin_dir=tmp_path)  # a real install's folder without pgbench
    srv = Server(name="bare", install=server_only)
    note = pgbench.client_note(srv, "own")
    assert note and "no pgbench of its own" in note
    assert pgbench.client_for(srv, installs, "own") == pgbench.newest_client(installs)
    assert pgbench.client_note(srv, "newest") is None
    own = Server(name=installs[0].name, install=pgbench.newest_client(installs))
    assert pgbench.client_note(own, "own") is None and pgbench.client_for(own, installs, "own") == own.install

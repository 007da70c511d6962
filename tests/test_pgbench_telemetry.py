"""The telemetry of every measured pgbench run (issue 32), on real servers the kit starts: a CHECKPOINT forced in the
middle of a TPC-B run is flagged on that run and marked on its second of the per-second timeline (a run without
one is not flagged); the stage's runs each carry their counters, /proc samples and percentiles; percentiles
from a known log are numpy's, exactly; and every table comes again from the raw store alone, byte for byte."""

import threading
import time

import numpy as np
import polars as pl
import pytest

from pglab import params
from pglab.core import derived
from pglab.core.derived import NO_SERVERS_ENV
from pglab.core.run import session
from pglab.core.store import RunStore
from pglab.pgtools import pgbench
from pglab.pgtools import pgbench_telemetry as telemetry_tables
from pglab.studies.pgbench import derive as pgbench_tables
from pglab.studies.pgbench.run import EXP_SELECT, EXP_SERIES, Stage

# checkpoint_timeout at its maximum: no timed checkpoint can fall into a run by chance, so a flag is ours
TINY = """
profile: pgbenchtelemetry
settings: {shared_buffers: 128MB, checkpoint_timeout: 1d}
pgbench:
  experiments: [select_only, series]
  scales: [1]
  select_only: {clients: 2, duration_s: 1, repetitions: 2, warmup_s: 1, aa_control: none}
  series: {runs: 2, clients: 2, transactions: null, duration_s: 1}
"""
PROBE = "pgbench_probe"  # the checkpoint runs' experiment: recorded beside the stage's, in the same store


def _checkpoint_after(srv, dbname: str, seconds: float, out: dict) -> None:
    """Once pgbench's clients are connected, wait `seconds`, then CHECKPOINT; when it was asked and answered."""
    with srv.connect(dbname) as conn:
        deadline = time.monotonic() + 30
        sql = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgbench'"
        )
        while conn.execute(sql).fetchone()[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(seconds)
        out["asked"] = time.time()
        conn.execute("CHECKPOINT")
        out["answered"] = time.time()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    f = tmp_path_factory.mktemp("pgbench-telemetry") / "tiny.yaml"
    f.write_text(TINY)
    s = session.begin(params.load(str(f)), f"pgbench-telemetry-{time.time_ns()}")
    s.start()
    try:
        stage = Stage(s)
        stage.run()
        probes = {}
        for srv in stage.servers:  # a 4 s TPC-B run with a CHECKPOINT after ~1.5 s, and one without
            for item in ("checkpoint", "control"):
                asked: dict = {}
                t = threading.Thread(target=_checkpoint_after, args=(srv, "pgbench_s1", 1.5, asked))
                if item == "checkpoint":
                    t.start()
                fields = stage.bench.run(
                    srv, "pgbench_s1", ["-c", 2, "-j", 2, "-T", 4], f"probe/{srv.name}/{item}", duration_s=4, log=True
                )
                if item == "checkpoint":
                    t.join(60)
                s.store.record(srv.name, PROBE, "s1", item, 0, fields.pop("value"), fields.pop("unit"), **fields)
                probes[(srv.name, item)] = asked
        yield {"session": s, "stage": stage, "probes": probes}
    finally:
        s.close()


def test_a_checkpoint_inside_a_run_is_flagged_and_marked_on_its_second(tiny):
    store = tiny["session"].store
    t = telemetry_tables.tables(store, [PROBE])
    runs, timeline = t["pgbench_telemetry"], t["pgbench_timeline"]
    recs = store.records(PROBE)
    assert recs["error"].null_count() == recs.height, recs["error"].to_list()
    assert "telemetry_error" not in recs.columns or recs["telemetry_error"].null_count() == recs.height
    for srv in tiny["stage"].servers:
        for item in ("checkpoint", "control"):
            run = runs.filter((pl.col("server") == srv.name) & (pl.col("item") == item)).row(0, named=True)
            rec = recs.filter((pl.col("server") == srv.name) & (pl.col("item") == item)).row(0, named=True)
            tl = timeline.filter((pl.col("server") == srv.name) & (pl.col("item") == item)).sort("second")
            # a row for every second from the one the run began in to the one it ended in (-T 4: at least 5)
            assert tl["second"].to_list() == list(range(tl.height)) and tl.height >= 5, tl
            assert not tl["partial"][1:-1].any() and tl["partial"][-1]
            # every transaction pgbench counted is in the log, and in the timeline
            assert tl["transactions"].sum() == run["transactions_logged"] == rec["transactions_processed"] > 0
            assert run["failed"] == 0 and run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"] <= run["max_ms"]
            label = f"{srv.name} {item}: {tl.select('second', 'tps', 'checkpoint').rows()}"
            if item == "control":
                assert run["checkpoint"] is False and run["checkpoints"] == 0, label
                assert not tl["checkpoint"].any(), label
                continue
            asked = tiny["probes"][(srv.name, item)]
            epoch0 = rec["txlog_epoch0"]
            assert run["checkpoint"] is True and run["checkpoints"] == 1, label
            # pg_control's time of the checkpoint lies between our asking and the answer, on pgbench's clock
            assert int(asked["asked"]) - epoch0 <= run["checkpoint_s"] <= int(asked["answered"]) - epoch0, label
            assert 1 <= run["checkpoint_s"] < tl.height - 1, label  # inside the run, not at its edges
            assert tl.filter(pl.col("checkpoint"))["second"].to_list() == [run["checkpoint_s"]], label
            print(label)  # the dip, for the reader: tps of the checkpoint's second against its neighbours'


def test_every_measured_run_carries_counters_samples_and_percentiles(tiny):
    store = tiny["session"].store
    t = pgbench_tables.derive(store, tiny["session"].params)
    n = len(tiny["stage"].servers)
    runs = t["pgbench_telemetry"].filter(pl.col("experiment") != PROBE)
    # select-only: 2 rounds per server (the warm-up keeps nothing); series: 2 runs per server
    assert runs.group_by("experiment").len().sort("experiment").rows() == [(EXP_SELECT, 2 * n), (EXP_SERIES, 2 * n)]
    assert runs["telemetry_error"].null_count() == runs.height, runs["telemetry_error"].to_list()
    assert (runs["samples"] >= 1).all() and runs["cpu_user_mean"].is_not_null().all()
    assert (runs["checkpoint"] == False).all()  # noqa: E712 (checkpoint_timeout 1d: none by chance)
    recs = pgbench_tables.records(store).filter(
        ~pl.col("warmup") & pl.col("experiment").is_in([EXP_SELECT, EXP_SERIES])
    )
    done = recs.select("server", "experiment", "item", "repetition", "transactions_processed")
    got = runs.join(done, on=["server", "experiment", "item", "repetition"])
    assert (got["transactions_logged"] == got["transactions_processed"]).all()
    # the statistics of pgbench's sessions are in once they have ended: every transaction committed is counted
    xact = t["pgbench_server_counters"].filter((pl.col("view") == "database") & (pl.col("counter") == "xact_commit"))
    got = xact.join(done, on=["server", "experiment", "item", "repetition"])
    assert got.height == 4 * n and (got["delta"] >= got["transactions_processed"]).all(), got
    # an interval within one clock tick has no CPU time: null shares (system_sampler.rates), left out here
    system = t["pgbench_system"].filter(pl.col("experiment") != PROBE, pl.col("cpu_idle").is_not_null())
    shares = system.select("cpu_user", "cpu_system", "cpu_iowait", "cpu_steal", "cpu_idle").sum_horizontal()
    assert system.height >= 4 * n and ((shares - 1).abs() < 0.02).all()
    lat = t["pgbench_latency"].filter(pl.col("experiment") == EXP_SELECT)
    assert lat.height == n and (lat["n_rounds"] == 2).all() and (lat["interval"] == "min–max of rounds").all()
    assert (lat["p50_low_ms"] <= lat["p50_high_ms"]).all() and (lat["p99_ms"] <= lat["max_ms"]).all()
    assert (lat["tps_median"] > 0).all()
    # warm-ups keep no telemetry
    warm = pgbench_tables.records(store).filter(pl.col("warmup"))
    assert warm.height == n
    assert store.records(EXP_SELECT).filter(pl.col("warmup"))["txlog_file"].null_count() == n


def test_rederiving_from_the_raw_store_alone_gives_identical_tables(tiny, tmp_path, monkeypatch):
    s = tiny["session"]
    first = pgbench_tables.derive(s.store, s.params)
    names = ("pgbench_timeline", "pgbench_latency", "pgbench_server_counters", "pgbench_system", "pgbench_telemetry")
    assert set(names) <= set(first) and all(first[n].height for n in names)
    monkeypatch.setenv(NO_SERVERS_ENV, "re-deriving from the raw store")
    again = pgbench_tables.derive(RunStore(s.run_id, s.store.dir.parent), s.params)
    assert sorted(again) == sorted(first)
    for name in sorted(first):
        assert again[name].equals(first[name]), name
    derived.write({n: first[n] for n in names}, "one", root=tmp_path)
    derived.write({n: again[n] for n in names}, "two", root=tmp_path)
    for n in names:
        assert (tmp_path / "one" / f"{n}.csv").read_bytes() == (tmp_path / "two" / f"{n}.csv").read_bytes(), n


def _write_log(path, rows) -> None:
    """A per-transaction log as pgbench writes it: client_id transaction_no time script_no time_epoch time_us."""
    path.write_text("".join(f"{c} {i} {lat} 0 {epoch} {us}\n" for i, (c, lat, epoch, us) in enumerate(rows)))


def test_percentiles_of_a_known_log_are_numpys_exactly(tmp_path):
    rng = np.random.default_rng(7)
    rounds = {}
    store = RunStore("telemetry-known-log", tmp_path / "raw")
    epoch0 = 1_700_000_000
    for rep in (0, 1, 2):
        lat = rng.lognormal(7, 0.6, 4000).astype(int)  # ~1 ms, a long tail, repeated values at µs resolution
        lat[::97] = 0  # pgbench's lazy clock: no latency, left out of every statistic
        seconds = np.sort(rng.integers(0, 3, lat.size))
        logdir = tmp_path / f"log{rep}"
        logdir.mkdir()
        half = lat.size // 2  # two thread files, as -j 2 writes them
        rows = [(i % 2, int(v), epoch0 + int(s), 123456) for i, (v, s) in enumerate(zip(lat, seconds, strict=True))]
        _write_log(logdir / "tx.1", rows[:half])
        _write_log(logdir / "tx.1.1", rows[half:] + [(1, "failed", epoch0 + 1, 5)])
        counts = pgbench.transaction_log_counts(logdir)
        assert sum(n for *_, n in counts) == lat.size + 1 and len(counts) < lat.size  # the same values, counted
        lines = ["second,latency_us,outcome,transactions"]
        lines += [f"{e - epoch0},{'' if v is None else v},{o},{n}" for e, v, o, n in counts]
        rel = f"pgbench/known.r{rep}.txlog.csv"
        store.save_text(rel, "\n".join(lines) + "\n")
        store.record(
            "known",
            "pgbench_known",
            "s1",
            "cell",
            rep,
            1000.0 + rep,
            "tps",
            txlog_file=rel,
            txlog_epoch0=epoch0,
            started_epoch=epoch0 + 0.5,
            ended_epoch=epoch0 + 2.5,
        )
        rounds[rep] = (lat, seconds)
    t = telemetry_tables.tables(store, ["pgbench_known"])
    every = np.concatenate([lat for lat, _ in rounds.values()])
    timed = every[every > 0] / 1000.0
    cell = t["pgbench_latency"].row(0, named=True)
    assert cell["transactions"] == every.size and cell["zero_us"] == (every == 0).sum() and cell["n_rounds"] == 3
    for p in (50, 95, 99):
        assert cell[f"p{p}_ms"] == np.percentile(timed, p)  # exactly: the same values, the same method
        per_round = [np.percentile(lat[lat > 0] / 1000.0, p) for lat, _ in rounds.values()]
        assert (cell[f"p{p}_low_ms"], cell[f"p{p}_high_ms"]) == (min(per_round), max(per_round))
    assert cell["max_ms"] == timed.max() and cell["tps_median"] == 1001.0
    # the timeline: per second, what the log says of that second
    tl = t["pgbench_timeline"].filter(pl.col("repetition") == 1).sort("second")
    lat, seconds = rounds[1]
    assert tl["second"].to_list() == [0, 1, 2] and tl["covered_s"].to_list() == [0.5, 1.0, 0.5]
    for s in (0, 1, 2):
        row = tl.row(s, named=True)
        mine = lat[seconds == s]
        assert row["transactions"] == mine.size and row["failed"] == (1 if s == 1 else 0)
        assert row["latency_p95_ms"] == np.percentile(mine[mine > 0] / 1000.0, 95)
        assert row["tps"] == mine.size / row["covered_s"]
    runs = t["pgbench_telemetry"]
    assert runs["checkpoint"].null_count() == 3 and runs["transactions_logged"].to_list() == [4000] * 3

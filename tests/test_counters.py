"""Server and system counters beside a measurement: deltas of the statistics views on every install (each version's
view names), a checkpoint inside the span flagged, and the /proc sampler's rates and flags."""

import time

import pytest

from pglab.core.run import system_sampler as ss
from pglab.pgtools import server_counters as sc


def _settled(conn, before: dict, view: str, counter: str, at_least: float) -> dict:
    """A snapshot once the server's statistics show the work: a backend reports its counters when its session
    ends (15+: at most a second later), the stats collector of older versions half a second later."""
    deadline = time.monotonic() + 10
    while True:
        snap = sc.snapshot(conn)
        if snap[view][counter] - before[view][counter] >= at_least or time.monotonic() > deadline:
            return snap
        time.sleep(0.1)


def test_server_counters_see_the_work_and_a_checkpoint_inside_the_span(cluster):
    with cluster.connect() as conn:  # the observer; the work runs in sessions of its own, as pgbench's do
        conn.execute("DROP TABLE IF EXISTS counted")
        conn.execute("CREATE TABLE counted (i int)")
        major = conn.info.server_version // 10000
        before = _settled(conn, sc.snapshot(conn), "database", "xact_commit", 0)
        with cluster.connect() as work:
            work.execute("INSERT INTO counted SELECT generate_series(1, 20000)")
        quiet = _settled(conn, before, "database", "tup_inserted", 20000)
        with cluster.connect() as work:
            work.execute("CHECKPOINT")
        after = _settled(conn, quiet, "checkpointer", "checkpoints_req", 1)
        conn.execute("DROP TABLE counted")
    got = {(r["view"], r["counter"]): r["delta"] for r in sc.deltas(before, after)}
    assert got[("database", "tup_inserted")] >= 20000
    assert ("wal", "wal_bytes") in got if major >= 14 else ("wal", "wal_bytes") not in got
    assert (got[("wal", "wal_bytes")] > 20000 * 20) if major >= 14 else True
    assert ("io", "writes") in got if major >= 16 else not any(v == "io" for v, _ in got)
    assert not sc.checkpoint_in(before, quiet) and sc.checkpoint_in(quiet, after)


def test_the_system_sampler_rates_a_busy_span():
    with ss.SystemSampler(interval_s=0.2) as s:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:  # one core busy in this process
            sum(range(10_000))
    t = s.table()
    if not s.available:
        pytest.skip("no /proc here")
    assert t.height >= 4 and (t["t_s"].diff().drop_nulls() > 0).all()
    shares = t.select(ss.SCHEMA.keys() & {"cpu_user", "cpu_system", "cpu_iowait", "cpu_steal", "cpu_idle"})
    assert ((shares.sum_horizontal() - 1).abs() < 0.02).all()  # the CPU shares of an interval add up
    summary = s.summary()
    assert summary["cpu_user_mean"] > 0.2 and summary["samples"] == t.height  # one of 2 cores busy: ~50 %


def test_steal_and_iowait_are_flagged():
    a = {
        "t": 0.0,
        "user": 0,
        "nice": 0,
        "system": 0,
        "idle": 0,
        "iowait": 0,
        "irq": 0,
        "softirq": 0,
        "steal": 0,
        "ctxt": 0,
        "procs_running": 1,
        "mem_available_kib": 1024,
        "read_sectors": 0,
        "write_sectors": 0,
    }
    b = a | {"t": 1.0, "user": 80, "steal": 10, "idle": 10, "ctxt": 500, "write_sectors": 2048}
    r = ss.rates(a, b)
    assert (r["cpu_steal"], r["ctxt_per_s"], r["write_mib_per_s"]) == (0.1, 500.0, 1.0)
    s = ss.SystemSampler()
    s._snaps = [a, b]  # two snapshots as /proc gave them: the flag is the summary's
    assert "steal 10 % of CPU time" in s.summary()["flag"]


def test_a_failing_stage_keeps_its_machine_samples(tmp_path):
    """Study.run samples the machine over the stage and keeps the samples even when the stage fails (a resumed
    stage adds an attempt); derive reads them back without a server, with the wall-clock time of each second."""
    import time

    import pytest

    from pglab.core.run import system_sampler
    from pglab.core.store import RunStore
    from pglab.studies.base import Section, Study

    class Failing(Study):
        def run_stage(self, session):
            time.sleep(1.2)
            raise RuntimeError("the server went away")

    class FakeSession:  # only the raw store is used by Study.run itself
        store = RunStore("machine", root=tmp_path)

    study = Failing("tinyfail", "05_x", (), Section("t", (), "q", {}, None, "", ""))
    t0 = time.time()
    with pytest.raises(RuntimeError):
        study.run(FakeSession())
    t = system_sampler.stage_table(FakeSession.store, "tinyfail")
    assert t.height >= 2 and set(t["attempt"]) == {1}
    first = t["time"][0].timestamp()
    assert t0 - 1 < first < time.time() + 1
    assert "steal" in system_sampler.stage_markdown(t)

"""pgbench experiments with the studies' evidence (issue 60) on a real server (the embedded install): a clients
sweep gives one latency row per condition with p50 <= p95 <= p99 <= max and a per-second timeline with the server's
counters; a rate-limited (-R) and a `-M prepared` condition run, weighted scripts reach pgbench as given, a scale
factor loads a database per scale; the tables come again from the raw store alone; bad factor values are refused
before any server starts, naming the key."""

import uuid

import polars as pl
import pytest

from pglab import params
from pglab.core import derived
from pglab.core.config import ParamsError
from pglab.core.run import session
from pglab.core.store import RunStore, finish_run
from pglab.pgtools.pgbench_output import parse_pgbench_output
from pglab.studies.experiments import derive as xderive
from pglab.studies.experiments import pgbench_report, pgbench_tables
from pglab.studies.experiments import run as xrun

MINE = "\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"


def write(folder, text: str, files: dict[str, str] | None = None):
    for name, body in (files or {}).items():
        (folder / name).write_text(body)
    p = folder / "x.yaml"
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, embedded):
    folder = tmp_path_factory.mktemp("xpgb")
    p = params.load(
        write(
            folder,
            f"""profile: xtest-pgbsweep-{uuid.uuid4().hex[:6]}
servers: {{use: [{embedded.name}]}}
experiments:
  - name: clients
    question: How do tps and latency move from 1 to 2 clients?
    data: {{pgbench: {{scale: 1}}}}
    workload: {{pgbench: {{builtin: select-only, duration_s: 2}}}}
    servers: [{embedded.name}]
    factors: {{clients: [1, 2]}}
    rounds: 2
    warmups: 0
  - name: rate_protocol
    question: At 50 tps, does -M prepared lower the latency of my mix?
    data: {{pgbench: {{scale: 1}}}}
    workload: {{pgbench: {{scripts: [select-only@3, mine.sql@1], rate: 50, duration_s: 2}}}}
    servers: [{embedded.name}]
    factors: {{protocol: [simple, prepared]}}
    rounds: 2
    warmups: 0
  - name: scales
    question: Does scale 2 read slower than scale 1?
    workload: {{pgbench: {{builtin: select-only, duration_s: 1}}}}
    servers: [{embedded.name}]
    factors: {{scale: [1, 2]}}
    rounds: 2
    warmups: 0
""",
            {"mine.sql": MINE},
        )
    )
    s = session.begin(p, None, study="experiments")
    s.start()
    try:
        assert [r.steps_run for r in xrun.run_all(s)] == [6, 6, 6]
        with s.servers[0].connect("pgbench_s2") as conn:  # the scale factor's second database, while it runs
            branches = conn.execute("SELECT count(*) FROM pgbench_branches").fetchone()[0]
    finally:
        s.close()
    finish_run(p.profile, s.run_id)
    return s, branches, xderive.derive(s.store, s.params)


def test_clients_sweep_percentiles_and_timeline(sweep):
    _, _, t = sweep
    lat = t["experiments_latency"].filter(experiment="clients").sort("condition")
    # one row per condition (the baseline, its A/A copy, clients=2), each with its clients and ordered percentiles
    assert lat["condition"].to_list() == ["clients=1", "clients=1~aa", "clients=2"]
    assert lat["clients"].to_list() == [1, 1, 2]
    for r in lat.iter_rows(named=True):
        assert r["transactions"] > 0 and r["tps_median"] > 0 and r["n_rounds"] == 2, r
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"], r
    tl = t["experiments_timeline"].filter(experiment="clients")
    # every measured run has its seconds: a 2 s run spans 2 or 3 whole-second rows, transactions in them
    per_run = tl.group_by("condition", "repetition").agg(pl.len().alias("seconds"), pl.col("transactions").sum())
    assert per_run.height == 6 and per_run["seconds"].min() >= 2 and per_run["transactions"].min() > 0, per_run
    assert tl["checkpoint"].dtype == pl.Boolean
    counters = t["experiments_server_counters"].filter(experiment="clients", view="database", counter="xact_commit")
    assert counters.height == 6 and (counters["delta"] > 0).all(), counters
    runs = t["experiments_runs"].filter(experiment="clients")
    assert runs.height == 6 and runs["p99_ms"].is_not_null().all()
    # the report's part: a table per condition, tps and latency against clients, the timeline
    shown = pgbench_report.section("clients", t)
    assert len(shown) == 4 and "clients" in shown[2].to_dict()["hconcat"][0]["encoding"]["x"]["field"]


def test_rate_prepared_and_weighted_scripts(sweep):
    s, _, t = sweep
    recs = s.store.records(xrun.store_name(s.params.experiments[1])).filter(pl.col("warmup") == "false")
    if recs.height == 0:  # the store keeps booleans as it was given them
        recs = s.store.records(xrun.store_name(s.params.experiments[1])).filter(~pl.col("warmup").cast(pl.Boolean))
    assert recs.height == 6 and recs["error"].is_null().all(), recs.select("condition", "error")
    for r in recs.iter_rows(named=True):
        protocol = "prepared" if r["condition"] == "protocol=prepared" else "simple"
        assert f"-M {protocol}" in r["command"] and "-R 50" in r["command"], r["command"]
        assert "-b select-only@3" in r["command"] and "-f script2_mine.sql@1" in r["command"], r["command"]
        out = parse_pgbench_output(s.store.artifact_path(r["stdout_file"]).read_text())
        assert out["query_mode"] == protocol
        assert out["lag_avg_ms"] is not None  # a rate-limited run reports its schedule lag
        assert [x["weight"] for x in out["scripts"]] == [3, 1], out["scripts"]
        assert all(x["transactions"] > 0 for x in out["scripts"]), out["scripts"]
        # 50 tps asked for 2 s: Poisson arrivals give ~100 transactions, well inside 25-75 tps
        assert 25 < float(r["value"]) < 75, r["value"]
    lat = t["experiments_latency"].filter(experiment="rate_protocol")
    assert set(lat["protocol"]) == {"simple", "prepared"} and (lat["rate"] == 50).all()


def test_scale_factor_loads_a_database_per_scale(sweep):
    s, branches, t = sweep
    setup = s.store.load_json(xrun.setup_path(s.params.experiments[2]))
    server = setup["servers"][0]
    assert setup["prepared"][server]["data"]["scales"] == [1, 2]
    lat = t["experiments_latency"].filter(experiment="scales").sort("condition")
    assert lat["scale"].to_list() == [1, 1, 2] and (lat["tps_median"] > 0).all()
    runs = t["experiments_runs"].filter(experiment="scales")
    assert runs["value"].is_not_null().all()
    assert branches == 2  # scale 2's database holds scale 2's data
    recs = s.store.records(xrun.store_name(s.params.experiments[2])).filter(condition="scale=2")
    assert recs["scale"].cast(pl.Int64).to_list() == [2, 2] and recs["command"].str.contains("-c 1 ").all()


def test_tables_again_from_raw_alone(sweep, tmp_path):
    s, _, t = sweep
    again = xderive.derive(RunStore(s.run_id), s.params)
    derived.write({k: t[k] for k in pgbench_tables.TABLES}, "a", root=tmp_path)
    derived.write({k: again[k] for k in pgbench_tables.TABLES}, "b", root=tmp_path)
    for name in pgbench_tables.TABLES:
        assert (tmp_path / "a" / f"{name}.csv").read_bytes() == (tmp_path / "b" / f"{name}.csv").read_bytes(), name
    # without a pgbench experiment every table is there, empty, with its columns
    empty = pgbench_tables.tables(RunStore(s.run_id), [])
    assert all(empty[k].is_empty() and empty[k].width > 5 for k in pgbench_tables.TABLES)


BAD = {
    "threads above clients": (
        "workload: {pgbench: {builtin: select-only, threads: 2}}\n    factors: {clients: [1, 4]}",
        r"factors: expected at most one thread per client in every condition; got threads 2 with clients 1",
    ),
    "threads above clients, fixed": (
        "workload: {pgbench: {builtin: select-only, clients: 1, threads: 2}}\n    factors: {x.a: [1, 2]}",
        r"workload\.pgbench\.threads: expected at most one thread per client",
    ),
    "rate zero": (
        "workload: {pgbench: {builtin: select-only}}\n    factors: {rate: [0, 100]}",
        r"factors\.rate\[0\]: expected transactions per second above 0",
    ),
    "rate negative, fixed": (
        "workload: {pgbench: {builtin: select-only, rate: -5}}\n    factors: {clients: [1, 2]}",
        r"workload\.pgbench\.rate: Input should be greater than 0",
    ),
    "unknown protocol": (
        "workload: {pgbench: {builtin: select-only}}\n    factors: {protocol: [simple, binary]}",
        r"factors\.protocol\[1\]: expected one of \['simple', 'extended', 'prepared'\]",
    ),
    "clients not a number": (
        "workload: {pgbench: {builtin: select-only}}\n    factors: {clients: [1, many]}",
        r"factors\.clients\[1\]: expected a whole number from 1",
    ),
    "weight zero": (
        "workload: {pgbench: {scripts: [select-only@0, ok.sql@1]}}\n    factors: {clients: [1, 2]}",
        r"scripts\[0\]: expected a weight that is a positive whole number; got '0'",
    ),
    "weight a fraction": (
        "workload: {pgbench: {scripts: [select-only@2, ok.sql@1.5]}}\n    factors: {clients: [1, 2]}",
        r"scripts\[1\]: expected a weight that is a positive whole number; got '1.5'",
    ),
    "script missing": (
        "workload: {pgbench: {scripts: [select-only@2, gone.sql@1]}}\n    factors: {clients: [1, 2]}",
        r"experiments\[0\] \(e1\)\.workload\.pgbench\.scripts\[1\]: no such file .*gone\.sql",
    ),
    "pgbench option on SQL": (
        "workload: {sql: ok.sql}\n    factors: {clients: [1, 2]}",
        r"factors\.clients: a pgbench option; this experiment's workload is SQL",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_factor_values_refused(case, tmp_path):
    body, message = BAD[case]
    path = write(
        tmp_path,
        f"profile: xbadpgb\nexperiments:\n  - name: e1\n    question: q?\n    {body}\n",
        {"ok.sql": "SELECT 1;\n"},
    )
    with pytest.raises(ParamsError, match=message) as got:
        params.load(path)
    assert str(path) in str(got.value) and "e1" in str(got.value), got.value

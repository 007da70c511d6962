"""The auto_explain stage on real servers, on a tiny grid: every condition × item × server recorded, the
log proof (a plan per transaction where one must be logged, none elsewhere; ANALYZE plans with actual
rows, log_timing = off plans without times), servers reset afterwards; per-connection loading without a
restart; external servers; and the params section's errors."""

import math
import os
import statistics
import uuid
from collections import Counter

import polars as pl
import pytest
import yaml

from pglab import params
from pglab.core.run import outcomes, schedule, session
from pglab.core.servers.cluster import Cluster
from pglab.params import ParamsError
from pglab.pgtools import pgbench
from pglab.studies.auto_explain import derive as auto_explain_results
from pglab.studies.auto_explain import verdicts as auto_explain_verdicts
from pglab.studies.auto_explain.params import EXPERIMENT, AutoExplainParams
from pglab.studies.auto_explain.run import (
    LOGGED_TXNS,
    PLAIN,
    PRELOAD,
    interleaved_script,
    run_stage,
    set_lines,
    split_log,
    williams,
)

TINY_RUN = {
    "mode": "transactions",
    "transactions": {"limit": 60, "count": 3, "count_serial": 3},
    "repetitions": 2,
    "warmups": 0,
    "settle_s": 0,
}

# limit's 1,500 transactions a condition are more than a run keeps: LOGGED_TXNS of them, evenly spaced
SAMPLED_RUN = TINY_RUN | {"transactions": {"limit": 1500, "count": 3, "count_serial": 3}}


def _params_file(tmp_path, name, section, **top):
    doc = {"profile": name, "settings": {"shared_buffers": "128MB", "jit": False}, "auto_explain": section, **top}
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    """The default matrix (plus a JSON-format logged condition) on every install, on a small table."""
    conditions = AutoExplainParams().model_dump(mode="json")["conditions"]
    conditions["analyze_json_logged"] = {
        "items": ["count"],
        "settings": {
            "auto_explain.log_min_duration": 0,
            "auto_explain.log_analyze": True,
            "auto_explain.log_format": "json",
        },
    }
    f = _params_file(
        tmp_path_factory.mktemp("ae"), "pytest-ae", {"rows": 20000, "conditions": conditions, "run": SAMPLED_RUN}
    )
    s = session.begin(params.load(str(f)), run_id=f"pytest-ae-{uuid.uuid4().hex[:8]}")  # fresh: never resume an old run
    s.start()
    try:
        result = run_stage(s)
        with s.servers[0].connect() as conn:  # the study's settings are gone again
            after = conn.execute(
                "SELECT current_setting('shared_buffers'), current_setting('autovacuum'), "
                "current_setting('log_destination')"
            ).fetchone()
    finally:
        s.close()
    yield s, result, after


def test_every_cell_is_recorded(stage):
    s, result, _ = stage
    cfg = s.params.auto_explain
    runs = result.seen["runs"]
    want = {(srv.name, c, i, r) for srv in s.servers for c, i in cfg.cells() for r in range(2)}
    got = {(x["server"], x["condition"], x["item"], x["repetition"]) for x in runs.iter_rows(named=True)}
    assert got == want
    assert runs["error"].null_count() == runs.height and runs["value"].null_count() == 0
    alone = runs.filter(pl.col("batch_conditions") == 1)
    shared = runs.filter(pl.col("batch_conditions") > 1)
    # a condition that does not load auto_explain runs alone; the others share one run per server, item and round
    assert set(alone["condition"]) == {"not_loaded"} and set(shared["condition"]) == {c for c, _ in cfg.cells()} - {
        "not_loaded"
    }
    m = cfg.run.queries_per_set  # whole SET blocks of m queries: each condition the same number, ≥ its -t
    per_item = {i: math.ceil(n / m) * m for i, n in cfg.run.transactions.items()}
    assert (runs["transactions"] == runs["item"].replace_strict(per_item)).all()
    batches = shared.group_by("batch").agg(pl.col("condition").n_unique(), pl.col("batch_conditions").first())
    assert (batches["condition"] == batches["batch_conditions"]).all()  # one run measured them all
    # every run of the same shape (a run alone too: its SET blocks set the baseline's settings as placeholders)
    assert runs["command"].str.contains("-D i=-1").all() and set(runs["batch_order"]) == {"williams"}
    # the items of run.split_cpus ran with client and backend on CPUs of their own (core.servers.cpus), the others
    # wherever the scheduler put them (a parallel count's workers would start on the backend's CPU)
    split = runs["item"].is_in(cfg.run.split_cpus)
    if len(os.sched_getaffinity(0)) > 1:
        assert runs.filter(split)["cpus"].str.starts_with("client CPU ").all() and split.any()
    assert runs.filter(~split)["cpus"].null_count() == runs.filter(~split).height
    # the value is the median of the run's transactions' latencies, every one of them kept as a raw artefact
    # the median of the timed transactions; a run whose every logged latency is pgbench's 0 µs has none: its mean
    assert set(runs["value_is"]) <= {"median", "mean"}
    assert runs["command"].str.contains("--log-prefix=TXLOG/txn").all()
    assert not runs["command"].str.contains("/tmp").any()  # no temporary folder in the recorded command
    for r in runs.iter_rows(named=True):
        tag = f"{r['server']}/{r['condition']}_{r['item']}_r{r['repetition']}"
        lat = [int(x) for x in s.store.artifact_path(f"auto_explain/latencies/{tag}.txt").read_text().split()]
        assert len(lat) == min(r["transactions"], LOGGED_TXNS)  # evenly spaced over the run where it had more
        # pgbench's 0 µs entries are no latency (pgbench.timed): kept in the file, left out of the median
        timed = pgbench.timed(lat)
        assert r["value_is"] == ("median" if timed else "mean")
        if timed and r["transactions"] <= LOGGED_TXNS:
            assert r["value"] == pytest.approx(statistics.median(timed) / 1000) == r["latency_median_ms"]
        elif not timed:
            assert r["value"] == pytest.approx(r["latency_mean_ms"]) and r["latency_median_ms"] is None
    # auto_explain was in shared_preload_libraries exactly for the loaded conditions
    assert (runs["preloaded"] == (runs["condition"] != "not_loaded")).all()
    assert (result.seen["servers"]["restarts"] >= 2).all()  # a switch per round, not per cell


def test_log_proof(stage):
    s, result, _ = stage
    runs = result.seen["runs"]
    assert set(runs["log_check"]) == {"passed"}, runs.filter(runs["log_check"] != "passed")["log_reason"].to_list()
    assert set(runs["log_destination"]) == {"stderr"}  # the study's text log, read where the server wrote it
    logging = runs.filter(runs["expect_plans"] == "every")
    quiet = runs.filter(runs["expect_plans"] == "none")
    assert set(logging["condition"]) == {
        "explain_logged",
        "analyze_logged",
        "analyze_no_timing_logged",
        "analyze_json_logged",
    }
    assert (logging["plans_logged"] == logging["transactions"]).all()
    assert (quiet["plans_logged"] == 0).all() and quiet.height == runs.height - logging.height
    assert (logging["plans_parsed"] > 0).all() and (logging["parse_errors"] == 0).all()
    assert (logging["log_bytes_per_txn"] > 100).all()
    by = {c: logging.filter(logging["condition"] == c) for c in set(logging["condition"])}
    for cond, rows_, times in [
        ("analyze_logged", True, True),
        ("analyze_no_timing_logged", True, False),
        ("explain_logged", False, False),
        ("analyze_json_logged", True, True),
    ]:
        d = by[cond]
        assert ((d["plans_with_rows"] == d["plans_parsed"]) if rows_ else (d["plans_with_rows"] == 0)).all(), cond
        assert ((d["plans_with_times"] == d["plans_parsed"]) if times else (d["plans_with_times"] == 0)).all(), cond
    assert set(by["analyze_json_logged"]["plan_format"]) == {"json"}
    assert set(by["analyze_logged"]["plan_format"]) == {"text"}


def test_analysis_and_reset(stage):
    s, result, after = stage
    cfg = s.params.auto_explain
    tables = auto_explain_results.analyse(result.seen, cfg)
    ratios = tables["auto_explain_ratios"]
    overhead = ratios.filter(ratios["comparison"] == "overhead")
    assert set(ratios["design"]) == {"interleaved"}  # its own priors' design (cluster_priors.DECLARED)
    want = {(srv.name, c, i) for srv in s.servers for c, i in cfg.cells() if c != cfg.baseline}
    assert set(zip(overhead["server"], overhead["condition"], overhead["item"], strict=True)) == want
    # two repetitions each: every ratio has an interval (on failure: which, and the runs' errors, to tell why)
    assert overhead["ci_low"].null_count() == 0, (
        overhead.filter(pl.col("ci_low").is_null()).to_dicts(),
        result.seen["runs"]
        .filter(pl.col("error").is_not_null())
        .select("server", "condition", "item", "round", "error")
        .to_dicts(),
    )
    logging = ratios.filter(ratios["comparison"] == "logging")
    assert set(zip(logging["condition"], logging["baseline"], strict=True)) == {
        ("explain_logged", "explain"),
        ("analyze_logged", "analyze"),
        ("analyze_no_timing_logged", "analyze_no_timing"),
    }
    findings = auto_explain_verdicts.judge(tables["auto_explain_evidence"])
    assert findings.height == 12 * len(s.servers)
    # two rounds: min–max covers 50 %, so nothing is decided (and nothing is missing from the matrix); below the
    # study's 1e6 rows the count's claims are still scored, on their quantities per row (auto_explain.verdicts)
    assert cfg.rows < 1_000_000 and set(findings["verdict"]) == {"undetermined"}, findings["evidence"].to_list()
    noise = tables["auto_explain_noise"]
    assert set(noise["server"]) == {*(srv.name for srv in s.servers), "all"} and (noise["n_pairs"] > 0).all()
    assert tables["auto_explain_drift"].height == 3 * len(s.servers)
    plans = tables["auto_explain_plans"]
    # count runs the study's 2-worker plan (a gather of 3 partial counts over the rows), count_serial none
    count = plans.filter(plans["item"] == "count")
    assert set(count["workers_planned"]) == {2} and (count["rows_processed"] >= 20002).all()
    assert set(plans.filter(plans["item"] == "count_serial")["rows_processed"]) == {20001.0}
    assert after[:2] == ("128MB", "on") and after[2] in ("jsonlog", "csvlog")  # the kit's log again


def test_interleaved_script_and_its_log(tmp_path):
    # two conditions, a SET block and 2 queries each: transaction t sets order[(t // 3) % 4] when t % 3 == 0
    text, order = interleaved_script("SELECT 1;", [["SET a = '1';"], ["SET a = '2';"]], 2)
    assert order == [0, 1, 1, 0]  # the Williams design of two: each after the other once
    assert text.splitlines()[:5] == [
        "\\set i :i + 1",
        "\\if :i % 3 != 0",
        "SELECT 1;",
        "\\else",
        "\\set pos (:i / 3) % 4",
    ]
    assert text.count("SET a = '2';") == 2 and text.splitlines()[-2:] == ["\\endif", "\\endif"]
    # pgbench -l lines: client, transaction, latency µs (or a word when it failed), script, epoch s, µs
    lat = ["20", "90", "91", "21", "80", "failed", "22", "81", "82", "23", "92"]
    (tmp_path / "txn.123").write_text("".join(f"0 {t + 1} {x} 0 1 {t}\n" for t, x in enumerate(lat)))
    per_cond, sequence = split_log(str(tmp_path), ["a", "b"], order, 2)
    assert per_cond == {"a": [90, 91, 92], "b": [80, None, 81, 82]}
    assert sequence == ["a", "a", "b", "b", "b", "b", "a"]


def test_williams_design_balances_what_comes_before():
    for k in (2, 3, 4, 5, 9):
        rows = williams(k)
        assert len(rows) == (k if k % 2 == 0 else 2 * k) and all(sorted(r) == list(range(k)) for r in rows)
        pairs = Counter((a, b) for r in rows for a, b in zip(r, r[1:], strict=False))
        assert len(pairs) == k * (k - 1) and len(set(pairs.values())) == 1, (k, pairs)


def test_set_lines_set_its_own_and_reset_the_others():
    lines = set_lines({"auto_explain.log_analyze": True, "auto_explain.log_min_duration": -1}, NAMES)
    assert lines == [
        "SET auto_explain.log_analyze = 'on';",
        "SET auto_explain.log_min_duration = '-1';",
        "RESET auto_explain.log_timing;",
    ]


NAMES = ["auto_explain.log_analyze", "auto_explain.log_min_duration", "auto_explain.log_timing"]


def test_snake_order_restarts_once_per_round():
    cells = [("a", c, "i") for c in ("x", "y", "z")] + [("b", c, "i") for c in ("x", "y", "z")]
    steps = schedule.plan(cells, repetitions=3, warmups=1, shuffle_seed=7)
    ordered = schedule.grouped(steps, lambda s: PRELOAD if s.condition != "x" else PLAIN)
    assert sorted(ordered, key=lambda s: (s.round, s.server, s.condition)) == sorted(
        steps, key=lambda s: (s.round, s.server, s.condition)
    )
    groups = [PRELOAD if s.condition != "x" else PLAIN for s in ordered]
    switches = sum(a != b for a, b in zip(groups, groups[1:], strict=False))
    assert switches == 4  # 4 rounds: one switch inside each, none between rounds
    assert [s.round for s in ordered] == sorted(s.round for s in ordered)  # rounds stay whole


def test_session_preload_and_external_servers(tmp_path, embedded):
    """Per-connection loading (no restart); an external server without allow_destructive is recorded as
    skipped, one with it runs but its log is out of reach."""
    ext = Cluster(embedded, name="ae-external")
    ext.start({"shared_buffers": "128MB"})
    try:
        dsn = ext.conninfo()
        section = {
            "rows": 2000,
            "loading": "session_preload",
            "conditions": {
                "not_loaded": {"load": False},
                "loaded_disabled": {"settings": {"auto_explain.log_min_duration": -1}},
                "explain_logged": {"settings": {"auto_explain.log_min_duration": 0}},
            },
            "items": {"limit": {"sql": "SELECT c1 FROM tab1 LIMIT 1;"}},
            "run": TINY_RUN | {"repetitions": 1},
        }
        servers = {
            "use": [embedded.name, "lab", "labw"],
            "external": [{"name": "lab", "dsn": dsn}, {"name": "labw", "dsn": dsn, "allow_destructive": True}],
        }
        f = _params_file(tmp_path, "pytest-ae-session", section, servers=servers)
        s = session.begin(params.load(str(f)), run_id=f"pytest-ae-session-{uuid.uuid4().hex[:8]}")
        s.start()
        try:
            result = run_stage(s)
        finally:
            s.close()
        runs = result.seen["runs"]
        kit = runs.filter(runs["server"] == embedded.name)
        assert set(kit["log_check"]) == {"passed"} and not kit["restarted_before"].any()
        assert kit.filter(kit["condition"] == "explain_logged")["plans_logged"].to_list() == [60]
        assert set(kit["loading"]) == {"session_preload"}
        assert runs.filter(runs["server"] == "lab").is_empty()  # a recorded skip, not failed runs
        skips = outcomes.skipped(s.store, [EXPERIMENT])
        assert skips["server"].to_list() == ["lab"] and "allow_destructive" in skips["reason"][0]
        labw = runs.filter(runs["server"] == "labw")
        assert labw["value"].null_count() == 0 and set(labw["log_check"]) == {"not available"}
        assert all("not reachable" in r for r in labw["log_reason"])
        srv = {r["server"]: r for r in result.seen["servers"].iter_rows(named=True)}
        assert srv["labw"]["restarts"] == 0 and srv["labw"]["loading"] == "session_preload"
    finally:
        ext.stop()


@pytest.mark.parametrize(
    "section, expected",
    [
        ({"rowz": 1}, r"auto_explain.rowz: unknown key"),
        ({"loading": "always"}, r"auto_explain.loading: .*'shared_preload' or 'session_preload'"),
        (
            {"conditions": {"x": {"items": ["nope"]}}, "baseline": "x"},
            r"auto_explain.conditions: x.items: expected 'all' or names among \['count', 'count_serial', 'limit'\]",
        ),
        ({"baseline": "nobody"}, r"auto_explain.baseline: expected one of the conditions"),
        (
            {"run": {"mode": "transactions", "transactions": {"limit": 5}}},
            r"auto_explain.run: mode transactions: expected transactions for every item; missing \['count', ",
        ),
        (
            {"conditions": {"x": {"settings": {"auto_explain.log_min_duration": "soon"}}}, "baseline": "x"},
            r"auto_explain.conditions.x.settings: auto_explain.log_min_duration: expected a number of ms",
        ),
        (
            {"conditions": {"x": {"load": False, "settings": {"auto_explain.log_analyze": True}}}, "baseline": "x"},
            r"auto_explain.conditions.x: .*load: false cannot have auto_explain",
        ),
        ({"run": {"duration_s": 0}}, r"auto_explain.run.duration_s: .*greater than or equal to 1"),
    ],
)
def test_params_errors_name_file_key_and_expectation(tmp_path, section, expected):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"auto_explain": section}))
    with pytest.raises(ParamsError, match=r"p\.yaml: " + expected):
        params.load(f, check_servers=False)


def test_default_params_document_the_defaults():
    """params/default.yaml spells out the section: it must say what the code does, but for the one thing it adds:
    a second A/A condition (the default's count floors from 8 pairs per item; a profile without it, like the quick
    one, keeps one)."""
    mine = params.load("params/default.yaml", check_servers=False).auto_explain
    assert mine.aa_names == ["loaded_disabled_aa", "loaded_disabled_aa2"]
    conditions = {k: c for k, c in mine.conditions.items() if k != "loaded_disabled_aa2"}
    one = mine.model_copy(update={"conditions": conditions, "aa_condition": "loaded_disabled_aa"})
    assert one == AutoExplainParams()


def test_log_summary_of_a_server_whose_log_is_out_of_reach():
    """An external server's runs carry no log counts at all: the summary has them as nulls (it once failed
    with ColumnNotFoundError 'plans_logged' on any external server)."""
    import polars as pl

    checks = pl.DataFrame(
        {
            "server": ["ext"],
            "condition": ["loaded_disabled"],
            "item": ["limit"],
            "repetition": [0],
            "warmup": [False],
            "expect_plans": ["none"],
            "log_check": ["not available"],
            "transactions": [10],
        }
    )
    out = auto_explain_results.log_summary(checks, AutoExplainParams())
    row = out.row(0, named=True)
    assert row["plans_logged"] is None and row["other"] == "not available" and row["transactions"] == 10

"""JIT per operator (S4 test 1) on real servers, on a tiny table: a server without JIT is recorded as not
available and not run; on the JIT server every cell is recorded, JIT off and on return the same (and the
right) values, the plans carry a JIT block exactly when JIT is on, with optimisation as the thresholds say;
a table of the same name in the role's own schema is left alone; a failed run has no time in either metric;
the report section works on the derived tables the stage wrote; the params section's errors and its reading
of unquoted on / off; the one verdict rule on synthetic rounds."""

import uuid

import polars as pl
import pytest
import yaml
from psycopg import sql

from pglab import params
from pglab.core import derived
from pglab.core.derived import Tables
from pglab.core.run import session
from pglab.core.stats import findings
from pglab.params import ParamsError
from pglab.studies.jit_operators import report as report
from pglab.studies.jit_operators import verdicts as jv
from pglab.studies.jit_operators.derive import RUNS_SCHEMA, summary, timed_long
from pglab.studies.jit_operators.derive import tables as stage_tables
from pglab.studies.jit_operators.params import OPERATORS
from pglab.studies.jit_operators.run import measure_statement, run_stage

ROWS = 20000
REPS = 2


def _params_file(path, section, name="pytest-jit"):
    doc = {"profile": name, "settings": {"shared_buffers": "128MB", "jit": False}, "jit_operators": section}
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


@pytest.fixture(scope="module")
def stage(tmp_path_factory, installs):
    if not any(i.jit for i in installs):
        pytest.skip("no install with llvmjit on this machine")
    d = tmp_path_factory.mktemp("jit")
    f = _params_file(d, {"rows": ROWS, "repetitions": REPS, "warmups": 1})
    # fresh: never resume an old run
    s = session.begin(params.load(str(f)), run_id=f"pytest-jit-{uuid.uuid4().hex[:8]}")
    s.start()
    try:
        p = s.params.jit_operators
        for x in s.servers:
            if x.install and x.install.jit:
                _decoy(x, p.database)
        result = run_stage(s)
        tables = stage_tables(s.store, s.params.jit_operators, result.seen["setup"])
        root = d / "derived"
        derived.write(tables, s.profile, root=root)
        fnd = jv.findings_from(
            *(tables[f"jit_operators_{n}"] for n in ("setup", "paired", "overall", "noise")), p.study_condition
        )
        derived.write_table(fnd, "jit_operators_findings", s.profile, root=root)
        yield s, result, tables, root  # servers still up for the tests that talk to them
    finally:
        s.close()


DECOY = "someone else's table"


def _decoy(server, dbname):
    """A jit_ops in the role's own schema, first on search_path ("$user", public): what an external server
    might hold. An unqualified DROP / CREATE would hit it."""
    with server.connect() as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    with server.connect(dbname) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS AUTHORIZATION CURRENT_USER")
        user = conn.execute("SELECT current_user").fetchone()[0]
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.jit_ops").format(sql.Identifier(user)))
        conn.execute("CREATE TABLE jit_ops (note text)")  # lands in the role's schema
        conn.execute("INSERT INTO jit_ops VALUES (%s)", (DECOY,))


def _jit_servers(s):
    return [x.name for x in s.servers if x.install and x.install.jit]


def test_not_available_is_recorded_not_dropped(stage):
    s, result, tables, _ = stage
    setup = {r["server"]: r for r in result.seen["setup"].iter_rows(named=True)}
    assert set(setup) == {x.name for x in s.servers}
    for x in s.servers:
        row = setup[x.name]
        assert row["jit_available"] == bool(x.install.jit), row
        if not x.install.jit:
            assert row["reason"] and "not available" in row["reason"]
            assert row["table_bytes"] is None
    ran = set(tables["jit_operators_runs"]["server"])
    assert ran == set(_jit_servers(s))


def test_table_in_the_roles_schema_left_alone(stage):
    s, _, tables, _ = stage
    p = s.params.jit_operators
    for x in s.servers:
        if x.name not in _jit_servers(s):
            continue
        with x.connect(p.database) as conn:
            assert conn.execute("SELECT note FROM jit_ops").fetchall() == [(DECOY,)]  # "$user".jit_ops
            assert conn.execute("SELECT count(*) FROM public.jit_ops").fetchone()[0] == ROWS


def test_failed_run_has_no_time(stage):
    s, _, _, _ = stage
    x = s.servers[0]  # CPU time is read for any kit server, JIT or not
    with x.connect(settings={"statement_timeout": "50"}) as conn:
        slow = measure_statement(conn, "SELECT count(*) FROM generate_series(1, 200000000)", local=True)
        fine = measure_statement(conn, "SELECT count(*) FROM generate_series(1, 1000)", local=True)
    assert slow["error"] and "statement timeout" in slow["error"], slow
    assert slow["value"] is None and slow["cpu_ms"] is None
    assert fine["result"] == "1000" and fine["value"] > 0 and fine["cpu_ms"] > 0


def test_failed_runs_are_missing_in_both_metrics():
    # as an older record of a statement timeout held it: 300 s of CPU time beside the error
    rows = [
        {
            "server": "a",
            "condition": "off",
            "operator": "sum",
            "repetition": i,
            "warmup": False,
            "round": i,
            "ms": 10.0,
            "cpu_ms": 9.5,
            "result": "1",
            "error": None,
        }
        for i in range(3)
    ]
    rows.append(
        {
            "server": "a",
            "condition": "off",
            "operator": "sum",
            "repetition": 3,
            "warmup": False,
            "round": 3,
            "ms": None,
            "cpu_ms": 300_000.0,
            "result": None,
            "error": "canceling statement",
        }
    )
    # an external server: no CPU time at all, so no cpu rows, not even for its failure
    rows += [r | {"server": "b", "cpu_ms": None} for r in rows]
    r = pl.from_dicts(rows, schema=RUNS_SCHEMA)
    long = timed_long(r)
    assert long.filter(pl.col("ms") > 1000).is_empty()
    summ = {(x["server"], x["metric"]): x for x in summary(r).iter_rows(named=True)}
    assert set(summ) == {("a", "wall"), ("a", "cpu"), ("b", "wall")}
    for key, median in {("a", "wall"): 10.0, ("a", "cpu"): 9.5, ("b", "wall"): 10.0}.items():
        assert (summ[key]["n"], summ[key]["n_missing"], summ[key]["max"]) == (3, 1, median), summ[key]


def test_every_cell_recorded_and_results_agree(stage):
    s, _, tables, _ = stage
    p = s.params.jit_operators
    runs = tables["jit_operators_runs"]
    want = {
        (srv, c, op, r, w)
        for srv in _jit_servers(s)
        for c in p.measured_conditions()
        for op in p.operators
        for r, w in [*((i, False) for i in range(REPS)), (0, True)]
    }
    got = set(runs.select("server", "condition", "operator", "repetition", "warmup").iter_rows())
    assert got == want
    assert runs["error"].null_count() == runs.height and (runs["ms"] > 0).all()
    # the backend's CPU time beside the wall time (local kit servers): positive, and within the wall time
    assert runs["cpu_ms"].null_count() == 0 and (runs["cpu_ms"] > 0).all()
    assert (runs["cpu_ms"] <= runs["ms"] + 1.0).all()
    checks = tables["jit_operators_results"]
    assert checks.height == len(_jit_servers(s)) * len(OPERATORS)
    assert checks["agree"].all(), checks.filter(~checks["agree"])
    assert (checks["conditions"] == len(p.measured_conditions())).all()  # the A/A copy agrees too
    # and the values are right: the generator, computed here
    c1 = [i % 1000 + 1 for i in range(1, ROWS + 1)]
    c2 = [(i * 7) % 997 + 1 for i in range(1, ROWS + 1)]
    expect = {
        "count": ROWS,
        "count_star": ROWS,
        "sum": sum(c1),
        "max": max(c1),
        "mul": sum(a * b for a, b in zip(c1, c2, strict=True)),
        "sub": sum(a - b for a, b in zip(c1, c2, strict=True)),
    }
    for r in checks.iter_rows(named=True):
        if r["operator"] in expect:
            assert int(r["result"]) == expect[r["operator"]], r
        elif r["operator"] == "avg":
            assert float(r["result"]) == pytest.approx(sum(c1) / ROWS)


def test_jit_block_exactly_when_on(stage):
    s, _, tables, _ = stage
    p = s.params.jit_operators
    plans = tables["jit_operators_plans"]
    assert plans["error"].null_count() == plans.height
    assert plans.height == len(_jit_servers(s)) * len(p.conditions) * len(p.operators)
    for r in plans.iter_rows(named=True):
        on = p.conditions[r["condition"]]["jit"]
        assert r["jit"] == on, r
        assert r["workers_planned"] == 0  # parallel query off in every condition
        if on:
            assert r["jit_functions"] > 0 and r["jit_total_ms"] > 0
            # the tiny plan stays below the 500000 thresholds of "on"; on_optimized forces both
            assert r["jit_optimization"] == (r["condition"] == "on_optimized"), r
            assert r["jit_inlining"] == (r["condition"] == "on_optimized"), r
        else:
            assert r["jit_functions"] is None
    st = {
        (r["server"], r["condition"], r["name"]): r["setting"]
        for r in tables["jit_operators_settings"].iter_rows(named=True)
    }
    for srv in _jit_servers(s):
        assert st[(srv, "off", "jit")] == "off" and st[(srv, "on", "jit")] == "on"
        assert st[(srv, "on", "jit_above_cost")] == "0"
        assert st[(srv, "on_optimized", "jit_optimize_above_cost")] == "0"
        assert st[(srv, "on", "max_parallel_workers_per_gather")] == "0"
    jt = tables["jit_operators_jit_time"]
    assert jt.height == len(_jit_servers(s)) * sum(1 for c in p.conditions.values() if c["jit"]) * len(p.operators)
    assert (jt["compiled_code_saved_ms"] - jt["saved_ms"] - jt["jit_total_ms"]).abs().max() < 1e-9


def test_report_section_on_derived_data(stage):
    s, _, _, root = stage
    profile = s.profile
    for name in report.TABLES:
        assert (root / profile / f"{name}.csv").exists(), name
    text = report.method(Tables(profile, root))
    for x in s.servers:
        assert x.name in text
    assert "not available" in text and f"{ROWS:,} rows" in text
    for chart in report.charts(Tables(profile, root)):
        chart.to_dict()
    f = report.findings(Tables(profile, root))
    assert set(f["verdict"]) <= set(findings.VERDICTS)
    assert f.height == len(s.servers) * (len(OPERATORS) + 1)
    for x in s.servers:
        mine = f.filter(f["server"] == x.name)
        if x.install.jit:  # the one rule in the fast mode (the default): our ratio JIT / off with its interval
            assert not {findings.NOT_RUN, findings.NOT_TESTABLE} & set(mine["verdict"])
            assert all(
                "JIT on / off in the fast mode" in e and "fast mode: 10 % quantile of every execution" in e.lower()
                for e in mine["evidence"]
            )
            assert mine["our_value"].null_count() == 0 and mine["study_value"].null_count() == 0
        else:
            assert set(mine["verdict"]) == {findings.NOT_TESTABLE}
            assert all("needs a build with JIT (llvmjit)" in e for e in mine["evidence"])
    nz = derived.read_table("jit_operators_noise", profile, root=root)
    assert sorted(nz["server"]) == sorted(_jit_servers(s)) and (nz["n_pairs"] == len(OPERATORS)).all()
    assert "A/A control" in text and "fast mode" in text
    # deterministic: the same tables give the same bytes
    assert report.method(Tables(profile, root)) == text
    assert report.findings(Tables(profile, root)).equals(f)


@pytest.mark.parametrize(
    "section, where, says",
    [
        ({"baseline": "nope"}, "jit_operators", "baseline 'nope' is not among conditions"),
        ({"operators": ["mul", "div"]}, "jit_operators.operators[1]", "got 'div'"),
        (
            {"conditions": {"off": {"jit": True}}, "study_condition": "off"},
            "jit_operators",
            "baseline condition 'off' must have jit: false",
        ),
        ({"conditions": {"off": {"jit_above_cost": 0}}}, "jit_operators.conditions", "must set jit"),
        ({"rows": 10}, "jit_operators.rows", "greater than or equal to 100"),
        ({"database": "postgres"}, "jit_operators.database", "not postgres or template*"),
        ({"database": "template1"}, "jit_operators.database", "got 'template1'"),
        (
            {"conditions": {"off": {"jit": False}, "on": {"jit": True, "jit_above_cost;drop": 0}}},
            "jit_operators.conditions",
            "condition 'on': jit_above_cost;drop: expected a PostgreSQL setting name",
        ),
        (
            {"metric": "cpu", "max_parallel_workers_per_gather": 2},
            "jit_operators",
            "metric: cpu counts the backend's CPU time only",
        ),
        (
            {
                "metric": "cpu",
                "conditions": {"off": {"jit": False}, "on": {"jit": True, "max_parallel_workers_per_gather": 1}},
            },
            "jit_operators",
            "condition 'on' runs with max_parallel_workers_per_gather = 1",
        ),
    ],
)
def test_params_errors(tmp_path, section, where, says):
    f = _params_file(tmp_path, section)
    with pytest.raises(ParamsError) as e:
        params.load(f, check_servers=False)
    assert f"{where}: " in str(e.value) and says in str(e.value), str(e.value)


UNQUOTED = """
profile: pytest-jit
jit_operators:
  conditions:
    off: {jit: false}
    on: {jit: true, jit_above_cost: 0}
  baseline: off
  study_condition: on
"""


def test_unquoted_on_off(tmp_path):
    f = tmp_path / "unquoted.yaml"
    f.write_text(UNQUOTED)
    p = params.load(f, check_servers=False).jit_operators
    assert list(p.conditions) == ["off", "on"] and (p.baseline, p.study_condition) == ("off", "on")
    assert p.conditions["off"] == {"jit": False} and [c for c, s in p.conditions.items() if s["jit"]] == ["on"]


def _synthetic_runs(on_factor: float, rounds: int = 12, jitter: float = 0.02) -> pl.DataFrame:
    """Known truth: off 100 ms, off_aa the same, on at `on_factor` of it, every round's level moved by up to
    ±40 % (the bimodal baselines of this VM) which pairing must cancel, each value by ±jitter."""
    import random

    rng = random.Random(11)
    rows = []
    for r in range(rounds):
        level = 100 * (1.4 if r % 2 else 1.0)  # two modes, as count(*) showed: 106 vs 196 ms
        for cond, f in (("off", 1.0), ("off_aa", 1.0), ("on", on_factor)):
            for op in OPERATORS:
                ms = level * f * (1 + jitter * rng.uniform(-1, 1))
                rows.append(
                    {
                        "server": "pg15",
                        "condition": cond,
                        "operator": op,
                        "repetition": r,
                        "warmup": False,
                        "round": r + 1,
                        "ms": ms,
                        "cpu_ms": ms,
                        "result": "1",
                        "error": None,
                    }
                )
    return pl.from_dicts(rows, schema=RUNS_SCHEMA)


@pytest.mark.parametrize(
    "factor, verdict, says",
    [
        (0.75, findings.SUPPORTED, "within ×/÷1.5 of the study's"),  # 25 % less, as the study
        (1.0, findings.CONTRADICTED, "less than a third"),  # no effect, where 25 % would be well beyond the floor
        (1.2, findings.CONTRADICTED, "shows the opposite"),  # JIT slower
        (0.4, findings.DIRECTION_ONLY, "a larger effect"),  # 60 % less: the right direction, not the size
    ],
)
def test_paired_verdicts_on_synthetic_rounds(factor, verdict, says):
    from pglab.studies.jit_operators.params import JitOperatorsParams

    p = JitOperatorsParams()
    t = jv.tables(_synthetic_runs(factor), p)
    nz = t["jit_operators_noise"].row(0, named=True)
    assert nz["n_pairs"] == len(OPERATORS) and nz["floor"] < 0.05  # the ±40 % between rounds cancels in pairs
    setup = pl.DataFrame(
        {
            "server": ["pg15", "pg18"],
            "jit_available": [True, False],
            "reason": [None, "JIT not available: this build ships no llvmjit"],
        }
    )
    f = jv.findings_from(setup, t["jit_operators_paired"], t["jit_operators_overall"], t["jit_operators_noise"], "on")
    ours = f.filter(pl.col("server") == "pg15", pl.col("finding") == "all_operators").row(0, named=True)
    assert ours["verdict"] == verdict and says in ours["evidence"], ours["evidence"]
    assert ours["our_value"] == pytest.approx(factor, rel=0.02) and ours["study_value"] == 0.75
    assert set(f.filter(pl.col("server") == "pg18")["verdict"]) == {findings.NOT_TESTABLE}
    if verdict == findings.SUPPORTED:  # count(*)'s 16.5 % is outside 25 % ± a narrow interval: the size differs
        star = f.filter(pl.col("server") == "pg15", pl.col("finding") == "reduction_count_star").row(0, named=True)
        assert star["verdict"] == findings.DIRECTION_ONLY, star["evidence"]

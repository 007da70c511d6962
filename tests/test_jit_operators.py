"""JIT per operator (S4 test 1) on real servers, on a tiny table: a server without JIT is recorded as not
available and not run; on the JIT server every cell is recorded, JIT off and on return the same (and the
right) values, the plans carry a JIT block exactly when JIT is on, with optimisation as the thresholds say;
the report section works on the derived tables the stage wrote; the params section's errors."""

import uuid

import pytest
import yaml

from pglab import derived, findings, params, session
from pglab import jit_operators_report as report
from pglab.jit_operators_results import derive, write
from pglab.jit_operators_run import run_stage
from pglab.jit_operators_study import OPERATORS
from pglab.params import ParamsError

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
    s = session.begin(str(f), run_id=f"pytest-jit-{uuid.uuid4().hex[:8]}")  # fresh: never resume an old run
    s.start()
    try:
        result = run_stage(s)
        tables = derive(s, result.setup)
        root = d / "derived"
        write(tables, s.profile, root=root)
        p = s.params.jit_operators
        fnd = report.findings_from(tables["jit_operators_setup"], tables["jit_operators_reduction"], p.study_condition)
        derived.write_table(fnd, "jit_operators_findings", s.profile, root=root)
    finally:
        s.close()
    yield s, result, tables, root


def _jit_servers(s):
    return [x.name for x in s.servers if x.install and x.install.jit]


def test_not_available_is_recorded_not_dropped(stage):
    s, result, tables, _ = stage
    setup = {r["server"]: r for r in result.setup.iter_rows(named=True)}
    assert set(setup) == {x.name for x in s.servers}
    for x in s.servers:
        row = setup[x.name]
        assert row["jit_available"] == bool(x.install.jit), row
        if not x.install.jit:
            assert row["reason"] and "not available" in row["reason"]
            assert row["table_bytes"] is None
    ran = set(tables["jit_operators_runs"]["server"])
    assert ran == set(_jit_servers(s))


def test_every_cell_recorded_and_results_agree(stage):
    s, _, tables, _ = stage
    p = s.params.jit_operators
    runs = tables["jit_operators_runs"]
    want = {(srv, c, op, r, w) for srv in _jit_servers(s) for c in p.conditions for op in p.operators
            for r, w in [*((i, False) for i in range(REPS)), (0, True)]}  # fmt: skip
    got = set(runs.select("server", "condition", "operator", "repetition", "warmup").iter_rows())
    assert got == want
    assert runs["error"].null_count() == runs.height and (runs["ms"] > 0).all()
    # the backend's CPU time beside the wall time (local kit servers): positive, and within the wall time
    assert runs["cpu_ms"].null_count() == 0 and (runs["cpu_ms"] > 0).all()
    assert (runs["cpu_ms"] <= runs["ms"] + 1.0).all()
    checks = tables["jit_operators_results"]
    assert checks.height == len(_jit_servers(s)) * len(OPERATORS)
    assert checks["agree"].all(), checks.filter(~checks["agree"])
    assert (checks["conditions"] == len(p.conditions)).all()
    # and the values are right: the generator, computed here
    c1 = [i % 1000 + 1 for i in range(1, ROWS + 1)]
    c2 = [(i * 7) % 997 + 1 for i in range(1, ROWS + 1)]
    expect = {"count": ROWS, "count_star": ROWS, "sum": sum(c1), "max": max(c1),
              "mul": sum(a * b for a, b in zip(c1, c2, strict=True)),
              "sub": sum(a - b for a, b in zip(c1, c2, strict=True))}  # fmt: skip
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
    st = {(r["server"], r["condition"], r["name"]): r["setting"] for r in tables["jit_operators_settings"].iter_rows(
        named=True)}  # fmt: skip
    for srv in _jit_servers(s):
        assert st[(srv, "off", "jit")] == "off" and st[(srv, "on", "jit")] == "on"
        assert st[(srv, "on", "jit_above_cost")] == "0"
        assert st[(srv, "on_optimized", "jit_optimize_above_cost")] == "0"
        assert st[(srv, "on", "max_parallel_workers_per_gather")] == "0"
    jt = tables["jit_operators_jit_time"]
    assert jt.height == len(_jit_servers(s)) * len(p.jit_conditions()) * len(p.operators)
    assert (jt["compiled_code_saved_ms"] - jt["saved_ms"] - jt["jit_total_ms"]).abs().max() < 1e-9


def test_report_section_on_derived_data(stage):
    s, _, _, root = stage
    profile = s.profile
    for name in report.TABLES:
        assert (root / profile / f"{name}.csv").exists(), name
    text = report.method(profile, root=root)
    for x in s.servers:
        assert x.name in text
    assert "not available" in text and f"{ROWS:,} rows" in text
    for chart in report.charts(profile, root=root):
        chart.to_dict()
    f = report.findings(profile, root=root)
    assert set(f["verdict"]) <= set(findings.VERDICTS)
    assert f.height == len(s.servers) * (len(OPERATORS) + 1)
    for x in s.servers:
        mine = f.filter(f["server"] == x.name)
        if x.install.jit:
            assert findings.NOT_RUN not in set(mine["verdict"])
            assert all("%" in e and "[" in e for e in mine.filter(mine["finding"] != "all_operators")["evidence"])
        else:
            assert set(mine["verdict"]) == {findings.NOT_RUN}
    # deterministic: the same tables give the same bytes
    assert report.method(profile, root=root) == text
    assert report.findings(profile, root=root).equals(f)


@pytest.mark.parametrize(
    "section, where, says",
    [
        ({"baseline": "nope"}, "jit_operators", "baseline 'nope' is not among conditions"),
        ({"operators": ["mul", "div"]}, "jit_operators.operators[1]", "got 'div'"),
        ({"conditions": {"off": {"jit": True}}, "study_condition": "off"}, "jit_operators",
         "baseline condition 'off' must have jit: false"),
        ({"conditions": {"off": {"jit_above_cost": 0}}}, "jit_operators.conditions", "must set jit"),
        ({"rows": 10}, "jit_operators.rows", "greater than or equal to 100"),
    ],
)
def test_params_errors(tmp_path, section, where, says):
    f = _params_file(tmp_path, section)
    with pytest.raises(ParamsError) as e:
        params.load(f, check_servers=False)
    assert f"{where}: " in str(e.value) and says in str(e.value), str(e.value)

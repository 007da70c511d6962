"""Experiments from params (issue 33) on real servers (the embedded install): a SQL experiment with a known effect
(pg_sleep twice as long in B) reads B / A ≈ 2 with an interval excluding 1 and its A/A as no difference; a
failing statement is recorded with its cell and the rest go on; a rerun measures nothing twice; the tables
re-derive byte for byte from the raw store; a tiny pgbench experiment gives tps and latency percentiles; bad
input stops before any server (exit 2, naming file, experiment and key); two runs compare; and the report.html of
`python -m pglab.report.experiment` shows the section with its verdicts and chart in headless Chromium."""

import math
import re
import shutil
import subprocess
import sys
import uuid

import polars as pl
import pytest
from conftest import ROOT, chromium, needs_chromium

from pglab import params
from pglab.core import derived
from pglab.core.config import ParamsError
from pglab.core.run import params_checks, session
from pglab.core.store import RunStore, finish_run
from pglab.studies.experiments import derive as xderive
from pglab.studies.experiments import run as xrun


def write(folder, text: str, files: dict[str, str] | None = None):
    for name, body in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body)
    p = folder / "x.yaml"
    p.write_text(text)
    return p


SLEEP = "SELECT pg_sleep(current_setting('x.sleep')::float)\n"


def sql_params(folder, server: str) -> str:
    return write(
        folder,
        f"""profile: xtest-{uuid.uuid4().hex[:6]}
experiments:
  - name: sleepy
    question: Does B sleep twice as long?
    workload: {{sql: q/*.sql}}
    servers: [{server}]
    factors: {{x.sleep: [0.05, 0.1]}}
    rounds: 10
  - name: broken
    question: Does a failing statement stop the rest?
    workload: {{sql: [q/sleep.sql, bad/fails.sql]}}
    servers: [{server}]
    factors: {{x.sleep: [0.001, 0.002]}}
    rounds: 2
    warmups: 0
""",
        {"q/sleep.sql": SLEEP, "bad/fails.sql": "SELECT 1 / 0\n"},
    )


def run(p):
    s = session.begin(p, None, study="experiments")
    s.start()
    try:
        results = xrun.run_all(s)
    finally:
        s.close()
    finish_run(p.profile, s.run_id)
    return s, results


# the sql_run tests run alone (make test): the A/A within 2 % and the 2x effect are timed with pg_sleep, and a
# busy neighbour delays executions; all of them, so the module's run is made once
alone = pytest.mark.alone


@pytest.fixture(scope="module")
def sql_run(tmp_path_factory, embedded):
    p = params.load(sql_params(tmp_path_factory.mktemp("x"), embedded.name))
    s, results = run(p)
    return s, results, xderive.derive(s.store, s.params)


@alone
def test_known_effect_and_aa(sql_run):
    _, _, t = sql_run
    v = t["experiments_verdicts"].filter(experiment="sleepy").row(0, named=True)
    assert 1.6 < v["ratio"] < 2.4 and v["low"] > 1, v  # 50 ms against 100 ms: client overhead is small beside it
    assert v["verdict"] == "slower"
    aa = t["experiments_paired"].filter(experiment="sleepy", kind="A/A").row(0, named=True)
    # the A/A copy is measured as a copy: its figure near 1, far from the 2x effect, with an interval of its own
    # width. Not "within 2 % of 1": one execution a round of a 50 ms sleep, and a VM's scheduler delays one
    # execution by 20 ms now and then; one such round among 10 moves the geometric mean 3.7 % (CI at 68ca565:
    # 1.037; at 223bf1b low 0.978; at 6d3589d an interval excluding 1). That is the host's noise, which the A/A is
    # there to measure; what the kit owns is that the copy runs A's setting (not B's: 2x) and is paired with A's
    # rounds, not with itself (an interval of width 0), and that its interval is narrower than the effect. A
    # tenth of the effect's log ratio is 7 %: three such delays in one copy's 10 rounds
    assert abs(math.log(aa["ratio"])) < abs(math.log(v["ratio"])) / 10, aa
    assert aa["low"] < aa["ratio"] < aa["high"] and aa["high"] / aa["low"] < 1.5, aa
    plans = t["experiments_plans"].filter(experiment="sleepy")
    assert plans.height == 3 and plans["root"].to_list() == ["Result"] * 3  # every cell's plan kept


@alone
def test_failure_recorded_others_go_on(sql_run):
    _, _, t = sql_run
    err = t["experiments_errors"].filter(experiment="broken")
    assert err.height > 0 and set(err["item"]) == {"fails"} and "division by zero" in err["error"][0]
    cells = t["experiments_cells"].filter(experiment="broken", item="sleep")
    assert cells["measured"].min() == 2 and cells["failed"].max() == 0


@alone
def test_rerun_measures_nothing_twice(sql_run):
    s, _, _ = sql_run
    before = s.store.file.read_bytes()
    s2 = session.begin(s.params, s.run_id, study="experiments")
    s2.start()
    try:
        assert [r.steps_run for r in xrun.run_all(s2)] == [0, 0]
    finally:
        s2.close()
    assert s.store.file.read_bytes() == before


@alone
def test_rederive_byte_for_byte(sql_run, tmp_path):
    s, _, t = sql_run
    again = xderive.derive(RunStore(s.run_id), s.params)
    derived.write(t, "a", root=tmp_path)
    derived.write(again, "b", root=tmp_path)
    for name in t:
        assert (tmp_path / "a" / f"{name}.csv").read_bytes() == (tmp_path / "b" / f"{name}.csv").read_bytes(), name


@alone
def test_compare_two_runs(sql_run, tmp_path):
    from pglab.report.compare import Dataset, ratios

    s, _, t = sql_run
    derived.write(t, "a", root=tmp_path)
    derived.write(t, "b", root=tmp_path)
    r = ratios(Dataset("a", "folder", tmp_path / "a"), Dataset("b", "folder", tmp_path / "b"))
    mine = r.filter(pl.col("study") == "experiments")
    assert mine.height > 0 and (mine["ratio"] == 1).all()


def test_pgbench_experiment(tmp_path, embedded):
    p = params.load(
        write(
            tmp_path,
            f"""profile: xtest-pgb-{uuid.uuid4().hex[:6]}
experiments:
  - name: tiny_pgbench
    question: Does the placeholder setting change tps?
    data: {{pgbench: {{scale: 1}}}}
    workload: {{pgbench: {{builtin: select-only, clients: 1, duration_s: 1}}}}
    servers: [{embedded.name}]
    factors: {{x.label: [a, b]}}
    rounds: 3
    warmups: 0
""",
        )
    )
    s, _ = run(p)
    t = xderive.derive(s.store, s.params)
    runs = t["experiments_runs"]
    assert runs.height == 9 and (runs["value"] > 0).all() and runs["p95_ms"].is_not_null().all()
    assert set(t["experiments_paired"]["metric"]) == {"tps", "p95_ms"}
    assert t["experiments_verdicts"]["metric"].to_list() == ["tps"]


BAD = {
    "missing": ("workload: {sql: nothere/*.sql}", r"experiments\[0\] \(e1\)\.workload\.sql: no file matches"),
    "empty": ("workload: {sql: empty.sql}", r"experiments\[0\] \(e1\)\.workload\.sql: .* is empty"),
    "unknown setting": (
        "workload: {sql: ok.sql}\n    factors: {no_such_setting: [1, 2]}",
        r"experiments\[0\] \(e1\)\.factors\.no_such_setting\[0\]: expected a setting a server",
    ),
    "bad value": (
        "workload: {sql: ok.sql}\n    factors: {work_mem: [4MB, lots]}",
        r"experiments\[0\] \(e1\)\.factors\.work_mem\[1\]: expected a value that a server",
    ),
    "schema": (  # a wrong type, found by the params model: the experiment named too
        "workload: {sql: ok.sql}\n    rounds: ten",
        r"experiments\[0\] \(e1\)\.rounds: Input should be a valid integer",
    ),
    "too big": (
        "data: {pgbench: {scale: 10000}}\n    workload: {sql: ok.sql}\n    settings: {work_mem: 4MB}",
        r"experiments\[0\] \(e1\)\.data: expected data that fits on disk",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_before_any_server(case, tmp_path):
    body, message = BAD[case]
    if "factors" not in body:
        body += "\n    factors: {work_mem: [4MB, 8MB]}"
    path = write(
        tmp_path,
        f"profile: xbad\nexperiments:\n  - name: e1\n    question: q?\n    {body}\n",
        {"ok.sql": "SELECT 1\n", "empty.sql": "-- nothing\n"},
    )
    # pgbench at scale 10000 is the largest data params allow: a disk with room for it cannot refuse it
    if case == "too big" and shutil.disk_usage(tmp_path).free > 10_000 * params_checks.PGBENCH_PER_SCALE:
        pytest.skip("this machine has room for pgbench at scale 10000")
    if case == "missing":  # once through the command: exit 2, the message on stderr, no run begun
        out = subprocess.run(
            [sys.executable, "-m", "pglab.report.experiment", "--params", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2 and str(path) in out.stderr, out.stderr
        assert re.search(message, out.stderr), out.stderr
        return
    with pytest.raises(ParamsError, match=message):
        params.load(path)


def test_factor_a_server_lacks_is_not_an_error(tmp_path, installs):
    if not any(i.major < 18 for i in installs) or not any(i.major >= 18 for i in installs):
        pytest.skip("needs a server before 18 and one from 18")
    path = write(
        tmp_path,
        "profile: xio\nexperiments:\n  - name: io\n    question: q?\n    workload: {sql: ok.sql}\n"
        "    factors: {io_method: [sync, worker, io_uring]}\n",
        {"ok.sql": "SELECT 1\n"},
    )
    p = params.load(path)  # io_method before 18, io_uring without liburing: not testable there, not an error
    from pglab.studies.experiments import checks

    old = next(i for i in installs if i.major < 18)
    assert checks.unavailable(p.experiments[0], {"work_mem"}) == {"io_method": "this server has no setting io_method"}
    assert checks.refused_values(p.experiments[0], old) == {}  # the name is unknown there: decided by `unavailable`


@needs_chromium
def test_report_html_shows_the_section(tmp_path, embedded):
    from selenium.webdriver.common.by import By

    profile = f"xtest-html-{uuid.uuid4().hex[:6]}"
    path = write(
        tmp_path,
        f"""profile: {profile}
servers: {{use: [{embedded.name}]}}
experiments:
  - name: sleepy_html
    question: Does B sleep twice as long?
    workload: {{sql: q.sql}}
    factors: {{x.sleep: [0.005, 0.01]}}
    expect: {{ratio: 2}}
    rounds: 5
""",
        {"q.sql": SLEEP},
    )
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "pglab.report.experiment", "--params", str(path), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    with chromium() as driver:
        driver.get("file://" + str(out / "report.html"))
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "sleepy_html" in body and "Does B sleep twice as long?" in body
        assert any(w in body for w in ("supported", "direction only", "undetermined", "contradicted"))
        assert "A/A noise floor" in body
        # nbconvert inlines a chart's SVG as an <img> of data:image/svg+xml: drawn = decoded, of real size
        drawn = driver.execute_script(
            "return [...document.querySelectorAll('img')].filter(i => "
            "i.src.startsWith('data:image/svg+xml') && i.complete && i.naturalWidth > 0)"
            ".length"
        )
        assert drawn >= 1, "no chart drawn"


@alone
def test_full_report_shows_the_experiments_of_its_run(sql_run, tmp_path):
    """make report runs a params file's experiments (80_experiments) and its report (99) shows them after the
    studies, from the derived tables alone; a run without experiments shows no such section."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from pglab.core import charts
    from pglab.report import sections

    InteractiveShell.instance()  # display() publishes as in a kernel, where capture_output records it
    charts.setup()
    _, _, t = sql_run
    derived.write(t, "withx", tmp_path)
    derived.write({"ssb_load": pl.DataFrame({"server": ["a"], "sf": [1.0]})}, "without", tmp_path)
    with capture_output() as shown:
        sections.show_experiments("withx", tmp_path)
    text = "\n".join(o.data.get("text/markdown", "") for o in shown.outputs)
    assert text.startswith("## Your own experiments") and "### sleepy" in text and "### broken" in text
    assert "Does B sleep twice as long?" in text
    assert sum("image/svg+xml" in o.data for o in shown.outputs) >= 1  # sleepy's chart
    with capture_output() as none:
        sections.show_experiments("without", tmp_path)
    assert none.outputs == []

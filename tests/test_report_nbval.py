"""nbval on the report notebooks, as `make test` has always run it, but inside the spread-out suite: the committed
report re-executed on the committed derived data (strict: every output must reproduce), and every notebook of
test_report's quick pass re-executed on that run (lax: every cell must run). The second needs the quick pass, so
this file shares its worker and runs after it (tests/conftest.py)."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT

QUICK = ROOT / "build" / "test"


def _nbval(args: list[str], env_extra: dict) -> subprocess.CompletedProcess:
    # the notebooks read PGLAB_DATA_DIR / PGLAB_STATE_DIR: not this worker's test home (tests/conftest.py sets
    # them), the committed data for the committed report
    drop = ("PGLAB_DATA_DIR", "PGLAB_STATE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_")} | env_extra
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--nbval-current-env"]
        + ["--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=560,
    )


def _summary(run: subprocess.CompletedProcess) -> str:
    return run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""


def test_the_committed_report_reproduces_every_output(capsys):
    run = _nbval(["--nbval", "report/99_report.ipynb"], {})
    with capsys.disabled():
        print(f"\nnbval, committed report: {_summary(run)}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_every_notebook_of_the_quick_pass_runs_again(capsys):
    notebooks = sorted((QUICK / "report").glob("*.ipynb"))
    if not (QUICK / "report" / "99_report.ipynb").exists():
        pytest.fail("no quick pass in build/test/report: run tests/test_report.py first (make test does)")
    env = {"PGLAB_DATA_DIR": str(QUICK / "data"), "PGLAB_STATE_DIR": str(QUICK / "state")}
    run = _nbval(["--nbval-lax", *(str(nb.relative_to(ROOT)) for nb in notebooks)], env)
    with capsys.disabled():
        print(f"\nnbval, the quick pass's {len(notebooks)} notebooks: {_summary(run)}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

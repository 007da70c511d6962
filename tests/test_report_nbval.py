"""nbval on the committed report, as `make test` has always run it, inside the spread-out suite: report/99_report.ipynb
re-executed on the committed derived data, strict (every output must reproduce).

nbval runs only where it proves something new. The quick pass's notebooks are no longer re-run through nbval-lax:
that was a second execution of every notebook (165 s on a loaded 2-core host) which proved nothing the pass does
not, and it wrote into the session's shared run (a re-executed study notebook may measure artefact rounds again).
Its checks moved: every cell of every notebook ran is asserted on the pass itself (tests/test_report.py); its
report notebook re-rendered alone reproduces byte for byte (test_report.py,
test_report_notebook_alone_reproduces_and_writes_self_contained_html); its tables come again byte for byte from its
raw records (tests/test_derive_run.py)."""

import os
import subprocess
import sys

from conftest import ROOT


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

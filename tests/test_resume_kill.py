"""kill -9 at any moment of `make report`, then rerun with the same run id: nothing lost, nothing twice.

A run of the SSB load, pgbench and auto_explain notebooks is killed (SIGKILL to its whole process group) at
seeded random moments, rerun with the same run id after each kill and finally run to its end. Its set of
measurement keys (server, experiment, condition, item, repetition, warm-up: what identifies a measurement in
`pglab.core.store`) must equal that of an uninterrupted run of the same params, with no key recorded twice; no
postmaster of the kit may outlive the process that started it. About three minutes on an idle 2-core machine."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, postmasters

from pglab.core.store import KEY

SEED = 20261123
KILLS = 3
NOTEBOOKS = ("10", "30", "40")


def _params(path: Path, server: str) -> Path:
    p = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())
    p["profile"] = "killtest"
    p["servers"] = {"use": [server], "installs": [], "external": []}
    p["ssb"] |= {"sf": 0.05}  # a load of a few seconds: the kills land in it, too
    p["pgbench"]["series"] |= {"runs": 2}
    p["pgbench"]["scaling"] |= {"max_clients": 2}
    p["auto_explain"]["rows"] = 50000
    p["auto_explain"]["run"] |= {"repetitions": 1}
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return path


def _start(params: Path, work: Path, run_id: str) -> subprocess.Popen:
    env = os.environ | {"PGLAB_DATA_DIR": str(work / "data"), "PGLAB_STATE_DIR": str(work / "state")}
    args = [
        sys.executable,
        "-m",
        "pglab.report",
        "--params",
        str(params),
        "--out",
        str(work / "report"),
        "--run-id",
        run_id,
    ]
    for nb in NOTEBOOKS:
        args += ["--only", nb]
    log = open(work / f"report-{time.time_ns()}.log", "w")  # noqa: SIM115 - closed by the caller's wait
    # its own process group: the kill reaches the report and everything it started in its group at once
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _log_tail(work: Path) -> str:
    logs = sorted(work.glob("report-*.log"))
    return logs[-1].read_text()[-3000:] if logs else "no log"


def _keys(work: Path, run_id: str, remeasured: bool = False) -> Counter:
    """The measurements' keys, counted: the planned ones, or (remeasured) only the re-measurements of artefact
    rounds, which depend on what each run measured (`schedule.remeasure_steps`)."""
    lines = (work / "data" / "raw" / run_id / "measurements.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    return Counter(tuple(r[k] for k in KEY) for r in recs if bool(r.get("remeasured")) == remeasured)


def _live_postmasters(work: Path) -> list[int]:
    clusters = work / "state" / "clusters"
    if not clusters.is_dir():
        return []
    return [pid for c in clusters.iterdir() if c.is_dir() for pid in postmasters(c / "data")]


def _no_orphans_within(work: Path, seconds: float) -> list[int]:
    """The kit's postmasters still alive after `seconds` (their kernel notices its parent's death within 1 s
    and exits; the server follows its parent)."""
    deadline = time.monotonic() + seconds
    while (left := _live_postmasters(work)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _diagnose(work: Path, pids: list[int]) -> str:
    """What a left-over postmaster is: its parent, and the last lines of every report log and server log."""
    out = []
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
        out.append(f"pid {pid}: " + " ".join(ln for ln in status.splitlines() if ln.startswith(("PPid", "State"))))
    for log in sorted(work.rglob("report-*.log")) + sorted(work.rglob("postmaster.log")):
        out.append(f"--- {log.relative_to(work)}\n" + log.read_text(errors="replace")[-1500:])
    return "\n".join(out)


@pytest.fixture
def work():
    # inside the checkout, not /tmp: the kit's clusters there must be reachable by its service user
    d = ROOT / "build" / "test" / f"kill-{uuid.uuid4().hex[:8]}"
    (d / "ref").mkdir(parents=True)
    (d / "killed").mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(900)  # its own budget (three kills, reruns): about 3 min idle, 7 min on a loaded machine
def test_kill_9_and_rerun_loses_and_duplicates_nothing(work, embedded):
    params = _params(work / "kill.yaml", embedded.name)

    t0 = time.monotonic()
    ref = _start(params, work / "ref", "ref-run")
    assert ref.wait(timeout=400) == 0, _log_tail(work / "ref")
    ref_s = time.monotonic() - t0
    expected = _keys(work / "ref", "ref-run")
    assert max(expected.values()) == 1
    assert {k[1] for k in expected} >= {"ssb_load", "pgbench_init", "pgbench_select_only", "auto_explain"}

    rng = random.Random(SEED)
    moments = []
    for _ in range(KILLS):
        proc = _start(params, work / "killed", "killed-run")
        moment = rng.uniform(3, min(20, max(4, ref_s - 5)))
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            moments.append(round(moment, 1))
        left = _no_orphans_within(work / "killed", 20)
        assert left == [], f"postmasters {left} outlived the run killed after {moment:.1f} s: " + _diagnose(work, left)
    for _ in range(3):  # then to its end (a kill may have come after the last record: one rerun suffices)
        if _start(params, work / "killed", "killed-run").wait(timeout=400) == 0:
            break
    else:
        pytest.fail("the rerun after the kills did not finish: " + _log_tail(work / "killed"))
    got = _keys(work / "killed", "killed-run")
    print(
        f"uninterrupted run {ref_s:.0f} s, {len(expected)} measurements; killed at {moments} s; "
        f"{len(got)} measurements after the reruns"
    )
    assert [k for k, n in got.items() if n > 1] == []  # nothing recorded twice
    assert [k for k, n in _keys(work / "killed", "killed-run", remeasured=True).items() if n > 1] == []
    assert set(got) == set(expected), {
        "lost": sorted(set(expected) - set(got))[:10],
        "extra": sorted(set(got) - set(expected))[:10],
    }

    for run in ("ref", "killed"):
        assert _live_postmasters(work / run) == []
        env = os.environ | {"PGLAB_STATE_DIR": str(work / run / "state"), "PGLAB_DATA_DIR": str(work / run / "data")}
        check = subprocess.run(
            [sys.executable, "-m", "pglab.core.servers.clean", "--check-orphans"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stdout + check.stderr

"""No user's run overwrites, mixes or throws away another: only params/default.yaml writes the committed
reference, a run resumes only with the params it was begun with, and `make clean` keeps raw runs that have no
archive (the only copy of their measurements)."""

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, postmasters

from pglab import params
from pglab.core import raw_archive
from pglab.core.config import ParamsError, check_reference
from pglab.core.run import session
from pglab.core.servers import clean
from pglab.core.store import RunStore, begin_run


def test_only_the_reference_file_writes_the_reference(tmp_path):
    copy = tmp_path / "mine.yaml"
    copy.write_text((ROOT / "params" / "default.yaml").read_text())  # what the README's "copy it" gives
    p = params.load(copy, check_servers=False)
    with pytest.raises(ParamsError, match=r"mine\.yaml: profile: default: that profile writes the committed "):
        session.begin(p)  # refused before a run is begun
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text("settings: {work_mem: 64MB}\n")
    with pytest.raises(ParamsError, match=r"profile: not set, so 'default'"):
        check_reference(params.load(unnamed, check_servers=False))
    copy.write_text(copy.read_text() + "reference: true\n")  # on purpose: allowed
    check_reference(params.load(copy, check_servers=False))
    check_reference(params.load(ROOT / "params" / "default.yaml", check_servers=False))


def _report(params_file: Path, work: Path, run_id: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PGLAB_DATA_DIR": str(work / "data"), "PGLAB_STATE_DIR": str(work / "state")}
    cmd = [
        sys.executable,
        "-m",
        "pglab.report",
        "--params",
        str(params_file),
        "--out",
        str(work / "report"),
        "--run-id",
        run_id,
        "--only",
        "00",
    ]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_resume_with_other_params_is_refused_and_with_the_same_ones_announced(embedded):
    # inside the checkout, not /tmp: the kit's clusters there must be reachable by its service user
    work = ROOT / "build" / "test" / f"resume-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    doc = {
        "profile": "pytest-resume",
        "servers": {"use": [embedded.name]},
        "settings": {"work_mem": "4MB"},
        "environment": {"pg_test_timing_seconds": 1},
    }
    f = work / "p.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    first = _report(f, work, "r1")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "resuming" not in first.stdout  # a new run
    raw = work / "data" / "raw" / "r1"
    # a measurement as a study records it, so the run has something a resume must keep
    os.environ["PGLAB_DATA_DIR"], old = str(work / "data"), os.environ["PGLAB_DATA_DIR"]
    try:
        RunStore("r1").record(embedded.name, "e", "c", "i", 0, value=1.0, unit="ms")
    finally:
        os.environ["PGLAB_DATA_DIR"] = old

    doc["settings"]["work_mem"] = "64MB"
    doc["environment"]["pg_test_timing_seconds"] = 2
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    changed = _report(f, work, "r1")
    assert changed.returncode == 2, changed.stdout + changed.stderr
    err = changed.stderr.strip().splitlines()[0]
    assert re.search(
        r"run r1 was begun with other params \(1 measurements kept\): environment\.pg_test_timing_"
        r"seconds: 1 then, 2 now; settings\.work_mem: '4MB' then, '64MB' now\. Either put those keys "
        r"back .* or start a new run: make report PARAMS=.*p\.yaml RUN_ID=pytest-resume-<new name>",
        err,
    )
    assert "Traceback" not in changed.stderr and postmasters(work) == []
    assert len((raw / "measurements.jsonl").read_text().splitlines()) == 1  # nothing written by the refusal

    doc["settings"]["work_mem"] = "4MB"
    doc["environment"]["pg_test_timing_seconds"] = 1
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    same = _report(f, work, "r1")
    assert same.returncode == 0, same.stderr[-2000:]
    assert "resuming run r1: 1 measurements kept (taken with the same params)" in same.stdout
    assert len((raw / "measurements.jsonl").read_text().splitlines()) == 1
    assert postmasters(work) == []
    subprocess.run(["rm", "-rf", str(work)], check=False)


def test_check_resume_reads_a_run_recorded_before_the_digest(tmp_path, monkeypatch):
    """Runs archived before the digest have params.json only (no servers): the keys it has are compared."""
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path))
    f = tmp_path / "p.yaml"
    f.write_text("profile: pytest-old\nsettings: {work_mem: 4MB}\n")
    p = params.load(f, check_servers=False)
    store = RunStore("old")
    store.save_json("params.json", {"file": "p.yaml"} | p.model_dump(mode="json", exclude={"servers"}))
    store.record("pg18", "e", "c", "i", 0, value=1.0, unit="ms")
    assert session.check_resume("old", p) == 1
    assert session.check_resume("new", p) is None
    f.write_text("profile: pytest-old\nsettings: {work_mem: 8MB}\n")
    with pytest.raises(ParamsError, match=r"settings\.work_mem: '4MB' then, '8MB' now"):
        session.check_resume("old", params.load(f, check_servers=False))


def _run(raw: Path, run_id: str, measured: bool = True) -> Path:
    d = raw / run_id
    d.mkdir(parents=True)
    (d / "measurements.jsonl").write_text('{"value": 1}\n' if measured else "")
    return d


def test_clean_keeps_unarchived_raw_runs_unless_forced(tmp_path, monkeypatch):
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path))
    raw = tmp_path / "raw"
    _run(raw, "archived")
    raw_archive.create("archived")  # a real archive: its folder may go
    only_copy = _run(raw, "only-copy")
    _run(raw, "begun", measured=False)  # nothing measured: nothing to lose
    begin_run("mine", "only-copy", root=raw)  # the interrupted run of profile mine: its marker stays with it
    begin_run("other", "gone", root=raw)
    kept = clean.remove_raw_runs()
    assert kept == [only_copy]
    assert sorted(p.name for p in raw.iterdir()) == [".current-mine", "only-copy"]
    msg = clean.kept_message(kept)
    assert "kept 1 raw run(s) with no archive" in msg and "make archive RUN_ID=only-copy" in msg
    assert "make clean FORCE=1 deletes it" in msg
    assert clean.remove_raw_runs(force=True) == [] and list(raw.iterdir()) == []
    assert raw_archive.archive_path("archived").is_file()  # archives are never removed


def _kernels_of(pid: int) -> list[int]:
    """PIDs of the ipykernel processes whose parent is `pid`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"ipykernel" in (proc / "cmdline").read_bytes():
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


STOPS = {
    # a terminal's Ctrl-C: SIGINT to the foreground process group (the kernel, in a session of its own, gets none)
    "ctrl-c": (lambda pid: os.killpg(pid, signal.SIGINT), "interrupted", 130),
    # `kill -INT <driver>`: the driver alone
    "kill-int": (lambda pid: os.kill(pid, signal.SIGINT), "interrupted", 130),
    # `kill <driver>`, a service manager's stop
    "kill-term": (lambda pid: os.kill(pid, signal.SIGTERM), r"stopped \(SIGTERM\)", 143),
}


@pytest.mark.parametrize("how", list(STOPS))
def test_ctrl_c_prints_one_line_with_the_resume_command_and_no_traceback(embedded, how):
    """SIGINT to the run's process group, as a terminal's Ctrl-C sends it, SIGINT or SIGTERM to the driver alone,
    once the pgbench notebook has recorded a measurement: one line says where it stopped and how to resume; no
    traceback; the driver ends within a minute, its kernel with it, and no server is left."""
    send, said_how, code = STOPS[how]
    work = ROOT / "build" / "test" / f"ctrl-c-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    p = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())
    p["profile"] = "pytest-ctrlc"
    p["servers"] = {"use": [embedded.name], "installs": [], "external": []}
    f = work / "p.yaml"
    f.write_text(yaml.safe_dump(p, sort_keys=False))
    env = os.environ | {"PGLAB_DATA_DIR": str(work / "data"), "PGLAB_STATE_DIR": str(work / "state")}
    cmd = [
        sys.executable,
        "-m",
        "pglab.report",
        "--params",
        str(f),
        "--out",
        str(work / "report"),
        "--run-id",
        "c1",
        "--only",
        "30",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    jsonl = work / "data" / "raw" / "c1" / "measurements.jsonl"
    deadline = time.monotonic() + 240
    while not (jsonl.is_file() and jsonl.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    kernels = _kernels_of(proc.pid)
    assert kernels, "no kernel found running the notebook"
    send(proc.pid)
    # a kernel left measuring kept the driver waiting on its shutdown (the servers stopped only with a second signal)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stdout + stderr
    said = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(said) == 1, stderr
    assert re.fullmatch(
        rf"pglab report: {said_how} in 30_pgbench\.ipynb, stopping its servers; measurements "
        r"recorded so far are kept; resume with: make report PARAMS=.*p\.yaml RUN_ID=c1",
        said[0],
    )
    assert not [k for k in kernels if Path(f"/proc/{k}").exists()], "the kernel outlived the driver"
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr
    left = postmasters(work)
    for _ in range(40):
        if not (left := postmasters(work)):
            break
        time.sleep(0.5)
    assert left == [], f"servers left running: {left}"
    subprocess.run(["rm", "-rf", str(work)], check=False)


def test_a_key_new_in_the_kit_at_its_default_is_no_change_but_a_removed_setting_is(tmp_path, monkeypatch):
    """A run begun by an older kit lacks keys a newer one added (at their defaults): it resumes. A setting the user
    took out of the file is a change like any other."""
    import json

    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path))
    f = tmp_path / "p.yaml"
    f.write_text("profile: pytest-kit\nsettings: {work_mem: 4MB}\n")
    p = params.load(f, check_servers=False)
    store = RunStore("kit")
    digest = session.effective_params(p)
    del digest["servers.build.cflags"]  # not in the older kit's record
    store.save_json(session.DIGEST, {"params": digest})
    store.record("pg18", "e", "c", "i", 0, value=1.0, unit="ms")
    assert session.check_resume("kit", p) == 1
    f.write_text("profile: pytest-kit\n")
    with pytest.raises(ParamsError, match=r"settings\.work_mem: '4MB' then, '\(not set\)' now"):
        session.check_resume("kit", params.load(f, check_servers=False))
    assert json.loads((tmp_path / "raw" / "kit" / session.DIGEST).read_text())["params"] == digest  # kept as it was

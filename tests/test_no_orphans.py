"""No postgres of the kit outlives the process that started it, however that process ends."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import postmasters

from pglab.core.installs.installs import discover
from pglab.core.servers import socketdir
from pglab.core.servers.cluster import Cluster
from pglab.core.servers.cluster_procs import proc_start_ticks

RUNNER = textwrap.dedent(
    """
    import sys, time
    from pglab.core.servers.cluster import Cluster
    from pglab.core.installs.installs import discover
    inst = next(i for i in discover() if i.source == "embedded")
    c = Cluster(inst, name=sys.argv[1])
    c.start({})
    print("ready", flush=True)
    if sys.argv[2] == "raise":
        raise RuntimeError("experiment failed")
    time.sleep(120)
    """
)


def _embedded():
    return next(i for i in discover() if i.source == "embedded")


def _hangup_default() -> None:
    # a runner in a terminal: under nohup (as CI may start us) SIGHUP is inherited as ignored, and the kit
    # rightly leaves an ignored SIGHUP alone
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start_runner(name: str, mode: str = "sleep") -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, name, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_hangup_default,
    )
    line = proc.stdout.readline()
    if mode != "raise":
        assert line.strip() == "ready", proc.stderr.read()
    return proc


def _gone_within(data, seconds=15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not postmasters(data):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_server_stops_when_its_runner_is_killed(how):
    name = f"orphan-{how.name.lower()}"
    proc = _start_runner(name)
    data = Cluster(_embedded(), name=name).data
    assert len(postmasters(data)) == 1
    proc.send_signal(how)
    proc.wait(30)
    assert _gone_within(data), f"postmaster still running after the runner got {how.name}"


def test_server_stops_when_the_runner_raises():
    proc = _start_runner("orphan-raise", "raise")
    proc.wait(60)
    assert proc.returncode != 0
    assert _gone_within(Cluster(_embedded(), name="orphan-raise").data)


def test_a_server_left_running_is_stopped_by_the_next_run(embedded):
    """A postmaster outlived its run (started here by pg_ctl, without the parent-death signal, and owned
    by a process that no longer exists): the next start finds it, stops it and starts anew."""
    c = Cluster(embedded, name="leftover")
    c.ensure()
    c.socket_dir = socketdir.choose(c.path, c.run_as)
    c.port = _free()
    c._write_conf({})
    subprocess.run(
        [str(c.server_install.tool("pg_ctl")), "-D", str(c.data), "-l", str(c.data / "pgctl.log"), "-w", "start"],
        check=True,
        capture_output=True,
        **c.run_as.popen_kwargs(),
    )
    dead = subprocess.Popen(["true"])
    dead.wait()
    c.owner_file.write_text(json.dumps({"pid": dead.pid, "ticks": "gone"}))
    left = postmasters(c.data)
    assert len(left) == 1

    again = Cluster(embedded, name="leftover")
    again.start({})
    now = postmasters(c.data)
    assert len(now) == 1 and now != left
    assert json.loads(again.owner_file.read_text())["pid"] == os.getpid()
    assert json.loads(again.owner_file.read_text())["ticks"] == proc_start_ticks(os.getpid())
    again.stop()
    assert postmasters(c.data) == []


def _free():
    from pglab.core.servers.cluster import _free_port

    return _free_port()

"""The kit's server processes seen from outside: is a pid alive and still the process we started, stop
one, and sweep the servers a killed run left behind (used by `Cluster`, `make clean` and the tests)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path

from .. import paths
from . import socketdir

log = logging.getLogger("pglab.core.servers.cluster")
STOP_TIMEOUT_S = 60


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def proc_start_ticks(pid: int) -> str | None:
    """Kernel start time of a process: tells a live owner from a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def sweep_orphans(root: Path | None = None) -> list[str]:
    """Stop servers left running in the kit's clusters by a run that was killed. Returns their names."""
    root = root or paths.clusters_dir()
    stopped = []
    if not root.is_dir():
        return stopped
    for cdir in sorted(p for p in root.iterdir() if p.is_dir()):
        owner_file = cdir / "owner.json"
        owner = {}
        if owner_file.exists():
            with contextlib.suppress(ValueError, OSError):
                owner = json.loads(owner_file.read_text())
        if owner and proc_start_ticks(owner.get("pid", -1)) == owner.get("ticks"):
            continue  # its owner is alive: not an orphan
        pid = postmaster_pid(cdir / "data")
        if pid and pid_alive(pid) and is_postgres(pid, cdir / "data"):
            log.warning("stopping %s (pid %d), left running by a run that was killed", cdir.name, pid)
            stop_pid(pid)
            stopped.append(cdir.name)
        if owner.get("socket_dir"):
            socketdir.remove(Path(owner["socket_dir"]), cdir)
        owner_file.unlink(missing_ok=True)
    return stopped


def is_postgres(pid: int, data: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(b"postgres") for a in cmdline[:1]) and str(data).encode() in cmdline


def stop_pid(pid: int) -> None:
    for sig, wait in ((signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.1)

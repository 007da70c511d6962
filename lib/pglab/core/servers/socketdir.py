"""The private folder a kit server's Unix socket lives in.

Local logins through the socket are trusted (the superuser needs no password), so whoever can enter that
folder owns the server: it must be ours, 0700, and impossible for another user to plant or redirect.

- Normally it is `s/` inside the cluster's own folder (which only the kit writes to); it is checked with
  lstat before use: a real folder, owned by the service user, mode 0700.
- When that path is too long for a socket address (sun_path holds 107 bytes), it is a fresh folder made
  atomically by `tempfile.mkdtemp` (unpredictable name, 0700), handed to the service user without following
  symlinks, removed when the server stops; `make clean` removes ones a killed run left behind."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from .osuser import RunAs

SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux (107 usable); keep a margin
TEMP_PREFIX = "pglab-s-"
_SOCKET_NAME = "/.s.PGSQL.65535.lock"
# ours (pglab-s-<random>) and the older kit's predictable ones (pglab-<10 hex digits>); not pgbench's folders
_KIT_SOCKET_DIR = re.compile(r"^(pglab-s-[A-Za-z0-9_]+|pglab-[0-9a-f]{10})$")


class SocketDirError(Exception):
    pass


def choose(cluster_dir: Path, run_as: RunAs) -> Path:
    own = cluster_dir / "s"
    if len(str(own)) + len(_SOCKET_NAME) <= SOCKET_PATH_MAX:
        with contextlib.suppress(FileExistsError):
            own.mkdir(mode=0o700)
            os.chown(own, run_as.uid, run_as.gid, follow_symlinks=False)
        check(own, run_as)
        return own
    d = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    if len(str(d)) + len(_SOCKET_NAME) > SOCKET_PATH_MAX:
        os.rmdir(d)
        raise SocketDirError(f"no short socket folder: {d} is too long; set TMPDIR to a short path")
    os.chown(d, run_as.uid, run_as.gid, follow_symlinks=False)
    check(d, run_as)
    return d


def check(d: Path, run_as: RunAs) -> None:
    """Refuse a socket folder that is a symlink, not ours, or open to others."""
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SocketDirError(f"refusing socket folder {d}: not a real folder (symlink or file)")
    if st.st_uid != run_as.uid:
        raise SocketDirError(f"refusing socket folder {d}: owned by uid {st.st_uid}, not by {run_as.name}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise SocketDirError(f"refusing socket folder {d}: mode {stat.S_IMODE(st.st_mode):o}, expected 700")


def remove(d: Path, cluster_dir: Path) -> None:
    """Remove a temporary socket folder (never the cluster's own `s/`, never anything but a folder)."""
    if d.is_relative_to(cluster_dir) or not d.name.startswith(TEMP_PREFIX):
        return
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(d).st_mode):
            shutil.rmtree(d)


def stale(owner_uids: set[int]) -> list[Path]:
    """Socket folders of the kit in the temp folder that no live server uses: made by a run that was killed,
    or by older versions of the kit (`pglab-<hex>`). Only folders owned by `owner_uids` are listed: another
    user's folder is never ours to remove."""
    out = []
    for d in sorted(Path(tempfile.gettempdir()).glob("pglab-*")):
        if not _KIT_SOCKET_DIR.match(d.name):
            continue
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in owner_uids:
            continue
        if not any(_lock_alive(lock) for lock in d.glob(".s.PGSQL.*.lock")):
            out.append(d)
    return out


def _lock_alive(lock: Path) -> bool:
    try:
        pid = int(lock.read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True  # unreadable or not ours to signal: treat as in use
    return True

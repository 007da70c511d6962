"""Who runs the PostgreSQL processes the kit starts.

PostgreSQL refuses to run as root. When the kit runs as root (CI does), initdb and postgres run as a
dedicated unprivileged OS user, created on demand; otherwise they run as the current user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVICE_USER = os.environ.get("PGLAB_OS_USER", "pglab")


@dataclass(frozen=True)
class RunAs:
    uid: int
    gid: int
    name: str

    @property
    def is_self(self) -> bool:
        return self.uid == os.getuid()

    def popen_kwargs(self) -> dict:
        """subprocess arguments that drop to this user (nothing when it is us)."""
        if self.is_self:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def chown(self, path: Path) -> None:
        if not self.is_self:
            os.chown(path, self.uid, self.gid)

    def can_access(self, path: Path, mode: str = "x") -> bool:
        """Whether this user can reach `path` (every parent must be searchable)."""
        if self.is_self:
            return os.access(path, {"x": os.X_OK, "r": os.R_OK, "w": os.W_OK}[mode])
        test = subprocess.run(["test", f"-{mode}", str(path)], **self.popen_kwargs())
        return test.returncode == 0


def server_user() -> RunAs:
    if os.geteuid() != 0:
        pw = pwd.getpwuid(os.geteuid())
        return RunAs(pw.pw_uid, pw.pw_gid, pw.pw_name)
    try:
        pw = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        _create_user(SERVICE_USER)
        pw = pwd.getpwnam(SERVICE_USER)
    if pw.pw_uid == 0:
        raise RuntimeError(f"OS user {SERVICE_USER!r} is root; PostgreSQL needs an unprivileged user")
    return RunAs(pw.pw_uid, pw.pw_gid, pw.pw_name)


def _create_user(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    # a system user with no login shell and no home: it only owns data directories
    subprocess.run(
        [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )

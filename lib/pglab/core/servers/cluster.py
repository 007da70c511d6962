"""Throwaway PostgreSQL clusters the kit owns: initdb, start, configure, restart, stop, delete.

A cluster lives in `<state>/clusters/<name>/`: `data/` (PGDATA), `cluster.json` (what made it),
`owner.json` (which process runs it now) and `postmaster.log` (the server's stderr before its logging
collector takes over). When the service user cannot reach that folder or the install's binaries (root in a
private folder), a kit-owned stand-in and a copy of the binaries are used instead (reach.py). The server
listens on 127.0.0.1 and on a Unix socket in a private directory (socketdir.py), on a free port.
Settings go to `data/pglab.conf`, included from postgresql.conf, rewritten on every change.

We start `postgres` ourselves rather than through the wheel's helper or `pg_ctl`: as our child, started
through `setpriv --pdeathsig`, it gets SIGINT (a fast shutdown) when the process that started it dies,
however it dies."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from .. import paths
from ..installs.installs import Install
from . import lifecycle, osuser, reach, socketdir
from .cluster_procs import STOP_TIMEOUT_S, pid_alive, proc_start_ticks, stop_pid, sweep_orphans  # noqa: F401
from .cluster_settings import ClusterError, ClusterSettings

# set by the test suite only (tests/conftest.py): initdb skips its final fsync of the new cluster, as PostgreSQL's own
# pg_regress does; a measuring run keeps it (a crash right after initdb must not leave a reusable, torn cluster)
INITDB_NO_SYNC_ENV = "PGLAB_TEST_INITDB_NO_SYNC"

log = logging.getLogger(__name__)

SUPERUSER = "pglab"
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class InitdbOptions:
    """Explicit and identical for every version: PostgreSQL 18 turns checksums on by default, 15 does not."""

    encoding: str = "UTF8"
    locale: str = "C"
    data_checksums: bool = False

    def args(self, major: int) -> list[str]:
        args = [f"--encoding={self.encoding}", f"--locale={self.locale}"]
        if self.data_checksums:
            args.append("--data-checksums")
        elif major >= 18:
            args.append("--no-data-checksums")
        return args


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster(ClusterSettings):
    def __init__(
        self,
        install: Install,
        name: str | None = None,
        root: Path | None = None,
        initdb: InitdbOptions | None = None,
    ):
        self.install = install
        self.name = name or install.name
        self._root = root or paths.clusters_dir()
        self._path: Path | None = None
        self._server_install: Install | None = None
        self._setting_names: set[str] | None = None
        self.not_applied: dict = {}  # settings this version does not have (see applicable)
        self.initdb_options = initdb or InitdbOptions()
        self.run_as = osuser.server_user()
        self.port: int | None = None
        self.socket_dir: Path | None = None
        self.settings: dict = {}
        self._proc: subprocess.Popen | None = None

    def __repr__(self) -> str:
        state = f"port {self.port}" if self.running else "stopped"
        return f"<Cluster {self.name} ({self.install.version}) {state}>"

    @property
    def path(self) -> Path:
        """The cluster's folder: under the wanted root, or its stand-in (resolved on first use, not in the
        constructor, so that describing servers creates nothing)."""
        if self._path is None:
            try:
                self._path = reach.server_folder(self._root, self.run_as) / self.name
            except reach.ReachError as e:
                raise ClusterError(str(e)) from None
        return self._path

    @property
    def data(self) -> Path:
        return self.path / "data"

    @property
    def server_install(self) -> Install:
        """The install whose initdb and postgres run: the install itself, or a copy the service user can run."""
        if self._server_install is None:
            try:
                self._server_install = reach.server_install(self.install, self.run_as)
            except reach.ReachError as e:
                raise ClusterError(str(e)) from None
        return self._server_install

    def folders(self) -> dict:
        """Where this cluster's files are, for the environment data."""
        return {
            "cluster_dir": paths.shown(self.path),
            "cluster_dir_wanted": paths.shown(self._root / self.name),
            "socket_dir": paths.shown(self.socket_dir) if self.socket_dir else None,
            "server_bin_dir": paths.shown(self.server_install.bin_dir),
        }

    # -- creation -------------------------------------------------------------------------------------------

    @property
    def meta_file(self) -> Path:
        return self.path / "cluster.json"

    def _wanted_meta(self) -> dict:
        return {
            "install": self.install.name,
            "bin_dir": str(self.install.bin_dir),
            "version": self.install.version,
            "major": self.install.major,
            "initdb": asdict(self.initdb_options),
        }

    def exists(self) -> bool:
        return (self.data / "PG_VERSION").exists() and self.meta_file.exists()

    def ensure(self) -> bool:
        """initdb unless a cluster made the same way is already there. Returns True if it created one."""
        if self.exists():
            have = json.loads(self.meta_file.read_text())
            want = self._wanted_meta()
            same = {k: have.get(k) for k in ("major", "initdb", "bin_dir")} == {
                k: want[k] for k in ("major", "initdb", "bin_dir")
            }
            if same:
                return False
            log.warning("cluster %s was made by %s; re-creating it for %s", self.name, have, want)
            self.delete()
        self._check_access()
        self.path.mkdir(parents=True, exist_ok=True)
        if self.data.exists():  # half-made by an interrupted initdb
            shutil.rmtree(self.data)
        self.data.mkdir(mode=0o700)
        self.run_as.chown(self.data)
        cmd = [
            str(self.server_install.tool("initdb")),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",  # no password is set: TCP logins are refused; we use the socket
            *self.initdb_options.args(self.install.major),
            *(["--no-sync"] if os.environ.get(INITDB_NO_SYNC_ENV) == "1" else []),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, **self.run_as.popen_kwargs())
        if out.returncode != 0:
            raise ClusterError(f"initdb failed for {self.name}:\n{out.stdout}\n{out.stderr}")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n# settings of the kit, rewritten on every start and change\n")
            f.write("include_if_exists = 'pglab.conf'\n")
        self.meta_file.write_text(json.dumps(self._wanted_meta() | {"created": time.time()}, indent=1))
        return True

    def _check_access(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.run_as.can_access(self.path.parent, "x"):
            raise ClusterError(
                f"OS user {self.run_as.name} cannot reach {self.path.parent}; "
                "set PGLAB_STATE_DIR to a folder it can reach"
            )

    def delete(self) -> None:
        self.stop()
        shutil.rmtree(self.path, ignore_errors=True)

    # -- settings: cluster_settings.ClusterSettings -----------------------------------------------------------

    # -- running --------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def owner_file(self) -> Path:
        return self.path / "owner.json"

    def start(self, settings: dict | None = None) -> None:
        if self.running:
            raise ClusterError(f"{self.name} is already running")
        sweep_orphans(self.path.parent)
        self._claim()
        try:
            self.ensure()
            settings = self.applicable(settings or {})
            self.validate(settings)
            self.settings = dict(settings)
            self.socket_dir = socketdir.choose(self.path, self.run_as)
            self._claim()  # again: the owner file names the socket folder, for the orphan sweep
            for attempt in range(5):
                self.port = _free_port()
                self._write_conf(self.settings)
                if self._spawn():
                    break
                if attempt == 4 or "already in use" not in self._startup_log():
                    raise ClusterError(f"{self.name} did not start:\n{self._startup_log()[-3000:]}")
        except BaseException:
            self.port = None
            self._release()
            raise
        lifecycle.register(self)

    def _claim(self) -> None:
        if self.owner_file.exists():
            owner = json.loads(self.owner_file.read_text())
            if owner["pid"] != os.getpid() and proc_start_ticks(owner["pid"]) == owner.get("ticks"):
                raise ClusterError(f"{self.name} is in use by another pglab process (pid {owner['pid']})")
        self.path.mkdir(parents=True, exist_ok=True)
        owner = {"pid": os.getpid(), "ticks": proc_start_ticks(os.getpid())}
        if self.socket_dir:
            owner["socket_dir"] = str(self.socket_dir)
        self.owner_file.write_text(json.dumps(owner))

    def _release(self) -> None:
        """Forget the owner file and a socket folder of our own outside the cluster."""
        if self.socket_dir:
            socketdir.remove(self.socket_dir, self.path)
        self.owner_file.unlink(missing_ok=True)

    def _spawn(self) -> bool:
        cmd = [str(self.server_install.tool("postgres")), "-D", str(self.data)]
        setpriv = shutil.which("setpriv")
        if setpriv:
            cmd = [setpriv, "--pdeathsig", "INT", "--", *cmd]
        logf = open(self.path / "postmaster.log", "w")  # noqa: SIM115 - the child keeps it
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.path.parent,
                start_new_session=True,  # a Ctrl-C in the terminal must not reach the server directly
                **self.run_as.popen_kwargs(),
            )
        finally:
            logf.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            with contextlib.suppress(psycopg.OperationalError):
                psycopg.connect(self.conninfo(), connect_timeout=2).close()
                return True
            time.sleep(0.1)
        self._kill()
        raise ClusterError(f"{self.name} did not accept connections within {START_TIMEOUT_S}s")

    def _startup_log(self) -> str:
        try:
            return (self.path / "postmaster.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGINT)  # fast shutdown
                try:
                    self._proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._kill()
            self._proc = None
        lifecycle.unregister(self)
        if self._path is not None:
            self._release()

    def _kill(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGQUIT)  # immediate shutdown
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def restart(self, settings: dict | None = None) -> None:
        self.stop()
        self.start(self.settings if settings is None else settings)

    # -- connecting -----------------------------------------------------------------------------------------

    def conninfo(self, dbname: str = "postgres") -> str:
        if self.port is None:
            raise ClusterError(f"{self.name} is not running")
        return psycopg.conninfo.make_conninfo(host=str(self.socket_dir), port=self.port, user=SUPERUSER, dbname=dbname)

    def connect(self, dbname: str = "postgres", **kwargs) -> psycopg.Connection:
        from .db import connect

        return connect(self.conninfo(dbname), **kwargs)

    def log_files(self) -> list[Path]:
        return sorted((self.data / "log").glob("postgresql-*"))

    def current_log_files(self) -> dict[str, Path]:
        """The file each log destination writes now ({"stderr": …, "jsonlog": …}), as the logging collector
        records it in current_logfiles; {} when it records none (not running, or no collector)."""
        try:
            lines = (self.data / "current_logfiles").read_text().splitlines()
        except OSError:
            return {}
        return {k: self.data / v for k, _, v in (ln.partition(" ") for ln in lines) if v}

    def log_destinations(self) -> set[str]:
        """The log destinations the server writes now (stderr is always among them with the collector)."""
        return set(self.current_log_files())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

"""A kit cluster's server settings: the kit's own base (listen on 127.0.0.1 and the private socket, the
logging collector), what a version knows (a setting an older major lacks is left out and recorded), the check by
the server binary itself, and applying them by reload or restart. Mixed into `cluster.Cluster`."""

from __future__ import annotations

import logging
import subprocess
import time

log = logging.getLogger("pglab.core.servers.cluster")


class ClusterError(Exception):
    pass


def _quote(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


class ClusterSettings:
    def _base_settings(self) -> dict:
        return {
            "listen_addresses": "127.0.0.1",
            "port": self.port,
            "unix_socket_directories": str(self.socket_dir),
            "logging_collector": True,
            "log_destination": "jsonlog" if self.install.major >= 15 else "csvlog",
            "log_directory": "log",
            "log_filename": "postgresql-%Y%m%d-%H%M%S.log",
        }

    def applicable(self, settings: dict) -> dict:
        """`settings` less those this version does not have (max_parallel_maintenance_workers is new in 11):
        one params file drives a sweep over 10 … 18, so a setting an older major lacks is left out for it,
        logged and kept in `not_applied` (the environment data records it). Extension settings (with a dot)
        are the extension's to check."""
        known = self._known_setting_names()
        out, dropped = {}, {}
        for k, v in settings.items():
            (out if "." in k or k.lower() in known else dropped)[k] = v
        for k in dropped.keys() - self.not_applied.keys():
            log.warning("%s: PostgreSQL %s has no setting %s; left out", self.name, self.install.major, k)
        self.not_applied = dropped
        return out

    def _known_setting_names(self) -> set[str]:
        if self._setting_names is None:
            out = subprocess.run(
                [str(self.server_install.tool("postgres")), "--describe-config"],
                capture_output=True,
                text=True,
                timeout=30,
                **self.run_as.popen_kwargs(),
            )
            if out.returncode != 0:
                raise ClusterError(f"{self.name}: postgres --describe-config failed: {out.stderr.strip()}")
            self._setting_names = {line.split("\t", 1)[0].lower() for line in out.stdout.splitlines()}
        return self._setting_names

    def validate(self, settings: dict) -> None:
        """Check names and values with the server binary itself (`postgres -C`), before they are written:
        a bad value in the config file would otherwise only show up in the server log."""
        if not settings:
            return
        cmd = [str(self.server_install.tool("postgres")), "-D", str(self.data), "-C", "server_version"]
        for k, v in settings.items():
            cmd += ["-c", f"{k}={_quote(v).strip(chr(39))}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, **self.run_as.popen_kwargs())
        if out.returncode != 0:
            msg = " ".join(out.stderr.split())
            raise ClusterError(f"{self.name}: settings rejected by PostgreSQL {self.install.major}: {msg}")

    def _write_conf(self, settings: dict) -> None:
        lines = [f"{k} = {_quote(v)}" for k, v in (self._base_settings() | settings).items()]
        conf = self.data / "pglab.conf"
        conf.write_text("\n".join(lines) + "\n")
        self.run_as.chown(conf)

    def configure(self, settings: dict) -> str:
        """Apply server settings: reload where PostgreSQL allows it, restart where it must.

        Returns "reloaded" or "restarted". Settings not named go back to their defaults."""
        if not self.running:
            self.start(settings)
            return "restarted"
        settings = self.applicable(settings)
        self.validate(settings)
        self._write_conf(settings)
        with self.connect() as conn:
            conn.execute("SELECT pg_reload_conf()")
            time.sleep(0.1)  # the postmaster reloads asynchronously
            pending = self._pending_restart(conn)
            errors = conn.execute(
                # 'setting could not be applied' only means: needs a restart; so does a restart-only
                # setting removed from the file (a row without a name: 'parameter "x" cannot be changed ...')
                "SELECT name, error FROM pg_file_settings"
                " WHERE error IS NOT NULL AND error <> 'setting could not be applied'"
                " AND error NOT LIKE '%cannot be changed without restarting the server'"
            ).fetchall()
        if errors:
            raise ClusterError(f"{self.name}: invalid settings {errors}")
        self.settings = dict(settings)
        if pending:
            self.restart(settings)
            return "restarted"
        return "reloaded"

    @staticmethod
    def _pending_restart(conn) -> list[str]:
        for _ in range(20):
            # pg_settings reflects the reload once the backend has processed the SIGHUP
            rows = conn.execute("SELECT name FROM pg_settings WHERE pending_restart").fetchall()
            if rows:
                return [r[0] for r in rows]
            time.sleep(0.05)
        return []

"""The pgbench databases the kit owns on each server, and the sizes the study measured around them.

One database per scale (`pgbench_s10`) for loads, select-only and scaling runs, and a separate one per
scale for the no-vacuum series (`pgbench_s10_nv`), which must start freshly loaded and is left bloated.
Dropping or creating one on an external server needs `allow_destructive` (`Server.require_destructive`).

Sizes: `pg_database_size` of the database, the sum over every database of the cluster, and for the kit's
own clusters what `du` of the data directory says (the study's `du -sk $PGDATA`, WAL included) and of
`pg_wal` alone. The WAL position is read too, so that the WAL a run wrote can be given."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

from ...core.servers.db import scrub
from ...core.servers.servers import Server


def database(scale: int, series: bool = False) -> str:
    return f"pgbench_s{scale}_nv" if series else f"pgbench_s{scale}"


def version(server: Server) -> tuple[int, int]:
    """A kit server's PostgreSQL (major, minor), to find the oldest or the newest."""
    return server.install.major, int(server.install.minor) if server.install.minor.isdigit() else 0


def dir_bytes(path: Path) -> int | None:
    """Disk space used under `path`, as `du` counts it (allocated blocks); None if unreadable."""
    total = 0
    try:
        for root, dirs, files in os.walk(path, onerror=_raise):
            for name in dirs + files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except FileNotFoundError:  # a file removed while we walk (WAL recycling, temp files)
                    pass
        return total + os.lstat(path).st_blocks * 512
    except OSError:
        return None


def _raise(err: OSError):
    raise err


def lsn_bytes(lsn: str | None) -> int | None:
    """'16/B374D848' -> byte position (what pg_wal_lsn_diff subtracts)."""
    if not lsn:
        return None
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def sizes(server: Server, dbname: str) -> dict:
    """db_bytes (None when the database does not exist), databases_bytes, datadir_bytes and wal_dir_bytes
    (kit clusters only, else None), wal_lsn."""
    with server.connect() as conn:
        db, total, lsn = conn.execute(
            "SELECT (SELECT pg_database_size(oid) FROM pg_database WHERE datname = %s),"
            " (SELECT sum(pg_database_size(oid))::bigint FROM pg_database"
            "  WHERE has_database_privilege(oid, 'CONNECT')),"
            " CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END",
            (dbname,),
        ).fetchone()
    out = {"db_bytes": db, "databases_bytes": total, "datadir_bytes": None, "wal_dir_bytes": None, "wal_lsn": lsn}
    if server.cluster is not None:
        out["datadir_bytes"] = dir_bytes(server.cluster.data)
        out["wal_dir_bytes"] = dir_bytes(server.cluster.data / "pg_wal")
    return out


def with_suffix(d: dict, suffix: str) -> dict:
    return {f"{k}_{suffix}": v for k, v in d.items()}


def wal_written(before: dict, after: dict) -> int | None:
    a, b = lsn_bytes(after.get("wal_lsn")), lsn_bytes(before.get("wal_lsn"))
    return None if a is None or b is None else a - b


def checkpoint(server: Server) -> str | None:
    """CHECKPOINT; the error text when not allowed (an external server without the right role)."""
    try:
        with server.connect() as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as e:
        return scrub(str(e).strip())
    return None


def loaded_scale(server: Server, dbname: str) -> int | None:
    """The scale a complete pgbench -i left in `dbname` (rows of pgbench_branches), None if not loaded.

    The primary keys are the last step of a load: without them the load did not finish."""
    try:
        with server.connect(dbname) as conn:
            if conn.execute("SELECT to_regclass('pgbench_accounts_pkey') IS NULL").fetchone()[0]:
                return None
            return conn.execute("SELECT count(*) FROM pgbench_branches").fetchone()[0]
    except psycopg.Error:
        return None

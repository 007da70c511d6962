"""An experiment's data on one server, and the user's SQL it runs: the data loaded (SSB, `pgbench -i`, a setup
script run statement by statement, a failing one named by file, number and first line) or kept when the database
already holds it (`pgbench_run.marked`), and what a connection may set there (`server_contexts`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...core.servers.db import scrub
from ...core.servers.servers import Server
from ...core.store import RunStore
from ...pgtools import pgbench
from . import pgbench_run
from .params import SCALE, Experiment


def statements(sql: str) -> list[str]:
    """The script's statements, split at the semicolons outside quotes, dollar quotes and comments (each with its
    comments; empty ones dropped): what a failing statement's number counts."""
    out, start, i, n = [], 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "'\"":
            j = i + 1
            while j < n and not (sql[j] == c and not sql.startswith(c * 2, j)):
                j += 2 if sql.startswith(c * 2, j) else 1
            i = j + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:])):
            j = sql.find(m.group(0), i + len(m.group(0)))
            i = n if j < 0 else j + len(m.group(0))
        elif c == ";":
            out.append(sql[start : i + 1])
            start = i = i + 1
        else:
            i += 1
    out.append(sql[start:])
    return [x for x in out if _code(x)]


def _code(statement: str) -> str:
    """The statement without comments and blank lines."""
    text = re.sub(r"/\*.*?\*/", " ", statement, flags=re.S)
    lines = [ln.split("--", 1)[0].rstrip() for ln in text.splitlines()]
    return "\n".join(ln for ln in lines if ln.strip()).strip("; \n")


def first_line(statement: str) -> str:
    code = _code(statement)
    line = code.splitlines()[0].strip() if code else ""
    return line if len(line) <= 80 else line[:77] + "..."


def shown_path(path: str) -> str:
    """A file as the user would name it: relative to the working folder when under it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


class ScriptError(RuntimeError):
    """A statement of the user's SQL failed: the file, the statement's number and first line, the server, the error."""

    def __init__(self, file: str, number: int, total: int, statement: str, server: str, error: str):
        self.file, self.number, self.statement = file, number, first_line(statement)
        self.server, self.error = server, error
        super().__init__(f"{file}: statement {number} of {total} ({self.statement}) failed on {server}: {error}")


def run_script(conn, sql: str, file: str, server: str) -> None:
    """Each statement of a setup script in turn (autocommit: VACUUM and CREATE INDEX CONCURRENTLY are allowed);
    the first that fails raises ScriptError."""
    import psycopg

    parts = statements(sql)
    conn.autocommit = True
    for k, stmt in enumerate(parts, 1):
        try:
            conn.execute(stmt)
        except psycopg.Error as ex:
            raise ScriptError(file, k, len(parts), stmt, server, scrub(str(ex).strip())) from None


def server_contexts(server: Server) -> dict[str, str]:
    with server.connect() as conn:
        return dict(conn.execute("SELECT name, context FROM pg_settings").fetchall())


@dataclass
class Prepared:
    """One server's part in an experiment, as first recorded (setup.json)."""

    server: str
    database: str
    contexts: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    skipped: str | None = None  # why the server cannot take part: an error (the data's script failed, no connection)
    error: dict | None = None  # a failing setup statement: file, statement, first line, error (ScriptError)


def prepare_data(e: Experiment, server: Server, dbname: str, store: RunStore) -> dict:
    """The experiment's data in `dbname` on `server`: loaded now, or kept when it is there already."""
    d = e.data
    t0 = time.monotonic()
    if SCALE in e.factors:  # every scale of the factor, each its own database (pgbench_run)
        return pgbench_run.prepare_data(e, server)
    if d.ssb is not None:
        from ...datasets.ssb.load import load

        r = load(server, d.ssb.sf, d.ssb.seed, run_id=store.run_id)
        return {
            "kind": "ssb",
            "sf": d.ssb.sf,
            "loaded_now": not r.skipped,
            "bytes": r.database_bytes,
            "seconds": round(time.monotonic() - t0, 3),
        }
    marker = {
        "kind": d.kind,
        "pgbench_scale": d.pgbench.scale if d.pgbench else None,
        "sql": (open(d.sql).read() if d.sql else None),
    }
    if pgbench_run.marked(server, dbname, marker):
        return {"kind": d.kind, "loaded_now": False, "seconds": 0.0}
    server.recreate_database(dbname)
    if d.pgbench is not None:
        from ...core.installs.installs import discover

        client = pgbench.newest_client(discover())
        res = pgbench.run(server, ["-i", "-q", "-s", str(d.pgbench.scale)], client, dbname=dbname, init=True)
        if not res.ok:
            raise RuntimeError(f"pgbench -i failed: {res.error}")
    elif d.sql:
        with server.connect(dbname) as conn:
            run_script(conn, marker["sql"], shown_path(d.sql), server.name)
    pgbench_run.mark(server, dbname, marker)
    return {"kind": d.kind, "loaded_now": True, "seconds": round(time.monotonic() - t0, 3)}

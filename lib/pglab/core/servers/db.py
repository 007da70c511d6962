"""Connections (psycopg 3) and the one helper every experiment times statements with."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def connect(conninfo: str, settings: dict | None = None, autocommit: bool = True, **kwargs) -> psycopg.Connection:
    """Connect with session `settings` applied at connection start (`options=-c k=v`).

    Auto-preparation is off (prepare_threshold=None): psycopg would otherwise switch to prepared statements
    after 5 executions, which can change plans in the middle of a benchmark."""
    if settings:
        conninfo = make_conninfo(conninfo, options=options(settings))
    kwargs.setdefault("connect_timeout", 10)
    conn = psycopg.connect(conninfo, autocommit=autocommit, **kwargs)
    conn.prepare_threshold = None
    return conn


def options(settings: dict) -> str:
    """Session settings as libpq's `options` ("-c k=v ..."; PGOPTIONS for a client such as pgbench)."""
    return " ".join(f"-c {k}={_option_value(v)}" for k, v in settings.items())


def _option_value(v) -> str:
    if isinstance(v, bool):
        v = "on" if v else "off"
    # backslash-escape spaces: libpq's options syntax
    return str(v).replace("\\", "\\\\").replace(" ", "\\ ")


def ensure_database(server, dbname: str) -> None:
    """CREATE DATABASE `dbname` on `server` (a `servers.Server`) unless it exists."""
    with server.connect() as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            server.announce_created(dbname)  # an external server's: named now, dropped when the run ends
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


def redact(conninfo: str) -> str:
    """The conninfo without its password, for anything that is stored or printed."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "<unparseable dsn>"
    params.pop("password", None)
    return make_conninfo(**params)


_SECRETS: set[str] = set()
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def register_secret(secret: str | None) -> None:
    """A password `scrub` must remove from any text (the kit registers external servers' dsn passwords)."""
    if secret:
        _SECRETS.add(secret)


def scrub(text: str | None) -> str | None:
    """`text` without any known password (registered, or PGPASSWORD's) and without `password=...` pairs: for
    error messages, tool output and command lines that are stored or printed."""
    if not text:
        return text
    text = _PASSWORD_KV.sub(r"\1***", text)
    for secret in sorted(_SECRETS | {os.environ.get("PGPASSWORD") or ""}, key=len, reverse=True):
        if len(secret) >= 4:  # a shorter one would blank out ordinary words; libpq never echoes it anyway
            text = text.replace(secret, "***")
    return text


@dataclass
class Timed:
    """Outcome of one timed statement: elapsed wall time, or the error, never both silently."""

    sql: str
    elapsed_s: float | None = None
    rowcount: int | None = None
    rows: list[tuple] = field(default_factory=list, repr=False)
    error: str | None = None
    sqlstate: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def timed_out(self) -> bool:
        return self.sqlstate == "57014"  # query_canceled: statement_timeout


def timeout_ms(seconds: float) -> str:
    """A statement_timeout in ms, at least 1: a timeout of 0 would mean none at all."""
    return str(max(1, round(seconds * 1000)))


def set_statement_timeout(conn: psycopg.Connection, seconds: float) -> None:
    conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms(seconds),))


def timed_statement(
    conn: psycopg.Connection,
    sql: str,
    params=None,
    timeout_s: float | None = None,
    keep_rows: bool = True,
) -> Timed:
    """Run one statement with a statement timeout; time it from send to the last row fetched.

    Errors come back as data (error text and SQLSTATE), the connection stays usable."""
    out = Timed(sql=sql)
    with conn.cursor() as cur:
        if timeout_s is not None:
            cur.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms(timeout_s),))
        try:
            t0 = time.perf_counter()
            cur.execute(sql, params)
            rows = cur.fetchall() if cur.description is not None else []
            out.elapsed_s = time.perf_counter() - t0
            out.rowcount = len(rows) if cur.description is not None else cur.rowcount
            if keep_rows:
                out.rows = rows
        except psycopg.Error as e:
            out.error = scrub(str(e).strip())
            out.sqlstate = e.sqlstate
            if not conn.autocommit:
                conn.rollback()
        finally:
            if timeout_s is not None and not conn.broken:
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                    conn.rollback()
                cur.execute("SELECT set_config('statement_timeout', '0', false)")
    return out


# -- plans: the one way every study runs EXPLAIN for its artefacts ---------------------------------------------------


def explain_json(
    conn: psycopg.Connection, sql: str, analyze: bool = True, verbose: bool = False, record_error: bool = False
):
    """The JSON plan of `sql`, as PostgreSQL returns it (a list of one plan document): EXPLAIN (ANALYZE, BUFFERS
    [, VERBOSE], FORMAT JSON), which runs the statement, untimed; or with analyze=False a plain EXPLAIN
    ([VERBOSE, ]FORMAT JSON) that only plans it (planning needs no cores). With record_error a statement that fails
    gives {"error": message} (scrubbed, as `timed_statement`'s): a plan that fails is recorded, not dropped."""
    options = [*(["ANALYZE", "BUFFERS"] if analyze else []), *(["VERBOSE"] if verbose else []), "FORMAT JSON"]
    try:
        return conn.execute(f"EXPLAIN ({', '.join(options)}) {sql.rstrip().rstrip(';')}").fetchone()[0]
    except psycopg.Error as e:
        if not record_error:
            raise
        if not conn.autocommit:
            conn.rollback()
        return {"error": scrub(str(e).strip())}


def plan_shape(conn: psycopg.Connection, sql: str) -> str:
    """EXPLAIN (COSTS OFF) of `sql`: the plan's shape as text, a line per row (what plan fingerprints compare)."""
    return "\n".join(r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {sql.rstrip().rstrip(';')}").fetchall())

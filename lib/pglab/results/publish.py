"""A run's export loaded into a PostgreSQL results schema, where runs from many machines meet.

    PGLAB_RESULTS_DSN="host=... dbname=... user=..." python -m pglab.results publish --run-id ID [--schema S]

The run is its export folder (data/export/<run-id>/, made first when missing; or a folder path holding a
manifest.json, e.g. one sent from another machine). In one transaction: the schema (default pglab_results) and its
tables are created as needed, one per exported table plus runs, servers, params and run_tables as the index has
them, columns typed from the Parquet files (a column a newer kit exports is added with ALTER TABLE ADD COLUMN; one
whose type differs from another run's is widened, to double precision or text, values kept); then every row of
the run id is deleted from every results table and the run's rows are copied in. Publishing again replaces the
run; no other run's rows and nothing outside the schema are touched. The view `findings` unions every study's
verdicts (`<study>_findings`) of every run there. The kit marks the tables it makes (COMMENT ON TABLE): a table of
the same name that it did not make is refused, not written to.

The DSN comes from PGLAB_RESULTS_DSN (not the command line, where other users could read it) or --dsn; its
password is never printed: messages are scrubbed of it and never quote the DSN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..core.servers.db import register_secret, scrub
from . import export
from .index import FINDINGS, FINDINGS_COLUMNS, manifest_tables

SCHEMA = "pglab_results"
DSN_ENV = "PGLAB_RESULTS_DSN"
MARK = "pglab results"  # the start of the comment on every table publish makes
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_TYPES = {
    pl.Int8: "bigint",
    pl.Int16: "bigint",
    pl.Int32: "bigint",
    pl.Int64: "bigint",
    pl.UInt8: "bigint",
    pl.UInt16: "bigint",
    pl.UInt32: "bigint",
    pl.UInt64: "numeric",
    pl.Float32: "double precision",
    pl.Float64: "double precision",
    pl.Boolean: "boolean",
    pl.String: "text",
    pl.Date: "date",
}
_NUMBERS = ("bigint", "integer", "numeric", "double precision")


class PublishError(Exception):
    """A publish refused before anything changed: the message says why (exit 2)."""


def pg_type(dtype: pl.DataType) -> str:
    return _TYPES.get(dtype.base_type(), "text")  # anything else goes as text


def widened(have: str, want: str) -> str | None:
    """The column type holding both a column's current values (`have`) and new ones (`want`); None: no change."""
    if have == want or have == "text" or (want == "bigint" and have in ("numeric", "double precision")):
        return None
    return "double precision" if have in _NUMBERS and want in _NUMBERS else "text"


def check_schema(name: str) -> str:
    if not _SCHEMA_NAME.fullmatch(name) or name.startswith("pg_") or name == "information_schema":
        raise PublishError(
            f"schema {name!r}: expected a lower-case name of letters, digits and '_' (not a system "
            "schema: pg_*, information_schema)"
        )
    return name


def export_folder(spec: str) -> Path:
    """The run's export: a folder path holding a manifest.json, else data/export/<run-id>/ (made when missing)."""
    if "/" in spec:
        folder = Path(spec).expanduser()
        if not (folder / export.MANIFEST).is_file():
            raise export.ExportError(f"{spec}: no {export.MANIFEST} there (make export writes one)")
        return folder
    folder = export.export_root() / export.run_of(spec)
    if (folder / export.MANIFEST).is_file():
        return folder
    return export.export(spec)


def run_tables(folder: Path) -> tuple[str, dict[str, pl.DataFrame]]:
    """(run id, {results table: rows}) of an export folder: its tables and those of its manifest."""
    m = json.loads((folder / export.MANIFEST).read_text())
    tables = {name: pl.read_parquet(folder / e["file"]) for name, e in sorted(m.get("tables", {}).items())}
    clash = sorted(set(tables) & set(export.RESERVED))
    if clash:
        raise PublishError(f"{folder}: tables {clash} have the names of the index's own tables")
    return m["run_id"], tables | manifest_tables([folder])


def _schema_tables(conn: psycopg.Connection, schema: str) -> tuple[dict[str, dict[str, str]], set[str]]:
    """({kit table: {column: type}}, names of relations in the schema the kit did not make)."""
    rels = conn.execute(
        "SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), '') LIKE %s FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')",
        [MARK + "%", schema],
    ).fetchall()
    cols = conn.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
        [schema],
    ).fetchall()
    kit = {name: {} for name, mine in rels if mine}
    for table, column, dtype in cols:
        if table in kit:
            kit[table][column] = dtype
    return kit, {name for name, mine in rels if not mine}


def _ensure(conn: psycopg.Connection, schema: str, name: str, df: pl.DataFrame, have: dict[str, str] | None) -> list:
    """Create or extend the table for `df`; the notes of what was added or widened."""
    table = sql.Identifier(schema, name)
    wanted = {c: pg_type(t) for c, t in df.schema.items() if t != pl.Null}  # all-missing: no type to give yet
    if have is None:
        columns = sql.SQL(", ").join(
            sql.SQL("{} {}{}").format(sql.Identifier(c), sql.SQL(t), sql.SQL(" NOT NULL" if c == "run_id" else ""))
            for c, t in wanted.items()
        )
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(table, columns))
        conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(
                table, sql.Literal(f"{MARK}: derived table {name} of pglab runs, one row set per run_id")
            )
        )
        conn.execute(sql.SQL("CREATE INDEX ON {} (run_id)").format(table))
        return []
    notes = []
    for c, t in wanted.items():
        if c not in have:
            conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(table, sql.Identifier(c), sql.SQL(t)))
            notes.append(f"{name}.{c} added ({t})")
        elif (to := widened(have[c], t)) is not None:
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}::{}").format(
                    table, sql.Identifier(c), sql.SQL(to), sql.Identifier(c), sql.SQL(to)
                )
            )
            notes.append(f"{name}.{c} widened from {have[c]} to {to}")
    return notes


def _copy(conn: psycopg.Connection, schema: str, name: str, df: pl.DataFrame, types: dict[str, str]) -> None:
    df = df.select(c for c, t in df.schema.items() if t != pl.Null)
    # a column widened to text takes this run's values as text too (true, 1.5), as the cast gave the others
    df = df.with_columns(
        pl.col(c).cast(pl.String) for c, t in df.schema.items() if types.get(c) == "text" and t != pl.String
    )
    if not df.height:
        return
    query = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(schema, name), sql.SQL(", ").join(sql.Identifier(c) for c in df.columns)
    )
    with conn.cursor() as cur, cur.copy(query) as copy:
        for row in df.iter_rows():
            copy.write_row(row)


def _findings_view(conn: psycopg.Connection, schema: str, tables: list[str]) -> None:
    """`<schema>.findings`: every study's verdicts of every run published there, as the results index has it."""
    if not tables:
        return
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in FINDINGS_COLUMNS)
    union = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(schema, t)) for t in tables
    )
    view = sql.Identifier(schema, FINDINGS)
    conn.execute(sql.SQL("CREATE VIEW {} AS {}").format(view, union))
    comment = f"{MARK}: every study's verdicts (the union of the *_findings tables), one row per run and claim"
    conn.execute(sql.SQL("COMMENT ON VIEW {} IS {}").format(view, sql.Literal(comment)))


def publish(dsn: str, spec: str, schema: str = SCHEMA) -> dict:
    """Load the run `spec` names into `schema`; what was done: run, tables, rows, replaced (rows of an earlier
    publish of the run), notes (columns added or widened)."""
    check_schema(schema)
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.ProgrammingError:
        raise PublishError(
            "the DSN does not parse (not shown: it may hold a password): expected key=value pairs "
            "or a postgresql:// URI"
        ) from None
    register_secret(password)
    run_id, frames = run_tables(export_folder(spec))
    with psycopg.connect(dsn, connect_timeout=10) as conn, conn.transaction():
        # publishers of one schema take turns: two creating the same table at once would fail
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{MARK} {schema}"])
        if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        kit, foreign = _schema_tables(conn, schema)
        refused = sorted(set(frames) & foreign)
        if refused:
            raise PublishError(
                f"schema {schema} holds {', '.join(refused)}, not made by pglab: not written to "
                "(publish into a schema of its own: --schema / SCHEMA=)"
            )
        # the view over the findings tables goes first: a column it reads could not change type under it
        if FINDINGS in kit:
            conn.execute(sql.SQL("DROP VIEW {}").format(sql.Identifier(schema, FINDINGS)))
            del kit[FINDINGS]
        notes = []
        for name, df in frames.items():
            notes += _ensure(conn, schema, name, df, kit.get(name))
        kit, _ = _schema_tables(conn, schema)
        replaced = 0
        for name in sorted(kit):  # every results table, also those this export lacks: the run is replaced whole
            cur = conn.execute(
                sql.SQL("DELETE FROM {} WHERE run_id = %s").format(sql.Identifier(schema, name)), [run_id]
            )
            replaced += cur.rowcount
        for name, df in frames.items():
            _copy(conn, schema, name, df, kit[name])
        _findings_view(conn, schema, sorted(n for n in kit if n.endswith("_findings")))
    return {
        "run": run_id,
        "schema": schema,
        "tables": len(frames),
        "rows": sum(df.height for df in frames.values()),
        "replaced": replaced,
        "notes": notes,
    }


def safe_message(error: Exception, dsn: str) -> str:
    """The error's text without the DSN or any password in it."""
    text = str(error).replace(dsn, "<dsn>") if dsn else str(error)
    return scrub(text) or type(error).__name__

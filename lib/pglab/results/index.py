"""The results index: DuckDB, in memory, over every exported run's Parquet files; no server.

    python -m pglab.results query ["SQL"] [--from DIR ...] [--csv]

The runs are the folders with a manifest.json under data/export/ and under each --from folder (an export root or
one run's export); a run found twice counts once, the first found. There are

- one view per table name, over the files of every run that has it (read_parquet with union_by_name: a column one
  run lacks reads as NULL there), `run_id` first;
- `findings`: every study's verdicts (`<study>_findings`) in one view: run_id, study, finding, server, verdict,
  claim, evidence;
- four tables from the manifests: `runs` (run_id, profile, captured_utc, cpu_model, cpu_cores, memory_gib, os,
  kernel, arch, measured_by, exported_by, source), `servers` (run_id, server, version, major, source, build,
  build_recorded, jit_available, version_string), `params` (run_id, key, value: the run's params flattened,
  values as JSON text) and `run_tables` (run_id, table_name, rows, columns).

Without SQL: the runs and the tables, with how many runs have each."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import duckdb
import polars as pl

from ..core.run.session import flatten
from .export import MANIFEST, export_root

_TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")

RUNS = {
    "run_id": pl.String,
    "profile": pl.String,
    "captured_utc": pl.String,
    "cpu_model": pl.String,
    "cpu_cores": pl.Int64,
    "memory_gib": pl.Float64,
    "os": pl.String,
    "kernel": pl.String,
    "arch": pl.String,
    "measured_by": pl.String,
    "exported_by": pl.String,
    "source": pl.String,
}
SERVERS = {
    "run_id": pl.String,
    "server": pl.String,
    "version": pl.String,
    "major": pl.Int64,
    "source": pl.String,
    "build": pl.String,
    "build_recorded": pl.Boolean,
    "jit_available": pl.Boolean,
    "version_string": pl.String,
}
PARAMS = {"run_id": pl.String, "key": pl.String, "value": pl.String}
RUN_TABLES = {"run_id": pl.String, "table_name": pl.String, "rows": pl.Int64, "columns": pl.Int64}

FINDINGS = "findings"  # the view of every study's verdicts (`<study>_findings`, pglab.core.stats.findings' columns)
FINDINGS_COLUMNS = ("run_id", "study", "finding", "server", "verdict", "claim", "evidence")

_DUCKDB_TYPES = {pl.String: "VARCHAR", pl.Int64: "BIGINT", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN"}


class QueryError(Exception):
    """Nothing to query, or a query DuckDB refused (exit 2)."""


def run_folders(extra: list[Path] | tuple[Path, ...] = (), default: bool = True) -> tuple[list[Path], list[Path]]:
    """(run export folders, folders skipped because their run was found earlier)."""
    found, seen, skipped = [], set(), []
    for root in ([export_root()] if default else []) + [Path(p) for p in extra]:
        # not .<run>.tmp<pid> nor .<run>.old<pid>: an export being written or replaced
        candidates = (
            [root]
            if (root / MANIFEST).is_file()
            else sorted(p.parent for p in root.glob(f"*/{MANIFEST}") if not p.parent.name.startswith("."))
        )
        for folder in candidates:
            run_id = json.loads((folder / MANIFEST).read_text()).get("run_id")
            if run_id in seen:
                skipped.append(folder)
                continue
            seen.add(run_id)
            found.append(folder)
    return found, skipped


def manifest_tables(folders: list[Path]) -> dict[str, pl.DataFrame]:
    """runs, servers, params and run_tables from the manifests of the run folders (shared with publish)."""
    runs, servers, params, tables = [], [], [], []
    for folder in folders:
        m = json.loads((folder / MANIFEST).read_text())
        run = m["run_id"]
        kit = m.get("kit") or {}
        runs.append(
            {
                "run_id": run,
                "profile": m.get("profile"),
                "captured_utc": m.get("captured_utc"),
                **(m.get("machine") or {}),
                "measured_by": kit.get("measured_by"),
                "exported_by": kit.get("exported_by"),
                "source": m.get("source"),
            }
        )
        servers += [{"run_id": run} | s for s in m.get("servers") or []]
        params += [{"run_id": run, "key": k, "value": json.dumps(v)} for k, v in flatten(m.get("params") or {}).items()]
        tables += [
            {"run_id": run, "table_name": t, "rows": e.get("rows"), "columns": e.get("columns")}
            for t, e in (m.get("tables") or {}).items()
        ]

    def frame(rows: list[dict], schema: dict) -> pl.DataFrame:
        return pl.from_dicts([{k: r.get(k) for k in schema} for r in rows], schema=schema).sort(list(schema)[:2])

    return {
        "runs": frame(runs, RUNS),
        "servers": frame(servers, SERVERS),
        "params": frame(params, PARAMS),
        "run_tables": frame(tables, RUN_TABLES),
    }


def connect(extra: list[Path] | tuple[Path, ...] = (), default: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the views of every exported run (QueryError when there is none)."""
    folders, _ = run_folders(extra, default)
    if not folders:
        where = ", ".join(str(p) for p in ([export_root()] if default else []) + list(extra))
        raise QueryError(f"no exported run under {where} (make export RUN_ID=<run id> writes one)")
    con = duckdb.connect(":memory:")
    for name, df in manifest_tables(folders).items():
        # inserted row by row: handing DuckDB a polars frame directly would need pyarrow
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {_DUCKDB_TYPES[t]}' for c, t in df.schema.items())})")
        if df.height:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * df.width)})", df.rows())
    files: dict[str, list[str]] = {}
    for folder in folders:
        for name, e in json.loads((folder / MANIFEST).read_text()).get("tables", {}).items():
            if _TABLE_NAME.fullmatch(name) and (folder / e["file"]).is_file():
                files.setdefault(name, []).append(str(folder / e["file"]))
    for name, paths in sorted(files.items()):
        listed = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)  # SQL string literals
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], union_by_name = true)")
    # every study's verdicts in one view: each study stores its own (`<study>_findings`), one schema for all
    verdicts = [n for n in sorted(files) if n.endswith("_findings") and n != FINDINGS]
    if verdicts:
        union = " UNION ALL ".join(f"SELECT {', '.join(FINDINGS_COLUMNS)} FROM {n}" for n in verdicts)
        con.execute(f"CREATE VIEW {FINDINGS} AS {union}")
    return con


_POLARS_TYPES = {
    "VARCHAR": pl.String,
    "BIGINT": pl.Int64,
    "INTEGER": pl.Int64,
    "DOUBLE": pl.Float64,
    "FLOAT": pl.Float64,
    "BOOLEAN": pl.Boolean,
    "DATE": pl.Date,
}


def query(sql: str, extra: list[Path] | tuple[Path, ...] = (), default: bool = True) -> pl.DataFrame:
    """The answer to `sql` over every exported run, as a polars frame."""
    return answer(connect(extra, default), sql)


def answer(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    try:
        rel = con.sql(sql)
    except duckdb.Error as e:
        raise QueryError(str(e)) from None
    if rel is None:  # a statement without a result
        return pl.DataFrame()
    names, seen = [], {}
    for c in rel.columns:  # polars needs unique names (SELECT a.server, b.server): server, server_2
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    schema = {n: _POLARS_TYPES.get(str(t)) for n, t in zip(names, rel.types, strict=True)}
    return pl.DataFrame(rel.fetchall(), schema=schema, orient="row", infer_schema_length=None)


def catalogue(extra: list[Path] | tuple[Path, ...] = (), default: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the runs, the tables with how many runs have each)."""
    con = connect(extra, default)
    runs = answer(
        con,
        "SELECT run_id, profile, cpu_model, cpu_cores, memory_gib, os, (SELECT count(*) FROM servers s "
        "WHERE s.run_id = r.run_id) AS servers FROM runs r ORDER BY run_id",
    )
    tables = answer(
        con,
        "SELECT table_name, count(*) AS runs, sum(rows) AS rows FROM run_tables GROUP BY table_name "
        "ORDER BY table_name",
    )
    return runs, tables


def show(df: pl.DataFrame, csv: bool = False) -> None:
    if csv:
        sys.stdout.write(df.write_csv())
        return
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=80,
        tbl_width_chars=240,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
    ):
        print(df)
    print(f"({df.height} rows)")

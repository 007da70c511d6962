"""`python -m pglab.results export|query|publish`: results that travel (see pglab.results).

    export  --run-id ID|PROFILE [--out DIR]      the run's tables as Parquet + manifest.json -> data/export/<run-id>/
    query   ["SQL"] [--from DIR ...] [--csv]     DuckDB over every exported run; without SQL: the runs and tables
    publish --run-id ID|FOLDER [--schema S]      the run into a PostgreSQL results schema (DSN: PGLAB_RESULTS_DSN)

Exit 2 when what was given cannot be done (no such run, bad SQL, a refused schema), 1 when the results database
fails."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import psycopg

from ..core import derived, paths
from . import export, index, publish


def _runs_missing(command: str, what: str) -> int:
    """No run named: the runs there are (as make compare lists them), exit 2."""
    print(
        f"make {command}: RUN_ID=<{what}> is required; the profiles of {paths.shown(paths.derived_dir())}: "
        f"{', '.join(p.name for p in export.profiles()) or 'none'}; the runs (data/raw/, data/raw-archive/):\n"
        + derived.runs_listing(),
        file=sys.stderr,
    )
    return 2


def _export(args) -> int:
    if not args.run_id:
        return _runs_missing("export", "run id or profile")
    t0 = time.monotonic()
    out = export.export(args.run_id, paths.resolve(args.out) if args.out else None)
    n = len(list(out.glob("*.parquet")))
    print(
        f"run {out.name}: {n} tables as Parquet + {export.MANIFEST} -> {paths.shown(out)} in "
        f"{time.monotonic() - t0:.1f} s"
    )
    return 0


def _query(args) -> int:
    extra = [paths.resolve(p) for p in args.from_ or []]
    folders, skipped = index.run_folders(extra, default=not args.only_from)
    for f in skipped:
        print(f"note: {paths.shown(f)} is a run found earlier: not counted twice", file=sys.stderr)
    if args.sql:
        index.show(index.query(args.sql, extra, default=not args.only_from), csv=args.csv)
        return 0
    runs, tables = index.catalogue(extra, default=not args.only_from)
    print(f"{runs.height} runs ({', '.join(dict.fromkeys(paths.shown(f.parent) for f in folders))}):")
    index.show(runs, csv=args.csv)
    print(f"\n{tables.height} tables, each a view (and runs, servers, params, run_tables; docs/results.md):")
    index.show(tables, csv=args.csv)
    return 0


def _publish(args) -> int:
    if not args.run_id:
        return _runs_missing("publish", "run id, profile or export folder")
    dsn = args.dsn or os.environ.get(publish.DSN_ENV, "")
    if not dsn:
        print(f"error: no DSN: set {publish.DSN_ENV} (make publish DSN=...) or pass --dsn", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        done = publish.publish(dsn, args.run_id, args.schema)
    except (psycopg.Error, OSError) as e:
        print(f"error: publish failed, nothing changed: {publish.safe_message(e, dsn)}", file=sys.stderr)
        return 1
    for note in done["notes"]:
        print(f"  {note}")
    again = f", replacing {done['replaced']:,} rows of an earlier publish" if done["replaced"] else ""
    print(
        f"run {done['run']}: {done['tables']} tables, {done['rows']:,} rows -> schema {done['schema']}{again} "
        f"in {time.monotonic() - t0:.1f} s"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.results", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="a run's derived tables as Parquet + manifest.json")
    e.add_argument("--run-id", help="a run id or a profile name (its run); without: the runs there are, exit 2")
    e.add_argument("--out", help="the folder to export into (default: data/export/)")
    q = sub.add_parser("query", help="SQL (DuckDB) over every exported run")
    q.add_argument("sql", nargs="?", help="the query; without it: the runs and tables there are")
    q.add_argument(
        "--from",
        dest="from_",
        action="append",
        metavar="DIR",
        help="another folder of exported runs (or one run's export); may be repeated",
    )
    q.add_argument("--only-from", action="store_true", help="the --from folders only, not data/export/")
    q.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p = sub.add_parser("publish", help="a run into a PostgreSQL results schema")
    p.add_argument("--run-id", help="a run id, a profile name or an export folder; without: the runs, exit 2")
    p.add_argument("--schema", default=publish.SCHEMA, help=f"the results schema (default {publish.SCHEMA})")
    p.add_argument("--dsn", help=f"the results database (better: {publish.DSN_ENV}, which ps does not show)")
    args = ap.parse_args(argv)
    try:
        return {"export": _export, "query": _query, "publish": _publish}[args.command](args)
    except (export.ExportError, index.QueryError, publish.PublishError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # `make results | head`: a reader that stops early ends the output quietly, as any filter's would
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())

"""`make bench-ssb`: how fast pglab makes SSB data, and what its timing costs.

    python -m pglab.datasets.ssb.bench [--sf 1] [--seed 1] [--overhead-batches 30] [--copy-paths]

Prints, for the embedded PostgreSQL (a throwaway cluster of its own):
1. generation to .tbl files (`python -m pglab.datasets.ssb`, 2 processes) against the C ssb-dbgen, alternating
   runs, with both outputs' sha256 compared; dbgen is `$PGLAB_DBGEN` or `dbgen` on PATH (its dists.dss
   from `$PGLAB_DBGEN_DISTS` or beside it); without one, our times alone;
2. generation alone: lineorder rows/s in this process and through the child-process producer;
3. generation + load into the server (the loader's real path): seconds, rows/s, peak memory;
4. the kit's overhead: the same query timed by pglab (`db.timed_statement`) and by psql's `\\timing`,
   alternating, ratio of medians with a 95 % CI (target: within 2 %).
Targets: issue 18, files in <= 0.65 x dbgen's time and time linear in SF (`--linearity 10`: SF 10 <= 11 x
SF 1); issue 3, SF 1 generated and loaded in <= 11 s, peak memory <= 1.5 GB."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...core import paths
from ...core.installs.installs import discover
from ...core.servers.cluster import Cluster
from ...core.servers.db import timed_statement
from ...core.servers.servers import Server
from . import COLUMNS, format_block, iter_blocks, iter_blocks_parallel, query_sql
from .load import database_name, load


def _peak_mib() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def generation(sf: float, seed: int) -> None:
    for label, source in (
        ("in-process", iter_blocks("lineorder", sf, seed, "copy")),
        ("child process", iter_blocks_parallel("lineorder", sf, seed, "copy")),
    ):
        t0 = time.perf_counter()
        rows = nbytes = 0
        for n, block in source:
            rows += n
            nbytes += len(block)
        dt = time.perf_counter() - t0
        print(
            f"  generation {label:13s}: {rows:,} lineorder rows in {dt:.2f} s = {rows / dt / 1e6:.2f} M rows/s "
            f"({nbytes / dt / 2**20:.0f} MiB/s of COPY text)"
        )


def find_dbgen() -> tuple[Path, Path] | None:
    """The C dbgen and its dists.dss, if there is one to compare with."""
    found = os.environ.get("PGLAB_DBGEN") or shutil.which("dbgen")
    if not found or not Path(found).is_file():
        return None
    dists = Path(os.environ.get("PGLAB_DBGEN_DISTS") or Path(found).with_name("dists.dss"))
    return (Path(found), dists) if dists.is_file() else None


def _timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and the peak RSS (MiB) of the largest process the command ran."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(before, after) / 1024  # ru_maxrss of children is a running maximum


def _digests(directory: Path) -> dict[str, str]:
    out = {}
    for path in sorted(directory.glob("*.tbl")):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 24):
                digest.update(block)
        out[path.stem] = digest.hexdigest()
    return out


def files_vs_dbgen(
    sf: float, runs: int, processes: int = 2, scratch: Path | None = None, with_dbgen: bool = True
) -> dict:
    """Generation to .tbl files, ours against the C dbgen, alternating; the files deleted afterwards."""
    dbgen = find_dbgen() if with_dbgen else None
    ours_cmd = [sys.executable, "-m", "pglab.datasets.ssb", "--sf", f"{sf:g}", "--processes", str(processes)]
    times: dict[str, list[float]] = {"pglab": [], "dbgen": []}
    peak = 0.0
    with tempfile.TemporaryDirectory(prefix="pglab-ssb-bench-", dir=scratch) as tmp:
        ours_dir, theirs_dir = Path(tmp, "pglab"), Path(tmp, "dbgen")
        theirs_dir.mkdir()
        for i in range(runs):
            order = ["pglab", "dbgen"] if i % 2 == 0 else ["dbgen", "pglab"]
            for who in order:
                # both write new files: overwriting the previous run's pages in place (as dbgen does, where
                # we write a new file and rename it) would spare dbgen the page allocation ours pays
                for old in (ours_dir if who == "pglab" else theirs_dir).glob("*.tbl"):
                    old.unlink()
                if who == "pglab":
                    seconds, rss = _timed([*ours_cmd, "--out", str(ours_dir)], Path(tmp))
                    times["pglab"].append(seconds)
                    peak = max(peak, rss)
                elif dbgen:
                    seconds, _ = _timed([str(dbgen[0]), "-q", "-f", "-s", f"{sf:g}", "-b", str(dbgen[1])], theirs_dir)
                    times["dbgen"].append(seconds)
        same = _digests(ours_dir) == _digests(theirs_dir) if dbgen else None
    ours = statistics.median(times["pglab"])
    line = (
        f"  files, SF {sf:g}: pglab ({processes} processes) median {ours:.2f} s of {runs} ({_spread(times['pglab'])})"
    )
    if dbgen:
        theirs = statistics.median(times["dbgen"])
        line += (
            f"; dbgen median {theirs:.2f} s ({_spread(times['dbgen'])}) -> ratio {ours / theirs:.2f} "
            f"(target <= 0.65); files identical: {same}"
        )
    else:
        line += "; no C dbgen run (set PGLAB_DBGEN to have one)" if with_dbgen else ""
    print(line + f"; largest process {peak:.0f} MiB")
    return {
        "pglab_s": ours,
        "dbgen_s": statistics.median(times["dbgen"]) if dbgen else None,
        "peak_mib": peak,
        "identical": same,
    }


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} s"


def psql_timing(server: Server, dbname: str, statements: list[str]) -> list[float]:
    """Seconds psql's \\timing reports for each statement, run in one session with output discarded."""
    script = "\\timing on\n\\o /dev/null\n" + "".join(st.strip().rstrip(";") + ";\n" for st in statements)
    out = subprocess.run(
        [str(server.install.tool("psql")), "-X", "-q", "-d", server.conninfo(dbname)],
        input=script,
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(m) / 1000 for m in re.findall(r"Time: ([\d.]+) ms", out.stdout)]


def overhead(server: Server, dbname: str, batches: int, per_batch: int = 3) -> None:
    """The same query timed by pglab and by psql's \\timing, in alternating batches (ABBA order, so drift
    cancels; this machine's run-to-run noise of ±15 % would swamp a block-wise comparison). Each psql batch
    is one session whose first execution is dropped: a new backend's first scan pays for mapping the
    shared buffers into its page table, which pglab's long-lived connection paid once, long ago."""
    from ...core.stats.stats import bootstrap_ci, interval

    sql = query_sql("pg_ssb_run", "q1.1")
    settings = {"max_parallel_workers_per_gather": 0, "jit": False}
    sets = [f"SET {k} = {'on' if v is True else 'off' if v is False else v}" for k, v in settings.items()]
    ours: list[float] = []
    theirs: list[float] = []
    paired: list[float] = []
    with server.connect(dbname, settings=settings) as conn:
        timed_statement(conn, sql)  # warm-up
        for i in range(batches):
            got = {}
            for who in ["pglab", "psql"] if i % 2 == 0 else ["psql", "pglab"]:
                if who == "pglab":
                    got[who] = [timed_statement(conn, sql).elapsed_s for _ in range(per_batch)]
                else:
                    got[who] = psql_timing(server, dbname, [*sets, *[sql] * (per_batch + 1)])[-per_batch:]
            ours += got["pglab"]
            theirs += got["psql"]
            paired.append(statistics.median(got["pglab"]) / statistics.median(got["psql"]))
    lo, hi = bootstrap_ci(paired, "median")  # the batches pair the two timers: one interval, over the batches
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(
        f"  q1.1 serial, {len(ours)} executions each in {batches} alternating batches: pglab median "
        f"{mo * 1000:.1f} ms, psql \\timing median {mt * 1000:.1f} ms; median of batch-paired ratios pglab/psql "
        f"{statistics.median(paired):.4f} (95 % CI {interval(lo, hi, '.4f')}); target within 2 %"
    )


def copy_paths(server: Server, sf: float, seed: int) -> None:
    """Server-side cost of each COPY path for the same lineorder rows, generated beforehand in memory:
    text vs CSV vs binary, with and without FREEZE. (Binary rows go through psycopg's write_row, which
    is client-bound: its rows/s is an upper bound on what binary would cost us, not the server's.)"""
    import io

    import polars as pl

    from . import create_table_sql, iter_chunks

    frames = list(iter_chunks("lineorder", sf, seed))
    rows = sum(f.height for f in frames)

    def text_block(f):
        return format_block(f, "copy")

    def csv_block(f):
        buf = io.BytesIO()
        f.write_csv(buf, include_header=False)
        return buf.getvalue()

    paths_ = [
        ("text", "", text_block),
        ("text", " (FREEZE)", text_block),
        ("csv", " (FORMAT csv)", csv_block),
        ("csv", " (FORMAT csv, FREEZE)", csv_block),
    ]
    with server.connect("postgres", autocommit=False) as conn:
        for name, opts, render in paths_:
            blocks = [render(f) for f in frames]
            t0 = time.perf_counter()
            conn.execute("DROP TABLE IF EXISTS lineorder_copy_test")
            conn.execute(create_table_sql("lineorder", sf).replace('"lineorder"', "lineorder_copy_test", 1))
            with conn.cursor().copy(f"COPY lineorder_copy_test FROM STDIN{opts}") as cp:
                for b in blocks:
                    cp.write(b)
            conn.commit()
            dt = time.perf_counter() - t0
            print(f"    {name:6s}{opts:22s} {rows / dt / 1e6:5.2f} M rows/s ({dt:.2f} s for {rows:,} rows)")
        sample = pl.concat(frames).head(300_000)
        conn.execute("DROP TABLE IF EXISTS lineorder_copy_test")
        conn.execute(create_table_sql("lineorder", sf).replace('"lineorder"', "lineorder_copy_test", 1))
        t0 = time.perf_counter()
        with conn.cursor().copy("COPY lineorder_copy_test FROM STDIN (FORMAT binary, FREEZE)") as cp:
            # varchar's binary form is text's
            cp.set_types([{"int": "int4", "bigint": "int8"}.get(t, "text") for _, t in COLUMNS["lineorder"]])
            for row in sample.iter_rows():
                cp.write_row(row)
        conn.commit()
        dt = time.perf_counter() - t0
        print(
            f"    binary (FORMAT binary, FREEZE) {sample.height / dt / 1e6:5.2f} M rows/s "
            f"(psycopg write_row, {sample.height:,} rows: client-bound)"
        )
        conn.execute("DROP TABLE lineorder_copy_test")
        conn.commit()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.datasets.ssb.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--overhead-batches", type=int, default=30)
    ap.add_argument("--copy-paths", action="store_true", help="also compare text, CSV and binary COPY")
    ap.add_argument("--file-runs", type=int, default=5, help="alternating runs of the files comparison (0: skip)")
    ap.add_argument(
        "--linearity",
        type=float,
        default=None,
        metavar="SF",
        help="also time files at this SF once (e.g. 10; needs ~6 GB per SF 10 in the scratch dir)",
    )
    ap.add_argument("--scratch", type=Path, default=None, help="where the files go (default: the temp dir)")
    args = ap.parse_args(argv)

    inst = next(i for i in discover() if i.source == "embedded")
    print(f"SSB benchmark, SF {args.sf:g}, seed {args.seed}, {inst.version}")
    if args.file_runs:
        base = files_vs_dbgen(args.sf, args.file_runs, scratch=args.scratch)
        if args.linearity:
            big = files_vs_dbgen(args.linearity, 1, scratch=args.scratch, with_dbgen=False)
            ratio = big["pglab_s"] / base["pglab_s"]
            print(
                f"  linearity: SF {args.linearity:g} took {ratio:.1f} x SF {args.sf:g} "
                f"(target <= {1.1 * args.linearity / args.sf:.1f})"
            )
    generation(args.sf, args.seed)
    own, children = _peak_mib()
    print(f"  peak memory so far: this process {own:.0f} MiB, largest child {children:.0f} MiB")

    cluster = Cluster(inst, name="bench-ssb", root=paths.state_dir() / "bench")
    settings = {
        "shared_buffers": "2GB",
        "max_wal_size": "8GB",
        "maintenance_work_mem": "1GB",
        "wal_level": "minimal",
        "max_wal_senders": 0,
    }
    server = Server(inst.name, install=inst, cluster=cluster, settings=settings)
    try:
        server.start()
        res = load(server, args.sf, args.seed, prewarm=False, force=True)
        rows = sum(t["rows"] for t in res.tables)
        load_only = sum(t["seconds"] for t in res.tables)
        print(
            f"  generation + load: {rows:,} rows in {res.total_s:.2f} s = {rows / res.total_s / 1e6:.2f} M rows/s "
            f"(COPY {load_only:.2f} s, VACUUM ANALYZE {res.analyze_s:.2f} s); database "
            f"{res.database_bytes / 2**20:.0f} MiB"
        )
        for t in res.tables:
            print(f"    {t['table']:9s} {t['rows']:>10,} rows {t['seconds']:6.2f} s")
        own, children = _peak_mib()
        print(
            f"  peak memory: this process {own:.0f} MiB, largest child {children:.0f} MiB "
            f"(target <= 1536 MiB); target SF 1 <= 11 s: {'met' if res.total_s <= 11 else 'NOT met'}"
        )
        t0 = time.perf_counter()
        again = load(server, args.sf, args.seed, prewarm=False)
        print(f"  loading the same dataset again: skipped={again.skipped} in {time.perf_counter() - t0:.2f} s")
        overhead(server, database_name(args.sf), args.overhead_batches)
        if args.copy_paths:
            print("  COPY paths (rows generated beforehand; server ingest only):")
            copy_paths(server, min(args.sf, 0.5), args.seed)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

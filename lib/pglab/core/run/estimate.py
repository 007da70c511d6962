"""The per-unit costs of make report's time estimate and the servers a study would run on, for the studies' own
models (`Study.estimate_s`, each study's estimate.py; `pglab.report.estimate` adds them up).

The costs (`COST`) are fitted to the three fresh default runs of 28 Nov 2026 on the reference machine (2 cores, a
host whose clock reads cost ~21 ns; installs: the wheel's 18, Debian's 15 and a source-built 18 with JIT; downloads
10 … 17 without; two clusters of each): 00 44-52 s, 10 540-575 s, 20 3580-3957 s, 30 780-792 s, 40 814-927 s,
50 269-287 s, 60 176-194 s, 70 48-53 s, 99 8-9 s (6265, 6615 and 6791 s in all: default-20261128-092635, -115426
and -144556); the quick profile 153-166 s in all (two runs of 2026-11-24). A host whose clock reads cost ~30 ns
took about 1.3 times as long."""

from __future__ import annotations

from pathlib import Path

from ..config import CommonParams
from ..installs.installs import Install
from ..paramtypes import version_major
from ..servers.servers import Server, for_study

# Seconds per unit, fitted to the measured runs above; each says what one unit is.
COST = {
    "notebook": 6.0,  # a notebook's kernel, imports, session, derived tables and charts
    "report": 9.0,  # 99_report: renders data/derived/ (no server)
    "server": 1.0,  # start and stop of one kit server
    # SSB (10, 20, 60): times per unit of SF
    "ssb_load": 12.2,  # generate + COPY FREEZE, VACUUM ANALYZE, prewarm and the selectivity check, per server
    "ssb_serial": 0.63,  # one query at SF 1, serial (mean over the 13)
    "ssb_parallel": 0.38,  # one query at SF 1 with parallel workers (JIT adds 0.1-0.2 s a query at SF 10)
    # a query's time grows as SF ** this: past shared_buffers (SF 10) its pages come from the OS cache
    "ssb_sf_power": 1.11,
    "ssb_jit_forced": 0.28,  # + seconds of forced inlining and optimisation per query, whatever the SF
    "ssb_plans": 1.15,  # EXPLAIN ANALYZE of every (server, mode, query) once plus the plan-only captures, in rounds
    # pgbench (30)
    "pgbench_load": 0.15,  # pgbench -i, per unit of scale (recreate, load, vacuum, keys)
    "pgbench_load_fixed": 0.18,  # pgbench -i, whatever the scale (CHECKPOINT, sizes)
    "pgbench_run": 0.06,  # a -T run beyond its -T: pgbench start, the clients' connections, sizes
    # the buffers experiment's restart with another shared_buffers (postgres -C, stop, start) and SHOW after it:
    # 0.27-0.75 s on the reference machine (pg18, 256kB … 2GB)
    "pgbench_restart": 0.5,
    # auto_explain (40): pgbench -c 1 runs of one-statement scripts on tab1
    "ae_txn": 64.7e-6,  # a transaction of a statement that reads one row (LIMIT 1)
    "ae_row": 8.18e-8,  # + per row of tab1, for a statement that reads them all (COUNT)
    "ae_logged_plan": 34.3e-6,  # a plan logged by auto_explain, written and then checked in the log
    "ae_run": 0.0343,  # a run beyond its transactions: pgbench start, PGOPTIONS, recording
    "ae_set": 20e-6,  # a SET statement of an interleaved run (a round trip; declared, not yet fitted)
    "ae_restart": 0.343,  # a restart (auto_explain in or out of shared_preload_libraries) and the prewarm after it
    "ae_setup": 1.19,  # per server: database, tab1, plans and timer capture
    # JIT per operator (50), serial aggregates over jit_ops
    "jit_row": 3.5e-8,  # one execution, per row (6 passes a round at 3e6 rows)
    "jit_compile": 0.015,  # + one execution with jit on: generation and emission
    "jit_table_row": 1.09e-6,  # creating, analysing and prewarming jit_ops, per row
    # parallel index build (60), on SSB lineorder
    "index_build": 1.83,  # one CREATE INDEX, per unit of SF (mean over key widths and worker counts on 2 cores)
    # partitioning (70)
    "part_row": 7.59e-8,  # one count over the partitioned table, per row (mean over worker counts)
    "part_load_row": 7.59e-7,  # loading, checksumming and prewarming the table, per row
}


def stand_in(spec: int | str) -> Install:
    """An install of version `spec` as a download would give (no JIT, no tools of its own), made up without
    fetching anything: for_study names and counts it as it would the real one."""
    major = version_major(spec)
    minor = str(spec).split(".", 1)[1] if "." in str(spec) else "0"
    folder = Path(f"/nonexistent/pglab-estimate/{spec}")
    return Install(
        name=f"pg{major}",
        source="download",
        bin_dir=folder / "bin",
        lib_dir=folder / "lib",
        share_dir=folder / "share",
        version="",
        major=major,
        minor=minor,
    )


def servers_for(p: CommonParams, study: str | None, base: list[Server]) -> list[Server]:
    """The servers `study` would run on among `base`, a version the run lacks stood in for (`stand_in`)."""
    return for_study(p, study, base, fetch=stand_in)


def jit(s: Server) -> bool:
    return s.install.jit if s.install else False

"""One pgbench measurement of an experiment (issue 60), with the evidence the pgbench study keeps for its own.

A condition's pgbench options (`pgbench_params.knobs`: clients, threads, scale, rate, protocol, the factors' values
over the workload's), its scripts with their weights (`-b builtin@w`, `-f file@w`), and around every measured run
(not a warm-up) the study's telemetry, from `pgtools.pgbench_telemetry`: the per-transaction log kept as counts
per second (`.txlog.csv`), server counters before and after with the latest checkpoint's time (`.counters.json`)
and the /proc sampler (`.system.json`); pgbench's whole output beside them. The record carries tps (the value), the
run's p50 / p95 / p99 / max latency and the files, so `pgbench_tables` derives the timeline and percentiles from
the raw store alone. With a `scale` factor each scale is a database of its own (`pgbench_s<scale>`), loaded once
per server and kept for the next run, as a `data: {pgbench: …}` database is."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from ...core.run.schedule import fresh_base
from ...core.servers.db import scrub
from ...core.servers.servers import Server
from ...pgtools import pgbench, pgbench_telemetry
from .params import BUILTINS, CLIENTS, PROTOCOL, RATE, SCALE, THREADS, Experiment
from .pgbench_params import knobs, scales

# pgbench's figures kept with each measurement beside tps (the rest stays in its stdout, kept whole)
PARSED = (
    "transactions_processed",
    "failed_transactions",
    "skipped_transactions",
    "latency_avg_ms",
    "latency_stddev_ms",
    "lag_avg_ms",
    "lag_max_ms",
    "initial_connection_ms",
    "query_mode",
)


def database(scale: int) -> str:
    """The database of one scale: the name `run.database` gives `data: {pgbench: {scale: S}}`, so both share it."""
    return f"pgbench_s{scale}"


def databases(e: Experiment) -> str:
    """What setup.json records as the experiment's database: every scale's, comma-separated."""
    return ", ".join(database(s) for s in scales(e))


def _marker(scale: int) -> dict:
    # the same marker prepare.prepare_data writes for data: {pgbench: {scale: S}}: either finds the other's load
    return {"kind": "pgbench", "pgbench_scale": scale, "sql": None}


def marked(server: Server, dbname: str, marker: dict) -> bool:
    """Whether `dbname` holds the data `marker` describes, as a load by the kit left it (`mark`)."""
    try:
        with server.connect(dbname) as conn:
            row = conn.execute("SELECT spec FROM pglab_experiment_data").fetchone()
        return bool(row) and json.loads(row[0]) == marker
    except Exception:  # no such database or marker yet: not loaded
        return False


def mark(server: Server, dbname: str, marker: dict) -> None:
    """After a load: VACUUM ANALYZE, then the marker that lets the next run keep the data (`marked`)."""
    with server.connect(dbname) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CREATE TABLE pglab_experiment_data (spec text)")
        conn.execute("INSERT INTO pglab_experiment_data VALUES (%s)", (json.dumps(marker),))


def load_scale(server: Server, scale: int, client) -> dict:
    """`pgbench -i -s SCALE` into `pgbench_s<scale>` unless a load of that scale by the kit is there already."""
    dbname, marker = database(scale), _marker(scale)
    t0 = time.monotonic()
    if marked(server, dbname, marker):
        return {"scale": scale, "database": dbname, "loaded_now": False, "seconds": 0.0}
    server.recreate_database(dbname)
    res = pgbench.run(server, ["-i", "-q", "-s", str(scale)], client, dbname=dbname, init=True)
    if not res.ok:
        raise RuntimeError(f"pgbench -i -s {scale} failed: {res.error}")
    mark(server, dbname, marker)
    return {"scale": scale, "database": dbname, "loaded_now": True, "seconds": round(time.monotonic() - t0, 3)}


def prepare_data(e: Experiment, server: Server) -> dict:
    """Every scale of a `scale` factor on `server` (prepare.prepare_data's part for such an experiment)."""
    from ...core.installs.installs import discover

    client = pgbench.newest_client(discover())
    loads = [load_scale(server, s, client) for s in scales(e)]
    return {
        "kind": "pgbench",
        "scales": [x["scale"] for x in loads],
        "loaded_now": any(x["loaded_now"] for x in loads),
        "seconds": round(sum(x["seconds"] for x in loads), 3),
    }


def scripts(e: Experiment) -> tuple[dict[str, str], list[str], str]:
    """(script files by the name pgbench is given, the -b/-f arguments, the mix as a label: 'tpcb-like@9 + mine@1')."""
    files: dict[str, str] = {}
    args: list[str] = []
    shown: list[str] = []
    for i, (name, weight) in enumerate(e.workload.pgbench.weighted()):
        if name in BUILTINS:
            args += ["-b", f"{name}@{weight}"]
            shown.append(f"{name}@{weight}")
        else:
            fname = f"script{i + 1}_{Path(name).name}"
            files[fname] = Path(name).read_text()
            args += ["-f", f"{fname}@{weight}"]
            shown.append(f"{Path(name).stem}@{weight}")
    return files, args, " + ".join(shown)


def arguments(e: Experiment, k: dict, logdir: str) -> list[str]:
    """pgbench's command line for one condition (without the scripts): no vacuum (-n, a custom database has no
    pgbench tables to vacuum), clients, threads, duration, protocol, the rate when set, the per-transaction log."""
    args = ["-n", "-c", str(k[CLIENTS]), "-j", str(k[THREADS]), "-T", str(e.workload.pgbench.duration_s)]
    args += ["-M", k[PROTOCOL]]
    if k[RATE] is not None:
        args += ["-R", f"{k[RATE]:g}"]
    return args + ["-l", "--log-prefix", f"{logdir}/tx"]


def measure(runner, step, session_level: dict) -> dict:
    """One pgbench run of `step` (run.Runner's pgbench step): the record's fields."""
    e, store = runner.e, runner.s.store
    cond = runner.conds[step.condition]
    k = knobs(e, cond["settings"])
    server = runner.servers[step.server]
    if runner.client is None:
        from ...core.installs.installs import discover

        runner.client = pgbench.newest_client([x.install for x in runner.s.servers if x.install] or discover())
    dbname = database(k[SCALE]) if SCALE in e.factors else runner.setup["database"]
    files, script_args, mix = scripts(e)
    logdir = tempfile.mkdtemp(prefix="pglab-xlog-")
    args = arguments(e, k, logdir) + script_args
    watch = None if step.warmup else pgbench_telemetry.Watch(server, dbname)
    fields: dict = {"unit": "tps", "mode": mix} | {x: k[x] for x in (CLIENTS, THREADS, SCALE, RATE, PROTOCOL)}
    try:
        if watch is not None:
            watch.before()
        with watch.sampler if watch is not None else contextlib.nullcontext():
            t_start = time.time()
            res = pgbench.run(
                server,
                args,
                runner.client,
                dbname=dbname,
                scripts=files,
                settings=session_level or None,
                timeout_s=e.workload.pgbench.duration_s + 120,
            )
            t_end = time.time()
        if watch is not None:
            watch.after()
        kind = "warmup" if step.warmup else "round"
        folder = f"experiments/{e.name}/pgbench/{step.server}/c{cond['index']}"
        base = fresh_base(store, f"{folder}/{kind}{step.repetition:03d}")
        store.save_text(f"{base}.stdout.txt", res.stdout)
        store.save_text(f"{base}.stderr.txt", res.stderr)
        parsed = res.parsed or {}
        fields |= {
            "value": parsed.get("tps") if res.ok else None,
            "error": res.error,
            "command": res.command.replace(logdir, "LOGDIR"),
            "client_version": res.client_version,
            "stdout_file": f"{base}.stdout.txt",
        } | {x: parsed.get(x) for x in PARSED}
        if watch is not None:
            fields |= {"started_epoch": t_start, "ended_epoch": t_end} | watch.keep(store, base)
            fields |= pgbench_telemetry.keep_txlog(store, Path(logdir), base, t_start)
        lat = pgbench.timed(pgbench.transaction_latencies_us(logdir)) if res.ok else []
        if lat:
            p = pgbench.latency_percentiles(lat)
            fields |= {x: p[x] for x in ("n", "p50_ms", "p95_ms", "p99_ms", "max_ms")}
    except Exception as ex:  # a server gone, a refused step: recorded as this run's outcome, the rest go on
        fields |= {"value": None, "error": scrub(f"{type(ex).__name__}: {ex}")}
    finally:
        if watch is not None:
            watch.close()
        shutil.rmtree(logdir, ignore_errors=True)
    return fields

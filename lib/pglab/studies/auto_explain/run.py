"""The auto_explain stage (study S2): every condition × item × server, measured with pgbench.

    result = auto_explain_run.run_stage(session)   # session started; servers reset afterwards

Order (methodology §2, §3): warm-up rounds, then round robin — repetition r of every cell before r+1
of any, servers interleaved. auto_explain in shared_preload_libraries needs a restart to switch, so
within a round the cells are grouped by that server-level state and the groups alternate direction from
one round to the next (…loaded | not loaded, not loaded | loaded…): one restart per round per server
instead of one per cell, and still every condition in every round. After a restart tab1 is prewarmed
again. auto_explain.* and the items' settings go with each pgbench connection (PGOPTIONS).

Each measured run logs its transactions' latencies (`pgbench -l`; a random sample of LOGGED_TXNS where a run
has more: limit's 20,000), kept as a raw artefact for the fast-mode comparisons, and records their
median (value, ms, by default: `run.latency`) beside pgbench's `latency average` (1000 / tps with one client,
the figure pgbench prints with 3 decimals, at full resolution): a burst of other load over part of a 1-3 s
run moves the mean, hardly the median. Also its transactions and tps, the full pgbench output as a raw
artefact, and the log proof of `auto_explain_logcheck`."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import polars as pl

from ...core import derived, raw_frames
from ...core.installs.installs import Install, discover
from ...core.run import outcomes, schedule
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...pgtools import environment, pgbench
from .logcheck import LogWatch
from .params import EXPERIMENT, AutoExplainParams
from .prepare import ServerState, plan_rows

PRELOAD, PLAIN = "auto_explain preloaded", "not preloaded"
LOGGED_TXNS = 1000  # per run at most (pgbench --sampling-rate above): a run's median and the fast mode's sample
SCRIPT = "auto_explain.sql"


def group_of(state: ServerState, params: AutoExplainParams, condition: str) -> str:
    """The server-level state a condition needs: only preloading (shared_preload) differs."""
    preload = state.loading == "shared_preload" and params.conditions[condition].load
    return PRELOAD if preload else PLAIN


def _measure(
    step: schedule.Step, states: dict, watches: dict, params: AutoExplainParams, client: Install, store
) -> dict:
    st: ServerState = states[step.server]
    cond, item = params.conditions[step.condition], params.items[step.item]
    base = {"value": None, "unit": "ms", "loading": st.loading, "expect_plans": cond.expected_plans}
    if st.skip_reason:
        return base | {"error": f"skipped: {st.skip_reason}"}
    if not cond.load and st.preloaded_by_server:
        return base | {"error": "auto_explain is in the server's own shared_preload_libraries: cannot run unloaded"}
    restarted = st.ensure_loaded(cond.load)
    if restarted and params.run.settle_s:
        _settle(st, params, client, store, step)
    settings = st.session_base | item.settings | cond.settings
    if cond.load and st.loading == "session_preload":
        settings["session_preload_libraries"] = "auto_explain"
    run_cfg = params.run
    if step.warmup and run_cfg.warmup_duration_s is not None:
        seconds = run_cfg.warmup_duration_s
        length, timeout = ["-T", str(seconds)], seconds + 120
    elif run_cfg.mode == "time":
        seconds = run_cfg.duration_s
        length, timeout = ["-T", str(seconds)], run_cfg.timeout_s or seconds + 120
    else:
        length, timeout = ["-t", str(run_cfg.transactions[step.item])], run_cfg.timeout_s
    watch: LogWatch = watches[step.server]
    watch.before_run()
    tag = f"{step.server}/{step.condition}_{step.item}_{'w' if step.warmup else 'r'}{step.repetition}"
    with tempfile.TemporaryDirectory(prefix="pglab-txlog-") as logdir:
        txlog = ["-l", f"--log-prefix={logdir}/txn"] if not step.warmup else []  # every transaction's latency
        if txlog and run_cfg.mode == "transactions" and run_cfg.transactions[step.item] > LOGGED_TXNS:
            # a sample of the 20,000 limit transactions: what the derive step keeps, without the log's I/O
            txlog.append(f"--sampling-rate={LOGGED_TXNS / run_cfg.transactions[step.item]:.6f}")
        run = pgbench.run(
            st.server,
            ["-n", "-f", SCRIPT, "-c", "1", "-j", "1", *txlog, *length],
            client,
            dbname=params.database,
            scripts={SCRIPT: item.sql.strip() + "\n"},
            settings=settings,
            timeout_s=timeout,
        )
        lat_us = pgbench.transaction_latencies_us(logdir) if txlog else []
        run.command = run.command.replace(logdir, "TXLOG")  # the recorded command names no temporary folder
    store.save_text(f"auto_explain/pgbench/{tag}.txt", f"$ {run.command}\n{run.stdout}\n--- stderr\n{run.stderr}")
    if lat_us:  # the raw measurement behind the run's median, one µs figure per transaction in run order
        store.save_text(f"auto_explain/latencies/{tag}.txt", "\n".join(map(str, lat_us)) + "\n")
    p = run.parsed or {}
    txns = p.get("transactions_processed")
    # pgbench's latency average is 1000 × clients / tps, printed with 3 decimals only: 1 µs is 3 % of limit's
    # latency here. The same figure from tps (printed with 6) keeps the resolution.
    tps = p.get("tps")
    mean_ms = 1000.0 / tps if tps else p.get("latency_avg_ms")
    timed = pgbench.timed(lat_us)  # the raw file keeps what pgbench logged, its 0 µs entries included
    median_ms = statistics.median(timed) / 1000.0 if timed else None
    value_is = "median" if run_cfg.latency == "median" and median_ms is not None else "mean"
    rec = base | {
        "value": (median_ms if value_is == "median" else mean_ms) if run.ok else None,
        "value_is": value_is if run.ok else None,
        "latency_mean_ms": mean_ms,
        "latency_median_ms": median_ms,
        "latency_avg_ms": p.get("latency_avg_ms"),
        "error": run.error,
        "transactions": txns,
        "tps": tps,
        "pgbench_duration_s": p.get("duration_s"),
        "elapsed_s": round(run.elapsed_s, 3),
        "cores": os.cpu_count(),  # the ceiling of a parallel speed-up, derivable from the raw runs
        "command": run.command,
        "client_version": run.client_version,
        "preloaded": bool(st.loaded) if st.loading == "shared_preload" else cond.load,
        "restarted_before": restarted,
        "restarts": st.restarts,
        "session_settings": json.dumps(settings, sort_keys=True, default=str),
    }
    if not run.ok:
        return rec | {"log_check": "not checked", "log_reason": "the pgbench run failed"}
    fields, sample = watch.after_run(cond, item.sql, txns, tag)
    if sample and not step.warmup:
        store.save_text(f"auto_explain/logged_plans/{step.server}/{step.condition}_{step.item}.txt", sample)
    rec |= fields
    if rec.get("log_bytes") is not None and txns:
        rec["log_bytes_per_txn"] = rec["log_bytes"] / txns
    return rec


def _settle(st: ServerState, params: AutoExplainParams, client: Install, store, step: schedule.Step) -> None:
    """An unrecorded run over every item's script right after a restart (kept as a raw artefact)."""
    scripts = {
        f"settle_{i}.sql": it.sql.strip() + "\n"
        for i, it in enumerate({it.sql.strip(): it for it in params.items.values()}.values())
    }
    args = ["-n", "-c", "1", "-j", "1", "-T", str(params.run.settle_s)]
    for name in scripts:
        args += ["-f", name]
    run = pgbench.run(
        st.server,
        args,
        client,
        dbname=params.database,
        scripts=scripts,
        settings=st.session_base,
        timeout_s=params.run.settle_s + 120,
    )
    tag = f"{step.server}/settle_round{step.round}_restart{st.restarts}"
    store.save_text(f"auto_explain/pgbench/{tag}.txt", f"$ {run.command}\n{run.stdout}\n--- stderr\n{run.stderr}")


def _timer(states: list[ServerState], profile: str, seconds: int) -> pl.DataFrame:
    """per_loop_ns per server: from the environment notebook's table of this profile, else measured now."""
    known = {}
    try:
        env = derived.read_table("environment_timing", profile)
        if "per_loop_ns" in env.columns:
            known = {r["server"]: r["per_loop_ns"] for r in env.iter_rows(named=True) if r["per_loop_ns"]}
    except (OSError, pl.exceptions.PolarsError):
        pass
    rows = []
    for st in states:
        t = environment.timer(st.server, seconds) if st.name not in known and st.server.managed else None
        if st.name in known:
            per_loop, source = float(known[st.name]), f"environment_timing ({profile})"
        elif t and t.get("per_loop_ns"):
            per_loop, source = float(t["per_loop_ns"]), "pg_test_timing now"
        else:
            per_loop = None
            source = (t or {}).get("error") or "external server: pg_test_timing runs on the server's machine"
        rows.append({"server": st.name, "per_loop_ns": per_loop, "timer_source": source})
    return pl.DataFrame(rows, schema={"server": pl.String, "per_loop_ns": pl.Float64, "timer_source": pl.String})


def run_stage(session: Session, installs: list[Install] | None = None) -> StageResult:
    """Measure the whole matrix on the session's (started) servers; servers are reset afterwards."""
    t0 = time.monotonic()
    params = session.params.auto_explain
    states = {s.name: ServerState(s, params) for s in session.servers}
    plans: list[dict] = []
    watches: dict[str, LogWatch] = {}
    try:
        for st in states.values():
            st.prepare()
            if st.skip_reason:
                continue
            for item in params.items:
                doc = st.explain(item)
                session.store.save_json(f"auto_explain/plans/{st.name}_{item}.json", doc)
                plans.append(plan_rows(st, item, doc))
        for st in states.values():
            if st.skip_reason:
                outcomes.skip(session.store, EXPERIMENT, st.name, st.skip_reason)
        active = [name for name, st in states.items() if not st.skip_reason]  # skipped servers get no runs
        watches = {name: LogWatch(st, params.log_check) for name, st in states.items()}
        installs = installs or discover()
        cells = [(name, c, i) for c, i in params.cells() for name in active]
        steps = schedule.plan(cells, params.run.repetitions, params.run.warmups, params.run.shuffle_seed)
        # PRELOAD | PLAIN in even rounds, PLAIN | PRELOAD in odd ones (sorted, rotated)
        steps = schedule.grouped(steps, lambda s: group_of(states[s.server], params, s.condition))
        clients = {name: pgbench.client_for(st.server, installs, params.client) for name, st in states.items()}

        def measure(step: schedule.Step) -> dict:
            return _measure(step, states, watches, params, clients[step.server], session.store)

        ran = schedule.run_steps(steps, session.store, EXPERIMENT, measure, desc="auto_explain", remeasure=True)
    finally:
        for st in states.values():
            st.reset()
    outcomes.require_measured(session.store, [EXPERIMENT], active)
    servers = pl.from_dicts(
        [st.describe() | _watch_fields(watches.get(st.name)) for st in states.values()], infer_schema_length=None
    )
    problems = [p for w in watches.values() for p in w.problems]
    empty = {"server": pl.String, "where": pl.String, "severity": pl.String, "message": pl.String}
    seen = {
        "servers": servers,
        "plans": pl.from_dicts(plans, infer_schema_length=None) if plans else pl.DataFrame(),
        "timer": _timer(list(states.values()), session.profile, session.params.environment.pg_test_timing_seconds),
    }
    # kept in the raw store as seen (a resumed run keeps the first): derive reads them back without a server
    seen = {name: raw_frames.keep(session.store, f"{EXPERIMENT}/{name}.json", df) for name, df in seen.items()}
    seen["runs"] = session.store.records(EXPERIMENT)
    seen["log_problems"] = pl.from_dicts(problems, infer_schema_length=None) if problems else pl.DataFrame(schema=empty)
    return StageResult(steps_run=ran, wall_s=time.monotonic() - t0, servers=active, seen=seen)


def _watch_fields(w: LogWatch | None) -> dict:
    if w is None:
        return {"log_check": None, "log_files_pruned": 0, "log_bytes_pruned": 0}
    return {
        "log_check": "available" if w.available else w.reason,
        "log_files_pruned": w.pruned_files,
        "log_bytes_pruned": w.pruned_bytes,
    }

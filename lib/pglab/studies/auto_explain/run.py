"""The auto_explain stage (study S2): every condition × item × server, measured with pgbench.

    result = auto_explain_run.run_stage(session)   # session started; servers reset afterwards

Order (methodology §2, §3): warm-up rounds, then round robin — repetition r of every cell before r+1
of any, servers interleaved. auto_explain in shared_preload_libraries needs a restart to switch, so
within a round the cells are grouped by that server-level state and the groups alternate direction from
one round to the next (…loaded | not loaded, not loaded | loaded…): one restart per round per server
instead of one per cell, and still every condition in every round. After a restart tab1 is prewarmed
again. The items' settings go with each pgbench connection (PGOPTIONS).

Interleaved within a run (`Batches`): the conditions that load auto_explain differ only in settings a SET
changes, so one pgbench run per server, item and round measures all of them (`interleaved_script`): blocks of
a SET and `run.queries_per_set` queries, the conditions' blocks in the order of a Williams design (each
condition directly after each other equally often), the SET a transaction of its own, in no query's latency.
A level shift of the host, which moved whole 1-s runs by 10-50 % on a shared 2-vCPU guest, then falls on every
condition alike. A condition that does not load auto_explain runs alone (a restart switches it), in a run of the
same shape: its SET blocks set the baseline's settings as placeholders, so that its queries follow SETs as often as
the others' (a query right after a SET runs colder than one after a query). The items of `run.split_cpus` run
with pgbench on one CPU and the server's backend on another (`core.servers.cpus`): placed freely, a `LIMIT 1`
read 13 or 70 µs by whether the two shared a CPU, which a condition run alone could not share with the others.

Per condition and run: its query transactions' latencies (`pgbench -l`, all read; up to LOGGED_TXNS evenly
spaced kept as a raw artefact for the fast-mode comparisons), their median (value, ms, by default:
`run.latency`) and mean, the run's full pgbench output as a raw artefact, and the log proof of
`auto_explain_logcheck` (the server log's plans follow the queries' order, so each is the condition's
whose query it follows)"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import polars as pl

from ...core import derived, raw_frames
from ...core.installs.installs import Install, discover
from ...core.run import outcomes, schedule
from ...core.run.session import Session
from ...core.run.stage import StageResult
from ...core.servers import cpus
from ...pgtools import environment, pgbench
from .logcheck import LogWatch
from .params import EXPERIMENT, AutoExplainParams
from .prepare import ServerState, plan_rows

PRELOAD, PLAIN = "auto_explain preloaded", "not preloaded"
LOGGED_TXNS = 1000  # per condition and run at most, kept raw: the fast mode's sample
SCRIPT = "auto_explain.sql"


def group_of(state: ServerState, params: AutoExplainParams, condition: str) -> str:
    """The server-level state a condition needs: only preloading (shared_preload) differs."""
    preload = state.loading == "shared_preload" and params.conditions[condition].load
    return PRELOAD if preload else PLAIN


def batch_of(state: ServerState, params: AutoExplainParams, condition: str) -> tuple[str, bool]:
    """Which conditions share one pgbench run: those of one server-level state that load auto_explain (their
    settings differ only in what a SET changes); a condition that does not load it runs alone."""
    return group_of(state, params, condition), params.conditions[condition].load


def set_lines(settings: dict, names: list[str]) -> list[str]:
    """What puts the session into a condition: SET its settings, RESET the batch's others (back to the
    connection's own, PGOPTIONS)."""
    lines = []
    for name in names:
        if name in settings:
            v = settings[name]
            text = ("on" if v else "off") if isinstance(v, bool) else str(v)
            lines.append(f"SET {name} = '{text.replace(chr(39), chr(39) * 2)}';")
        else:
            lines.append(f"RESET {name};")
    return lines


def williams(k: int) -> list[list[int]]:
    """A Williams design of k conditions: every condition in every position once per row, and each one directly
    after each other one equally often (k rows where k is even, 2k where it is odd), so that what a condition
    leaves behind (a cache, a log write) falls on every other condition alike."""
    first, lo, hi = [0], 1, k - 1
    for j in range(1, k):
        if j % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % k for x in first] for i in range(k)]
    return rows + ([r[::-1] for r in rows] if k % 2 else [])


def interleaved_script(sql: str, sets: list[list[str]], queries_per_set: int) -> tuple[str, list[int]]:
    """One pgbench script for a batch, and the order of its conditions (indexes into `sets`): transaction t
    (from 0, pgbench's -D i=-1 counting) runs the SET block of condition order[(t // (m + 1)) % len(order)] when
    t % (m + 1) == 0, else the query under the last SET (m = queries_per_set). A SET is a transaction of its own,
    in no query's latency; the order follows `williams`."""
    order = [c for row in williams(len(sets)) for c in row]
    m1 = queries_per_set + 1
    lines = ["\\set i :i + 1", f"\\if :i % {m1} != 0", sql.strip(), "\\else", f"\\set pos (:i / {m1}) % {len(order)}"]
    for pos, c in enumerate(order):
        lines.append(f"\\{'if' if pos == 0 else 'elif'} :pos = {pos}")
        lines += sets[c]
    lines += ["\\endif", "\\endif"]
    return "\n".join(lines) + "\n", order


def split_log(
    logdir: str, conditions: list[str], order: list[int], queries_per_set: int
) -> tuple[dict[str, list[int | None]], list[str]]:
    """The query transactions of an interleaved run (`interleaved_script`) per condition, in run order (µs, None
    for a failed one), and the condition of every query transaction in run order (what the server log's plans
    follow). The log of the one client holds its transactions in order."""
    out: dict[str, list[int | None]] = {c: [] for c in conditions}
    sequence: list[str] = []
    m1, t = queries_per_set + 1, 0
    for path in sorted(Path(logdir).iterdir()):
        for line in path.read_text().splitlines():
            f = line.split()
            if len(f) < 6:
                continue
            current = conditions[order[(t // m1) % len(order)]]
            if t % m1:
                out[current].append(int(f[2]) if f[2].isdigit() else None)
                sequence.append(current)
            t += 1
    return out, sequence


class Batches:
    """One pgbench run measures every condition of a batch (`batch_of`) for one server, item and round, the
    conditions interleaved (`interleaved_script`), so a burst of other load or a level shift of the host falls on
    all of them alike. The first step of a batch runs it; its other steps take their records from here."""

    def __init__(self, states: dict, watches: dict, params: AutoExplainParams, clients: dict, store):
        self.states, self.watches, self.params, self.clients, self.store = states, watches, params, clients, store
        self.done: dict[tuple, dict[str, dict]] = {}

    def members(self, step: schedule.Step) -> list[str]:
        st, key = self.states[step.server], batch_of(self.states[step.server], self.params, step.condition)
        return [c for c, i in self.params.cells() if i == step.item and batch_of(st, self.params, c) == key]

    def measure(self, step: schedule.Step) -> dict:
        key = (
            step.server,
            step.item,
            step.repetition,
            step.warmup,
            batch_of(self.states[step.server], self.params, step.condition),
        )
        if key not in self.done or step.condition not in self.done[key]:
            self.done[key] = _measure_batch(step, self.members(step), self)
        return self.done[key].pop(step.condition)


def _measure_batch(step: schedule.Step, conditions: list[str], b: Batches) -> dict[str, dict]:
    """Every condition's record of one batch run."""
    st: ServerState = b.states[step.server]
    params, item = b.params, b.params.items[step.item]
    conds = {c: params.conditions[c] for c in conditions}
    bases = {
        c: {"value": None, "unit": "ms", "loading": st.loading, "expect_plans": cond.expected_plans}
        for c, cond in conds.items()
    }
    if st.skip_reason:
        return {c: base | {"error": f"skipped: {st.skip_reason}"} for c, base in bases.items()}
    load = next(iter(conds.values())).load
    if not load and st.preloaded_by_server:
        error = "auto_explain is in the server's own shared_preload_libraries: cannot run unloaded"
        return {c: base | {"error": error} for c, base in bases.items()}
    restarted = st.ensure_loaded(load)
    if restarted and params.run.settle_s:
        _settle(st, params, b.clients[step.server], b.store, step)
    settings = st.session_base | item.settings
    if load and st.loading == "session_preload":
        settings["session_preload_libraries"] = "auto_explain"
    # every run the same shape, SET blocks of the same statements, whatever its conditions: a query after a SET runs
    # colder than one after a query, so a condition run alone without them would read faster than the others for it
    names = sorted({k for cond in params.conditions.values() for k in cond.settings})
    baseline = params.conditions[params.baseline].settings
    run_cfg, k, m = params.run, len(conds), params.run.queries_per_set
    # a condition without auto_explain SETs the baseline's settings too: placeholders, which the server keeps unread
    sets = [set_lines(c.settings if c.load else baseline | c.settings, names) for c in conds.values()]
    text, order = interleaved_script(item.sql, sets, m)
    scripts = {SCRIPT: text}
    if step.warmup and run_cfg.warmup_duration_s is not None:
        seconds = run_cfg.warmup_duration_s * k
        length, timeout = ["-T", str(seconds)], seconds + 120
    elif run_cfg.mode == "time":
        seconds = run_cfg.duration_s * k
        length, timeout = ["-T", str(seconds)], run_cfg.timeout_s or seconds + 120
    else:
        # every condition's SET blocks of m queries, enough for its transactions
        blocks = math.ceil(run_cfg.transactions[step.item] / m) * k
        length = ["-t", str(blocks * (m + 1))]
        timeout = run_cfg.timeout_s * k if run_cfg.timeout_s else None
    watch: LogWatch = b.watches[step.server]
    watch.before_run()
    name = "interleaved" if k > 1 else conditions[0]
    tag = f"{step.server}/{name}_{step.item}_{'w' if step.warmup else 'r'}{step.repetition}"
    placed = cpus.split(st.server) if step.item in run_cfg.split_cpus else contextlib.nullcontext()
    with tempfile.TemporaryDirectory(prefix="pglab-txlog-") as logdir, placed as placement:
        run = pgbench.run(
            st.server,
            [
                "-n",
                "-f",
                SCRIPT,
                "-D",
                "i=-1",
                "-c",
                "1",
                "-j",
                "1",
                "-l",
                f"--log-prefix={logdir}/txn",
                *length,
            ],
            b.clients[step.server],
            dbname=params.database,
            scripts=scripts,
            settings=settings,
            timeout_s=timeout,
        )
        per_cond, sequence = split_log(logdir, conditions, order, m)
        run.command = run.command.replace(logdir, "TXLOG")  # the recorded command names no temporary folder
    b.store.save_text(f"auto_explain/pgbench/{tag}.txt", f"$ {run.command}\n{run.stdout}\n--- stderr\n{run.stderr}")
    p = run.parsed or {}
    records = {}
    for c, cond in conds.items():
        lat = [x for x in per_cond.get(c, []) if x is not None]
        timed = pgbench.timed(lat)  # the raw file keeps what pgbench logged, its 0 µs entries included
        median_ms = statistics.median(timed) / 1000.0 if timed else None
        mean_ms = statistics.fmean(lat) / 1000.0 if lat else None  # its queries' (pgbench's counts the SETs too)
        value_is = "median" if run_cfg.latency == "median" and median_ms is not None else "mean"
        ok = run.ok and bool(lat)
        if lat and not step.warmup:  # the raw measurement behind the median: evenly spaced over the run, µs
            keep = [
                lat[round(i * (len(lat) - 1) / max(1, min(len(lat), LOGGED_TXNS) - 1))]
                for i in range(min(len(lat), LOGGED_TXNS))
            ]
            b.store.save_text(
                f"auto_explain/latencies/{step.server}/{c}_{step.item}_r{step.repetition}.txt",
                "\n".join(map(str, keep)) + "\n",
            )
        records[c] = bases[c] | {
            "value": (median_ms if value_is == "median" else mean_ms) if ok else None,
            "value_is": value_is if ok else None,
            "latency_mean_ms": mean_ms,
            "latency_median_ms": median_ms,
            "latency_avg_ms": None,  # pgbench's is of every transaction, SETs included: no condition's
            "error": run.error or (None if lat else "no transaction of this condition in the run"),
            "transactions": len(per_cond.get(c, [])),
            "failed_transactions": sum(x is None for x in per_cond.get(c, [])),
            "tps": None,
            "pgbench_duration_s": p.get("duration_s"),
            "elapsed_s": round(run.elapsed_s, 3),
            "cores": os.cpu_count(),  # the ceiling of a parallel speed-up, derivable from the raw runs
            "command": run.command,
            "client_version": run.client_version,
            "preloaded": bool(st.loaded) if st.loading == "shared_preload" else cond.load,
            "restarted_before": restarted,
            "restarts": st.restarts,
            "session_settings": json.dumps(settings | cond.settings, sort_keys=True, default=str),
            "batch": tag,
            "batch_conditions": k,
            "batch_order": "williams",
            # where client and backend ran (core.servers.cpus); null: wherever the scheduler put them
            "cpus": placement,
        }
    if not run.ok:
        return {c: r | {"log_check": "not checked", "log_reason": "the pgbench run failed"} for c, r in records.items()}
    checks = watch.after_batch(conds, item.sql, sequence, tag)
    for c, (fields, sample) in checks.items():
        if sample and not step.warmup:
            b.store.save_text(f"auto_explain/logged_plans/{step.server}/{c}_{step.item}.txt", sample)
        records[c] |= fields
        if fields.get("log_bytes") is not None and records[c]["transactions"]:
            records[c]["log_bytes_per_txn"] = fields["log_bytes"] / records[c]["transactions"]
    return records


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

        batches = Batches(states, watches, params, clients, session.store)
        ran = schedule.run_steps(steps, session.store, EXPERIMENT, batches.measure, desc="auto_explain", remeasure=True)
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

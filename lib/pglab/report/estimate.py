"""How long each notebook of `make report` will take: the estimate behind the run's "~m:ss left".

Per notebook a small model of what it runs, from the params' sizes: the servers the study will use (chosen by
`servers.for_study` itself, with a stand-in for every version the run would download, so nothing is fetched or
started), times the rounds, runs, rows and SF of its section, times a per-unit cost. The costs (`COST`) are
fitted to measured runs on the reference machine (2 cores; installs: the wheel's 18, Debian's 15 with JIT;
downloads 10 … 17 without): the default profile (SSB 15 rounds, S2 10) took 00 13-18 s, 10 57 s, 20 946-949 s,
30 812-821 s, 40 592-594 s, 50 343-356 s, 60 190-202 s, 70 39-48 s, 99 9 s (2983 and 3041 s in all, two runs of
2026-11-24 in a quiet hour); the quick profile 153-166 s in all.

What the model leaves out: downloads and initdb on a machine's first run, loads skipped because a cluster
still holds the dataset, and a busier or faster machine. The progress line corrects for all of them by how
long the notebooks done so far took against their estimates (`RunProgress.left_s`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from subprocess import SubprocessError

from .. import studies
from ..core.installs import Install, InstallError, discover, from_params
from ..core.paramtypes import version_major
from ..core.servers import Server, for_study, matches_version, select
from ..params import Params

# Seconds per unit, fitted to the measured runs above; each says what one unit is.
COST = {
    "notebook": 6.0,  # a notebook's kernel, imports, session, derived tables and charts
    "report": 9.0,  # 99_report: renders data/derived/ (no server)
    "server": 1.0,  # start and stop of one kit server
    # SSB (10, 20, 60): times per unit of SF
    "ssb_load": 18.0,  # generate + COPY FREEZE, VACUUM ANALYZE, prewarm and the selectivity check, per server
    "ssb_serial": 0.75,  # one query, serial (mean over the 13)
    "ssb_parallel": 0.45,  # one query with parallel workers (JIT at S1's thresholds adds next to nothing)
    "ssb_jit_forced": 0.45,  # + seconds of forced inlining and optimisation per query, whatever the SF
    "ssb_plans": 1.3,  # EXPLAIN ANALYZE of every (server, mode, query) once plus the plan-only captures, in rounds
    # pgbench (30)
    "pgbench_load": 0.25,  # pgbench -i, per unit of scale (recreate, load, vacuum, keys)
    "pgbench_load_fixed": 0.3,  # pgbench -i, whatever the scale (CHECKPOINT, sizes)
    "pgbench_run": 0.1,  # a -T run beyond its -T: pgbench start, the clients' connections, sizes
    # auto_explain (40): pgbench -c 1 runs of one-statement scripts on tab1
    "ae_txn": 0.056e-3,  # a transaction of a statement that reads one row (LIMIT 1)
    "ae_row": 7.0e-8,  # + per row of tab1, for a statement that reads them all (COUNT)
    "ae_logged_plan": 30e-6,  # a plan logged by auto_explain, written and then checked in the log
    "ae_run": 0.03,  # a run beyond its transactions: pgbench start, PGOPTIONS, recording
    "ae_restart": 0.3,  # a restart (auto_explain in or out of shared_preload_libraries) and the prewarm after it
    "ae_setup": 1.0,  # per server: database, tab1, plans and timer capture
    # JIT per operator (50), serial aggregates over jit_ops
    "jit_row": 4.8e-8,  # one execution, per row (6 passes a round at 3e6 rows: 343-361 s quiet, 546-561 s noisy)
    "jit_compile": 0.02,  # + one execution with jit on: generation and emission
    "jit_table_row": 1.5e-6,  # creating, analysing and prewarming jit_ops, per row
    # parallel index build (60), on SSB lineorder
    "index_build": 2.5,  # one CREATE INDEX, per unit of SF (mean over key widths and worker counts on 2 cores)
    # partitioning (70)
    "part_row": 1e-7,  # one count over the partitioned table, per row (mean over worker counts)
    "part_load_row": 1e-6,  # loading, checksumming and prewarming the table, per row
}


def stand_in(spec: int | str) -> Install:
    """An install of version `spec` as a download would give (no JIT, no tools of its own), made up without
    fetching anything: for_study names and counts it as it would the real one."""
    major = version_major(spec)
    minor = str(spec).split(".", 1)[1] if "." in str(spec) else "0"
    folder = Path(f"/nonexistent/pglab-estimate/{spec}")
    return Install(name=f"pg{major}", source="download", bin_dir=folder / "bin", lib_dir=folder / "lib",
                   share_dir=folder / "share", version="", major=major, minor=minor)  # fmt: skip


def run_servers(p: Params) -> list[Server]:
    """The run's servers as `servers.select` picks them: the installs found (probed, nothing started) and a
    stand-in for each of servers.versions (not downloaded)."""
    try:
        installs = discover(from_params(p.servers))
    except (InstallError, OSError, SubprocessError):  # an estimate never stops a run; params_checks reports it
        installs = []
    names = {i.name for i in installs}
    for v in p.servers.versions:
        inst = stand_in(v)
        installs.append(inst if inst.name not in names else replace(inst, name=f"{inst.name}-download"))
        names.add(installs[-1].name)
    try:
        return select(p, installs)
    except KeyError:  # servers.use names a server this machine lacks: params_checks reports it
        return []


def _servers(p: Params, study: str | None, base: list[Server]) -> list[Server]:
    return for_study(p, study, base, fetch=stand_in)


def _jit(s: Server) -> bool:
    return s.install.jit if s.install else False


def _on(value) -> bool:
    return str(value).lower() in ("true", "on", "1", "yes")


def _environment(p: Params, base: list[Server]) -> float:
    servers = _servers(p, None, base)
    # pg_test_timing runs where the install has it: the machine's own, not the downloads
    timed = [s for s in servers if s.install and s.install.source != "download"]
    return COST["server"] * len(servers) + p.environment.pg_test_timing_seconds * len(timed)


def _ssb_load(p: Params, base: list[Server]) -> float:
    return len(_servers(p, "ssb", base)) * (COST["server"] + COST["ssb_load"] * p.ssb.sf)


def _ssb(p: Params, base: list[Server]) -> float:
    model = studies.estimate_module("ssb")  # the study's rules: studies/ssb/estimate.py
    q, servers = p.ssb, _servers(p, "ssb", base)
    serial, parallel = COST["ssb_serial"] * q.sf, COST["ssb_parallel"] * q.sf
    round_s = 0.0  # one round of run_modes: every available (server, mode, query), as ex.availability decides
    for m, n_queries in model.round_cells(servers, q, _jit):
        each = serial if m == "serial" else parallel + (COST["ssb_jit_forced"] if m == "parallel_jit_forced" else 0)
        round_s += each * n_queries
    counts = model.sweep_counts(q)
    sweep = sum(serial if k == 0 else parallel for k in counts) * len(q.sweep_query_ids()) * len(servers)
    return (COST["server"] * len(servers) + round_s * (q.repetitions + q.warmups + COST["ssb_plans"])
            + sweep * (q.sweep_repetitions + q.warmups))  # fmt: skip


def _pgbench(p: Params, base: list[Server]) -> float:
    """The grid of pgbench_stage.Stage.plan: loads, -T seconds and runs."""
    g = p.pgbench
    servers = [s for s in _servers(p, "pgbench", base) if s.allow_destructive]
    n = len(servers)
    aa = {"all": n, "baseline": min(n, 1), "none": 0}[g.select_only.aa_control]
    wanted = g.scaling.versions
    ns = len([s for s in servers if not wanted or s.install is None
              or any(matches_version(s.install, v) for v in wanted)])  # fmt: skip
    loads, runs, seconds = [], 0, 0.0  # loads by scale
    if "load" in g.experiments:
        loads += [sc for sc in g.scales for _ in range(n * g.init.repetitions)]
    if "select_only" in g.experiments:
        q, cells = g.select_only, (n + aa) * len(g.scales)
        runs += cells * (q.repetitions + (1 if q.warmup_s else 0))
        seconds += cells * (q.repetitions * q.duration_s + q.warmup_s)
        if "load" not in g.experiments:
            loads += [sc for sc in g.scales for _ in range(n)]
    if "scaling" in g.experiments:
        c = g.scaling
        cells = ns * len(c.modes) * len(c.client_counts())
        runs += cells * (c.repetitions + (1 if c.warmup_s else 0))
        seconds += cells * (c.repetitions * c.duration_s + c.warmup_s)
    if "series" in g.experiments:
        s = g.series
        loads += [sc for sc in g.series_scales for _ in range(n * s.repetitions)]
        runs += n * len(g.series_scales) * s.repetitions * s.runs
        # a -t series has no -T: at least a second a run (the default is time-based)
        seconds += n * len(g.series_scales) * s.repetitions * s.runs * (s.duration_s or 1)
    load_s = sum(COST["pgbench_load_fixed"] + COST["pgbench_load"] * sc for sc in loads)
    return COST["server"] * n + load_s + seconds + COST["pgbench_run"] * runs


def _auto_explain(p: Params, base: list[Server]) -> float:
    a, servers = p.auto_explain, _servers(p, "auto_explain", base)
    r = a.run

    def txn_s(item: str) -> float:
        # LIMIT 1 reads one row whatever the table's size; the study's other statements read all of tab1
        one_row = "limit" in a.items[item].sql.lower()
        return COST["ae_txn"] + (0 if one_row else COST["ae_row"] * a.rows)

    measured = warmup = 0.0  # per server and round
    for cond, item in a.cells():
        t = txn_s(item)
        txns = r.transactions.get(item, 1) if r.mode == "transactions" else r.duration_s / t
        logged = txns if a.conditions[cond].expected_plans == "every" else 0
        measured += COST["ae_run"] + txns * t + logged * COST["ae_logged_plan"]
        warmup += COST["ae_run"] + (r.warmup_duration_s or txns * t)
    loads = {c.load for c in a.conditions.values()}
    restart = (COST["ae_restart"] + r.settle_s) if a.loading == "shared_preload" and len(loads) > 1 else 0.0
    per_server = (COST["server"] + COST["ae_setup"] + r.repetitions * (measured + restart)
                  + r.warmups * (warmup + restart))  # fmt: skip
    return per_server * len(servers)


def _jit_operators(p: Params, base: list[Server]) -> float:
    j, servers = p.jit_operators, _servers(p, "jit_operators", base)
    jit = [s for s in servers if _jit(s) or s.install is None]  # an external server may have JIT
    per_exec = sum(j.rows * COST["jit_row"] + (COST["jit_compile"] if _on(j.session_settings(c).get("jit")) else 0)
                   for c in j.measured_conditions()) * len(j.operators)  # fmt: skip
    # the timed rounds, and about one more for the plans and the result checks
    per_server = j.rows * COST["jit_table_row"] + per_exec * (j.repetitions * j.executions + j.warmups + 1)
    return COST["server"] * len(servers) + per_server * len(jit)


def _parallel_index(p: Params, base: list[Server]) -> float:
    pi, servers = p.parallel_index, _servers(p, "parallel_index", base)
    # the SSB dataset is loaded here on servers notebook 10 did not load it on
    loaded = {s.name for s in _servers(p, "ssb", base)}
    load = sum(COST["ssb_load"] * p.ssb.sf for s in servers if s.name not in loaded)
    conds = len(pi.workers()) + (1 if pi.aa_control else 0)
    cells = len(pi.column_sets()) * conds
    warm = cells if pi.warmup_cells == "all" else len(pi.column_sets())  # largest_workers: one per key
    builds = (cells * pi.repetitions + warm * pi.warmups) * len(servers)
    return COST["server"] * len(servers) + load + builds * COST["index_build"] * p.ssb.sf


def _partitioning(p: Params, base: list[Server]) -> float:
    t, servers = p.partitioning, _servers(p, "partitioning", base)
    queries = len(t.timed_conditions()) * (t.repetitions + t.warmups)
    per_server = COST["server"] + t.rows * (COST["part_load_row"] + queries * COST["part_row"])
    return per_server * len(servers)


MODELS = {"00": _environment, "10": _ssb_load, "20": _ssb, "30": _pgbench, "40": _auto_explain,
          "50": _jit_operators, "60": _parallel_index, "70": _partitioning}  # fmt: skip


def estimate_s(notebook: str, p: Params, base: list[Server]) -> float:
    """Seconds notebook `notebook` (e.g. "30_pgbench.ipynb") should take with params `p`, on the servers `base`
    (`run_servers`) and as many cores as this machine has."""
    nn = notebook[:2]
    if nn == "99":
        return COST["report"]
    model = MODELS.get(nn)
    return COST["notebook"] + (model(p, base) if model else 60.0)  # a notebook this table does not know: a minute


def estimates(notebooks: list[str], p: Params, base: list[Server] | None = None) -> dict[str, float]:
    base = run_servers(p) if base is None else base
    return {nb: estimate_s(nb, p, base) for nb in notebooks}

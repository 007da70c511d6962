"""Notebook 30's time: the grid of run.Stage.plan (loads, -T seconds and runs), for make report's estimate."""

from __future__ import annotations

from ...core.paramtypes import version_major
from ...core.run.estimate import COST, servers_for
from ...core.servers.servers import Server, matches_version

TELEMETRY_RUN_S, TELEMETRY_BEFORE_15_S = 0.09, 0.35  # a measured run's telemetry: its log counted; before 15 the wait


def estimate_s(p, base: list[Server]) -> float:
    """The grid of pgbench_stage.Stage.plan: loads, -T seconds and runs."""
    g = p.pgbench
    servers = [s for s in servers_for(p, "pgbench", base) if s.allow_destructive]
    n = len(servers)
    aa = {"all": n, "baseline": min(n, 1), "none": 0}[g.select_only.aa_control]
    wanted = g.scaling.versions
    ns = len(
        [s for s in servers if not wanted or s.install is None or any(matches_version(s.install, v) for v in wanted)]
    )
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
    per_run = COST["pgbench_run"]
    if g.telemetry and n:
        # the log read and counted (fitted with the runs above), counters and sampler; before 15 a wait for
        # the statistics collector's file (pgtools.pgbench_telemetry.Watch): warm-ups counted too, an upper bound
        old = sum(1 for s in servers if s.install is not None and s.install.major < 15) / n
        per_run += TELEMETRY_RUN_S + TELEMETRY_BEFORE_15_S * old
    return COST["server"] * n + load_s + seconds + per_run * runs + buffers_s(p, servers)


def buffers_s(p, servers: list[Server]) -> float:
    """The buffers experiment alone (run.Stage.buffers): one server (the newest; its first cluster), per round a
    restart per shared_buffers value and per scale a warm-up and a measured run, plus a load of each of its scales
    the other experiments do not load."""
    g = p.pgbench
    if "buffers" not in g.experiments or not any(s.cluster is not None for s in servers):
        return 0.0
    b = g.buffers
    cells = len(b.scales) * len(b.shared_buffers) * b.repetitions
    runs = cells * (2 if b.warmup_s else 1)
    loaded = set(g.scales) | {g.scaling_scale} if {"load", "select_only", "scaling"} & set(g.experiments) else set()
    load_s = sum(COST["pgbench_load_fixed"] + COST["pgbench_load"] * sc for sc in set(b.scales) - loaded)
    old = b.version is not None and version_major(b.version) < 15  # null: the newest of pgbench's versions
    per_run = COST["pgbench_run"] + (TELEMETRY_RUN_S + TELEMETRY_BEFORE_15_S * old if g.telemetry else 0.0)
    restarts = len(b.shared_buffers) * b.repetitions + 1  # and the one back to the server's own settings
    return load_s + COST["pgbench_restart"] * restarts + cells * (b.duration_s + b.warmup_s) + per_run * runs

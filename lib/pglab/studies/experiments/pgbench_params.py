"""pgbench's own options as an experiment's factors (issue 60): `clients`, `threads`, `scale` (the data: one
database per value), `rate` (-R) and `protocol` (-M), checked with the schema, before any server starts.

    factors: {clients: [1, 4, 16], protocol: [simple, prepared]}

Each value must be one pgbench takes (a whole number of clients or threads from 1, a scale from 1, a rate above 0,
a protocol pgbench knows), every condition must have no more threads than clients (pgbench would quietly run fewer), and
they are factors of a pgbench workload only. `knobs` gives one condition's options, the workload's fixed values
under the factors'."""

from __future__ import annotations

from .params import BUILTINS, CLIENTS, PGBENCH_FACTORS, PROTOCOL, PROTOCOLS, RATE, SCALE, THREADS

LIMITS = {CLIENTS: (1, 1000), THREADS: (1, 1000), SCALE: (1, 10_000)}  # as the workload's and data's own fields


def _whole(key: str, j: int, v) -> int:
    lo, hi = LIMITS[key]
    if isinstance(v, bool) or not isinstance(v, int | str) or not str(v).isdigit() or not lo <= int(v) <= hi:
        raise ValueError(f"factors.{key}[{j}]: expected a whole number from {lo} to {hi}; got {v!r}")
    return int(v)


def _value(key: str, j: int, v):
    if key in LIMITS:
        return _whole(key, j, v)
    if key == RATE:
        try:
            rate = float(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            rate = None
        if rate is None or not rate > 0 or rate == float("inf"):
            raise ValueError(f"factors.rate[{j}]: expected transactions per second above 0 (pgbench -R); got {v!r}")
        return rate
    if str(v) not in PROTOCOLS:
        raise ValueError(f"factors.protocol[{j}]: expected one of {list(PROTOCOLS)} (pgbench -M); got {v!r}")
    return str(v)


def check_factors(e) -> None:
    """ValueError naming the factor and value when a pgbench factor is misplaced or a value is one pgbench refuses."""
    mine = {k: v for k, v in e.factors.items() if k in PGBENCH_FACTORS}
    if e.workload.kind != "pgbench":
        if mine:
            raise ValueError(f"factors.{next(iter(mine))}: a pgbench option; this experiment's workload is SQL")
        return
    values = {k: [_value(k, j, x) for j, x in enumerate(v)] for k, v in mine.items()}
    if SCALE in values and (e.data.ssb is not None or e.data.sql is not None):
        raise ValueError("factors.scale: pgbench's data per condition; this experiment's data is not pgbench's")
    w = e.workload.pgbench
    clients = values.get(CLIENTS, [w.clients])
    threads = values.get(THREADS, [w.threads])
    if max(threads) > min(clients):
        key = "factors" if CLIENTS in values or THREADS in values else "workload.pgbench.threads"
        raise ValueError(
            f"{key}: expected at most one thread per client in every condition; got threads {max(threads)} with "
            f"clients {min(clients)} (pgbench would quietly run fewer threads than asked)"
        )


def knobs(e, settings: dict) -> dict:
    """One condition's pgbench options: clients, threads, scale, rate (None: as fast as it goes), protocol."""
    w = e.workload.pgbench
    scale = e.data.pgbench.scale if e.data.pgbench is not None else 1
    out = {CLIENTS: w.clients, THREADS: w.threads, SCALE: scale, RATE: w.rate, PROTOCOL: w.protocol}
    for k in PGBENCH_FACTORS:
        if k in settings:
            out[k] = float(settings[k]) if k == RATE else str(settings[k]) if k == PROTOCOL else int(settings[k])
    return out


def scales(e) -> list[int]:
    """Every scale the experiment's conditions use, in the factor's order."""
    if SCALE in e.factors:
        return [int(x) for x in e.factors[SCALE]]
    return [e.data.pgbench.scale if e.data.pgbench is not None else 1]


def script_files(e) -> list[tuple[str, str]]:
    """(params key, path) of every script file the workload names (builtins are no file)."""
    w = e.workload.pgbench
    if w is None:
        return []
    if w.scripts is not None:
        return [(f"workload.pgbench.scripts[{i}]", n) for i, (n, _) in enumerate(w.weighted()) if n not in BUILTINS]
    return [("workload.pgbench.script", w.script)] if w.script else []


def describe(e) -> str:
    """The workload in a few words for experiments_setup: the scripts with their weights, and the options that are
    not pgbench's defaults (a factor's values named as the factor)."""
    w = e.workload.pgbench
    if w.scripts is not None:
        mix = " + ".join(f"{n if n in BUILTINS else n.rsplit('/', 1)[-1]}@{k}" for n, k in w.weighted())
    else:
        mix = w.builtin or "script " + w.script.rsplit("/", 1)[-1]
    f = e.factors
    words = [f"pgbench {mix}", "clients as a factor" if CLIENTS in f else f"{w.clients} client(s)"]
    if THREADS in f or w.threads > 1:
        words.append("threads as a factor" if THREADS in f else f"{w.threads} threads")
    if RATE in f or w.rate is not None:
        words.append("rate as a factor" if RATE in f else f"-R {w.rate:g} tps")
    if PROTOCOL in f or w.protocol != "simple":
        words.append("protocol as a factor" if PROTOCOL in f else f"-M {w.protocol}")
    return ", ".join([*words, f"{w.duration_s} s a run"])


def describe_data(e) -> str | None:
    """The data of a scale factor ('pgbench -i scale 1, 10 (a database each)'); None without one."""
    if SCALE not in e.factors:
        return None
    return f"pgbench -i scale {', '.join(str(s) for s in scales(e))} (a database each)"

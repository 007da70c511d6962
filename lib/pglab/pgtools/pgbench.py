"""Running pgbench against a server: the one way experiments call it.

By default one binary — the newest pgbench found — drives every server, so that the client is not a
variable (methodology §7); `client="own"` uses each server's own, as study S3 did. The connection goes
through libpq environment variables, never the command line, so the recorded command holds no secret; an
external server's pgbench sees the libpq environment the kit's own connections see (a `PGPASSWORD`, a
passfile, TLS settings), with the dsn's keys on top. Output is kept whole as raw data (without any known
password: `db.scrub`) and parsed by `pgbench_output`."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from ..core.installs.installs import Install
from ..core.servers.db import options, scrub
from ..core.servers.servers import Server
from .pgbench_output import PgbenchOutputError, parse_pgbench_init_output, parse_pgbench_output

# conninfo keys and the libpq environment variables that carry them (every key libpq has one for)
_ENV = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "dbname": "PGDATABASE",
    "passfile": "PGPASSFILE",
    "options": "PGOPTIONS",
    "application_name": "PGAPPNAME",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "service": "PGSERVICE",
    "client_encoding": "PGCLIENTENCODING",
    "require_auth": "PGREQUIREAUTH",
    "channel_binding": "PGCHANNELBINDING",
    "sslmode": "PGSSLMODE",
    "requiressl": "PGREQUIRESSL",
    "sslnegotiation": "PGSSLNEGOTIATION",
    "sslcompression": "PGSSLCOMPRESSION",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "sslcertmode": "PGSSLCERTMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcrl": "PGSSLCRL",
    "sslcrldir": "PGSSLCRLDIR",
    "sslsni": "PGSSLSNI",
    "requirepeer": "PGREQUIREPEER",
    "ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION",
    "ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
    "gssencmode": "PGGSSENCMODE",
    "krbsrvname": "PGKRBSRVNAME",
    "gsslib": "PGGSSLIB",
    "gssdelegation": "PGGSSDELEGATION",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "load_balance_hosts": "PGLOADBALANCEHOSTS",
}


def newest_client(installs: list[Install]) -> Install:
    with_pgbench = [i for i in installs if i.tool("pgbench").exists()]
    if not with_pgbench:
        raise RuntimeError("no pgbench found in any PostgreSQL install")
    return max(with_pgbench, key=lambda i: (i.major, int(i.minor) if i.minor.isdigit() else 0))


def client_note(server: Server, client: str = "newest") -> str | None:
    """Why `client: own` cannot use this server's own pgbench (None when it can, or when not asked for):
    downloaded builds carry the server alone, external servers none at all. The newest is used instead."""
    if client != "own":
        return None
    if server.install is None:
        return f"{server.name} is an external server (no pgbench of its own): the newest pgbench drives it"
    if not server.install.tool("pgbench").exists():
        return (
            f"{server.name} ({server.install.version}) has no pgbench of its own (a server-only build): "
            "the newest pgbench drives it instead of its own"
        )
    return None


def client_for(server: Server, installs: list[Install], client: str = "newest") -> Install:
    """`newest`: the newest pgbench for every server; `own`: the server's own, falling back to the newest where
    it has none (`client_note` says so, and the stage records it)."""
    if client not in ("newest", "own"):
        raise ValueError(f"client must be 'newest' or 'own', not {client!r}")
    if client == "own" and client_note(server, client) is None:
        return server.install
    return newest_client(installs)


def _env(server: Server, dbname: str | None, settings: dict | None) -> dict:
    """pgbench's environment: how to reach `server` in libpq variables (the password too: never argv).

    A kit cluster is reached with its own conninfo alone (the user's PG* variables play no part); an external
    server as psycopg reaches it, with the user's PG* variables (PGPASSWORD, PGPASSFILE, ...) under the dsn."""
    env = {k: v for k, v in os.environ.items() if server.external is not None or not k.startswith("PG")}
    params = conninfo_to_dict(server.conninfo(dbname))
    unsupported = sorted(k for k, v in params.items() if v is not None and k not in _ENV)
    if unsupported:
        raise ValueError(
            f"{server.name}: pgbench cannot be given dsn keys {unsupported} (no libpq environment "
            "variable carries them, and connection details never go on its command line)"
        )
    for key, value in params.items():
        if value is not None:
            env[_ENV[key]] = str(value)
    if settings:  # session settings for pgbench's connections
        env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + " " + options(settings)).strip()
    return env


@dataclass
class PgbenchRun:
    command: str  # as run, without connection details or secrets
    client_version: str
    returncode: int
    elapsed_s: float
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)
    parsed: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run(
    server: Server,
    args: list[str],
    client: Install,
    dbname: str | None = None,
    scripts: dict[str, str] | None = None,
    settings: dict | None = None,
    timeout_s: float | None = None,
    init: bool = False,
) -> PgbenchRun:
    """Run `pgbench ARGS` against `server`. `scripts` maps a file name to its text; pass `-f NAME` in
    args to use one. pgbench runs in a private temporary folder holding the scripts: give `-l` logs an
    absolute `--log-prefix`. Errors (non-zero exit, unparseable output, timeout) come back in `.error`."""
    with tempfile.TemporaryDirectory(prefix="pglab-pgbench-") as tmp:
        for name, text in (scripts or {}).items():
            Path(tmp, name).write_text(text)
        cmd = [str(client.tool("pgbench")), *map(str, args)]
        shown = shlex.join(["pgbench", *map(str, args)])
        t0 = time.monotonic()
        try:
            out = subprocess.run(
                cmd,
                cwd=tmp,
                env=_env(server, dbname, settings),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            return PgbenchRun(
                scrub(shown),
                client.version,
                -1,
                time.monotonic() - t0,
                scrub(_text(e.stdout)),
                scrub(_text(e.stderr)),
                error=f"pgbench did not finish within {timeout_s} s",
            )
        elapsed = time.monotonic() - t0
    # the output is stored and its errors shown: without any password that may have come through
    res = PgbenchRun(scrub(shown), client.version, out.returncode, elapsed, scrub(out.stdout), scrub(out.stderr))
    if out.returncode != 0:
        lines = res.stderr.strip().splitlines()
        # the first error says what went wrong; the last one only that the run was aborted
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "no output")
        res.error = f"pgbench exited {out.returncode}: {first.strip()}"
    try:
        res.parsed = parse_pgbench_init_output(res.stderr) if init else parse_pgbench_output(res.stdout)
    except PgbenchOutputError as e:
        res.error = res.error or str(e)
    return res


def _text(b) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def transaction_latencies_us(logdir: Path | str) -> list[int]:
    """Every transaction's latency (µs, in log order) from the per-transaction logs (`-l`, no aggregate
    interval) pgbench wrote into `logdir`: the third field of `client_id transaction_no time script_no
    time_epoch time_us [...]`. Failed or skipped transactions (a word in that field) are left out."""
    out: list[int] = []
    for path in sorted(Path(logdir).iterdir()):
        for line in path.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[2].isdigit():
                out.append(int(fields[2]))
    return out


def transaction_log_counts(logdir: Path | str) -> list[tuple[int, int | None, str, int]]:
    """The per-transaction logs (`-l`, no aggregate interval) in `logdir` as counts: (epoch second the
    transaction ended, its latency in µs or None, outcome, transactions), sorted. Lossless for every figure the
    kit takes from the log (per-second throughput, exact percentiles): only the client, transaction and script
    numbers and the sub-second end time are dropped, so a log of 68,000 tps keeps ~5,000 lines of 4 MB's. pgbench's
    0 µs entries are kept as logged (`timed` leaves them out of statistics); a failed or skipped transaction
    (pgbench 15+ writes the word in the latency field) has latency None and its word as outcome."""
    counts: dict[tuple[int, int | None, str], int] = {}
    for path in sorted(Path(logdir).iterdir()):
        for line in path.read_text().splitlines():
            f = line.split()
            if len(f) < 6 or not f[4].isdigit():
                continue
            key = (int(f[4]), int(f[2]), "ok") if f[2].isdigit() else (int(f[4]), None, f[2])
            counts[key] = counts.get(key, 0) + 1
    return sorted(((*k, n) for k, n in counts.items()), key=lambda r: (r[0], r[1] is None, r[1] or 0, r[2]))


def timed(latencies_us):
    """The logged latencies that are measurements: pgbench reads its clock lazily, once per pass of a client's
    state machine (`pg_time_now_lazy`), so a transaction whose result is already there when pgbench first looks
    ends on the same reading it started on and is logged as 0 µs (seen in 2.6 % of 1 ms runs on this 2-core VM,
    where pgbench is often descheduled while the server works). Such a 0 is no latency: left out."""
    return [x for x in latencies_us if x > 0]


PERCENTILES = (50, 95, 99)


def latency_percentiles(latencies_us, rounds=None, confidence: float = 0.95) -> dict:
    """p50 / p95 / p99 and max (ms) of a cell's transactions, each with an interval over its rounds (a round's own
    percentile, min–max of them below 10 rounds, else a percentile bootstrap of the rounds): the tail beside tps.
    `latencies_us`: every timed transaction (pgbench's 0 µs entries are left out, `timed`); `rounds`: the round of
    each (None: one round). Percentiles are numpy's linear ones, exact on the values given."""
    import numpy as np

    x = np.asarray(latencies_us, dtype=float)
    r = np.zeros(x.size, dtype=int) if rounds is None else np.asarray(rounds)
    keep = x > 0
    x, r = x[keep] / 1000.0, r[keep]
    out: dict = {"n": int(x.size), "max_ms": float(x.max()) if x.size else None}
    per_round = {k: x[r == k] for k in np.unique(r)}
    for p in PERCENTILES:
        out[f"p{p}_ms"] = float(np.percentile(x, p)) if x.size else None
        values = np.array([np.percentile(v, p) for v in per_round.values() if v.size])
        lo = hi = None
        if values.size >= 10:
            boot = np.random.default_rng(p).choice(values, (2000, values.size)).mean(axis=1)
            lo, hi = (float(q) for q in np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2]))
        elif values.size >= 2:
            lo, hi = float(values.min()), float(values.max())
        out[f"p{p}_low_ms"], out[f"p{p}_high_ms"] = lo, hi
    return out

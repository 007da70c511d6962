"""Parse pgbench output of every generation: run summary (stdout), ``-i`` log (stderr), aggregate logs.

pgbench's text changed over the years and tools that matched one version's text broke on the next, so
every pattern here is tested against real output of pgbench 15 and 18 and hand-written 9.x–14 output
(``tests/fixtures/pgbench/``). Differences handled:

* ≤ 13 prints ``tps = … (including connections establishing)`` and ``… (excluding …)``; 14+ prints one
  ``tps = … (without initial connection time)`` (or ``(including reconnection times)`` under ``-C``) and
  ``initial connection time = … ms``; 14+ starts with ``pgbench (18.6)`` / ``pgbench (18.6, server 15.4)``.
* ≤ 9.5 spells ``latency average: 1.2 ms``; ≤ 9.3 prints no latency at all.
* 15+ adds ``maximum number of tries``, failed / retried transactions, ``(including failures)``.
* per-script blocks: ≤ 15 ``- 123 transactions (50.0% of total, tps = …)``; 18 moves tps to a separate
  ``- number of transactions actually processed: 123 (tps = …)`` line.
* ``-r`` statement lines carry 1 (≤ 14), 2 (15+: failures) or 3 (15+ with retries) numeric columns; the
  header line says which.
* ``latency stddev`` is printed only with ``-P``, ``-R`` or ``-L`` (per-script blocks always have it).
"""

from __future__ import annotations

import re

import polars as pl

__all__ = [
    "PgbenchOutputError",
    "parse_pgbench_output",
    "parse_pgbench_init_output",
    "parse_aggregate_log",
    "AGGREGATE_LOG_COLUMNS",
]


class PgbenchOutputError(ValueError):
    """The text is not pgbench output we understand, or lacks a figure we must not guess."""


_N = r"(-?\d+(?:\.\d+)?)"  # a decimal number as pgbench prints it (%f, %.3f, %.1f)
_PCT = rf"\({_N} ?%\)"  # "(0.150 %)" up to 14, "(0.150%)" from 15

# tps kinds, in order of preference for the comparable ``tps`` figure
_TPS_EXCLUDING = ("without initial connection time", "excluding connections establishing")
_TPS_INCLUDING = ("including connections establishing", "including reconnection times")

# Lines that may be interleaved when stdout and stderr were captured together; never data.
_NOISE = re.compile(r"^(starting vacuum|progress: |NOTICE: |WARNING: |end\.$)")
_ERROR = re.compile(r"^(pgbench: (error|fatal)|client \d+ aborted|.*Run was aborted)")

# Counters shared by the summary and the per-script blocks: (key, regex with the count in group 1).
_COUNTERS = [
    ("failed_transactions", re.compile(rf"^number of failed transactions: (\d+) {_PCT}$")),
    ("serialization_failures", re.compile(rf"^number of serialization failures: (\d+) {_PCT}$")),
    ("deadlock_failures", re.compile(rf"^number of deadlock failures: (\d+) {_PCT}$")),
    ("other_failures", re.compile(rf"^number of other(?: SQL)? failures: (\d+) {_PCT}$")),
    ("retried_transactions", re.compile(rf"^number of transactions retried: (\d+) {_PCT}$")),
    ("total_retries", re.compile(r"^total number of retries: (\d+)$")),
    ("skipped_transactions", re.compile(rf"^number of transactions skipped: (\d+) {_PCT}$")),
]
_LAT_AVG = re.compile(rf"^latency average(?: =|:) {_N} ms(?P<fail> \(including failures\))?$")
_LAT_SD = re.compile(rf"^latency stddev(?: =|:) {_N} ms$")
_STMT_HEADER = re.compile(r"^(?:- )?statement latencies in milliseconds(?P<rest>.*):$")
_STMT_FILE = re.compile(r"^file (\d+):$")  # 9.x -r with several -f files

_SUMMARY = [
    ("version", re.compile(r"^pgbench \((?P<client>[^,]*?)(?:, server (?P<server>.*))?\)$")),
    ("transaction_type", re.compile(r"^transaction type: (.+)$")),
    ("scaling_factor", re.compile(r"^scaling factor: (\d+)$")),
    ("partition_method", re.compile(r"^partition method: (\S+)$")),
    ("partitions", re.compile(r"^partitions: (\d+)$")),
    ("query_mode", re.compile(r"^query mode: (\S+)$")),
    ("clients", re.compile(r"^number of clients: (\d+)$")),
    ("threads", re.compile(r"^number of threads: (\d+)$")),
    ("max_tries", re.compile(r"^maximum number of tries: (\d+)$")),
    ("transactions_per_client", re.compile(r"^number of transactions per client: (\d+)$")),
    ("duration_s", re.compile(r"^duration: (\d+) s$")),
    ("processed", re.compile(r"^number of transactions actually processed: (\d+)(?:/(\d+))?$")),
    ("late", re.compile(rf"^number of transactions above the {_N} ms latency limit: (\d+)(?:/\d+)? {_PCT}$")),
    ("lag", re.compile(rf"^rate limit schedule lag: avg {_N} \(max {_N}\) ms$")),
    ("initial_connection_ms", re.compile(rf"^initial connection time = {_N} ms$")),
    ("connection_time_avg_ms", re.compile(rf"^average connection time = {_N} ms$")),
    ("tps", re.compile(rf"^tps = {_N}(?: \((?P<kind>[^)]*)\))?$")),
    ("script", re.compile(r"^SQL script (\d+): (.*)$")),
]
_SCRIPT = [
    ("weight", re.compile(rf"^weight: (\d+)(?: \(targets {_N}% of total\))?$")),
    ("transactions", re.compile(rf"^(\d+) transactions \({_N}% of total(?:, tps = {_N})?\)$")),
    ("processed", re.compile(rf"^number of transactions actually processed: (\d+) \(tps = {_N}\)$")),
]

_INT_KEYS = {"scaling_factor", "partitions", "clients", "threads", "max_tries", "transactions_per_client", "duration_s"}


def _empty_record() -> dict:
    # Every key always present, so records of different versions stack into one DataFrame.
    return {
        "pgbench_version": None,
        "server_version": None,
        "transaction_type": None,
        "scaling_factor": None,
        "partition_method": None,
        "partitions": None,
        "query_mode": None,
        "clients": None,
        "threads": None,
        "max_tries": None,
        "duration_s": None,
        "transactions_per_client": None,
        "transactions_processed": None,
        "transactions_expected": None,
        **{key: None for key, _ in _COUNTERS},
        "latency_limit_ms": None,
        "late_transactions": None,
        "latency_avg_ms": None,
        "latency_stddev_ms": None,
        "latency_includes_failures": False,
        "lag_avg_ms": None,
        "lag_max_ms": None,
        "initial_connection_ms": None,
        "connection_time_avg_ms": None,
        "tps": None,
        "tps_kind": None,
        "tps_including_connections": None,
        "scripts": [],
        "statement_latencies": [],
        "statement_failures": [],
        "errors": [],
        "aborted": False,
        "unrecognized_lines": [],
    }


def _empty_script(number: int, name: str) -> dict:
    return {
        "script": number,
        "name": name,
        "weight": None,
        "weight_pct": None,
        "transactions": None,
        "share_pct": None,
        "transactions_processed": None,
        "tps": None,
        **{key: None for key, _ in _COUNTERS},
        "latency_avg_ms": None,
        "latency_stddev_ms": None,
    }


def _match_common(text: str, target: dict) -> bool:
    """Counters and latency lines that appear both in the summary and in per-script blocks."""
    for key, rx in _COUNTERS:
        if m := rx.match(text):
            target[key] = int(m.group(1))
            return True
    if m := _LAT_AVG.match(text):
        target["latency_avg_ms"] = float(m.group(1))
        if m.group("fail") and "latency_includes_failures" in target:
            target["latency_includes_failures"] = True
        return True
    if m := _LAT_SD.match(text):
        target["latency_stddev_ms"] = float(m.group(1))
        return True
    return False


def _first_match(patterns: list, text: str) -> tuple[str | None, re.Match | None]:
    for key, rx in patterns:
        if m := rx.match(text):
            return key, m
    return None, None


def _statement_columns(header_rest: str) -> int:
    # "" (<= 14), " and failures" (15+, max_tries == 1), ", failures and retries" (15+, retries)
    if "retries" in header_rest:
        return 3
    if "failures" in header_rest:
        return 2
    return 1


def parse_pgbench_output(text: str) -> dict:
    """Parse the summary pgbench prints at the end of a run into one flat record.

    ``text`` is the run's stdout; stderr lines (vacuum, progress, errors) may be interleaved.
    Keys are always all present (None / empty list when the version did not print the figure):
    pgbench_version, server_version, transaction_type, scaling_factor, partition_method, partitions,
    query_mode, clients, threads, max_tries (None when not printed: ≤ 14, or unlimited tries in 15+),
    duration_s / transactions_per_client, transactions_processed, transactions_expected (``-t`` only),
    failed_transactions, serialization_failures, deadlock_failures, other_failures, retried_transactions,
    total_retries, skipped_transactions, latency_limit_ms, late_transactions, latency_avg_ms,
    latency_stddev_ms, latency_includes_failures, lag_avg_ms, lag_max_ms, initial_connection_ms (14+),
    connection_time_avg_ms (14+ with ``-C``), tps, tps_kind, tps_including_connections,
    scripts (list of per-script dicts, only with several scripts),
    statement_latencies (list of (script number, statement, latency_ms), with ``-r``),
    statement_failures (list of (script number, statement, failures, retries or None), 15+ with ``-r``),
    errors (error lines seen), aborted, unrecognized_lines (for spotting new formats).

    ``tps`` is the comparable figure: the excluding / without-connection one when printed (≤ 13 prints
    both, 14+ only "without"). Under ``-C`` 14+ prints only "including reconnection times", which then is
    ``tps``; ``tps_kind`` always says which. ``tps_including_connections`` holds the including figure
    whenever one is printed (compare ``-C`` runs across versions on that one).

    Raises PgbenchOutputError naming the missing lines when the summary is absent or incomplete.
    """
    rec = _empty_record()
    tps_lines: list[tuple[float, str]] = []
    script: dict | None = None
    stmt_cols = 0  # > 0 while inside a statement-latency block
    stmt_script = 1
    n_summaries = 0

    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if stmt_cols:
            m = re.match(rf"^\s+{_N}((?:\s+\d+){{{stmt_cols - 1}}})\s+(\S.*)$", line)
            if m:
                counts = [int(c) for c in m.group(2).split()]
                rec["statement_latencies"].append((stmt_script, m.group(3), float(m.group(1))))
                if stmt_cols > 1:
                    retries = counts[1] if stmt_cols == 3 else None
                    rec["statement_failures"].append((stmt_script, m.group(3), counts[0], retries))
                continue
            if m := _STMT_FILE.match(line.strip()):
                stmt_script = int(m.group(1))
                continue
            stmt_cols = 0
        if _ERROR.match(line):
            rec["errors"].append(line)
            rec["aborted"] = rec["aborted"] or "aborted" in line
            continue
        if _NOISE.match(line):
            continue
        stripped = line.strip()
        if m := _STMT_HEADER.match(stripped):
            stmt_cols = _statement_columns(m.group("rest"))
            stmt_script = script["script"] if script else 1
            continue
        if script is not None and line.startswith(" - "):
            body = line[3:].strip()
            if _match_common(body, script):
                continue
            key, m = _first_match(_SCRIPT, body)
            if key == "weight":
                script["weight"] = int(m.group(1))
                script["weight_pct"] = float(m.group(2)) if m.group(2) else None
            elif key == "transactions":
                script["transactions"] = int(m.group(1))
                script["share_pct"] = float(m.group(2))
                if m.group(3):
                    script["tps"] = float(m.group(3))
            elif key == "processed":
                script["transactions_processed"] = int(m.group(1))
                script["tps"] = float(m.group(2))
            else:
                rec["unrecognized_lines"].append(line)
            continue
        if _match_common(stripped, rec):
            continue
        key, m = _first_match(_SUMMARY, stripped)
        if key is None:
            rec["unrecognized_lines"].append(line)
        elif key == "version":
            rec["pgbench_version"] = m.group("client")
            rec["server_version"] = m.group("server")
        elif key == "transaction_type":
            n_summaries += 1
            rec["transaction_type"] = m.group(1)
        elif key == "partition_method":
            rec["partition_method"] = m.group(1)
        elif key == "query_mode":
            rec["query_mode"] = m.group(1)
        elif key in _INT_KEYS:
            rec[key] = int(m.group(1))
        elif key == "processed":
            rec["transactions_processed"] = int(m.group(1))
            rec["transactions_expected"] = int(m.group(2)) if m.group(2) else None
        elif key == "late":
            rec["latency_limit_ms"] = float(m.group(1))
            rec["late_transactions"] = int(m.group(2))
        elif key == "lag":
            rec["lag_avg_ms"], rec["lag_max_ms"] = float(m.group(1)), float(m.group(2))
        elif key in ("initial_connection_ms", "connection_time_avg_ms"):
            rec[key] = float(m.group(1))
        elif key == "tps":
            tps_lines.append((float(m.group(1)), m.group("kind") or ""))
        elif key == "script":
            script = _empty_script(int(m.group(1)), m.group(2))
            rec["scripts"].append(script)

    _check_complete(rec, tps_lines, n_summaries, text)
    _choose_tps(rec, tps_lines)
    return rec


def _check_complete(rec: dict, tps_lines: list, n_summaries: int, text: str) -> None:
    if n_summaries > 1:
        raise PgbenchOutputError(f"{n_summaries} pgbench summaries in one text; parse each run separately")
    missing = []
    if not tps_lines:
        missing.append("no 'tps = ' line found")
    if rec["transaction_type"] is None:
        missing.append("no 'transaction type:' line found")
    if rec["clients"] is None:
        missing.append("no 'number of clients:' line found")
    if rec["transactions_processed"] is None:
        missing.append("no 'number of transactions actually processed:' line found")
    if missing:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        detail = f"; errors: {rec['errors']}" if rec["errors"] else f"; first line: {first[:80]!r}"
        raise PgbenchOutputError("pgbench output not recognised: " + ", ".join(missing) + detail)


def _choose_tps(rec: dict, tps_lines: list[tuple[float, str]]) -> None:
    by_kind = {kind: value for value, kind in tps_lines}
    for kind in _TPS_INCLUDING:
        if kind in by_kind:
            rec["tps_including_connections"] = by_kind[kind]
    preferred = [k for k in _TPS_EXCLUDING if k in by_kind]
    if preferred:
        kind = preferred[0]
    elif len(by_kind) == 1:
        kind = next(iter(by_kind))  # e.g. -C on 14+: the only figure pgbench gives
    else:
        raise PgbenchOutputError(f"cannot tell which tps line is comparable: {sorted(by_kind)}")
    rec["tps"], rec["tps_kind"] = by_kind[kind], kind or None


_INIT_DONE = re.compile(rf"^done in {_N} s(?: \((?P<steps>.*)\))?\.$")
_INIT_STEP = re.compile(rf"^(.+?) {_N} s$")
_INIT_TUPLES = re.compile(r"^(\d+) of (\d+) tuples \(\d+%\)(?: of (\S+))? done")
_INIT_GEN = re.compile(r"^generating data(?: \((?P<side>[a-z-]+)\))?\.\.\.$")
_INIT_PARTS = re.compile(r"^creating (\d+) partitions\.\.\.$")


def parse_pgbench_init_output(stderr_text: str) -> dict:
    """Parse what ``pgbench -i`` writes to stderr.

    Returns total_s (13+: ``done in 1.23 s``; None for older versions, which print only ``done.`` —
    time it yourself), steps_s ({"drop_tables": 0.0, "create_tables": …, "client_side_generate": …,
    "vacuum": …, "primary_keys": …, "foreign_keys": …} as printed, in order; empty before 13),
    generation ("client-side" / "server-side" / None when the version does not say), tuples_generated
    (last progress line's count; None with server-side generation), partitions (None unless created),
    errors (error lines). Raises PgbenchOutputError when no ``done`` line is present (init failed or
    the text is not pgbench -i output).
    """
    out: dict = {
        "total_s": None,
        "steps_s": {},
        "generation": None,
        "tuples_generated": None,
        "partitions": None,
        "errors": [],
    }
    done = False
    for raw in stderr_text.replace("\r", "\n").splitlines():
        line = raw.strip()
        if m := _INIT_DONE.match(line):
            done = True
            out["total_s"] = float(m.group(1))
            for part in (m.group("steps") or "").split(", "):
                if sm := _INIT_STEP.match(part.strip()):
                    name = re.sub(r"[^a-z0-9]+", "_", sm.group(1).lower()).strip("_")
                    out["steps_s"][name] = float(sm.group(2))
        elif line == "done.":
            done = True
        elif m := _INIT_TUPLES.match(line):
            out["tuples_generated"] = int(m.group(1))
        elif m := _INIT_GEN.match(line):
            out["generation"] = m.group("side")
        elif m := _INIT_PARTS.match(line):
            out["partitions"] = int(m.group(1))
        elif _ERROR.match(line):
            out["errors"].append(line)
    if not done:
        why = f"errors: {out['errors']}" if out["errors"] else "not pgbench -i output?"
        raise PgbenchOutputError(f"no 'done' line found in pgbench -i output ({why})")
    return out


# Aggregate log columns by field count (latencies and lags in microseconds):
#   6  ≤ 14: base;  10  ≤ 14 with -R: + lag;  11  ≤ 14 with -R and -L: + skipped;
#   15  15–18: every column always printed, zeros where the option was off (failure columns only
#       filled with --failures-detailed);  16  19devel: + other_sql_failures.
AGGREGATE_LOG_COLUMNS = [
    "interval_start",
    "num_transactions",
    "sum_latency",
    "sum_latency_2",
    "min_latency",
    "max_latency",
    "sum_lag",
    "sum_lag_2",
    "min_lag",
    "max_lag",
    "skipped",
    "retried",
    "retries",
    "serialization_failures",
    "deadlock_failures",
    "other_sql_failures",
]
_AGG_WIDTHS = {6, 10, 11, 15, 16}
_AGG_FLOAT = {"sum_latency", "sum_latency_2", "sum_lag", "sum_lag_2"}  # %.0f sums can exceed int64


def parse_aggregate_log(text: str) -> pl.DataFrame:
    """Parse a ``--aggregate-interval`` log (one line per interval) into a DataFrame.

    Always returns all AGGREGATE_LOG_COLUMNS (null where the version did not write the column);
    interval_start is Unix epoch seconds, latencies and lags are microseconds. Concatenate the per-thread
    files (``prefix.PID``, ``prefix.PID.1`` …) before or after parsing. Raises PgbenchOutputError on a
    line with an unknown field count, a non-integer field, or lines of different widths.
    """
    rows: list[list[float]] = []
    width = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields:
            continue
        if len(fields) not in _AGG_WIDTHS:
            raise PgbenchOutputError(
                f"aggregate log line {lineno}: {len(fields)} fields, expected one of {sorted(_AGG_WIDTHS)}"
            )
        if width is not None and len(fields) != width:
            raise PgbenchOutputError(f"aggregate log line {lineno}: {len(fields)} fields after {width}-field lines")
        width = len(fields)
        try:
            rows.append([float(f) if "." in f else int(f) for f in fields])
        except ValueError as exc:
            raise PgbenchOutputError(f"aggregate log line {lineno}: non-numeric field ({exc})") from None
    cols = {}
    for i, name in enumerate(AGGREGATE_LOG_COLUMNS):
        dtype = pl.Float64 if name in _AGG_FLOAT else pl.Int64
        values = [r[i] if width and i < width else None for r in rows]
        cols[name] = pl.Series(name, values, dtype=dtype, strict=False)
    return pl.DataFrame(cols)

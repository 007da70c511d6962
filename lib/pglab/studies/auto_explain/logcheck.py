"""The proof from the server log, per pgbench run: did auto_explain log what each condition says?

One `LogWatch` per server follows its log for the whole stage. After a run it logs a marker message and
reads the log up to it (the logging collector writes asynchronously, so the marker says the run's
entries are all in). In that window it counts auto_explain entries of the study's database, each the plan of
the next query of a condition that logs every plan (an interleaved run's conditions in the order its queries
ran), and checks per condition:
a plan per transaction where one must be logged (within a tolerance), none where none may be; a sample
of the plans parsed with `pglab.pgtools.explain` (the right query; actual rows under ANALYZE; per-node times only
with log_timing on); bytes written per transaction. Warnings and errors in the log, during runs or
between them (restarts), are kept as well.

A kit cluster's log is a local file; an external server's is not reachable: the check is then recorded
as "not available" with the reason."""

from __future__ import annotations

import uuid

from ...pgtools.serverlog import LogCursor, LogEntry, LogTimeout, detect_format
from .params import Condition, LogCheckParams
from .prepare import ServerState

PROBLEMS = ("WARNING", "ERROR", "FATAL", "PANIC")
NOT_AVAILABLE = "not available"
# what the kit's own restarts log: a connection it just closed, cut by the shutdown (57P01), and its
# readiness probe while the server starts (57P03)
RESTART_NOISE = ("57P01", "57P03")
# the same in a text (stderr) log, whose default line prefix carries no SQLSTATE: their messages
RESTART_NOISE_TEXT = (
    "terminating connection due to administrator command",  # 57P01
    "the database system is starting up",  # 57P03
    "the database system is shutting down",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
)


class LogWatch:
    def __init__(self, state: ServerState, params: LogCheckParams):
        self.state = state
        self.params = params
        cluster = state.server.cluster
        self.reason = None
        if not params.enabled:
            self.reason = "log check disabled in params (auto_explain.log_check.enabled)"
        elif cluster is None:
            self.reason = "external server: its log is not reachable from the kit"
        # the format the server writes now, not the first present: the stage may log to stderr alone (as the
        # study did) while the folder keeps the kit's jsonlog files from before, which never get the marker
        self.cursor = LogCursor(cluster.log_files, live=cluster.log_destinations) if self.reason is None else None
        self.initial = set(self.cursor.start) if self.cursor else set()
        self.problems: list[dict] = []  # warnings and errors seen in the log during the stage
        self.pruned_files = 0
        self.pruned_bytes = 0

    @property
    def available(self) -> bool:
        return self.cursor is not None

    def _note(self, e: LogEntry, where: str) -> None:
        code = e.fields.get("state_code")
        if where == "between runs" and (code in RESTART_NOISE or (code is None and e.message in RESTART_NOISE_TEXT)):
            return
        if e.severity in PROBLEMS:
            self.problems.append(
                {
                    "server": self.state.name,
                    "where": where,
                    "timestamp": e.timestamp,
                    "severity": e.severity,
                    "message": e.message[:500],
                    "detail": e.detail,
                }
            )

    def before_run(self) -> None:
        """Read past whatever was logged since the last run (restarts, set-up)."""
        if self.cursor:
            for e in self.cursor.read():
                self._note(e, "between runs")

    def after_batch(
        self, conditions: dict[str, Condition], sql: str, sequence: list[str], where: str
    ) -> dict[str, tuple[dict, str | None]]:
        """Each condition's check fields for its record, and the text of one of its logged plans (a sample).
        `sequence`: the condition of every query transaction of the run, in run order. One backend logs the plans
        in the order it ran the queries, so the i-th plan in the log is the i-th query's of a condition that logs
        every plan; when the count is off, that attribution is too, and every condition's check fails."""
        expect = {c: cond.expected_plans for c, cond in conditions.items()}
        out = {c: {"log_check": NOT_AVAILABLE, "log_reason": self.reason, "expect_plans": e} for c, e in expect.items()}
        if not self.cursor:
            return {c: (f, None) for c, f in out.items()}
        logged = [c for c in sequence if expect[c] == "every"]
        txns = {c: sequence.count(c) for c in conditions}
        marker = f"pglab auto_explain marker {uuid.uuid4().hex}"
        # LOG reaches the server log unless log_min_messages is above it: make sure, for this session
        with self.state.server.connect(settings={"log_min_messages": "warning"}) as conn:
            conn.execute(f"DO $$BEGIN RAISE LOG '{marker}'; END$$")
        tallies = {c: _Tally(self.params.parse_sample, txns[c], sql) for c in conditions}
        other = _Tally(0, 0, sql)  # entries no query's: other messages, plans beyond the queries that log
        database = self.state.params.database
        plans = 0
        try:
            for e in self.cursor.follow(lambda e: e.message == marker, timeout_s=self.params.wait_s):
                self._note(e, where)
                is_plan = e.auto_explain is not None and (e.dbname is None or e.dbname == database)
                owner = logged[plans] if is_plan and plans < len(logged) else None
                plans += is_plan
                (tallies[owner] if owner else other).add(e, database)
        except LogTimeout as exc:
            failed = {"log_check": "failed", "log_reason": f"log incomplete in {self._destination()}: {exc}"}
            return {
                c: (out[c] | tallies[c].fields() | {"log_destination": self._destination()} | failed, tallies[c].sample)
                for c in conditions
            }
        allowed = self.params.tolerance_abs + self.params.tolerance * len(logged)
        batch = []
        if abs(plans - len(logged)) > allowed if logged else plans:
            batch.append(f"{plans} plans logged in the run for {len(logged)} queries of conditions that log every plan")
        result = {}
        for c, cond in conditions.items():
            fields = tallies[c].fields() | {"log_destination": self._destination()}
            problems = batch + self._verdict(cond, fields, txns[c])
            fields |= {"log_check": "failed" if problems else "passed", "log_reason": "; ".join(problems) or None}
            fields |= {"run_log_entries": other.entries, "run_log_bytes": other.bytes}
            result[c] = (out[c] | fields, tallies[c].sample)
        if self.params.prune:
            self.prune()
        return result

    def _destination(self) -> str | None:
        """The log destination the cursor reads (what the server writes now)."""
        return self.cursor.format_of(self.cursor.pos)

    def _verdict(self, c: Condition, f: dict, transactions: int | None) -> list[str]:
        """What is wrong with a condition's share of the log (its plans, `after_batch`)."""
        n = f["plans_logged"]
        if c.expected_plans == "none":
            return [] if n == 0 else [f"{n} plans logged where none may be"]
        problems = []
        txns = transactions or 0
        allowed = self.params.tolerance_abs + self.params.tolerance * txns
        if abs(n - txns) > allowed:
            problems.append(f"{n} plans logged for {txns} transactions (tolerance ±{allowed:g})")
        parsed = f["plans_parsed"]
        if f["parse_errors"]:
            problems.append(
                f"{f['parse_errors']} of {parsed + f['parse_errors']} sampled plans did not parse "
                f"({f['parse_error_first']})"
            )
        if f["plans_other_query"]:
            problems.append(f"{f['plans_other_query']} sampled plans are of another query")
        if c.analyze and f["plans_with_rows"] != parsed:
            problems.append(f"ANALYZE: only {f['plans_with_rows']} of {parsed} plans carry actual rows")
        if not c.analyze and f["plans_with_rows"]:
            problems.append(f"no ANALYZE, yet {f['plans_with_rows']} plans carry actual rows")
        if c.timing and f["plans_with_times"] != parsed:
            problems.append(f"log_timing on: only {f['plans_with_times']} of {parsed} plans carry times")
        if not c.timing and f["plans_with_times"]:
            problems.append(f"no timing, yet {f['plans_with_times']} plans carry per-node times")
        return problems

    # -- keeping the disk free -------------------------------------------------------------------------------

    def prune(self) -> None:
        """Delete log files this stage filled and has read to the end, except the one being written."""
        current = set(self.state.server.cluster.current_log_files().values())
        if not current:
            return  # cannot tell which file is live: keep everything
        fmt = self.cursor.format_of(self.cursor.start)
        for p in sorted((self.state.server.cluster.data / "log").glob("postgresql-*")):
            if p in self.initial or p in current or detect_format(p) != fmt:
                continue
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                continue
            if self.cursor.pos.get(p, 0) < size:
                continue  # not read to the end
            p.unlink(missing_ok=True)
            self.pruned_files += 1
            self.pruned_bytes += size


class _Tally:
    """Counts of one run's log window; parses an evenly spread sample of the plans."""

    def __init__(self, sample: int, transactions: int, sql: str):
        step = max(1, transactions // sample) if transactions else 1
        self.pick = {0} | set(range(0, max(transactions, 1), step)[:sample])
        self.sql = " ".join(sql.split())
        self.entries = self.bytes = self.plans = self.plan_bytes = 0
        self.parsed = self.errors = self.with_rows = self.with_times = self.other_query = 0
        self.first_error: str | None = None
        self.formats: set[str] = set()
        self.durations: list[float] = []
        self.sample: str | None = None

    def add(self, e: LogEntry, database: str) -> None:
        self.entries += 1
        self.bytes += e.nbytes
        ae = e.auto_explain
        if ae is None or (e.dbname is not None and e.dbname != database):
            return
        index = self.plans
        self.plans += 1
        self.plan_bytes += e.nbytes
        self.formats.add(ae.format)
        self.durations.append(ae.duration_ms)
        if index not in self.pick:
            return
        if self.sample is None:
            self.sample = e.message
        try:
            plan = ae.parse()
        except Exception as exc:  # ExplainParseError, or anything the parser trips on: recorded, not raised
            self.errors += 1
            self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:300]
            return
        self.parsed += 1
        n = plan.nodes
        self.with_rows += bool(n["actual_rows"].is_not_null().any())
        self.with_times += bool(n["actual_total_ms"].is_not_null().any())
        text = " ".join((plan.query_text or "").split())
        self.other_query += bool(text) and text != self.sql

    def fields(self) -> dict:
        d = sorted(self.durations)
        return {
            "plans_logged": self.plans,
            "plans_parsed": self.parsed,
            "parse_errors": self.errors,
            "parse_error_first": self.first_error,
            "plans_with_rows": self.with_rows,
            "plans_with_times": self.with_times,
            "plans_other_query": self.other_query,
            "plan_format": ",".join(sorted(self.formats)) or None,
            "plan_duration_median_ms": d[len(d) // 2] if d else None,
            "log_entries": self.entries,
            "log_bytes": self.bytes,
            "plan_bytes": self.plan_bytes,
        }

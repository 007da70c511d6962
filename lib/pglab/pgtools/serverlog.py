"""Reading a PostgreSQL server log: jsonlog (15+), csvlog and plain text (stderr), one entry per message.

    cursor = LogCursor(cluster.log_files)      # remember where every log file ends now
    ... run something ...
    for e in cursor.entries():                  # what was written since, across rotated files
        if (ae := e.auto_explain) is not None:
            ae.duration_ms, ae.plan, ae.format  # the plan text (or JSON text) auto_explain logged

The format is taken from the file name as PostgreSQL writes it (`.json`, `.csv`, anything else is
stderr text). A record the logging collector has not finished writing (no final newline yet) is left
for the next read, so an entry is never seen cut in half.

auto_explain logs `duration: 1.234 ms  plan:` and the plan in one message: in jsonlog and csvlog the
plan lines follow a newline; in the text log every continuation line starts with a tab. In all three
the plan itself is text or, with `auto_explain.log_format = json`, JSON text to be parsed again.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CSV_COLUMNS",
    "AutoExplainEntry",
    "LogCursor",
    "LogEntry",
    "LogTimeout",
    "detect_format",
    "iter_entries",
    "parse_auto_explain",
    "read_entries",
]

# csvlog columns in order: 13 has the first 24, 14+ adds leader_pid and query_id; older ones fewer
CSV_COLUMNS = (
    "timestamp",
    "user",
    "dbname",
    "pid",
    "remote_host",
    "session_id",
    "line_num",
    "ps",
    "session_start",
    "vxid",
    "txid",
    "error_severity",
    "state_code",
    "message",
    "detail",
    "hint",
    "internal_query",
    "internal_position",
    "context",
    "statement",
    "cursor_position",
    "func_name",
    "application_name",
    "backend_type",
    "leader_pid",
    "query_id",
)  # fmt: skip  (the jsonlog key names, so both give the same fields)

_AUTO_EXPLAIN = re.compile(r"^duration: (\d+(?:\.\d+)?) ms  plan:\n(.*)\Z", re.S)
_SEVERITIES = "LOG|ERROR|WARNING|NOTICE|INFO|DEBUG[1-5]?|FATAL|PANIC"
_FOLLOW_UPS = {
    "DETAIL": "detail",
    "HINT": "hint",
    "STATEMENT": "statement",
    "CONTEXT": "context",
    "QUERY": "internal_query",
    "LOCATION": "func_name",
}
# a text-log line: any log_line_prefix, then "SEVERITY:  message" (two spaces: PostgreSQL's own layout)
_TEXT_LINE = re.compile(rf"^(?P<prefix>.*?)(?P<sev>{_SEVERITIES}|{'|'.join(_FOLLOW_UPS)}):  (?P<msg>.*)$")
_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Za-z+\-0-9]+)?)")
_PID = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class AutoExplainEntry:
    """The plan auto_explain logged: duration, the plan as logged (text, or JSON text), its format."""

    duration_ms: float
    plan: str
    format: str  # "text" | "json"

    def parse(self):
        """The plan through pglab.pgtools.explain (ExplainParseError when it does not parse)."""
        from .explain import parse_plan

        return parse_plan(self.plan)


@dataclass
class LogEntry:
    timestamp: str | None
    severity: str | None
    message: str
    pid: int | None = None
    dbname: str | None = None
    user: str | None = None
    application_name: str | None = None
    backend_type: str | None = None
    detail: str | None = None
    statement: str | None = None
    context: str | None = None
    fields: dict = field(default_factory=dict, repr=False)  # everything the log line had
    file: str | None = None
    offset: int | None = None  # byte offset of the entry in its file
    nbytes: int = 0  # bytes the entry takes in the file
    complete: bool = True  # False: the last entry of a live text log, which may still get more lines

    @property
    def auto_explain(self) -> AutoExplainEntry | None:
        return parse_auto_explain(self.message) if self.severity == "LOG" else None


def parse_auto_explain(message: str) -> AutoExplainEntry | None:
    """duration and plan of an auto_explain message; None for any other message."""
    m = _AUTO_EXPLAIN.match(message)
    if m is None:
        return None
    plan = m.group(2).strip("\n")
    return AutoExplainEntry(float(m.group(1)), plan, "json" if plan.lstrip()[:1] in "{[" else "text")


def detect_format(path: str | Path) -> str:
    """jsonlog / csvlog / stderr, from the file name PostgreSQL gives each destination."""
    suffix = Path(path).suffix
    return {".json": "jsonlog", ".csv": "csvlog"}.get(suffix, "stderr")


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _entry(rec: dict) -> LogEntry:
    return LogEntry(
        timestamp=rec.get("timestamp"),
        severity=rec.get("error_severity"),
        message=rec.get("message") or "",
        pid=_int(rec.get("pid")),
        dbname=rec.get("dbname") or None,
        user=rec.get("user") or None,
        application_name=rec.get("application_name") or None,
        backend_type=rec.get("backend_type") or None,
        detail=rec.get("detail") or None,
        statement=rec.get("statement") or None,
        context=rec.get("context") or None,
        fields=rec,
    )


# -- reading complete records from a byte range ----------------------------------------------------------------


def _complete_lines(f, start: int, end: int | None) -> Iterator[tuple[int, bytes]]:
    """(offset, line with its newline) for every complete line in [start, end)."""
    f.seek(start)
    pos = start
    for line in f:
        if end is not None and pos + len(line) > end:
            return
        if not line.endswith(b"\n"):
            return  # still being written
        yield pos, line
        pos += len(line)


def _jsonlog(f, start, end) -> Iterator[LogEntry]:
    for pos, line in _complete_lines(f, start, end):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line of the log that is not JSON (cannot happen in jsonlog; tolerated)
        e = _entry(rec)
        e.offset, e.nbytes = pos, len(line)
        yield e


def _csvlog(f, start, end) -> Iterator[LogEntry]:
    # a record may span lines (quoted newlines): gather lines until the quotes balance
    buf, buf_start = b"", None
    for pos, line in _complete_lines(f, start, end):
        if not buf:
            buf_start = pos
        buf += line
        if buf.count(b'"') % 2:
            continue
        row = next(csv.reader(io.StringIO(buf.decode(errors="replace"))), None)
        if row:
            e = _entry(dict(zip(CSV_COLUMNS, row, strict=False)))
            e.offset, e.nbytes = buf_start, len(buf)
            yield e
        buf = b""


def _stderr(f, start, end, hold_last: bool = False) -> Iterator[LogEntry]:
    """Text log: an entry is its message line plus the tab-indented lines after it, and the DETAIL /
    STATEMENT / ... lines that follow it. `hold_last`: the last entry may still grow: it comes
    with complete=False."""
    current: LogEntry | None = None
    for pos, raw in _complete_lines(f, start, end):
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith("\t") and current is not None:
            current.message += "\n" + line[1:]
            current.nbytes += len(raw)
            continue
        m = _TEXT_LINE.match(line)
        if m and m.group("sev") in _FOLLOW_UPS and current is not None:
            key = _FOLLOW_UPS[m.group("sev")]
            if key in ("detail", "statement", "context"):
                setattr(current, key, m.group("msg"))
            current.fields[key] = m.group("msg")
            current.nbytes += len(raw)
            continue
        if current is not None:
            yield current
        if m is None:  # not a message line (e.g. a crashed child's output): kept, severity unknown
            current = LogEntry(None, None, line, offset=pos, nbytes=len(raw))
            continue
        prefix = m.group("prefix")
        ts, pid = _TS.match(prefix), _PID.search(prefix)
        current = LogEntry(
            timestamp=ts.group(1) if ts else None,
            severity=m.group("sev"),
            message=m.group("msg"),
            pid=int(pid.group(1)) if pid else None,
            fields={"prefix": prefix},
            offset=pos,
            nbytes=len(raw),
        )
    if current is not None:
        current.complete = not hold_last
        yield current


_READERS = {"jsonlog": _jsonlog, "csvlog": _csvlog, "stderr": _stderr}


def iter_entries(
    path: str | Path, start: int = 0, end: int | None = None, fmt: str | None = None, live: bool = False
) -> Iterator[LogEntry]:
    """Entries of one log file between byte offsets, streamed (a log of gigabytes is fine). `live`: the
    file is still being written, so a text-log entry at the very end comes with complete=False."""
    fmt = fmt or detect_format(path)
    if fmt not in _READERS:
        raise ValueError(f"log format must be one of {sorted(_READERS)}, not {fmt!r}")
    with open(path, "rb") as f:
        entries = _stderr(f, start, end, hold_last=live) if fmt == "stderr" else _READERS[fmt](f, start, end)
        for e in entries:
            e.file = str(path)
            yield e


def read_entries(path: str | Path, start: int = 0, end: int | None = None, fmt: str | None = None) -> list[LogEntry]:
    return list(iter_entries(path, start, end, fmt))


# -- following a live log ---------------------------------------------------------------------------------------


class LogTimeout(Exception):
    pass


class LogCursor:
    """Reads what a server writes to its log from now on, across rotations (a file that appears later is
    read from its start). `files` is called on every read, e.g. `Cluster.log_files`.

    With several destinations (e.g. csvlog and jsonlog) every message is in each: entries are read from
    one format, `fmt` if given, else the first of `formats` the server writes now (`live`, called on every
    read, e.g. `Cluster.log_destinations`: its current_logfiles), else the first of `formats` present. The
    files present are no guide once log_destination changed: the log folder keeps the old destination's
    files, which no longer grow (jsonlog files of a server now logging to stderr alone)."""

    def __init__(
        self,
        files: Callable[[], list[Path]],
        formats: tuple[str, ...] = ("jsonlog", "csvlog", "stderr"),
        fmt: str | None = None,
        live: Callable[[], set[str]] | None = None,
    ):
        self._files = files
        self.formats = formats
        self.fmt = fmt
        self._live = live
        self.start = self._sizes()
        self.pos = dict(self.start)  # where the next read of each file begins
        self.pending: LogEntry | None = None  # a text-log entry that may still grow (not yet read past)

    def _sizes(self) -> dict[Path, int]:
        out = {}
        for p in sorted(Path(p) for p in self._files()):  # names carry the creation time: oldest first
            try:
                out[p] = p.stat().st_size
            except FileNotFoundError:
                continue
        return out

    def bytes_written(self) -> int:
        """Bytes appended to the log files (every destination) since the cursor was made."""
        return sum(max(0, n - self.start.get(p, 0)) for p, n in self._sizes().items())

    def format_of(self, sizes) -> str | None:
        """The log format this cursor reads: its own, else the first the server writes now, else the first
        present among the files `sizes` names."""
        if self.fmt:
            return self.fmt
        live = self._live() if self._live else set()
        present = live or {detect_format(p) for p in sizes}
        return next((f for f in self.formats if f in present), None)

    def read(self) -> Iterator[LogEntry]:
        """Complete entries written since the last read (or since the cursor was made)."""
        sizes = self._sizes()
        fmt = self.format_of(sizes)
        mine = [p for p in sizes if detect_format(p) == fmt]
        for p in mine:
            size = sizes[p]
            if size <= self.pos.get(p, 0):
                continue
            try:  # only the newest file is still written to: an older one's last entry is complete
                for e in iter_entries(p, self.pos.get(p, 0), size, fmt, live=p == mine[-1]):
                    if not e.complete:
                        self.pending = e
                        break
                    self.pos[p] = e.offset + e.nbytes
                    yield e
            except FileNotFoundError:  # removed meanwhile
                continue

    def _take_pending(self, until) -> bool:
        """A text log's last entry is only known complete once another follows; the awaited one-line
        marker need not wait for that."""
        e, self.pending = self.pending, None
        if e is not None and until(e):
            self.pos[Path(e.file)] = e.offset + e.nbytes
            return True
        return False

    def follow(
        self, until: Callable[[LogEntry], bool], timeout_s: float = 15.0, poll_s: float = 0.005
    ) -> Iterator[LogEntry]:
        """Entries as they arrive, up to the first one for which `until(entry)` is true (not yielded).
        LogTimeout when it has not arrived within `timeout_s`: the logging collector writes
        asynchronously, so a marker message logged after a run tells when the run's entries are all in."""
        deadline = time.monotonic() + timeout_s
        while True:
            for e in self.read():
                if until(e):
                    return
                yield e
            if self._take_pending(until):
                return
            if time.monotonic() > deadline:
                raise LogTimeout(f"the awaited log entry did not arrive within {timeout_s} s")
            time.sleep(poll_s)
            poll_s = min(poll_s * 2, 0.2)

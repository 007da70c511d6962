"""From what a user holds to what the parsers read.

Accepted: a JSON plan as psycopg returns it (a list with one dict, or the dict), psycopg rows of either
format (`cur.fetchall()`), a string or bytes (JSON or text), a list of text lines. Unwrapped on the way:
psql's "QUERY PLAN" header and "(N rows)" footer, and one auto_explain log entry
("<log prefix> LOG:  duration: 12.3 ms  plan:" followed by tab-indented lines; the entry ends at the
first line that is not indented, so the rest of a log excerpt is ignored). A jsonlog line
({"message": "duration: ... plan:\\n..."}) is handled by the caller once the JSON is decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ExplainParseError

_AUTO_EXPLAIN = re.compile(r"duration: (?P<ms>\d+(?:\.\d+)?) ms\s+plan:\s*$")
_PSQL_FOOTER = re.compile(r"\(\d+ rows?\)")


@dataclass
class Source:
    """Plan text split into lines, each with its 1-based line number in the original input."""

    lines: list[tuple[int, str]]
    duration_ms: float | None = None

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.lines)

    def is_json(self) -> bool:
        return bool(self.lines) and self.lines[0][1].lstrip()[:1] in ("[", "{")


def _unbox(plan):
    # psycopg wraps values in rows: (value,), [(value,)], [(line,), (line,), ...]
    while isinstance(plan, list | tuple) and len(plan) == 1 and isinstance(plan[0], list | tuple | str | bytes):
        plan = plan[0]
    return plan


def read_source(plan) -> Source | dict | list:
    """A Source for anything textual, else the decoded JSON object unchanged."""
    plan = _unbox(plan)
    if isinstance(plan, dict):
        return plan
    if isinstance(plan, list | tuple):
        if plan and isinstance(plan[0], dict):
            return list(plan)
        try:
            lines = [_unbox(item) for item in plan]
            plan = "\n".join(line.decode() if isinstance(line, bytes) else line for line in lines)
        except TypeError:
            raise ExplainParseError(
                f"expected a plan (JSON object, text or rows of text), got a list of {type(plan[0]).__name__}"
            ) from None
    if isinstance(plan, bytes):
        try:
            plan = plan.decode()
        except UnicodeDecodeError as e:
            raise ExplainParseError(f"plan bytes are not UTF-8 (byte {e.start})") from None
    if not isinstance(plan, str):
        raise ExplainParseError(f"expected a plan (JSON object, text or rows of text), got {type(plan).__name__}")
    return strip_wrappers(plan)


def strip_wrappers(text: str) -> Source:
    lines = [(number, line.rstrip()) for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1)]
    lines = _trim_blank(lines)
    if not lines:
        raise ExplainParseError("empty input: no plan")
    duration = None
    if m := _AUTO_EXPLAIN.search(lines[0][1]):
        duration = float(m.group("ms"))
        lines = _auto_explain_body(lines[1:])
    elif lines[0][1].strip() == "QUERY PLAN" and len(lines) > 1 and set(lines[1][1].strip()) == {"-"}:
        lines = _trim_blank(lines[2:])
    if lines and _PSQL_FOOTER.fullmatch(lines[-1][1].strip()):
        lines = _trim_blank(lines[:-1])
    # psql's aligned output marks continued lines of one value (a JSON plan) with a trailing "+"
    if len(lines) > 1 and all(line.endswith("+") for _, line in lines[:-1]):
        lines = [(number, line.removesuffix("+").rstrip()) for number, line in lines]
    if not lines:
        raise ExplainParseError("no plan after the header")
    return Source(lines, duration)


def _auto_explain_body(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    # in a stderr / csv log, the lines of one entry after the first carry a leading tab
    if lines and lines[0][1].startswith("\t"):
        body = []
        for number, line in lines:
            if not line.startswith("\t"):
                break
            body.append((number, line[1:]))
        return _trim_blank(body)
    return _trim_blank(lines)


def _trim_blank(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]

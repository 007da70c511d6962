"""Parse ``pg_test_timing`` output (timer overhead explains EXPLAIN ANALYZE overhead, methodology §5).

Formats (fixtures in ``tests/fixtures/timing/``):

* ≤ 18 (real output of 15.18 and 18.6 is identical in shape): ``Per loop time including overhead: 42.57 ns``
  and a histogram ``< us   % of total      count`` in power-of-two *microsecond* buckets (exclusive bound).
* 19devel: ``Average loop time including overhead: 16.40 ns``, histogram ``<= ns   % of total  running %
  count`` in power-of-two *nanosecond* buckets (inclusive bound 2^i - 1), then
  ``Observed timing durations up to 99.9900%:`` listing exact durations (``...`` marks skipped rows).
  Proposed patches print one block per clock source (``Clock source: RDTSCP``); each block is kept.

All histogram bounds are returned as exclusive upper bounds in nanoseconds, so versions compare directly:
a ≤ 18 row ``< 2 us`` becomes 2000 ns, a 19 row ``<= 31 ns`` becomes 32 ns.
"""

from __future__ import annotations

import re

__all__ = ["TimingOutputError", "parse_pg_test_timing"]


class TimingOutputError(ValueError):
    """The text is not pg_test_timing output we understand."""


_DURATION = re.compile(r"^Testing timing overhead for (\d+) seconds?\.$")
_LOOP = re.compile(r"^(?:Per|Average) loop time including overhead: ([\d.]+) ns$")
_CLOCK = re.compile(r"^(?:System )?[Cc]lock source: (.+)$")
_HIST_HEADER = re.compile(r"^(<|<=) (us|ns)\s+% of total(\s+running %)?\s+count$")
_OBS_HEADER = re.compile(r"^Observed timing durations up to ([\d.]+)%:$")
_OBS_COLUMNS = re.compile(r"^ns\s+% of total\s+running %\s+count$")
_ROW3 = re.compile(r"^(\d+)\s+([\d.]+)\s+(\d+)$")  # bound, percent, count
_ROW4 = re.compile(r"^(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$")  # bound, percent, running %, count


def _new_block(clock_source: str | None) -> dict:
    return {
        "clock_source": clock_source,
        "per_loop_ns": None,
        "histogram_unit": None,
        "histogram": [],
        "observed_cutoff_pct": None,
        "observed": [],
    }


def parse_pg_test_timing(text: str) -> dict:
    """Parse the stdout of ``pg_test_timing [-d N]``.

    Returns duration_s, per_loop_ns ("Per/Average loop time including overhead"), clock_source (None
    unless printed), histogram_unit ("us" for ≤ 18, "ns" for 19+: the resolution the tool measured in),
    histogram: list of (upper_bound_ns exclusive, count, percent), observed_cutoff_pct and observed: list
    of (duration_ns, count, percent) for 19+'s exact-duration list (empty before), and blocks: one such
    dict per clock source tested (the top-level figures are the first block's).
    Raises TimingOutputError when the loop time or the histogram is missing.
    """
    duration = None
    blocks: list[dict] = []
    pending_clock = None
    section = None  # "hist" or "obs" while reading rows
    inclusive = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line == "...":
            continue
        if m := _DURATION.match(line):
            duration = int(m.group(1))
        elif m := _CLOCK.match(line):
            pending_clock, section = m.group(1), None
        elif m := _LOOP.match(line):
            blocks.append(_new_block(pending_clock))
            pending_clock, section = None, None
            blocks[-1]["per_loop_ns"] = float(m.group(1))
        elif line == "Histogram of timing durations:":
            section = None
        elif (m := _HIST_HEADER.match(line)) and blocks:
            section, inclusive = "hist", m.group(1) == "<="
            blocks[-1]["histogram_unit"] = m.group(2)
        elif (m := _OBS_HEADER.match(line)) and blocks:
            section = "obs"
            blocks[-1]["observed_cutoff_pct"] = float(m.group(1))
        elif _OBS_COLUMNS.match(line):
            continue
        elif section and (m := _ROW4.match(line) or _ROW3.match(line)):
            bound, pct, count = int(m.group(1)), float(m.group(2)), int(m.group(m.lastindex))
            if section == "obs":
                blocks[-1]["observed"].append((bound, count, pct))
                continue
            scale = 1000 if blocks[-1]["histogram_unit"] == "us" else 1
            upper_ns = (bound + 1) if inclusive else bound * scale
            blocks[-1]["histogram"].append((upper_ns, count, pct))
        else:
            section = None  # anything else ends a table; unknown lines are ignored
    if not blocks:
        raise TimingOutputError("pg_test_timing output not recognised: no 'loop time including overhead' line")
    for b in blocks:
        if not b["histogram"]:
            raise TimingOutputError(
                "pg_test_timing output not recognised: no histogram rows after "
                f"'loop time including overhead: {b['per_loop_ns']} ns'"
            )
    first = blocks[0]
    return {"duration_s": duration, **first, "blocks": blocks}

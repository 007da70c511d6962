"""One verdict vocabulary and one rule for every study (in plain words in docs/verdicts.md).

A claim is the source study's statement with a direction and, usually, a size: the ratio of the measured value
under condition B over condition A (0.5 = B takes half the time, 1.1 = B gives 10 % more tps), or "no change
within ±x %" where the source says there is none. The evidence is our ratio and its interval. The rule, with its
tolerance declared here once and fixed before the runs that test it (never fitted to them), on the log scale of
the effect, oriented so that the claimed direction is positive (e: the study's effect, ours: our interval's):

* **supported** — our whole interval lies within ×/÷ TOLERANCE (1.5) of the study's effect: a faithful
  reproduction of a 0.75× claim lies between 0.65× and 0.83×. A claim without a size: our whole interval shows an
  effect beyond UNSIZED_MIN (5 %) and the noise floor. "No change within ±x %": the interval lies inside ±x %
  and the machine's A/A noise floor is no wider than ±x %.
* **direction only** — the whole interval shows at least a third of the study's effect the claimed way, but not
  its size: it lies outside the tolerance (smaller, or larger), or reaches across one of its edges (the size
  open, and what would decide it said); unsized: past the noise floor but not wholly beyond 5 %.
* **contradicted** — the whole interval shows less than a third of the effect: none, or the opposite (0.7 %
  against a claimed 31 % is no reproduction). "No change": the interval lies wholly outside ±x %. An interval
  wholly the other way beyond the noise floor (or, for "no change", wholly outside ±x % and the floor) is
  contradicted before any of the floor's reasons below can make it undetermined: a floor hides a small effect
  the claimed way, not a clear one the other way.
* **undetermined** — the interval reaches from contradicted into another zone (it names both); unsized: from short
  of the noise floor past 5 %; or it covers less than 90 % (too few rounds, see paired.FAST_COVERAGE); or the
  claim's own effect is within this machine's noise floor; or the evidence carries a measurement flag (e.g. a
  speed-up above the physical ceiling, `noise.ceiling_check`).
  Across zones it says what would decide it (`decide`): more rounds, clusters or runs, or nothing on this machine.
* **not comparable** — the claim compares servers whose builds differ in more than the version (compiler,
  optimisation, code-generation flags, assertions, block or WAL segment size, checksums: `builds.difference`):
  the difference is named and our figure kept, but it is not scored (`builds.apply_comparability`).
* **not testable here** — this machine, scale, version set or build cannot test the claim; always with the
  reason and what would make it testable ("needs SF ≥ 10", "needs 16 and 17"). Decided by the study, not by data.
* **not run** — not in this profile.

Counting is per claim, not per server: a claim tested on several servers gets one overall verdict — the
servers' common verdict when all tested servers agree; *mixed* when they decided opposite ways (one supported or
direction only, another contradicted: decisively apart, not noisy); *direction only* when all decided the claimed
way, some within the tolerance and some outside it; else *undetermined*, the per-server breakdown kept. Servers
where it was not comparable, not testable or not run are left out of that; a claim tested nowhere is
*not comparable* (if any server says so), else *not testable here* (if any server says so), else *not run*. Tallies
keep those three apart from the tested claims.
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import polars as pl

from .stats import ratio_digits, ratio_with_interval

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
DIRECTION_ONLY = "direction only"
UNDETERMINED = "undetermined"
NOT_COMPARABLE = "not comparable"
NOT_TESTABLE = "not testable here"
NOT_RUN = "not run"
MIXED = "mixed"
VERDICTS = (SUPPORTED, CONTRADICTED, DIRECTION_ONLY, MIXED, UNDETERMINED, NOT_COMPARABLE, NOT_TESTABLE, NOT_RUN)
TESTED = VERDICTS[:5]
UNTESTED = (NOT_COMPARABLE, NOT_TESTABLE, NOT_RUN)  # kept apart from the tested claims in every count

HIGHER, LOWER, SAME = "higher", "lower", "no change"
MIN_COVERAGE = 0.90  # one cluster's fast mode over 5 rounds covers 89 % (pooled over two: 95 %): below, no verdict
# Each zone edge is a one-sided test at 5 % (two one-sided tests, TOST, for a zone with two edges: Schuirmann 1987),
# so the interval that places our figure in a zone is the 90 % one; the 95 % interval is what the tables show.
DECISION = 0.90


@dataclass(frozen=True)
class Claim:
    """The study's statement. ratio: its magnitude as B over A (None: a direction only). margin: for SAME, the
    "no change within ±x %". tolerance: this claim's own ×/÷ factor where the study's spread justifies one (written
    next to the claim, with why), else the declared TOLERANCE."""

    statement: str
    direction: str
    ratio: float | None = None
    margin: float | None = None
    tolerance: float | None = None  # a claim-specific factor the study's own spread justifies (else TOLERANCE)
    # a scale-free quantity the claim is scored on instead of a ratio, with its unit ("ns per row", "of the overhead
    # removed"): `ratio` is then the study's value of it, 0 meaning no effect, and our value is compared with it
    # in proportion (rule 11: the machine's size and speed cancel out of it where they do not out of a ratio)
    quantity: str | None = None

    def __post_init__(self):
        if self.direction not in (HIGHER, LOWER, SAME):
            raise ValueError(f"direction must be {HIGHER!r}, {LOWER!r} or {SAME!r}, not {self.direction!r}")
        if self.direction == SAME and not (self.margin and self.margin > 0):
            raise ValueError("a 'no change' claim needs its margin (e.g. 0.05 for ±5 %)")
        if self.quantity is not None:
            if self.direction != HIGHER or not (self.ratio and self.ratio > 0):
                raise ValueError(f"a claim on {self.quantity!r} needs the study's positive value, direction higher")
        elif self.ratio is not None and self.direction != SAME and (self.ratio > 1) != (self.direction == HIGHER):
            raise ValueError(f"ratio {self.ratio} does not go in direction {self.direction!r}")


@dataclass(frozen=True)
class Evidence:
    """Our paired ratio (B over A) with its interval, as `paired.paired_compare` gives it; flags: measurement
    problems (e.g. `noise.ceiling_check`), any of which makes the verdict undetermined."""

    ratio: float | None
    low: float | None
    high: float | None
    n_rounds: int = 0
    coverage: float | None = None
    method: str = ""
    flags: tuple[str, ...] = ()
    unit: str = "×"  # a claim's quantity ("ns per row") where the evidence is one, not a ratio
    # what a pooled interval is made of (`between_runs.POOLED_COLUMNS`, log scale), for what would decide an
    # undetermined verdict (`decide`); None where not pooled, or read from the method where built by hand
    n_clusters: int | None = None
    within_low: float | None = None
    within_high: float | None = None
    cluster_sd: float | None = None
    cluster_df: float | None = None
    run_sd: float | None = None
    floor_sd: float | None = None
    floor_df: float | None = None

    @classmethod
    def from_row(cls, row: dict, flags: Sequence[str | None] = ()) -> Evidence:
        """From a `paired.paired_compare` row, or a pooled one with its components (`between_runs.pool_clusters`);
        None flags (checks that passed) are dropped."""
        return cls(
            row["ratio"],
            row["low"],
            row["high"],
            row["n_rounds"],
            row["coverage"],
            row["method"],
            tuple(f for f in flags if f),
            **{c: row.get(c) for c in _PARTS},
        )

    def text(self) -> str:
        """'0.52× [0.48–0.57] (min–max, n=5)' (`stats.ratio_with_interval`, then what the interval is)."""
        if self.ratio is None:
            return "no data"
        if self.unit != "×":
            ends = f" [{self.low:.3g}–{self.high:.3g}]" if self.low is not None and self.high is not None else ""
            return f"{self.ratio:.3g} {self.unit}{ends} ({self.method})"
        return f"{ratio_with_interval(self.ratio, self.low, self.high)} ({self.method})"


_PARTS = ("n_clusters", "within_low", "within_high", "cluster_sd", "cluster_df", "run_sd", "floor_sd", "floor_df")


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str
    needs: str | None = None  # what would make the claim testable / decidable here

    def text(self) -> str:
        return self.reason + (f" ({self.needs})" if self.needs else "")


def not_testable(reason: str, needs: str) -> Verdict:
    """The claim cannot be tested on this machine, scale, version set or build: say why and what would do."""
    if not reason.strip() or not needs.strip():
        raise ValueError("'not testable here' needs both a reason and what would make it testable")
    return Verdict(NOT_TESTABLE, reason, needs)


def not_run(reason: str = "not in this profile") -> Verdict:
    return Verdict(NOT_RUN, reason)


def _pct(log_x: float) -> str:
    return f"±{math.expm1(log_x):.1%}".replace("%", " %")


def decision_scale(coverage: float | None) -> float:
    """How much narrower than an interval covering `coverage` (two-sided, about our figure on the log scale) the
    DECISION interval is: z(0.95) / z((1 + coverage) / 2), 0.84 for a 95 % interval; 1 at or below DECISION. A
    coverage above 95 % is read as 95 % (never narrowed more than 0.84): a min–max of many rounds covers 99 % of
    the median by order statistics, not by a normal width, and a pooled row's 97-98 % is a simulated figure. For a
    t interval with few df the true ratio is smaller (0.77 at df 4): the normal one errs on the wide side."""
    from statistics import NormalDist

    c = coverage or 0.0
    if c <= DECISION:
        return 1.0
    z = NormalDist().inv_cdf
    return z(0.5 + DECISION / 2) / z(0.5 + min(c, 0.95) / 2)


def _decision(ev: Evidence) -> tuple[float | None, float | None, float]:
    """(low, high, scale): `decision_interval` and the scale it applied (1: the interval kept as it is)."""
    s = decision_scale(ev.coverage)
    if s >= 1 or not (ev.ratio and ev.low and ev.high and 0 < ev.low <= ev.ratio <= ev.high):
        return ev.low, ev.high, 1.0
    m = math.log(ev.ratio)
    return math.exp(m - s * (m - math.log(ev.low))), math.exp(m + s * (math.log(ev.high) - m)), s


def decision_interval(ev: Evidence) -> tuple[float | None, float | None]:
    """(low, high) of `ev` as the verdict reads it: each end moved toward our figure by `decision_scale` on the
    log scale (an interval that does not hold our figure, or has no positive ends, is kept as it is)."""
    lo, hi, _ = _decision(ev)
    return lo, hi


def _ours(ev: Evidence) -> tuple[str, float, float]:
    """'our 0.52× [0.48–0.57] (min–max, n=5; 0.49–0.56 at 90 %, which decides)' and the decision interval."""
    lo, hi = decision_interval(ev)
    text = f"our {ev.text()}"
    if (lo, hi) != (ev.low, ev.high):  # decimals enough for the ends that decide (which side of 1.00 they lie)
        spec = ".3g" if ev.unit != "×" else f".{max(ratio_digits(ev.low, ev.high), ratio_digits(lo, hi))}f"
        text = text[:-1] + f"; {lo:{spec}}–{hi:{spec}} at {DECISION:.0%}, which decides)".replace("%", " %")
    return text, lo, hi


def _checks(ev: Evidence) -> Verdict | None:
    """What keeps any evidence from a verdict: flags, no data, no interval, no positive ratio, too few rounds."""
    if ev.flags:
        return Verdict(UNDETERMINED, "measurement problem: " + "; ".join(ev.flags))
    if ev.ratio is None:
        return Verdict(UNDETERMINED, "no paired rounds")
    if ev.low is None or ev.high is None:
        return Verdict(UNDETERMINED, f"no interval ({ev.method})", "needs more rounds (an interval covering ≥ 90 %)")
    if not (ev.ratio > 0 and ev.low > 0 and ev.high > 0):  # a zero time or tps: a failed run, not an effect
        return Verdict(UNDETERMINED, f"no positive ratio to judge ({ev.text()})")
    if (ev.coverage or 0) < MIN_COVERAGE:
        return Verdict(
            UNDETERMINED,
            f"{ev.method} covers only " + f"{ev.coverage:.0%}".replace("%", " %"),
            "needs more rounds (an interval covering ≥ 90 %)",
        )
    return None


def _no_change(claim: Claim, ev: Evidence, floor: float) -> Verdict:
    """A claim the source states as no change within ±x %."""
    ours, d_lo, d_hi = _ours(ev)
    lo, hi = sorted((math.log(d_lo), math.log(d_hi)))
    small = abs(math.log(ev.ratio)) < floor
    m = math.log1p(claim.margin)
    if hi < -max(m, floor) or lo > max(m, floor):  # a change beyond the floor too: decided before the floor's gate
        beyond = f" and the noise floor {_pct(floor)}" if floor > m else ""
        return Verdict(CONTRADICTED, f"{ours} lies wholly outside {_pct(m)}{beyond}")
    if floor > m:
        return Verdict(
            UNDETERMINED,
            f"{ours}: the noise floor {_pct(floor)} is wider than the claim's {_pct(m)}",
            "a quieter machine or a steadier measurement",
        )
    if -m <= lo and hi <= m:
        return Verdict(SUPPORTED, f"{ours} lies within {_pct(m)}")
    if small:
        return Verdict(UNDETERMINED, f"{ours}: the effect is below the noise floor {_pct(floor)}")
    x = math.log(ev.ratio)
    return Verdict(UNDETERMINED, f"{ours} reaches beyond {_pct(m)}", decide(ev, x, lo, hi, (-m, m), _shown(1)))


# -- the declared tolerance (issue 29): a faithful reproduction reads supported, a near-null contradicted ------------
#
# Decided before the runs that will test it, never fitted to them. On the log scale of the effect, oriented so that
# the claimed direction is positive (e = |log(study's ratio)|, ours = our oriented log ratio):
#   supported       e / TOLERANCE <= ours <= e * TOLERANCE   (×/÷ 1.5: 0.75× claimed, 0.65×-0.83× supported)
#   direction only  e * THIRD <= ours < e / TOLERANCE, or ours > e * TOLERANCE   (right way, other size)
#   contradicted    ours < e * THIRD   (less than a third of the effect: none, or the opposite)
# Direction only is two zones, a smaller effect and a larger one, with supported between them. Supported and
# contradicted need the whole interval in their zone. An interval wholly past a third but across a size edge reads
# direction only: the claimed way is shown by the edge at a third (a one-sided test like every edge), the size is
# not, and it names the zones it reaches across and what would decide the size (7 Dec: runs of one boot flipped
# between supported and undetermined on such edges, and what they shared, the direction, went unsaid; the runs
# after it test it). An interval reaching below a third is undetermined, naming the zones.
# A claim without a size ("JIT helps") needs a noticeable effect: supported when the whole interval is beyond
# UNSIZED_MIN (and the noise floor); direction only when it is past the floor but not wholly beyond UNSIZED_MIN;
# contradicted when it is wholly below UNSIZED_MIN and not past the floor (no noticeable effect, or the opposite);
# undetermined where the floor itself is wider than UNSIZED_MIN (a noticeable effect would drown in it). A sized
# claim whose own effect is within the noise floor cannot be told from noise here: undetermined. "No change within
# ±x %" (only where the source says there is none): inside ±x % with a floor no wider, or wholly outside it.
# Checked first, before any of the floor's gates: an interval wholly the other way beyond the floor (no change:
# wholly outside ±x % and the floor) is contradicted, since the floor hides small effects, not clear opposite ones.
TOLERANCE = 1.5
THIRD = 1 / 3
UNSIZED_MIN = 0.05  # 5 %: below it a DBA would not notice the effect a study only says exists


def _zone(x: float, e: float, tol: float) -> str:
    if x < e * THIRD:
        return CONTRADICTED
    if e / tol <= x <= e * tol:
        return SUPPORTED
    return DIRECTION_ONLY


def _same_zone(lo: float, hi: float, e: float, tol: float) -> str | None:
    """The one zone an interval (oriented: lo <= hi) lies in, else None. Direction only is two zones, a smaller
    and a larger effect than the tolerance: an interval from one to the other reaches across supported."""
    z_lo, z_hi = _zone(lo, e, tol), _zone(hi, e, tol)
    if z_lo != z_hi or (z_lo == DIRECTION_ONLY and lo < e / tol < e * tol < hi):
        return None
    return z_lo


_ZONES = (CONTRADICTED, f"{DIRECTION_ONLY} (smaller)", SUPPORTED, f"{DIRECTION_ONLY} (larger)")  # in effect order


def _zone_index(x: float, e: float, tol: float) -> int:
    z = _zone(x, e, tol)
    return _ZONES.index(z) if z != DIRECTION_ONLY else (1 if x < e / tol else 3)


def _across(lo: float, hi: float, e: float, tol: float) -> str:
    """'from direction only (smaller) to supported', 'from contradicted across direction only (smaller) and
    supported to direction only (larger)': the zones an interval reaches across, the smaller end first."""
    a, b = _zone_index(lo, e, tol), _zone_index(hi, e, tol)
    inner = _ZONES[a + 1 : b]
    return f"from {_ZONES[a]}" + (f" across {' and '.join(inner)}" if inner else "") + f" to {_ZONES[b]}"


SIZE_OPEN = "its size: "  # before what would decide a direction-only verdict whose size the interval leaves open


def _across_edges(ours: str, lo: float, hi: float, e: float, tol: float, study: str, band: str, hint: str) -> Verdict:
    """An interval (oriented) across a zone's edge: direction only where it stays wholly past a third (the claimed
    way shown, its size open, and what would decide the size), else undetermined, naming the zones it spans."""
    if lo >= e * THIRD:
        return Verdict(
            DIRECTION_ONLY,
            f"{ours} shows at least a third of the effect of {study} the claimed way, but not its size within "
            f"×/÷{tol:g} ({band}): it reaches {_across(lo, hi, e, tol)}",
            SIZE_OPEN + hint,
        )
    return Verdict(UNDETERMINED, f"{ours} reaches {_across(lo, hi, e, tol)} against {study} ({band})", hint)


def verdict(
    claim: Claim, evidence: Evidence, noise_floor: float | None = None, tolerance: float = TOLERANCE
) -> Verdict:
    """The one rule (module docstring, comment above). noise_floor: relative, e.g. 0.04 (`noise.noise_floor`)."""
    ev = evidence
    if (stop := _checks(ev)) is not None:
        return stop
    if claim.quantity is not None:
        return _on_quantity(claim, ev, tolerance)
    floor = math.log1p(noise_floor) if noise_floor else 0.0
    if claim.direction == SAME:
        return _no_change(claim, ev, floor)
    sign = -1.0 if claim.direction == LOWER else 1.0
    ours, d_lo, d_hi = _ours(ev)
    lo, hi = sorted((sign * math.log(d_lo), sign * math.log(d_hi)))
    if hi < -floor:  # the other way, beyond the floor: decisive before the floor's "no test here" (issue 57)
        study = f" of the study's {claim.ratio:.2f}×" if claim.ratio is not None else f": not {claim.direction}"
        beyond = f", beyond the noise floor {_pct(floor)}" if floor else ""
        return Verdict(CONTRADICTED, f"{ours} shows the opposite{study}{beyond}")
    if claim.ratio is None:
        need = math.log1p(UNSIZED_MIN)
        if lo > max(need, floor):
            return Verdict(SUPPORTED, f"{ours} is {claim.direction} by more than {_pct(max(need, floor))}")
        if floor > need:  # a noticeable effect would drown here: no test either way
            return Verdict(
                UNDETERMINED,
                f"{ours}: the noise floor {_pct(floor)} is wider than a noticeable {_pct(need)}",
                "a quieter machine or a steadier measurement",
            )
        if hi < need and lo > floor:
            return Verdict(
                DIRECTION_ONLY, f"{ours} is {claim.direction}, but by less than {_pct(need)}: too small to notice"
            )
        if hi < 0:
            return Verdict(CONTRADICTED, f"{ours} shows the opposite: not {claim.direction}")
        if hi < need:
            return Verdict(
                CONTRADICTED,
                f"{ours} shows no noticeable effect {claim.direction} (less than "
                f"{_pct(need)}, not past the noise floor {_pct(floor)})",
            )
        hint = decide(ev, sign * math.log(ev.ratio), lo, hi, (need,), _shown(sign))
        if lo > floor:  # past the floor (>= 0) the claimed way: the direction is shown, its size is not
            return Verdict(
                DIRECTION_ONLY,
                f"{ours} is {claim.direction} past the noise floor {_pct(floor)}, but not shown to be by a noticeable "
                f"{_pct(need)}: it reaches across it",
                SIZE_OPEN + hint,
            )
        return Verdict(UNDETERMINED, f"{ours} reaches across a noticeable {_pct(need)}", hint)
    e = abs(math.log(claim.ratio))
    tolerance = claim.tolerance or tolerance
    study = f"the study's {claim.ratio:.2f}×"
    if e <= floor:
        return Verdict(
            UNDETERMINED,
            f"{ours}, but {study} is within this machine's noise floor {_pct(floor)}: no test here",
            "a quieter machine, or a larger effect",
        )
    z_lo = _same_zone(lo, hi, e, tolerance)
    edges = sorted((math.exp(sign * e / tolerance), math.exp(sign * e * tolerance)))
    band = f"{edges[0]:.2f}×–{edges[1]:.2f}×"
    if z_lo is not None:
        size = "a larger" if lo > e else "a smaller"
        what = {
            SUPPORTED: f"lies within ×/÷{tolerance:g} of {study} ({band})",
            DIRECTION_ONLY: f"is {claim.direction}, but {size} effect than ×/÷{tolerance:g} of {study} ({band})",
            CONTRADICTED: f"shows the opposite of {study}"
            if hi < 0
            else f"shows less than a third of the effect of {study}",
        }[z_lo]
        return Verdict(z_lo, f"{ours} {what}")
    edges = (e * THIRD, e / tolerance, e * tolerance)
    hint = decide(ev, sign * math.log(ev.ratio), lo, hi, edges, _shown(sign))
    return _across_edges(ours, lo, hi, e, tolerance, study, band, hint)


# -- the claim's regime (methodology rule 11): scored only at a size where its mechanism works as in the study -----


@dataclass(frozen=True)
class Regime:
    """Where a study's claims can be tested: the findings whose id matches one of `findings` (fnmatch patterns)
    need `quantity` (read as the largest value of `table`.`column` of the run, per server where the table has a
    server column) of at least `minimum`. Declared with the study (`Study.regimes`), before the runs that test it;
    below it the claim reads *not testable here*, saying why (`why`) and what would make it testable. `met_by`
    (table, column, values): what the run measured that answers `why` at any size, e.g. the SSB JIT claims' modes
    with inlining and optimisation forced and the compile time subtracted; a server whose rows of that table hold
    one of those values is within the regime."""

    findings: tuple[str, ...]
    table: str
    column: str
    minimum: float
    quantity: str  # how to say it: "SF", "rows"
    why: str
    met_by: tuple[str, str, tuple[str, ...]] | None = None

    def met(self, tables) -> set[str]:
        """The servers `met_by` puts within the regime whatever their size ("all": some server of the run)."""
        if self.met_by is None or self.met_by[0] not in tables:
            return set()
        table, column, values = self.met_by
        t = tables[table]
        if column not in t.columns or "server" not in t.columns:
            return set()
        servers = set(t.filter(pl.col(column).is_in(list(values)))["server"].cast(pl.String))
        return servers | ({"all"} if servers else set())

    def sizes(self, tables) -> dict[str, float]:
        """The run's size per server ("all": the whole run's), from the derived tables; {} where not recorded."""
        if self.table not in tables:
            return {}
        t = tables[self.table]
        if self.column not in t.columns:
            return {}
        t = t.filter(pl.col(self.column).is_not_null()).with_columns(pl.col(self.column).cast(pl.Float64))
        if t.is_empty():
            return {}
        out = {"all": float(t[self.column].max())}
        if "server" in t.columns:
            out |= {s: float(g[self.column].max()) for (s,), g in t.group_by("server")}
        return out

    def covers(self, finding: str) -> bool:
        return any(fnmatch.fnmatchcase(finding, f) for f in self.findings)


def _size_text(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:g}"


def apply_regimes(findings: pl.DataFrame, regimes: Sequence[Regime], tables) -> pl.DataFrame:
    """Findings with every tested row measured below its claim's regime turned *not testable here* (why, and
    the size it needs). Rows not run stay as they are; a row whose size is not recorded is left to the study."""
    if findings.is_empty() or not regimes:
        return findings
    sized = [(r, r.sizes(tables), r.met(tables)) for r in regimes]
    rows = []
    for row in findings.iter_rows(named=True):
        for r, sizes, met in sized:
            size = sizes.get(row["server"], sizes.get("all"))
            if row["verdict"] == NOT_RUN or size is None or not r.covers(row["finding"]) or size >= r.minimum:
                continue
            if row["server"] in met or (row["server"] not in sizes and "all" in met):
                continue
            need = f"needs {r.quantity} ≥ {_size_text(r.minimum)}"
            was = f" What it gave there: {row['verdict']}, {row['evidence'][:1].lower()}{row['evidence'][1:]}"
            v = not_testable(f"measured at {r.quantity} {_size_text(size)}: {r.why}.{was}", need)
            row = row | {
                "verdict": v.label,
                "evidence": v.text()[:1].upper() + v.text()[1:],
                "our_value": None,
                "our_low": None,
                "our_high": None,
                "interval": None,
            }
            break
        rows.append(row)
    return pl.from_dicts(rows, schema=findings.schema)


def _on_quantity(claim: Claim, ev: Evidence, tolerance: float) -> Verdict:
    """The same zones on a scale-free quantity, in proportion to the study's value (0 = no effect): within
    ×/÷ tolerance supported, at least a third direction only, below that contradicted. The A/A floor is a ratio's
    and does not apply: the quantity's own interval carries its noise."""
    e, tol = claim.ratio, claim.tolerance or tolerance
    ours, d_lo, d_hi = _ours(ev)
    lo, hi = sorted((d_lo, d_hi))
    z_lo = _same_zone(lo, hi, e, tol)
    study = f"the study's {e:.3g} {claim.quantity}"
    band = f"{e / tol:.3g}–{e * tol:.3g}"
    if z_lo is not None:
        what = {
            SUPPORTED: f"lies within ×/÷{tol:g} of {study} ({band})",
            DIRECTION_ONLY: f"is {'larger' if lo > e else 'smaller'} than ×/÷{tol:g} of {study} ({band})",
            CONTRADICTED: f"is less than a third of {study}",
        }[z_lo]
        return Verdict(z_lo, f"{ours} {what}")
    # on the quantity's log (positive here: `_checks`), where its pooled interval's components are
    edges = tuple(math.log(z) for z in (e * THIRD, e / tol, e * tol))
    hint = decide(ev, math.log(ev.ratio), math.log(lo), math.log(hi), edges, _shown(1, claim.quantity or ""))
    return _across_edges(ours, lo, hi, e, tol, study, band, hint)


# -- what would decide an undetermined verdict (methodology rule 16) ------------------------------------------------
#
# An interval across a zone's edge is decided when it is narrower than the distance from our figure to that edge.
# Which measurement narrows it depends on what the interval is made of: the rounds' spread (more rounds per
# cluster), the clusters' disagreement (more clusters per server: that also pools more rounds), or what moves every
# cluster of a run alike, the re-run floor and a declared between-run sd (no number of rounds or clusters in one run
# narrows those: only runs pooled). Counted from the evidence's components on the log scale, a spread shrinking as
# 1 / sqrt(count) (for a min–max of a few rounds that overstates the rounds needed: a bootstrap takes over at 10),
# and priced with what the study's stage took in the run being judged (`costs`).
MAX_RUNS = 10  # beyond this many runs of a stage pooled, nothing on this machine decides the claim in practice
EDGE = 10  # an interval that would have to be over 10× narrower: our figure sits on its zone's edge


@dataclass(frozen=True)
class StageCost:
    """What the study's stage took in the run being judged: its wall time (loads and setup included, so a round's
    or a cluster's share of it overstates what one more costs), rounds per cluster, clusters per server."""

    minutes: float
    rounds: int
    clusters: int = 1


_COST: ContextVar[StageCost | None] = ContextVar("pglab_stage_cost", default=None)


@contextlib.contextmanager
def costs(cost: StageCost | None) -> Iterator[StageCost | None]:
    """Judge with the stage's cost (`stage_cost`), so that what would decide a verdict says its minutes; without
    one it gives the counts only. Nested uses restore the outer one."""
    token = _COST.set(cost)
    try:
        yield cost
    finally:
        _COST.reset(token)


def stage_cost(tables, study: str) -> StageCost | None:
    """The cost of a study's stage from what the run stored: the wall time of every attempt at it
    (`<study>_machine`, `system_sampler.stage_table`: its last sample's t_s), rounds per cluster (the median over
    its servers and designs of their rounds after warm-up, `<study>_measurements`) and clusters per server (its
    servers' names, `replicas.base_names`). None where either table is missing (an old run, a stage not run)."""
    from ..replicas import base_names

    machine, meas = tables.get(f"{study}_machine"), tables.get(f"{study}_measurements")
    if machine is None or meas is None or machine.is_empty() or not {"attempt", "t_s"} <= set(machine.columns):
        return None
    minutes = float(machine.group_by("attempt").agg(pl.col("t_s").max())["t_s"].sum()) / 60
    rounds = meas.filter(pl.col("round").is_not_null())
    if "warmup" in rounds.columns:
        rounds = rounds.filter(~pl.col("warmup").cast(pl.Boolean).fill_null(False))
    if rounds.is_empty() or minutes <= 0:
        return None
    by = [c for c in ("server", "experiment") if c in rounds.columns]
    per = rounds.group_by(by).agg(pl.col("round").n_unique())["round"]
    clusters = max(Counter(base_names(meas["server"].unique().sort().to_list()).values()).values())
    return StageCost(minutes, max(1, math.ceil(float(per.median()))), clusters)


# what pool_clusters writes into a pooled row's method, read where evidence was built by hand from a pooled row
_CLUSTER_TEXT = re.compile(r"between-cluster sd (?:of the quantities )?([\d.]+) %(?: \(df (\d+))?")
_RUN_TEXT = re.compile(r"between-run sd ([\d.]+) %")
_FLOOR_TEXT = re.compile(r"spread over \d+ archived runs \(sd ([\d.]+) %\)")


@dataclass(frozen=True)
class _Parts:
    """An interval's half-width (log scale) by what narrows it."""

    clusters: int  # per server; 1: not pooled, the rounds' interval alone
    rounds: int  # per cluster
    within: float  # the rounds' half-width
    cluster: float = 0.0  # the between-cluster term's
    run: float = 0.0  # the between-run sd's: every cluster of a run alike
    floor: float = 0.0  # the re-run floor's (an interval is at least this wide)


def _t95(df: float | None) -> float:
    from scipy import stats  # here: only an undetermined verdict needs it

    return float(stats.t.ppf(0.975, df)) if df and df >= 1 else 1.96


def _parts(ev: Evidence, half: float) -> _Parts:
    """The components of an interval of half-width `half`, from the evidence's own fields or, for evidence built by
    hand from a pooled row, from its method (`between_runs.pool_clusters` writes both)."""
    from .between_runs import pooled_basis

    method = ev.method or ""
    basis = pooled_basis(method)
    k = ev.n_clusters or (basis[0] if basis else 1)
    if k < 2:
        return _Parts(1, ev.n_rounds or 0, half)
    n = round(ev.n_rounds / k) if ev.n_rounds else (basis[1] if basis else 0)
    c, r, f = _CLUSTER_TEXT.search(method), _RUN_TEXT.search(method), _FLOOR_TEXT.search(method)
    sd_c = ev.cluster_sd if ev.cluster_sd is not None else (float(c[1]) / 100 if c else 0.0)
    df_c = ev.cluster_df if ev.cluster_df is not None else (float(c[2]) if c and c[2] else None)
    sd_r = ev.run_sd if ev.run_sd is not None else (float(r[1]) / 100 if r else 0.0)
    sd_f = ev.floor_sd if ev.floor_sd is not None else (float(f[1]) / 100 if f else 0.0)
    t_c = _t95(df_c)
    cluster, run, floor = t_c * sd_c / math.sqrt(k), t_c * sd_r, _t95(ev.floor_df) * sd_f
    if floor >= (1 - 1e-9 if ev.floor_sd is not None else 0.95) * half:  # the floor set it (a method's sd: rounded)
        return _Parts(k, n, 0.0, cluster, run, max(floor, half))
    within = None
    if ev.within_low and ev.within_high and ev.within_low > 0:
        within = (math.log(ev.within_high) - math.log(ev.within_low)) / 2
    if within is None:  # the rounds' share is what the other terms leave of the interval
        return _Parts(k, n, math.sqrt(max(half**2 - cluster**2 - run**2, 0.0)), cluster, run, floor)
    # the pooled interval's t (Welch–Satterthwaite, capped at the clusters' df) is one for all three terms: scale
    # them to the interval's own width
    g = half / math.sqrt(within**2 + cluster**2 + run**2) if within or cluster or run else 1.0
    return _Parts(k, n, g * within, g * cluster, g * run, floor)


def _small_pct(log_x: float) -> str:
    """_pct, with two significant digits below 1 % (near a zone's edge '±0.0 %' would say nothing)."""
    return _pct(log_x) if log_x >= 0.01 else f"±{100 * math.expm1(log_x):.2g} %"


def _minutes(m: float | None) -> str:
    if m is None:
        return ""
    return f", ≈ {m / 60:.1f} h more" if m >= 120 else f", ≈ {max(m, 1):.0f} min more"


def _shown(sign: float, unit: str = "×"):
    """An oriented log value as the reader sees it: '0.83×', '10.5 ns per row'."""
    return lambda z: f"{math.exp(sign * z):.3g}" + (unit if unit == "×" else f" {unit}")


def decide(ev: Evidence, x: float, lo: float, hi: float, edges: Sequence[float], shown) -> str:
    """What would decide an undetermined verdict whose DECISION interval [lo, hi] (`decision_interval`) around our
    figure x (oriented, log scale) reaches past an edge of x's zone (`edges`, same scale): more rounds, more
    clusters or more runs, with about how many and the minutes (`costs`), or that nothing on this machine decides
    it. `shown` writes a value of that scale as the reader sees it."""
    below = max((z for z in edges if z <= x), default=-math.inf)
    above = min((z for z in edges if z > x), default=math.inf)
    sides = ([(x - lo, x - below, below)] if lo < below else []) + ([(hi - x, above - x, above)] if hi > above else [])
    if not sides:
        return "a narrower interval"
    half, need, edge = max(sides, key=lambda s: s[0] / max(s[1], 1e-12))
    # [lo, hi] is the DECISION interval: what narrows it is counted on the interval it came from, so both the
    # half-width and the distance it must come within are taken back to that interval's scale
    scale = _decision(ev)[2]
    half, need = half / scale, need / scale
    f2 = (half / need) ** 2  # how many times the measurement the interval needs, however it is made
    p, cost = _parts(ev, half), _COST.get()
    level = max(p.floor, p.run)
    if level >= need:  # what moves a whole run is wider than the claim allows: only runs pooled narrow it
        spread, wanted = f"its re-run spread {_pct(level)}", f"the {_small_pct(need)} the claim needs"
        floor_runs, runs = max(2, math.ceil((level / need) ** 2 - 1e-9)), max(2, math.ceil(f2 - 1e-9))
        if floor_runs > MAX_RUNS:
            return (
                f"nothing on this machine decides it: {spread} would need over {MAX_RUNS} runs pooled to come "
                f"within {wanted}"
            )
        if runs > MAX_RUNS:  # too many runs as measured, but the floor's few would do with more rounds in each
            more = _minutes((floor_runs - 1) * cost.minutes if cost else None).replace("≈", "at least ≈")
            return (
                f"more runs, each with more rounds or clusters: {spread} alone needs about {floor_runs} runs pooled "
                f"to come within {wanted}{more}"
            )
        more = _minutes((runs - 1) * cost.minutes if cost else None)
        return f"more runs: about {runs} runs of this stage pooled{more}; {spread} is wider than {wanted}"
    if need * EDGE <= half:  # over 100 times the rounds or clusters: the figure is as good as on the edge
        return (
            f"nothing can be promised: our {shown(x)} is too near its zone's edge at {shown(edge)}, the interval "
            f"would have to be over {EDGE}× narrower"
        )
    budget = need**2 - p.run**2  # for the rounds' and the clusters' terms together
    k, n = p.clusters, p.rounds
    rounds = math.ceil(n * p.within**2 / (budget - p.cluster**2)) if p.cluster**2 < budget and n else None
    clusters = math.ceil(k * (p.within**2 + p.cluster**2) / budget) if k > 1 else None
    if rounds is not None and (clusters is None or (rounds - n) / n <= (clusters - k) / k):
        rounds = max(rounds, n + 1)
        more = _minutes((rounds - n) * cost.minutes / cost.rounds if cost else None)
        per = " per cluster" if k > 1 else ""
        return f"more rounds: about {rounds}{per} instead of {n}{more}"
    if clusters is not None:
        clusters = max(clusters, k + 1)
        more = _minutes((clusters - k) * cost.minutes / cost.clusters if cost else None)
        return f"more clusters: about {clusters} per server instead of {k}{more}"
    return f"more rounds: about {math.ceil(f2)} times as many"  # no round count recorded


# -- one verdict per claim, and the tallies ---------------------------------------------------------------------------


def overall(verdicts: Sequence[str]) -> str:
    """One claim's verdict over its servers: theirs when the tested servers agree; *mixed* when two of them decided
    opposite ways (one supported or direction only, another contradicted: decisively apart, not noisy); *direction
    only* when every one decided the claimed way, some within the tolerance and some not (the direction holds on
    all of them, the size on some: what they share); else undetermined (one of them could not tell). Tested
    nowhere: not comparable if any server says so (a figure was measured, between builds that differ), else not
    testable here if any server says so, else not run."""
    tested = [v for v in verdicts if v not in UNTESTED]
    if not tested:
        return next((u for u in UNTESTED if u in verdicts), NOT_RUN)
    kinds = set(tested)
    if len(kinds) == 1:
        return kinds.pop()
    if CONTRADICTED in kinds and kinds & {SUPPORTED, DIRECTION_ONLY}:
        return MIXED
    if kinds == {SUPPORTED, DIRECTION_ONLY}:
        return DIRECTION_ONLY
    return UNDETERMINED


def claim_verdicts(findings: pl.DataFrame) -> pl.DataFrame:
    """Findings rows (study, finding, server, verdict) to one row per claim: study, finding, verdict (overall),
    servers (how many), breakdown ("pg15: supported; pg18: contradicted")."""
    rows = []
    for (study, finding), g in findings.sort("study", "finding", "server").group_by(
        "study", "finding", maintain_order=True
    ):
        vs = g["verdict"].to_list()
        rows.append(
            {
                "study": study,
                "finding": finding,
                "verdict": overall(vs),
                "servers": g.height,
                "breakdown": "; ".join(f"{s}: {v}" for s, v in zip(g["server"], vs, strict=True)),
            }
        )
    schema = {
        "study": pl.String,
        "finding": pl.String,
        "verdict": pl.String,
        "servers": pl.Int64,
        "breakdown": pl.String,
    }
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def tally(claims: pl.DataFrame) -> pl.DataFrame:
    """Per study and overall ("all"): tested (claims with one of the four tested verdicts), then the count of
    each verdict in VERDICTS order; not comparable, not testable here and not run are never part of `tested`."""

    def counts(study: str, g: pl.DataFrame) -> dict:
        vs = g["verdict"].to_list()
        return {"study": study, "tested": sum(v in TESTED for v in vs), **{v: vs.count(v) for v in VERDICTS}}

    unknown = sorted(set(claims["verdict"]) - set(VERDICTS))
    if unknown:  # a study still on the old vocabulary would silently drop out of the counts
        raise ValueError(f"verdicts {unknown} are not among {VERDICTS}")
    rows = [counts(s, g) for (s,), g in claims.sort("study").group_by("study", maintain_order=True)]
    rows.append(counts("all", claims))
    return pl.from_dicts(rows, schema={"study": pl.String, "tested": pl.Int64, **{v: pl.Int64 for v in VERDICTS}})


def finding_row(
    study: str, finding: str, claim: Claim, server: str, v: Verdict, evidence: Evidence | None = None
) -> dict:
    """A row in `pglab.core.stats.findings`' shape: the claim's statement, the verdict, its reason (with what it needs),
    and the numbers behind it (the study's ratio, ours with its interval) for the report's summary chart; on a
    claim's quantity the study's value in its unit, ours in the evidence's words (off the ratio strip)."""
    e = evidence or Evidence(None, None, None)
    if claim.quantity is not None:  # not a ratio: kept out of the summary's ratio strip, given in the evidence text
        e = Evidence(None, None, None, method=e.method)
    return {
        "study": study,
        "finding": finding,
        "claim": claim.statement,
        "server": server,
        "verdict": v.label,
        "evidence": v.text()[:1].upper() + v.text()[1:],
        "study_value": claim.ratio,  # a quantity's in its unit (the summary's "theirs": "15.7 ns per row")
        "our_value": e.ratio,
        "our_low": e.low,
        "our_high": e.high,
        "interval": e.method or None,
        "unit": claim.quantity or ("×" if claim.ratio is not None else None),
    }

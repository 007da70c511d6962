"""The shape every study's findings take in the report: one row per (study, finding, server), the source
study's claim beside our evidence (numbers with their 95 % interval) and a verdict from a fixed vocabulary."""

from __future__ import annotations

import polars as pl

from . import verdicts as _v
from .stats import ratio_with_interval

# the one vocabulary of pglab.core.stats.verdicts (docs/verdicts.md)
SUPPORTED, CONTRADICTED, DIRECTION_ONLY = _v.SUPPORTED, _v.CONTRADICTED, _v.DIRECTION_ONLY
UNDETERMINED, NOT_TESTABLE, NOT_RUN = _v.UNDETERMINED, _v.NOT_TESTABLE, _v.NOT_RUN
NOT_COMPARABLE = _v.NOT_COMPARABLE
VERDICTS = _v.VERDICTS

SCHEMA = {
    "study": pl.String,  # "S1" … "S5", the studies of docs/studies.md
    "finding": pl.String,  # short key, e.g. "q4.3_workers"
    "claim": pl.String,  # what the source study reported, in words and numbers
    "server": pl.String,  # our server, or "all"
    "verdict": pl.String,  # one of VERDICTS
    "evidence": pl.String,  # our sentence, computed from the data, with its uncertainty
}
# the numbers behind a verdict, for the report's summary chart (the study's figure beside ours); null where
# the claim has no magnitude, or nothing was measured. Same scale for both: the claim's ratio B / A, or where the
# claim is on a scale-free quantity (`Claim.quantity`) the study's value of it in `unit`, ours then in the
# evidence's words only (a quantity is no ratio: it stays off the summary's ratio strip).
NUMBERS = {
    "study_value": pl.Float64,  # the study's figure (Claim.ratio)
    "our_value": pl.Float64,  # our estimate (Evidence.ratio)
    "our_low": pl.Float64,  # our interval
    "our_high": pl.Float64,
    "interval": pl.String,  # what the interval is: "95 % bootstrap over 12 rounds", "min–max, n=5"
    "unit": pl.String,  # study_value's: "×" (null: the same, a row written before this column) or "ns per row"
}


def value_text(value: float | None, unit: str | None) -> str | None:
    """A figure of the findings in its unit: "0.75×" for a ratio (also where unit is null), "15.7 ns per row" for a
    quantity; None where there is no figure."""
    if value is None:
        return None
    if unit in (None, "×"):
        return ratio_with_interval(value)
    return f"{value:.3g} {unit}"


def on_ratio_scale(unit: str | None) -> bool:
    """Whether a row's figures belong on the summary's ratio strip (a ratio, not a quantity such as ns per row)."""
    return unit in (None, "×")


def table(rows: list[dict]) -> pl.DataFrame:
    """Findings as a polars table with SCHEMA (and NUMBERS, null where a row has none), checked, in a stable
    order."""
    schema = SCHEMA | NUMBERS
    df = pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    bad = sorted(set(df["verdict"]) - set(VERDICTS))
    if bad:
        raise ValueError(f"findings: verdicts {bad} are not among {VERDICTS}")
    missing = df.select(list(SCHEMA)).filter(pl.any_horizontal(pl.all().is_null()))
    if not missing.is_empty():
        raise ValueError(f"findings: rows with empty fields: {missing.to_dicts()}")
    return df.sort("study", "finding", "server", maintain_order=True)


def markdown(f: pl.DataFrame) -> str:
    """Findings for reading: each claim of the study once, then per server our verdict and evidence."""
    out = []
    for (finding, claim), g in f.group_by("finding", "claim", maintain_order=True):
        out.append(f"**{claim}** *(source study; finding `{finding}`)*\n")
        out += [f"- {r['server']}: **{r['verdict']}**. {r['evidence']}" for r in g.iter_rows(named=True)]
        out.append("")
    return "\n".join(out) if out else "*No findings.*"


# -- plain sentences for the report's first screen (each study's report.answers) -------------------------------------


def measured(f: pl.DataFrame, finding: str) -> list[dict]:
    """The rows of `finding` that carry our figure (tested, with a value), in server order."""
    if f.is_empty():
        return []
    return f.filter(pl.col("finding") == finding, pl.col("our_value").is_not_null()).sort("server").to_dicts()


def change(ratio: float, up: str = "slower", down: str = "faster", same: str = "no different") -> str:
    """A time ratio in words: 0.97 -> '3 % faster', 1.53 -> '53 % slower', 2.4 -> '2.4× slower'."""
    if abs(ratio - 1) < 0.005:
        return same
    if ratio >= 2 or ratio <= 0.5:
        return f"{max(ratio, 1 / ratio):.1f}× {up if ratio > 1 else down}"
    return f"{abs(ratio - 1):.0%} {up if ratio > 1 else down}".replace("%", " %")


def holds_one(r: dict) -> bool:
    """Whether a finding's interval holds 1 (no change); False without an interval."""
    lo, hi = r.get("our_low"), r.get("our_high")
    return lo is not None and hi is not None and lo <= 1 <= hi


def shown(r: dict, up: str = "slower", down: str = "faster") -> str:
    """A finding's figure in words where its interval shows a change ('17 % faster'); where the interval holds 1,
    'no clear change (0.92× [0.77–1.08])': a first-screen sentence must not read a point figure as an effect."""
    if holds_one(r):
        return f"no clear change ({r['our_value']:.2f}× [{r['our_low']:.2f}–{r['our_high']:.2f}])"
    return change(r["our_value"], up, down)


def servers_text(rows: list[dict]) -> str:
    return ", ".join(f"{r['server']} {r['our_value']:.2f}×" for r in rows)


def span(xs: list[float], fmt: str = "{:.1f}") -> str:
    """'1.8' when the values agree at that precision, else '1.6–1.7'."""
    lo, hi = fmt.format(min(xs)), fmt.format(max(xs))
    return lo if lo == hi else f"{lo}–{hi}"

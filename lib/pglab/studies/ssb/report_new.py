"""The SSB section's method text for runs with the paired analysis: how comparisons are paired, the A/A noise
floor, the drift between halves of the run, which generator made the data and whether the answers were checked
against dbgen's, and the queries whose plan changes between versions."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ...core import paired
from ...core.stats import ratio_with_interval
from .findings import optional
from .study_plans import plan_changes


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}".replace("%", " %")


def method_lines(profile: str, root: Path | None = None) -> str:
    t = {n: optional(n, profile, root) for n in ("ssb_noise", "ssb_drift", "ssb_answers", "ssb_fingerprints",
                                                 "ssb_load", "ssb_plans_scaled")}
    pr = optional("ssb_paired", profile, root)
    if "method" in pr.columns and paired.is_fast(pr["method"]):
        how = ("in the fast mode: the 10 % quantile of a cell's executions over all rounds, against the "
               "baseline's, i.e. what a query costs when the machine is not slowed; the interval resamples the "
               "rounds, the same for both sides (its coverage stated, at most what min–max of the rounds covers)")
    else:
        how = ("within the schedule's rounds: per round one ratio, their geometric mean with a 95 % bootstrap "
               "interval over rounds (min–max below 10 rounds, labelled so)")
    lines = ["- **Paired analysis**: every comparison (parallel over serial, JIT over parallel, 17 over 16, "
             f"workers over none) is made {how}; suite figures sum the queries of a round. Verdicts follow "
             "docs/verdicts.md."]
    nz = t["ssb_noise"]
    if nz.height:
        parts = [f"{r['server']}: floor ±{_pct(r['floor'])}, false-difference rate {_pct(r['false_difference_rate'])}"
                 f" over {r['n_pairs']} A/A pairs" for r in nz.sort("server").iter_rows(named=True)]
        lines.append("- **Noise floor** (A/A control: the parallel mode measured twice per round under two labels, "
                     "parallel and parallel_aa): " + "; ".join(parts) + ". An effect below the floor supports "
                     "nothing.")  # fmt: skip
    dr = t["ssb_drift"]
    if dr.height:
        parts = [f"{r['server']} {ratio_with_interval(r['drift'], r['low'], r['high'], digits=3)}" for r in
                 dr.drop_nulls("drift").sort("server").iter_rows(named=True)]  # fmt: skip
        lines.append("- **Drift** (parallel suite time, 2nd half of the rounds over the 1st): "
                     + ("; ".join(parts) or "too few rounds") + "; pairing removes what both conditions share.")
    ld = t["ssb_load"]
    if "flavor" in ld.columns and ld.height:
        r = ld.row(0, named=True)
        lines.append(f"- **Generator**: {r['generator']} (dataset {r['dataset_id']}).")
    an = t["ssb_answers"]
    if an.height:
        checked = an.filter(pl.col("checked"))
        lines.append("- **Answers**: " + (
            f"{checked.height} server × query results checked against dbgen's expected rows at SF 1 "
            f"({int(checked['executions'].sum()):,} executions, {int(checked['wrong'].sum())} wrong)."
            if checked.height else "not checked against dbgen's expected rows (the data is not dbgen's at SF 1); "
            "servers and modes are compared with each other."))  # fmt: skip
    sc = t["ssb_plans_scaled"]
    if sc.height:
        lines.append(f"- **q4.3's workers**: a plan-only EXPLAIN with {sc['allowed_workers'][0]} workers allowed and "
                     f"min_parallel_table_scan_size scaled by SF/70 to {sc['min_parallel_table_scan_kb'][0]} kB, so "
                     "that table sizes stand to it as S1's did at SF 70.")  # fmt: skip
    fp = t["ssb_fingerprints"]
    if fp.height:
        changes = plan_changes(fp)
        lines.append("- **Plans across versions** (fingerprints of EXPLAIN (COSTS OFF)): "
                     + ("; ".join(changes) if changes else "the same plan on every version for every query") + ".")
    return "\n".join(lines)

"""Findings of the SSB section under the rule used before pglab.core.verdicts (ratios of medians against 2/3 of
the ceiling, "not supported"): parallel query and versions. Kept so that datasets derived before the paired
analysis (no ssb_noise table) read exactly as they did."""

from __future__ import annotations

import polars as pl

from ...core import stats
from ...core.findings import NOT_RUN, NOT_SUPPORTED, SUPPORTED, UNDETERMINED
from . import charts as ssb_charts
from . import reference as ref
from .report_data import (
    _MODE_WORDS,
    NEAR_CEILING,
    _ceiling_text,
    _Data,
    _inv,
    _plural,
    _range,
    _row,
    _suite,
    _totals,
    _x,
)


def _s1_parallel(d: _Data) -> list[dict]:
    s1 = ref.s1_speedup_table()["s1_speedup"].to_list()
    claim = (f"Parallel query with {ref.S1_ALLOWED_WORKERS} workers ran the queries ≈ 5× faster than serial "
             f"({_range(s1, '.1f')} on {len(s1) // 2} of S1's 13 queries, 16.6 and 17.2, SF 70), against "
             f"a ceiling of {ref.S1_ALLOWED_WORKERS + 1} (workers + leader).")  # fmt: skip
    rows = []
    suite = _suite(d.ok, "mode", len(d.queries))
    for s in d.servers:
        n = d.workers(s)
        serial, par = _totals(suite, s, "mode", "serial"), _totals(suite, s, "mode", "parallel")
        if n is None or not serial or not par:
            rows.append(_row("S1", "parallel_speedup", claim, s, NOT_RUN,
                             f"{s} has no complete serial and parallel repetitions in this profile."))
            continue
        c = d.ceiling(n)
        if c < 2:
            rows.append(_row("S1", "parallel_speedup", claim, s, NOT_RUN,
                             f"one core: parallel query cannot gain on this machine ({n} workers)."))
            continue
        r = stats.ratio_ci(serial, par)  # serial / parallel time: > 1 is a gain
        per_q = ssb_charts.speedup_frame(d.speedup.filter(pl.col("server") == s))["speedup"].to_list()
        verdict = {"near": SUPPORTED, "below": NOT_SUPPORTED}.get(
            stats.against_threshold(r["ci_low"], r["ci_high"], NEAR_CEILING * c), UNDETERMINED)
        rows.append(_row("S1", "parallel_speedup", claim, s, verdict, (
            f"{s} runs the {len(d.queries)} queries with {n} workers {_x(r['ratio'], r['ci_low'], r['ci_high'])} "
            f"as fast as serially (sum of the query times, median of {min(r['n_a'], r['n_b'])} repetitions); "
            f"per query {_range(per_q)}. {_ceiling_text(d, n).capitalize()} (the study's ≈ 5× is "
            f"{500 / (ref.S1_ALLOWED_WORKERS + 1):.0f} % of its ceiling).")))  # fmt: skip
    return rows


def _s4_parallel_a(d: _Data) -> list[dict]:
    lo, hi = ref.S4_PARALLEL_A_SPEEDUP
    n4 = ref.S4_PARALLEL_A_WORKERS
    claim = (f"With default settings ({n4} workers per Gather) every SSB query ran {lo:g}–{hi:g}× faster on v10 "
             f"than on 9.5 without parallel query (ceiling {n4 + 1}).")  # fmt: skip
    rows = []
    for s in d.servers:
        n = d.workers(s)
        sp = ssb_charts.speedup_frame(d.speedup.filter(pl.col("server") == s))
        if n is None or sp.is_empty():
            rows.append(_row("S4", "parallel_a", claim, s, NOT_RUN,
                             f"{s} has no serial and parallel times to compare in this profile."))
            continue
        thr = NEAR_CEILING * d.ceiling(n)
        kinds = [stats.against_threshold(r["speedup_low"], r["speedup_high"], thr) for r in sp.iter_rows(named=True)]
        near, below, unclear = (kinds.count(k) for k in ("near", "below", "unclear"))
        verdict = (SUPPORTED if near == len(kinds) else
                   NOT_SUPPORTED if below > near else UNDETERMINED)  # fmt: skip
        each = "; ".join(f"{r['query']} {_x(r['speedup'], r['speedup_low'], r['speedup_high'])}"
                         for r in sp.iter_rows(named=True))  # fmt: skip
        rows.append(_row("S4", "parallel_a", claim, s, verdict, (
            f"{s}, parallel ({n} workers) against serial on the same server: {near} of {len(kinds)} queries "
            f"reach the match, {below} fall short, {unclear} undetermined; {_ceiling_text(d, n)}. Per query: "
            f"{each}.")))  # fmt: skip
    return rows


def _version_pairs(d: _Data, mode: str) -> list[tuple[str, str, dict, pl.DataFrame]]:
    """(newer, older, suite ratio older/newer time, per-query frame) for each server against the oldest."""
    if len(d.servers) < 2:
        return []
    old = d.servers[0]
    suite = _suite(d.ok.filter(pl.col("mode") == mode), "mode", len(d.queries))
    out = []
    for new in d.servers[1:]:
        pair = d.ok.filter(pl.col("mode") == mode, pl.col("server").is_in([old, new]))
        if set(pair["server"]) != {old, new}:
            continue
        per_q = stats.compare(pair, by=["query"], condition_col="server", baseline=old, value="seconds")
        r = stats.ratio_ci(_totals(suite, old, "mode", mode), _totals(suite, new, "mode", mode))
        out.append((new, old, r, per_q))
    return out


def _versions(d: _Data, mode: str, claim: str, judge, study_max: float) -> list[dict]:
    finding = f"newer_version_{mode}"
    pairs = _version_pairs(d, mode)
    if not pairs:
        why = ("one server in this run: no version comparison" if len(d.servers) < 2
               else f"fewer than two servers ran the {mode} mode")  # fmt: skip
        return [_row("S1", finding, claim, "all", NOT_RUN, why + ".")]
    rows = []
    for new, old, r, per_q in pairs:
        faster = per_q.filter(pl.col("verdict") == stats.LOWER).height
        slower = per_q.filter(pl.col("verdict") == stats.HIGHER).height
        same = per_q.height - faster - slower
        each = "; ".join(f"{q['query']} {_x(*_inv(q['ratio'], q['ci_low'], q['ci_high']))}"
                         for q in per_q.iter_rows(named=True))  # fmt: skip
        evidence = (
            f"{new} ({d.version(new)}) runs the {len(d.queries)} queries {_MODE_WORDS[mode]} "
            f"{_x(r['ratio'], r['ci_low'], r['ci_high'])} as fast as {old} ({d.version(old)}) (sum of the query "
            f"times); per query faster on {faster}, slower on {slower}, no detectable difference or too few "
            f"repetitions on {same}: {each}."
        )
        if r["ci_low"] is not None and r["ci_low"] > study_max:
            evidence += (f" The gain is larger than the study's (at most {study_max:.2f}×): our versions are "
                         f"{_majors(d, old, new)} major releases apart, the study's one.")  # fmt: skip
        rows.append(_row("S1", finding, claim, f"{new} vs {old}", judge(r, faster, slower), evidence))
    return rows


def _majors(d: _Data, old: str, new: str) -> str:
    a, b = d.env.get(old), d.env.get(new)
    return str(int(b["major"]) - int(a["major"])) if a and b else "several"


def _s1_versions(d: _Data) -> list[dict]:
    par = [ref.S1_PARALLEL_MEAN_S["16.6"][q] / ref.S1_PARALLEL_MEAN_S["17.2"][q] for q in ref.QUERIES]
    ser = [ref.S1_SERIAL_MEAN_S["16.6"][q] / t for q, t in ref.S1_SERIAL_MEAN_S["17.2"].items()]

    def newer_faster(r, faster, slower):
        if r["ci_low"] is None:
            return UNDETERMINED
        if r["ci_low"] > 1 and slower == 0:
            return SUPPORTED
        if r["ci_high"] < 1:
            return NOT_SUPPORTED
        return UNDETERMINED

    def no_consistent_winner(r, faster, slower):
        if faster and slower:
            return SUPPORTED
        if r["ci_low"] is not None and (r["ci_low"] > 1 or r["ci_high"] < 1):
            return NOT_SUPPORTED
        return UNDETERMINED

    return [
        *_versions(d, "parallel", (
            f"With parallel query on, 17.2 was slightly faster than 16.6: {_range(par)} as fast per query "
            "(means of 5 runs, SF 70)."), newer_faster, max(par)),
        *_versions(d, "serial", (
            f"With parallel query off, no consistent winner and wide run-to-run variation (CPU clock): 17.2 ran "
            f"{len(ser)} of S1's 13 queries {_range(ser)} as fast as 16.6."), no_consistent_winner, max(ser)),
    ]  # fmt: skip


def _sweep_ratios(d: _Data, s: str) -> pl.DataFrame:
    df = d.sweep_ok.filter(pl.col("server") == s)
    if df.is_empty() or 0 not in set(df["workers"]):
        return pl.DataFrame()
    return stats.compare(df, by=["query"], condition_col="workers", baseline=0, value="seconds")


def _s4_sweep(d: _Data) -> list[dict]:
    claim = ("S4 test B (v10/v11): query time against the number of workers 0 … N was close to inversely "
             "proportional, time ∝ 1 / (workers + 1).")  # fmt: skip
    rows = []
    for s in d.servers:
        cmp = _sweep_ratios(d, s)
        if cmp.is_empty():
            rows.append(_row("S4", "parallel_b", claim, s, NOT_RUN,
                             f"{s}: no worker sweep with a serial baseline in this profile."))
            continue
        k = int(cmp["workers"].max())
        at = cmp.filter(pl.col("workers") == k).sort("query")
        thr = NEAR_CEILING * d.ceiling(k)
        parts, kinds = [], []
        for r in at.iter_rows(named=True):
            v, lo, hi = _inv(r["ratio"], r["ci_low"], r["ci_high"])
            kinds.append(stats.against_threshold(lo, hi, thr))
            parts.append(f"{r['query']} {_x(v, lo, hi)}")
        near, below, unclear = (kinds.count(x) for x in ("near", "below", "unclear"))
        verdict = (SUPPORTED if near == len(kinds) else
                   NOT_SUPPORTED if below > near else UNDETERMINED)  # fmt: skip
        reps = _plural(int(at["n"].min()), "timed repetition")
        rows.append(_row("S4", "parallel_b", claim, s, verdict, (
            f"{s}, max_parallel_workers_per_gather = {k} against 0 ({reps} each): {near} of "
            f"{len(kinds)} queries reach the match, {below} fall short, {unclear} undetermined; "
            f"{_ceiling_text(d, k)}. Speed-up per query: {'; '.join(parts)}.")))  # fmt: skip
    return rows


Q43_FLAT_MARGIN = 0.10  # "stopped improving": more workers gain less than this, at 95 % confidence


def _s4_q43_flat(d: _Data) -> list[dict]:
    flat = ref.S4_Q43_FLAT_FROM_WORKERS
    claim = (f"S4 test B (v11): q4.3 stopped improving at {flat} workers, because its join order changed and the "
             "planned worker count follows the driving table.")  # fmt: skip
    rows = []
    for s in d.servers:
        cmp = _sweep_ratios(d, s)
        q = d.study_plans.filter(pl.col("server") == s, pl.col("query") == "q4.3")
        if cmp.is_empty() or q.is_empty():
            rows.append(_row("S4", "parallel_b_q4.3", claim, s, NOT_RUN,
                             f"{s}: no worker sweep or no q4.3 plan in this profile."))
            continue
        k, cap = int(cmp["workers"].max()), int(q["workers_planned"][0])
        if k <= cap:
            rows.append(_row("S4", "parallel_b_q4.3", claim, s, NOT_RUN, (
                f"{s}: the sweep stops at {k} workers, and q4.3 plans {cap} of {q['allowed_workers'][0]} allowed "
                f"here, so its time could only level off above {cap} workers (a sweep beyond {cap} needs more "
                "cores).")))  # fmt: skip
            continue
        df = d.sweep_ok.filter(pl.col("server") == s, pl.col("query") == "q4.3")
        r = stats.ratio_ci(df.filter(pl.col("workers") == cap)["seconds"], df.filter(pl.col("workers") == k)["seconds"])
        # "stopped improving" needs the interval to rule out a real gain, not merely to contain 1
        flat_enough = r["ci_high"] is not None and r["ci_high"] <= 1 + Q43_FLAT_MARGIN
        verdict = {stats.HIGHER: NOT_SUPPORTED, stats.LOWER: SUPPORTED}.get(
            r["verdict"], SUPPORTED if r["verdict"] == stats.NO_DIFFERENCE and flat_enough else UNDETERMINED)
        rows.append(_row("S4", "parallel_b_q4.3", claim, s, verdict, (
            f"{s}: q4.3 plans {cap} workers; from {cap} to {k} allowed it runs "
            f"{_x(r['ratio'], r['ci_low'], r['ci_high'])} as fast ({r['verdict']}; a gain of more than "
            f"{Q43_FLAT_MARGIN:.0%} {'is' if flat_enough else 'is not'} ruled out).")))  # fmt: skip
    return rows



"""Findings of the SSB section under the rule used before pglab.core.verdicts: JIT, q4.3's workers and the
answers (see legacy_parallel)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ...core.findings import NOT_RUN, NOT_SUPPORTED, SUPPORTED, UNDETERMINED
from ...core.findings import table as findings_table
from . import charts as ssb_charts
from . import reference as ref
from .legacy_parallel import _s1_parallel, _s1_versions, _s4_parallel_a, _s4_q43_flat, _s4_sweep
from .report_data import _UNITS, _Data, _pct, _range, _row, _setting


def _jit_plans(d: _Data, s: str) -> str:
    p = d.plans.filter(pl.col("server") == s, pl.col("mode") == "parallel_jit").unique(["query"])
    f = p["jit_functions"].drop_nulls()
    if f.is_empty():
        return " No plan of this mode compiled anything (plan costs below jit_above_cost)."
    return (f" JIT compiled in {f.len()} of {p.height} plans: median {int(f.median())} functions and "
            f"{p['jit_total_ms'].drop_nulls().median():.0f} ms of JIT time within "
            f"{p['execution_ms'].drop_nulls().median():.0f} ms of execution (EXPLAIN ANALYZE).")  # fmt: skip


def _s1_jit(d: _Data) -> list[dict]:
    s1 = ref.s1_jit_reduction_pct()
    q1 = s1.filter(pl.col("query").str.starts_with("q1."))["s1_jit_reduction_pct"].to_list()
    rest = s1.filter(~pl.col("query").str.starts_with("q1."))
    claim = (f"JIT (jit = on, parallel on) helped q1.x most, ≈ 25 %: q1.1 {_range(q1, '.0f', ' %')} shorter "
             f"(16.6, 17.2); little elsewhere ({', '.join(sorted(set(rest['query'])))}: "
             f"{_range(rest['s1_jit_reduction_pct'].to_list(), '.0f', ' %')}).")  # fmt: skip
    rows = []
    for s in d.servers:
        why = d.jit_reason(s)
        if why:
            rows.append(_row("S1", "jit_q1", claim, s, NOT_RUN, why + "."))
            continue
        fr = ssb_charts.jit_frame(d.jit.filter(pl.col("server") == s))
        ones = fr.filter(pl.col("query").str.starts_with("q1."))
        others = fr.filter(~pl.col("query").str.starts_with("q1."))
        lows, highs = ones["reduction_low_pct"].to_list(), ones["reduction_high_pct"].to_list()
        if ones.is_empty() or any(v is None for v in lows + highs):
            verdict = UNDETERMINED
        elif any(h < 0 for h in highs) or all(h < min(q1) for h in highs):
            verdict = NOT_SUPPORTED  # JIT detectably slower, or the study's gain excluded
        elif all(lo > 0 for lo in lows) and ones["reduction_pct"].min() >= (others["reduction_pct"].median() or 0):
            verdict = SUPPORTED
        else:
            verdict = UNDETERMINED
        each = "; ".join(f"{r['query']} {_pct(r['reduction_pct'], r['reduction_low_pct'], r['reduction_high_pct'])}"
                         for r in ones.iter_rows(named=True))  # fmt: skip
        rest_txt = (f"the other {others.height} queries: median {others['reduction_pct'].median():+.0f} % "
                    f"(from {others['reduction_pct'].min():+.0f} to {others['reduction_pct'].max():+.0f} %)"
                    if not others.is_empty() else "no other queries")  # fmt: skip
        rows.append(_row("S1", "jit_q1", claim, s, verdict, (
            f"{s}: time reduction by JIT over parallel (positive = faster with JIT): {each}; {rest_txt}."
            + _jit_plans(d, s))))  # fmt: skip
    return rows


def _s4_jit(d: _Data) -> list[dict]:
    s4 = ref.S4_JIT_REDUCTION_PCT
    q1 = [v for q, v in s4.items() if q.startswith("q1.")]
    rest = [v for q, v in s4.items() if not q.startswith("q1.")]
    claim = (f"S4 test 2 (v11): JIT reduced every SSB query's time, q1.x by {_range(q1, '.1f', ' %')}, "
             f"the other queries by {_range(rest, '.1f', ' %')}.")  # fmt: skip
    rows = []
    for s in d.servers:
        why = d.jit_reason(s)
        if why:
            rows.append(_row("S4", "jit_per_query", claim, s, NOT_RUN, why + "."))
            continue
        fr = ssb_charts.jit_frame(d.jit.filter(pl.col("server") == s))
        reduced = fr.filter(pl.col("reduction_low_pct") > 0).height
        increased = fr.filter(pl.col("reduction_high_pct") < 0).height
        verdict = (SUPPORTED if reduced * 2 >= fr.height and increased == 0 else
                   NOT_SUPPORTED if increased > reduced else UNDETERMINED)  # fmt: skip
        each = "; ".join(
            f"{r['query']} {_pct(r['reduction_pct'], r['reduction_low_pct'], r['reduction_high_pct'])} "
            f"(S4 {r['s4_jit_reduction_pct']:.1f} %)" for r in fr.iter_rows(named=True)
        )
        rows.append(_row("S4", "jit_per_query", claim, s, verdict, (
            f"{s}: JIT detectably shortened {reduced} of {fr.height} queries, lengthened {increased}, no detectable "
            f"difference on the rest. Reduction per query: {each}.")))  # fmt: skip
    return rows


def _planner_workers(n_bytes: float, min_scan_bytes: float, cap: int) -> int:
    """PostgreSQL's compute_parallel_worker for a plain table scan: one worker from min_parallel_table_scan_size,
    one more each time the table triples beyond it, at most the allowance."""
    if n_bytes < min_scan_bytes:
        return 0
    n, threshold = 1, min_scan_bytes
    while n_bytes >= threshold * 3 and n < cap:
        n, threshold = n + 1, threshold * 3
    return min(n, cap)


def _min_scan_bytes(d: _Data, s: str) -> tuple[float, str]:
    r = d.settings.filter(pl.col("server") == s, pl.col("name") == "min_parallel_table_scan_size")
    if r.is_empty():
        return 8 * 2**20, "8MB, the default"
    row = r.row(0, named=True)
    return int(row["setting"]) * _UNITS.get(row["unit"] or "B", 1), _setting(row)


def _s1_q43(d: _Data) -> list[dict]:
    claim = (f"q4.3 planned only {ref.S1_Q43_PLANNED_WORKERS} workers (planned = launched) although "
             f"{ref.S1_ALLOWED_WORKERS} were allowed, because the worker count follows the plan's driving "
             "(leftmost) table, which for q4.3 was customer.")  # fmt: skip
    rows = []
    for s in d.servers:
        sp = d.study_plans.filter(pl.col("server") == s)
        q43 = sp.filter(pl.col("query") == "q4.3")
        if q43.is_empty():
            rows.append(_row("S1", "q4.3_workers", claim, s, NOT_RUN, f"{s}: q4.3 was not planned."))
            continue
        r = q43.row(0, named=True)
        planned, allowed, driver = r["workers_planned"], r["allowed_workers"], r["leftmost_relation"] or "no table"
        peers = sp.filter(pl.col("query") != "q4.3")
        counts = peers["workers_planned"].value_counts(sort=True, name="n").sort(["n", "workers_planned"],
                                                                                 descending=[True, True])
        modal = counts["workers_planned"][0] if counts.height else None
        same = peers.filter(pl.col("workers_planned") == planned, pl.col("leftmost_relation") == driver).height
        if planned >= allowed:
            verdict = NOT_SUPPORTED
            why = "all of them"
        elif modal is not None and planned < modal:
            verdict = SUPPORTED
            why = f"fewer than the {modal} most other queries plan: singled out by its driving table, as in the study"
        else:
            verdict = NOT_SUPPORTED
            as_study = ("the study's count" if planned == ref.S1_Q43_PLANNED_WORKERS
                        else "below the allowance as in the study")  # fmt: skip
            why = (f"{as_study}, but not its cause: {same} other queries driven by {driver} plan {planned} too, "
                   f"so the cap is {driver}'s size here, not q4.3's join order")  # fmt: skip
        evidence = (f"{s}: with {allowed} workers allowed (plain EXPLAIN), q4.3 plans {planned} of {allowed} "
                    f"workers, driven by {driver} — {why}.")  # fmt: skip
        table = driver.split(".")[-1]
        size = d.load.filter(pl.col("server") == s, pl.col("table") == table)["table_bytes"]
        if size.len():
            min_b, min_txt = _min_scan_bytes(d, s)
            expect = _planner_workers(float(size[0]), min_b, allowed)
            if expect == planned:
                evidence += (f" PostgreSQL gives a scan one worker from min_parallel_table_scan_size ({min_txt}) and "
                             f"one more each time the table triples: {table}'s {size[0] / 2**20:,.0f} MiB gives "
                             f"{expect}.")  # fmt: skip
        below = peers.filter(pl.col("workers_planned") < pl.col("allowed_workers"),
                             pl.col("leftmost_relation") != driver).sort("query")
        if below.height:
            evidence += " Also below the allowance: " + ", ".join(
                f"{b['query']} plans {b['workers_planned']} (driven by {b['leftmost_relation']})"
                for b in below.iter_rows(named=True)) + "."  # fmt: skip
        run = d.plans.filter(pl.col("server") == s, pl.col("mode") == "parallel", pl.col("query") == "q4.3",
                             pl.col("gather_id").is_not_null()).sort("gather_id")
        if run.height:
            g = run.row(0, named=True)
            evidence += (f" In the timed runs ({g['allowed_workers']} allowed) q4.3 planned {g['workers_planned']} "
                         f"and launched {g['workers_launched']}.")  # fmt: skip
        rows.append(_row("S1", "q4.3_workers", claim, s, verdict, evidence))
    return rows


def _results(d: _Data) -> list[dict]:
    claim = ("Implicit in S1 (times only were compared): a query returns the same rows on every server, in every "
             "mode and with any number of workers.")  # fmt: skip
    ck = d.checksums
    if ck.is_empty():
        return [_row("S1", "results_agree", claim, "all", NOT_RUN, "No result checksums in this profile.")]
    wrong = ck.filter(~pl.col("agree")).sort("query")
    errors = pl.concat([d.execs.select("server", "query", "error"), d.sweep.select("server", "query", "error")])
    errors = errors.filter(pl.col("error").is_not_null())
    ev = (f"{ck.height} queries, {int(ck['executions'].sum()):,} executions over every server, mode and the worker "
          "sweep: " + ("one result checksum per query." if wrong.is_empty() else
                       "results DIFFER for " + ", ".join(wrong["query"]) + "."))  # fmt: skip
    failed = sorted({f"{e['server']} {e['query']}: {e['error'][:80]}" for e in errors.iter_rows(named=True)})
    ev += (" No execution failed." if errors.is_empty() else
           f" {errors.height} executions failed (recorded, not retried): " + "; ".join(failed[:5]) + ".")  # fmt: skip
    verdict = SUPPORTED if wrong.is_empty() else NOT_SUPPORTED
    return [_row("S1", "results_agree", claim, "all", verdict, ev)]


def findings_rows(d: _Data) -> list[dict]:
    return [*_s1_parallel(d), *_s1_versions(d), *_s1_jit(d), *_s1_q43(d), *_results(d), *_s4_parallel_a(d),
            *_s4_jit(d), *_s4_sweep(d), *_s4_q43_flat(d)]  # fmt: skip


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    return findings_table(findings_rows(_Data(profile, root)))

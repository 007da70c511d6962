"""Findings of the SSB section (S1, S4's SSB tests) under the one rule of `core.stats.verdicts`, from the tables of
the paired analysis (`paired_tables`): ratios over the rounds, the A/A noise floor of each server, the ceiling
flag on parallel speed-ups. Version claims are scored on S1's own versions only (16 against 17)."""

from __future__ import annotations

import math

import polars as pl

from ...core import replicas
from ...core.stats import between_runs, noise, paired
from ...core.stats import verdicts as v
from . import reference as ref
from .paired_tables import NET, SUITE, SUITE_Q1, jit_mode
from .report_data import Data

V = v.Claim
# what makes a JIT claim testable on a source build the machine could not make
NEEDS_BUILD = (
    "a C compiler, clang and llvm-config (Debian: build-essential, clang, llvm-dev) and the source package "
    "(a deb-src entry for a Debian release that has it), then make report again"
)


# what each of paired_tables.JIT_CLAIM_MODES times, as a claim's evidence says it
JIT_LABELS = {
    "parallel_jit_forced" + NET: (
        "inlining and optimisation forced, as S1's thresholds do every plan at its SF 70; each execution net of the "
        "leader's JIT compile, counted by pg_stat_statements"
    ),
    "parallel_jit"
    + NET: "S1's thresholds; each execution net of the leader's JIT compile, counted by pg_stat_statements",
    "parallel_jit": "S1's thresholds",
}


class Paired:
    def __init__(self, tables):
        self.d = Data(tables)
        t = {
            n: tables.optional(n)
            for n in (
                "ssb_paired",
                "ssb_versions_paired",
                "ssb_noise",
                "ssb_sweep_paired",
                "ssb_answers",
                "ssb_plans_scaled",
                "ssb_jit_io",
                "ssb_jit_executions",
            )
        }
        self.modes, self.versions, self.noise = t["ssb_paired"], t["ssb_versions_paired"], t["ssb_noise"]
        self.sweep, self.answers, self.scaled = t["ssb_sweep_paired"], t["ssb_answers"], t["ssb_plans_scaled"]
        self.jit_io, self.jit_exec = t["ssb_jit_io"], t["ssb_jit_executions"]
        # with replica clusters (params servers.clusters) the paired tables hold base servers only: one finding each
        bases = replicas.base_names(self.d.servers)
        self.servers = [s for s in self.d.servers if bases[s] == s]

    def floor(self, server: str) -> float | None:
        if self.noise.is_empty():
            return None
        r = self.noise.filter(pl.col("server") == server)
        r = r if r.height else self.noise.filter(pl.col("server") == "all")
        return r["floor"][0] if r.height and r["floor"][0] is not None else None

    def evidence(self, df: pl.DataFrame, flags=()) -> v.Evidence | None:
        return v.Evidence.from_row(df.row(0, named=True), flags) if df.height else None

    def compare(self, server: str, query: str, mode: str, baseline: str) -> pl.DataFrame:
        if self.modes.is_empty():
            return self.modes
        return self.modes.filter(
            pl.col("server") == server, pl.col("query") == query, pl.col("mode") == mode, pl.col("baseline") == baseline
        )


def _how(cmp: pl.DataFrame) -> str:
    """How a paired-table row compared its conditions, for the evidence text."""
    fast = "method" in cmp.columns and paired.is_fast(cmp["method"])
    return "in the fast mode (rounds resampled)" if fast else "paired by round"


def _row(study, finding, claim, server, verdict, evidence=None, extra: str = "") -> dict:
    r = v.finding_row(study, finding, claim, server, verdict, evidence)
    r["evidence"] += extra
    return r


def _ceiling_flag(p: Paired, server: str, ev: v.Evidence) -> tuple[str | None, int]:
    """Speed-up above min(processes, cores): processes = the most workers planned in the server's parallel
    plans + the leader."""
    pl_ = p.d.plans.filter(pl.col("server") == server, pl.col("mode") == "parallel")
    planned = pl_["workers_planned"].drop_nulls()
    procs = int(planned.max()) + 1 if planned.len() else (p.d.workers(server) or 0) + 1
    return noise.ceiling_check(1 / ev.ratio if ev.ratio else None, procs, p.d.cores), procs


def _speedups(p: Paired) -> list[dict]:
    s1 = V(
        "S1: parallel query (5 workers) ran the SSB queries about 5× faster than serial (SF 70, 16.6 and 17.2).",
        v.LOWER,
        0.2,
        0.25,
    )
    lo, hi = ref.S4_PARALLEL_A_SPEEDUP
    s4 = V(
        f"S4 test A: with parallel query every SSB query ran {lo:g}–{hi:g}× faster than without.",
        v.LOWER,
        1 / math.sqrt(lo * hi),
        math.sqrt(hi / lo) - 1,
    )
    rows = []
    for s in p.servers:
        cmp = p.compare(s, SUITE, "parallel", "serial")
        if cmp.is_empty():
            why = v.not_run(f"{s} ran no serial and parallel rounds (serial runs on S1's versions only)")
            rows += [_row("S1", "parallel_speedup", s1, s, why), _row("S4", "parallel_a", s4, s, why)]
            continue
        ev = p.evidence(cmp)
        flag, procs = _ceiling_flag(p, s, ev)
        ev = p.evidence(cmp, [flag])
        per_q = p.modes.filter(
            pl.col("server") == s,
            pl.col("mode") == "parallel",
            pl.col("baseline") == "serial",
            ~pl.col("query").is_in([SUITE, SUITE_Q1]),
        ).sort("query")
        each = "; ".join(f"{r['query']} {1 / r['ratio']:.2f}×" for r in per_q.iter_rows(named=True))
        extra = (
            f" Suite time (sum of the queries per round), parallel over serial, {_how(cmp)}; speed-up "
            f"{1 / ev.ratio:.2f}×, ceiling min({procs} processes, {p.d.cores} cores). Per query: {each}."
        )
        ceiling = min(procs, p.d.cores or procs)
        if ceiling < 1 / (s1.ratio * (1 + s1.margin)):
            verdict = v.not_testable(
                f"at most {ceiling} processes run at once here, S1's 5× needs 6", "needs ≥ 6 cores"
            )
        else:
            verdict = v.verdict(s1, ev, p.floor(s))
        rows.append(_row("S1", "parallel_speedup", s1, s, verdict, ev, extra))
        rows.append(_row("S4", "parallel_a", s4, s, v.verdict(s4, ev, p.floor(s)), ev, extra))
    return rows


def _versions(p: Paired) -> list[dict]:
    par = sum(ref.S1_PARALLEL_MEAN_S["17.2"].values()) / sum(ref.S1_PARALLEL_MEAN_S["16.6"].values())
    claims = {
        "parallel": V(
            f"S1: with parallel query on, 17.2 was slightly faster than 16.6 (suite time {par:.3f}× of 16.6's).",
            v.LOWER,
            par,
            0.025,
        ),
        "serial": V(
            "S1: with parallel off no consistent winner between 16.6 and 17.2 (run-to-run variation from "
            "the CPU clock); taken as: no change within ±5 %.",
            v.SAME,
            None,
            0.05,
        ),
    }
    rows = []
    for mode, claim in claims.items():
        cmp = p.versions.filter(pl.col("mode") == mode) if not p.versions.is_empty() else p.versions
        if cmp.is_empty():
            why = v.not_testable("this run lacks PostgreSQL 16 or 17", "needs 16 and 17")
            rows.append(_row("S1", f"newer_version_{mode}", claim, "all", why))
            continue
        suite = cmp.filter(pl.col("query") == SUITE)
        ev = p.evidence(suite)
        new, old = suite["server"][0], suite["baseline"][0]
        floor = max(filter(None, [p.floor(new), p.floor(old)]), default=None)
        each = "; ".join(
            f"{r['query']} {r['ratio']:.2f}×"
            for r in cmp.filter(pl.col("query") != SUITE).sort("query").iter_rows(named=True)
        )
        extra = f" {new} over {old}, time ratio {_how(suite)}; per query: {each}."
        if mode == "serial":
            # S1's serial sentence reports its own runs' spread (the CPU clock), not an effect of the version: nothing
            # here can reproduce that; our serial figure stays in the evidence and in the report's plain answers
            verdict = v.not_testable(
                f"S1 saw no consistent winner serially because its own runs varied with its CPU clock: a statement "
                f"about its machine's noise, not about the versions (our {ev.text() if ev else 'figure: no data'})",
                "needs S1's machine and clock; our serial difference is reported as our own finding",
            )
        else:
            verdict = v.verdict(claim, ev, floor)
        rows.append(_row("S1", f"newer_version_{mode}", claim, f"{new} vs {old}", verdict, ev, extra))
    return rows


def compile_share(jit_exec: pl.DataFrame, server: str, mode: str, queries: list[str]) -> str | None:
    """Compile against wall time from every timed execution of `server`'s clusters in `mode` (pg_stat_statements'
    JIT times around each, the leader's); None where the run recorded none."""
    if jit_exec.is_empty():
        return None
    mine = between_runs.base_servers(jit_exec).filter(
        pl.col("server") == server,
        pl.col("mode") == mode,
        pl.col("query").is_in(queries),
    )
    if mine.is_empty() or not mine["wall_ms"].sum():
        return None
    jit, wall = mine["jit_ms"].sum(), mine["wall_ms"].sum()
    return (
        f" Compiling from every timed execution (pg_stat_statements, the leader's; {mine.height} executions): "
        f"{jit:.0f} ms of {wall:.0f} ms wall time, {jit / wall:.1%}.".replace("%", " %")
    )


def _jit_share(p: Paired, s: str, mode: str, queries: list[str]) -> str:
    """Compile against execution: from every timed execution where the run recorded it (`compile_share`), else
    in the plans (one EXPLAIN ANALYZE per query and mode): each JIT phase, and the JIT plans' execution net of
    compiling over parallel's execution."""
    if (every := compile_share(p.jit_exec, s, mode, queries)) is not None:
        return every
    plans = p.d.plans.filter(pl.col("server") == s, pl.col("query").is_in(queries))
    jp = plans.filter(pl.col("mode") == mode).unique(["query"])
    jt, ex = jp["jit_total_ms"].drop_nulls(), jp["execution_ms"].drop_nulls()
    if jt.is_empty() or ex.is_empty():
        return " No plan compiled anything (plan costs below jit_above_cost)."
    phases = ", ".join(
        f"{name} {jp[c].drop_nulls().sum():.0f}"
        for name, c in (
            ("generation", "jit_generation_ms"),
            ("inlining", "jit_inlining_ms"),
            ("optimisation", "jit_optimization_ms"),
            ("emission", "jit_emission_ms"),
        )
    )
    out = (
        f" Compile against execution (EXPLAIN ANALYZE, leader and workers summed, {jp.height} plans): JIT "
        f"{jt.sum():.0f} ms ({phases}) against {ex.sum():.0f} ms of execution"
    )
    par = plans.filter(pl.col("mode") == "parallel").unique(["query"])["execution_ms"].drop_nulls()
    if par.len() == ex.len() and par.sum() > 0:
        # the processes compile side by side: each plan's compile wall time is its total over them
        wall = (jp["jit_total_ms"].fill_null(0) / (jp["workers_launched"].fill_null(0) + 1)).sum()
        out += f"; net of compiling (≈ {wall:.0f} ms of wall time), {(ex.sum() - wall) / par.sum():.2f}× parallel's"
    return out + "."


def disk_flag(jit_io: pl.DataFrame, server: str) -> str | None:
    """A measurement problem where a cluster of `server` read more of its database from disk while it was timed than
    the target share (methodology rule 17: a JIT claim is about the CPU); None where each stayed within it, or the
    run did not record it."""
    if jit_io.is_empty():
        return None
    bases = replicas.base_names(jit_io["server"].to_list())
    over = [
        f"{r['server']} read {r['read_share']:.1%} of its {r['database_bytes'] / 2**30:.1f} GiB database"
        for r in jit_io.iter_rows(named=True)
        if bases[r["server"]] == server and r["read_share"] is not None and r["read_share"] > r["target_share"]
    ]
    if not over:
        return None
    target = jit_io["target_share"].max()
    return (f"{'; '.join(over)} from disk while timed (target under {target:.0%}): its times are partly the "
            "disk's").replace("%", " %")  # fmt: skip


def _jit_floor(p: Paired, server: str, cmp: pl.DataFrame) -> tuple[float | None, str]:
    """The noise floor of a JIT claim and where it comes from. The JIT servers run in a block of their own (one
    database at a time, forced JIT) with no A/A control: the versions' rounds' A/A is another quantity's (rule 15),
    so a comparison pooled over clusters, whose interval carries the clusters' disagreement, is gated by none; on
    one cluster the run's A/A stands in, the nearest this run has."""
    if p.noise.is_empty() or (p.noise["server"] == server).any():
        return p.floor(server), ""
    f, pooled = noise.borrowed_floor(p.floor(server), cmp.row(0, named=True).get("n_clusters") if cmp.height else 1)
    if pooled:
        return None, " No noise floor: the JIT block runs no A/A control; its pooled interval carries its noise."
    return f, " Noise floor: the run's A/A control (no A/A on this server; the versions' rounds')."


def _jit(p: Paired) -> list[dict]:
    def s1_ratio(q):
        return math.exp(
            sum(
                math.log(ref.S1_PARALLEL_JIT_MEAN_S[ver][q] / ref.S1_PARALLEL_MEAN_S[ver][q])
                for ver in ("16.6", "17.2")
            )
            / 2
        )

    q1 = V(
        f"S1: JIT helped q1.x clearly, about a quarter less time (q1.1 {s1_ratio('q1.1'):.2f}× of parallel).",
        v.LOWER,
        0.75,
        0.1,
    )
    little = {
        q: V(f"S1: JIT helped {q} a little ({s1_ratio(q):.2f}× of parallel's time).", v.LOWER, s1_ratio(q), 0.04)
        for q in ("q3.1", "q4.3")
    }
    s4r = math.exp(sum(math.log(1 - x / 100) for x in ref.S4_JIT_REDUCTION_PCT.values()) / 13)
    s4 = V(
        f"S4 test 2: JIT reduced the SSB queries' time by 4–32 % (geometric mean {s4r:.2f}× of the time).",
        v.LOWER,
        s4r,
        0.05,
    )
    items = [
        ("S1", "jit_q1", q1, SUITE_Q1),
        *[("S1", f"jit_{q}", c, q) for q, c in little.items()],
        ("S4", "jit_per_query", s4, SUITE),
    ]
    rows = []
    claim_mode = jit_mode(p.modes)  # net of compiling where the run counted every execution's JIT work
    modes = [(claim_mode, "", JIT_LABELS[claim_mode])]
    # forced inlining and optimisation as timed, compiling included, is our variant, not a source's claim: scored
    # only where it ran and the claims take S1's thresholds as timed (a run without JIT counts)
    if claim_mode == "parallel_jit" and not p.modes.is_empty() and (p.modes["mode"] == "parallel_jit_forced").any():
        modes.append(("parallel_jit_forced", "_forced", "inlining and optimisation forced"))
    for s in p.servers:
        for mode, suffix, label in modes:
            timed_mode = mode.removesuffix(NET)  # the mode the executions ran in
            for study, finding, claim, item in items:
                cmp = p.compare(s, item, mode, "parallel")
                if cmp.is_empty():
                    why = p.d.jit_reason(s) if not suffix else None
                    not_run = v.not_run(why or f"no {timed_mode} rounds on {s} in this profile")
                    rows.append(_row(study, finding + suffix, claim, s, not_run))
                    continue
                ev = p.evidence(cmp, [disk_flag(p.jit_io, s)])
                qs = {SUITE_Q1: ["q1.1", "q1.2", "q1.3"], SUITE: list(ref.QUERIES)}.get(item, [item])
                floor, said = _jit_floor(p, s, cmp)
                extra = f" JIT ({label}) over parallel, {_how(cmp)}." + _jit_share(p, s, timed_mode, qs) + said
                rows.append(_row(study, finding + suffix, claim, s, v.verdict(claim, ev, floor), ev, extra))
    for s, why in p.d.unbuilt.items():  # a JIT build the machine could not make: the claims say so on its row
        for study, finding, claim, _ in items:
            rows.append(_row(study, finding, claim, s, v.not_testable(why, NEEDS_BUILD)))
    return rows


def _q43(p: Paired) -> list[dict]:
    a, w = ref.S1_ALLOWED_WORKERS, ref.S1_Q43_PLANNED_WORKERS
    claim = V(
        f"S1: q4.3 planned only {w} of {a} allowed workers, because the worker count follows the plan's "
        "driving (leftmost) table, customer.",
        v.LOWER,
        w / a,
        0.0,
    )
    rows = []
    for s in p.servers:
        sc = p.scaled.filter(pl.col("server") == s) if not p.scaled.is_empty() else p.scaled
        q = sc.filter(pl.col("query") == "q4.3") if sc.height else sc
        if q.is_empty():
            rows.append(_row("S1", "q4.3_workers", claim, s, v.not_run(f"{s}: q4.3 was not planned")))
            continue
        r = q.row(0, named=True)
        ratio = r["workers_planned"] / r["allowed_workers"]
        ev = v.Evidence(ratio, ratio, ratio, 1, 1.0, "plan-only EXPLAIN, exact")
        others = sc.filter(pl.col("query") != "q4.3", pl.col("workers_planned") < pl.col("allowed_workers"))
        also = (
            "; ".join(
                f"{o['query']} plans {o['workers_planned']} (driven by {o['leftmost_relation']})"
                for o in others.sort("query").iter_rows(named=True)
            )
            or "none"
        )
        unscaled = p.d.study_plans.filter(pl.col("server") == s, pl.col("query") == "q4.2")
        q42 = (
            f" At the default min_parallel_table_scan_size q4.2 plans {unscaled['workers_planned'][0]} of "
            f"{unscaled['allowed_workers'][0]} (driven by {unscaled['leftmost_relation'][0]}): the same mechanism, "
            "the driving table's size sets the count."
            if unscaled.height
            else ""
        )
        extra = (
            f" {s}: with min_parallel_table_scan_size scaled by SF/70 to {r['min_parallel_table_scan_kb']} kB "
            f"(so our tables stand to it as S1's did at SF 70), q4.3 plans {r['workers_planned']} of "
            f"{r['allowed_workers']}, driven by {r['leftmost_relation']}. Other queries below the allowance: "
            f"{also}.{q42}"
        )
        rows.append(_row("S1", "q4.3_workers", claim, s, v.verdict(claim, ev), ev, extra))
    return rows


def _sweep(p: Paired) -> list[dict]:
    claim_b = V(
        "S4 test B: query time fell close to inversely with the number of workers, time ∝ 1/(workers + 1); "
        "taken at the largest count this machine can run at once.",
        v.LOWER,
        None,
    )
    flat = ref.S4_Q43_FLAT_FROM_WORKERS
    claim_f = V(
        f"S4 test B (v11): q4.3 stopped improving at {flat} workers (its planned worker count follows the "
        "driving table).",
        v.SAME,
        None,
        0.10,
    )
    rows = []
    for s in p.servers:
        sw = p.sweep.filter(pl.col("server") == s, pl.col("query") == SUITE) if not p.sweep.is_empty() else p.sweep
        fit = sw.filter(pl.col("workers") + 1 <= (p.d.cores or 1)) if sw.height else sw
        if fit.is_empty():
            rows.append(_row("S4", "parallel_b", claim_b, s, v.not_run(f"{s}: no worker sweep in this profile")))
        else:
            r = fit.sort("workers").row(-1, named=True)
            k = r["workers"]
            c = V(claim_b.statement, v.LOWER, 1 / (k + 1), 0.15)
            ev = v.Evidence.from_row(r, [noise.ceiling_check(1 / r["ratio"], k + 1, p.d.cores)])
            how = f" {k} workers over 0, the sweep's queries' summed time {_how(fit)}."
            rows.append(_row("S4", "parallel_b", c, s, v.verdict(c, ev, p.floor(s)), ev, how))
        why = f"q4.3 levels off only beyond {flat} workers; this machine has {p.d.cores} cores"
        rows.append(_row("S4", "parallel_b_q4.3", claim_f, s, v.not_testable(why, f"needs ≥ {flat + 2} cores")))
    return rows


def _answers(p: Paired) -> list[dict]:
    agree = V(
        "Implicit in S1: a query returns the same rows on every server, in every mode and with any number of workers.",
        v.SAME,
        None,
        1e-9,
    )
    right = V(
        "Implicit in S1: every server returns the SSB queries' right rows (dbgen's expected answers at SF 1).",
        v.SAME,
        None,
        1e-9,
    )
    ck = p.d.checksums
    wrong = ck.filter(~pl.col("agree")).sort("query")
    n = int(ck["executions"].sum()) if ck.height else 0
    share = 1 + wrong.height / max(ck.height, 1)
    ev = v.Evidence(share, share, share, n, 1.0, "every execution checksummed")
    txt = f" {ck.height} queries, {n:,} executions: " + (
        "one result checksum per query."
        if wrong.is_empty()
        else "results DIFFER for " + ", ".join(wrong["query"]) + "."
    )
    rows = [_row("S1", "results_agree", agree, "all", v.verdict(agree, ev), ev, txt)]
    for s in p.servers:
        a = p.answers.filter(pl.col("server") == s) if not p.answers.is_empty() else p.answers
        checked = a.filter(pl.col("checked")) if a.height else a
        if checked.is_empty():
            gen = a["generator"][0] if a.height else "unknown"
            why = f"dbgen's expected answers hold for its SF 1 data only; this run's data: {gen}"
            rows.append(_row("S1", "answers_right", right, s, v.not_testable(why, "needs the dbgen flavor at SF 1")))
            continue
        bad = checked.filter(pl.col("wrong") > 0)
        execs = int(checked["executions"].sum())
        share = 1 + int(checked["wrong"].sum()) / execs
        ev = v.Evidence(share, share, share, execs, 1.0, "checksums against dbgen's answers")
        txt = f" {s}: {checked.height} queries, {execs:,} executions checked against dbgen's expected rows: " + (
            "all right."
            if bad.is_empty()
            else "WRONG rows for "
            + ", ".join(f"{b['query']} ({b['wrong']} of {b['executions']})" for b in bad.iter_rows(named=True))
            + "."
        )
        rows.append(_row("S1", "answers_right", right, s, v.verdict(right, ev), ev, txt))
    return rows


def findings_rows(tables) -> list[dict]:
    p = Paired(tables)
    return [*_speedups(p), *_versions(p), *_jit(p), *_q43(p), *_sweep(p), *_answers(p)]

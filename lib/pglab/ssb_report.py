"""Report section of study S1 (SSB: parallel query, JIT, versions) with study S4's SSB tests (JIT per query,
parallel query tests A and B), computed from the derived tables only: no server, no raw store.

How the verdicts are reached (docs/methodology.md, rule 4):

* Every comparison is a ratio of medians with a 95 % bootstrap interval (pglab.stats); an interval that
  contains 1 is "no detectable difference", and a verdict that needs a difference is then "undetermined".
* Parallel gains are judged against a ceiling: N workers plus the leader make N + 1 processes, and no more of
  them run at once than the machine has cores. The studies' own figures sit at 2/3 of their ceilings or above
  (S1: ≈ 5× with a ceiling of 6; S4 A: 2–3× with 3), so a speed-up whose interval lies at or above 2/3 of our
  ceiling reproduces them, one whose interval lies below it does not, anything else is undetermined.
* Whole-run figures use the "suite time": the sum of the 13 queries' times in one repetition (repetitions are
  interleaved rounds), so that one ratio with one interval speaks for the run; per-query ratios go beside it.
"""

from __future__ import annotations

import math
from pathlib import Path

import altair as alt
import polars as pl

from . import derived, stats
from .findings import NOT_RUN, NOT_SUPPORTED, SUPPORTED, UNDETERMINED
from .findings import table as findings_table
from .ssb import charts as ssb_charts
from .ssb import reference as ref

TITLE = "S1 · SSB: parallel query, JIT and versions (with S4's SSB tests)"
TABLES = (
    "environment_servers", "environment_machine", "environment_settings", "ssb_load", "ssb_availability",
    "ssb_executions", "ssb_summary", "ssb_speedup", "ssb_jit", "ssb_plans", "ssb_plans_study_workers",
    "ssb_checksums", "ssb_sweep", "ssb_sweep_summary",
)  # fmt: skip

NEAR_CEILING = stats.NEAR_CEILING  # share of the ceiling the studies' parallel gains reached (module docstring)
SETTINGS = ("shared_buffers", "effective_cache_size", "work_mem", "maintenance_work_mem", "max_worker_processes",
            "max_parallel_workers", "max_parallel_workers_per_gather", "min_parallel_table_scan_size", "jit")
_UNITS = {"8kB": 8192, "kB": 1024, "MB": 2**20, "B": 1}
_MODE_WORDS = {"serial": "serially", "parallel": "in parallel", "parallel_jit": "in parallel with JIT"}


# -- reading ----------------------------------------------------------------------------------------------------


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    return derived.read_table(name, profile, root=root)


def _floats(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
    # a table written without rows reads back as strings
    return df.with_columns(pl.col(c).cast(pl.Float64) for c in cols if c in df.columns)


class _Data:
    """The derived tables of one profile, with the few facts every part of the section needs."""

    def __init__(self, profile: str, root: Path | None):
        t = {n: _read(n, profile, root) for n in TABLES}
        self.execs = _floats(t["ssb_executions"], "seconds")
        self.timed = self.execs.filter(~pl.col("warmup"))
        self.ok = self.timed.filter(pl.col("error").is_null() & pl.col("seconds").is_not_null())
        self.sweep = _floats(t["ssb_sweep"], "seconds")
        self.sweep_ok = self.sweep.filter(~pl.col("warmup"), pl.col("error").is_null(), pl.col("seconds").is_not_null())
        self.summary = _floats(t["ssb_summary"], "median", "min", "max", "ci_low", "ci_high")
        self.speedup = _floats(t["ssb_speedup"], "median", "median_baseline", "ratio", "ci_low", "ci_high")
        self.jit = _floats(t["ssb_jit"], "median", "median_baseline", "ratio", "ci_low", "ci_high")
        self.plans, self.study_plans = t["ssb_plans"], t["ssb_plans_study_workers"]
        self.availability, self.checksums = t["ssb_availability"], t["ssb_checksums"]
        self.load, self.settings = t["ssb_load"], t["environment_settings"]
        self.sweep_summary = t["ssb_sweep_summary"]
        names = sorted(set(self.execs["server"]))
        env = t["environment_servers"].filter(pl.col("server").is_in(names))
        self.env = {r["server"]: r for r in env.sort("version_num", "server").iter_rows(named=True)}
        self.servers = [s for s in self.env] + [s for s in names if s not in self.env]  # oldest version first
        self.machine = dict(t["environment_machine"].select("key", "value").iter_rows())
        self.cores = int(self.machine["cpu_cores"]) if self.machine.get("cpu_cores") else None
        self.queries = [q for q in ref.QUERIES if q in set(self.execs["query"])]

    def version(self, server: str) -> str:
        e = self.env.get(server)
        return f"{e['major']}.{e['minor']}" if e else "unknown version"

    def workers(self, server: str) -> int | None:
        """Workers per Gather allowed in the timed parallel mode."""
        w = self.plans.filter(pl.col("server") == server, pl.col("mode") == "parallel")["allowed_workers"]
        return int(w.max()) if w.len() else None

    def ceiling(self, n_workers: int) -> float:
        return float(min(n_workers + 1, self.cores) if self.cores else n_workers + 1)

    def jit_reason(self, server: str) -> str | None:
        """Why the JIT mode has no data for this server (None when it has)."""
        a = self.availability.filter(pl.col("server") == server, pl.col("mode") == "parallel_jit")
        if a.is_empty():
            return "the parallel + JIT mode was not in this profile's modes"
        if not a["available"][0]:
            return f"{server} ({self.version(server)}) cannot run it: {a['reason'][0]}"
        if self.jit.filter(pl.col("server") == server).drop_nulls("ratio").is_empty():
            return "no successful parallel + JIT executions to compare"
        return None


# -- formatting -------------------------------------------------------------------------------------------------


def _inv(ratio, low, high) -> tuple:
    """A time ratio turned into a speed factor (how many times as fast), interval ends swapped."""

    def inv(v):
        return None if v is None or v == 0 or not math.isfinite(v) else 1 / v

    return inv(ratio), inv(high), inv(low)


def _x(v, low, high) -> str:
    if v is None:
        return "no data"
    if low is None or high is None:
        return f"{v:.2f}× (no interval)"
    return f"{v:.2f}× [{low:.2f}–{high:.2f}]"


def _pct(v, low, high) -> str:
    if v is None:
        return "no data"
    if low is None or high is None:
        return f"{v:+.0f} % (no interval)"
    return f"{v:+.0f} % [{low:+.0f}, {high:+.0f}]"


def _size(n_bytes: float) -> str:
    for unit, f in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n_bytes >= f and n_bytes % f == 0:
            return f"{int(n_bytes // f)}{unit}"
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes >= 2**20 else f"{int(n_bytes)} B"


def _setting(row: dict) -> str:
    unit = row["unit"] or ""
    if unit in _UNITS and row["setting"].lstrip("-").isdigit() and int(row["setting"]) >= 0:
        return _size(int(row["setting"]) * _UNITS[unit])
    return row["setting"]


def _range(values: list[float], fmt: str = ".2f", unit: str = "×") -> str:
    return f"{min(values):{fmt}}–{max(values):{fmt}}{unit}" if values else "none"


# -- method -----------------------------------------------------------------------------------------------------


def method(profile: str, root: Path | None = None) -> str:
    d = _Data(profile, root)
    servers = []
    for s in d.servers:
        e = d.env.get(s)
        vs = e["version_string"].split(" on ")[0] if e else "version not recorded"
        jit = "JIT available" if e and e["jit_available"] else "no JIT"
        servers.append(f"{s} = {vs} ({jit})")
    m = d.machine
    cpu = f" ({m['cpu_model']}, {m.get('memory_gib', '?')} GiB)" if m.get("cpu_model") else ""
    lines = [f"- **Servers**: {'; '.join(servers)}; on {d.cores or '?'} cores{cpu}."]

    lo = d.load.filter(pl.col("table") == "lineorder").sort("server")
    if not lo.is_empty():
        r = lo.row(0, named=True)
        prewarm = " and pre-warmed with pg_prewarm" if lo["prewarm_s"].is_not_null().all() else ""
        lines.append(
            f"- **Data**: SSB scale factor {r['sf']:g} (lineorder {r['rows']:,} rows, "
            f"{r['table_bytes'] / 2**20:,.0f} MiB), generator seed {r['seed']}, loaded by {r['method']}{prewarm}; "
            "the same rows on every server. Study S1: SF 70 (lineorder 41 GB)."
        )

    workers = sorted({w for s in d.servers if (w := d.workers(s)) is not None})
    w_txt = "/".join(str(w) for w in workers) or "?"
    no_jit = [f"{s} ({d.jit_reason(s).split(': ', 1)[-1]})" for s in d.servers if d.jit_reason(s)]
    thresholds = d.plans.filter(pl.col("mode") == "parallel_jit").select(
        "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost").unique().drop_nulls()
    thr = (" with the servers' JIT thresholds (" + ", ".join(f"{k} {v:g}" for k, v in thresholds.row(0, named=True)
                                                           .items()) + ")") if thresholds.height == 1 else ""
    modes = sorted(set(d.availability["mode"]), key=lambda x: ssb_charts.MODES.index(x)
                   if x in ssb_charts.MODES else 99)  # fmt: skip
    mode_txt = {"serial": "serial (max_parallel_workers_per_gather = 0)",
                "parallel": f"parallel ({w_txt} workers per Gather, max_parallel_workers the same)",
                "parallel_jit": f"parallel + jit = on{thr}" + (f" — not run on {'; '.join(no_jit)}" if no_jit else "")}
    lines.append("- **Modes**: " + "; ".join(mode_txt.get(x, x) for x in modes)
                 + f". Study S1: {ref.S1_ALLOWED_WORKERS} workers, on a larger machine.")  # fmt: skip

    st = d.settings.filter(pl.col("name").is_in(SETTINGS), pl.col("server").is_in(d.servers))
    parts, same = [], True
    for name in SETTINGS:
        vals = {r["server"]: _setting(r) for r in st.filter(pl.col("name") == name).iter_rows(named=True)}
        if not vals:
            continue
        if len(set(vals.values())) == 1 and len(vals) == len(d.servers):
            parts.append(f"{name} {next(iter(vals.values()))}")
        else:
            same = False
            parts.append(f"{name} " + ", ".join(f"{v} ({s})" for s, v in sorted(vals.items())))
    if parts:
        lines.append("- **Settings**" + (" (the same on every server)" if same else "") + ": " + ", ".join(parts)
                     + " (every non-default setting: table environment_settings).")  # fmt: skip

    counts = d.execs.group_by("server", "mode", "query").agg(
        (~pl.col("warmup")).sum().alias("timed"), pl.col("warmup").sum().alias("warm"))
    sw = d.sweep.group_by("server", "workers", "query").agg(
        (~pl.col("warmup")).sum().alias("timed"), pl.col("warmup").sum().alias("warm"))
    ks = sorted(set(d.sweep["workers"]))
    lines.append(
        f"- **Repetitions**: {_span(counts['timed'])} timed + {_span(counts['warm'])} warm-up per server × mode × "
        "query, interleaved round by round across servers, modes and queries (study S1: 5 runs, means reported)"
        + (f"; worker sweep (S4 test B) at max_parallel_workers_per_gather ∈ {{{', '.join(map(str, ks))}}}, "
           f"{_span(sw['timed'])} timed + {_span(sw['warm'])} warm-up each." if ks else ".")
    )  # fmt: skip
    lines.append(
        "- **Time**: client wall time of each statement over a Unix socket (query sent to last row fetched); "
        "medians with min–max, ratios of medians with 95 % bootstrap intervals over repetitions; every result "
        "checksummed. Plans: one untimed EXPLAIN (ANALYZE, BUFFERS) per server × mode × query, and a plain EXPLAIN "
        f"with the study's {ref.S1_ALLOWED_WORKERS} allowed workers."
    )
    qs = sorted(set(d.plans["query_set"].drop_nulls())) if "query_set" in d.plans.columns else []
    qs_txt = (f" (query set {', '.join(qs)}" + (", S1's pg_ssb_run tool" if qs == ["pg_ssb_run"] else "") + ")"
              if qs else "")  # fmt: skip
    lead = (f"The {len(d.queries)} SSB queries{qs_txt} timed on every server in {len(modes)} modes, with the "
            "plans that explain the times:")  # fmt: skip
    return lead + "\n\n" + "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _span(s: pl.Series) -> str:
    lo, hi = int(s.min()), int(s.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"


# -- charts -----------------------------------------------------------------------------------------------------


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    d = _Data(profile, root)
    ceilings = {d.ceiling(w) for s in d.servers if (w := d.workers(s)) is not None}
    out = [ssb_charts.times(d.summary),
           ssb_charts.speedup(d.speedup, ceiling=ceilings.pop() if len(ceilings) == 1 else None)]
    if not ssb_charts.jit_frame(d.jit).is_empty():
        out.append(ssb_charts.jit(d.jit))
    out.append(ssb_charts.workers(d.plans, d.study_plans))  # why q4.3 gets fewer workers
    if not d.sweep_summary.is_empty():
        out.append(ssb_charts.sweep(d.sweep_summary, cores=d.cores))
    return out


# -- findings ---------------------------------------------------------------------------------------------------


def _row(study: str, finding: str, claim: str, server: str, verdict: str, evidence: str) -> dict:
    return {"study": study, "finding": finding, "claim": claim, "server": server, "verdict": verdict,
            "evidence": evidence}  # fmt: skip


def _suite(ok: pl.DataFrame, cond: str, n_queries: int) -> pl.DataFrame:
    """Sum of the query times per (server, condition, repetition), for repetitions where every query ran."""
    return (
        ok.group_by("server", cond, "repetition")
        .agg(pl.col("seconds").sum().alias("total"), pl.col("query").n_unique().alias("queries"))
        .filter(pl.col("queries") == n_queries)
        .sort("server", cond, "repetition")
    )


def _totals(suite: pl.DataFrame, server: str, cond: str, value) -> list[float]:
    return suite.filter(pl.col("server") == server, pl.col(cond) == value)["total"].to_list()


def _ceiling_text(d: _Data, n: int) -> str:
    c = d.ceiling(n)
    capped = f", capped at the machine's {d.cores} cores" if d.cores and d.cores < n + 1 else ""
    return f"ceiling {c:g}× ({n} workers + the leader{capped}); a match needs ≥ {NEAR_CEILING * c:.2f}×"


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

"""The SSB report section's method text and charts (on the committed data exactly as before the split of
ssb_report)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from . import charts as ssb_charts
from . import reference as ref
from .report_data import SETTINGS, _Data, _setting, _span

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
    # the chart's order, then by name: a set's own order changes from one process to the next
    modes = sorted(set(d.availability["mode"]), key=lambda x: (ssb_charts.MODES.index(x)
                   if x in ssb_charts.MODES else 99, x))  # fmt: skip
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



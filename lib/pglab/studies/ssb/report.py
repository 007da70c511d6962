"""Report section of study S1 (SSB: parallel query, JIT, versions) with study S4's SSB tests (JIT per query,
parallel query tests A and B), computed from the derived tables only: no server, no raw store. Every claim goes
through the one rule of `pglab.core.stats.verdicts` with paired ratios (the fast mode by default, else per round), the
A/A noise floor and the ceiling flag (`pglab.studies.ssb.verdicts`).

The method text: the setup from the tables every run has, then the paired analysis (how comparisons are paired,
the A/A noise floor, the drift between halves of the run, which generator made the data and whether the answers
were checked against dbgen's, and the queries whose plan changes between versions); the charts; the findings."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import replicas
from ...core.stats import between_runs, method_notes, paired
from ...core.stats.findings import table as findings_table
from ...core.stats.stats import ratio_with_interval
from . import charts as ssb_charts
from . import paired_tables, verdicts
from . import reference as ref
from .derive import plan_changes
from .report_data import TABLES, Data

__all__ = ["TABLES", "charts", "findings", "method"]

SETTINGS = (
    "shared_buffers",
    "effective_cache_size",
    "work_mem",
    "maintenance_work_mem",
    "max_worker_processes",
    "max_parallel_workers",
    "max_parallel_workers_per_gather",
    "min_parallel_table_scan_size",
    "jit",
)
_UNITS = {"8kB": 8192, "kB": 1024, "MB": 2**20, "B": 1}


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


def _span(s: pl.Series) -> str:
    lo, hi = int(s.min()), int(s.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}".replace("%", " %")


# -- method -----------------------------------------------------------------------------------------------------


def _builds_line(d: Data) -> str | None:
    """How the servers were built, beside S1's -O2 builds, and how to compare -O2 source builds instead."""
    groups: dict[tuple, list[str]] = {}
    bases = replicas.base_names(d.servers)  # one name per server, not per replica cluster
    for s in d.servers:
        e = d.env.get(s)
        if not e or not e.get("build_opt") or bases[s] != s:
            continue
        how = (e.get("source"), e.get("build_compiler") or "compiler not recorded", e["build_opt"])
        groups.setdefault(how, []).append(s)
    if not groups:
        return None
    said = {"download": "downloaded builds (npm packages)", "build": "built here from source", "debian": "Debian's"}
    parts = [f"{', '.join(ss)}: {said.get(src, src)}, {cc} {opt}" for (src, cc, opt), ss in groups.items()]
    size = (
        " -Os optimises for size, so times here may sit above an -O2 build's of the same version; a ratio between "
        "versions holds for these builds."
        if any(opt == "-Os" for _, _, opt in groups)
        else ""
    )
    return (
        "- **Builds**: " + "; ".join(parts) + ". S1 compared versions built from source with -O2." + size + " To "
        "compare -O2 source builds instead, list each version as a source install, e.g. `servers.installs: "
        "- {name: pg16, source: {tarball: <release URL>, sha256: <its sha256>}, studies: [ssb]}`, built alike by "
        "`servers.build: {cflags: -O2}` (about 4 minutes each on 2 cores, once), and set `ssb.builds: any`, which "
        "takes the run's install of a version where there is one (docs/running.md, source builds)."
    )


def method(tables) -> str:
    d = Data(tables)
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
        bases = replicas.base_names(lo["server"].to_list())
        # per scale factor, the servers that hold it: the versions block and the JIT block load different scales
        at = []
        for sf in sorted(set(lo["sf"])):
            one = lo.filter(pl.col("sf") == sf).row(0, named=True)
            names = ", ".join(dict.fromkeys(bases[s] for s in lo.filter(pl.col("sf") == sf)["server"]))
            size = f"lineorder {one['rows']:,} rows, {one['table_bytes'] / 2**20:,.0f} MiB"
            at.append(f"scale factor {sf:g} on {names} ({size})")
        same = "every server" if len(at) == 1 else "every server at the same scale factor"
        lines.append(
            f"- **Data**: SSB at {'; '.join(at)}, generator seed {r['seed']}, loaded by {r['method']}{prewarm}; "
            f"the same rows on {same}. Study S1: SF 70 (lineorder 41 GB)."
        )
    if (builds := _builds_line(d)) is not None:
        lines.append(builds)

    workers = sorted({w for s in d.servers if (w := d.workers(s)) is not None})
    w_txt = "/".join(str(w) for w in workers) or "?"
    no_jit = [f"{s} ({d.jit_reason(s).split(': ', 1)[-1]})" for s in d.servers if d.jit_reason(s)]
    thresholds = (
        d.plans.filter(pl.col("mode") == "parallel_jit")
        .select("jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost")
        .unique()
        .drop_nulls()
    )
    thr = (
        (
            " with the servers' JIT thresholds ("
            + ", ".join(f"{k} {v:g}" for k, v in thresholds.row(0, named=True).items())
            + ")"
        )
        if thresholds.height == 1
        else ""
    )
    # the chart's order, then by name: a set's own order changes from one process to the next
    modes = sorted(
        set(d.availability["mode"]), key=lambda x: (ssb_charts.MODES.index(x) if x in ssb_charts.MODES else 99, x)
    )
    mode_txt = {
        "serial": "serial (max_parallel_workers_per_gather = 0)",
        "parallel": f"parallel ({w_txt} workers per Gather, max_parallel_workers the same)",
        "parallel_jit": f"parallel + jit = on{thr}" + (f" — not run on {'; '.join(no_jit)}" if no_jit else ""),
        "parallel_jit_forced": "parallel + jit = on, inlining and optimisation forced (their thresholds 0, as every "
        "plan passes them at S1's SF 70)" + (f" — not run on {'; '.join(no_jit)}" if no_jit else ""),
    }
    lines.append(
        "- **Modes**: "
        + "; ".join(mode_txt.get(x, x) for x in modes)
        + f". Study S1: {ref.S1_ALLOWED_WORKERS} workers, on a larger machine."
    )

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
        lines.append(
            "- **Settings**"
            + (" (the same on every server)" if same else "")
            + ": "
            + ", ".join(parts)
            + " (every non-default setting: table environment_settings)."
        )

    counts = d.execs.group_by("server", "mode", "query").agg(
        (~pl.col("warmup")).sum().alias("timed"), pl.col("warmup").sum().alias("warm")
    )
    sw = d.sweep.group_by("server", "workers", "query").agg(
        (~pl.col("warmup")).sum().alias("timed"), pl.col("warmup").sum().alias("warm")
    )
    ks = sorted(set(d.sweep["workers"]))
    lines.append(
        f"- **Repetitions**: {_span(counts['timed'])} timed + {_span(counts['warm'])} warm-up per server × mode × "
        "query, interleaved round by round across servers, modes and queries (study S1: 5 runs, means reported)"
        + (
            f"; worker sweep (S4 test B) at max_parallel_workers_per_gather ∈ {{{', '.join(map(str, ks))}}}, "
            f"{_span(sw['timed'])} timed + {_span(sw['warm'])} warm-up each."
            if ks
            else "."
        )
    )
    lines.append(
        "- **Time**: client wall time of each statement over a Unix socket (query sent to last row fetched); "
        "medians with min–max; every ratio the paired one the claims judge (below), with its interval; every result "
        "checksummed. Plans: one untimed EXPLAIN (ANALYZE, BUFFERS) per server × mode × query, and a plain EXPLAIN "
        f"with the study's {ref.S1_ALLOWED_WORKERS} allowed workers."
    )
    qs = sorted(set(d.plans["query_set"].drop_nulls())) if "query_set" in d.plans.columns else []
    qs_txt = (
        f" (query set {', '.join(qs)}" + (", S1's pg_ssb_run tool" if qs == ["pg_ssb_run"] else "") + ")" if qs else ""
    )
    lead = (
        f"The {len(d.queries)} SSB queries{qs_txt} timed on every server in {len(modes)} modes, with the "
        "plans that explain the times:"
    )
    return lead + "\n\n" + "\n".join(lines) + "\n" + _paired_lines(tables)


def clusters_markdown(modes: pl.DataFrame, versions: pl.DataFrame) -> str | None:
    """What each interval rests on when every server was measured on several clusters (params servers.clusters):
    None for a run of one cluster per server."""
    parts = []
    if (text := between_runs.clusters_text(modes)) is not None:
        parts.append("modes: " + text)
    if (text := between_runs.clusters_text(versions)) is not None:
        parts.append("17 over 16: " + text)
    over, how = "the queries; the suites take the same", " (17 over 16: cluster k over cluster k)"
    return method_notes.clusters_paragraph(parts, "SSB load", "per-execution tables", over, how=how)


def _paired_lines(tables) -> str:
    """The paired analysis: pairing, noise floor, drift, generator, answers, q4.3's workers, plans across versions."""
    t = {
        n: tables.optional(n)
        for n in ("ssb_noise", "ssb_drift", "ssb_answers", "ssb_fingerprints", "ssb_load", "ssb_plans_scaled")
    }
    pr = tables.optional("ssb_paired")
    if "method" in pr.columns and paired.is_fast(pr["method"]):
        how = (
            "in the fast mode: the 10 % quantile of a cell's executions over all rounds, against the "
            "baseline's, i.e. what a query costs when the machine is not slowed; the interval resamples the "
            "rounds, the same for both sides (its coverage stated, at most what min–max of the rounds covers)"
        )
    else:
        how = (
            "within the schedule's rounds: per round one ratio, their geometric mean with a 95 % bootstrap "
            "interval over rounds (min–max below 10 rounds, labelled so)"
        )
    lines = [
        "- **Paired analysis**: every comparison (parallel over serial, JIT over parallel, 17 over 16, "
        f"workers over none) is made {how}; suite figures sum the queries of a round. Verdicts follow "
        "docs/verdicts.md."
    ]
    if (clusters := clusters_markdown(pr, tables.optional("ssb_versions_paired"))) is not None:
        lines.append(clusters)
    nz = t["ssb_noise"]
    if nz.height:
        parts = [
            f"{r['server']}: floor ±{_pct(r['floor'])}, false-difference rate {_pct(r['false_difference_rate'])}"
            f" over {r['n_pairs']} A/A pairs"
            for r in nz.sort("server").iter_rows(named=True)
        ]
        lines.append(
            "- **Noise floor** (A/A control: the parallel mode measured twice per round under two labels, "
            "parallel and parallel_aa): " + "; ".join(parts) + ". An effect below the floor supports "
            "nothing."
        )
    dr = t["ssb_drift"]
    if dr.height:
        parts = [
            f"{r['server']} {ratio_with_interval(r['drift'], r['low'], r['high'], digits=3)}"
            for r in dr.drop_nulls("drift").sort("server").iter_rows(named=True)
        ]
        lines.append(
            "- **Drift** (parallel suite time, 2nd half of the rounds over the 1st): "
            + ("; ".join(parts) or "too few rounds")
            + "; pairing removes what both conditions share."
        )
    ld = t["ssb_load"]
    if "flavor" in ld.columns and ld.height:
        r = ld.row(0, named=True)
        lines.append(f"- **Generator**: {r['generator']} (dataset {r['dataset_id']}).")
    an = t["ssb_answers"]
    if an.height:
        checked = an.filter(pl.col("checked"))
        lines.append(
            "- **Answers**: "
            + (
                f"{checked.height} server × query results checked against dbgen's expected rows at SF 1 "
                f"({int(checked['executions'].sum()):,} executions, {int(checked['wrong'].sum())} wrong)."
                if checked.height
                else "not checked against dbgen's expected rows (the data is not dbgen's at SF 1); "
                "servers and modes are compared with each other."
            )
        )
    sc = t["ssb_plans_scaled"]
    if sc.height:
        lines.append(
            f"- **q4.3's workers**: a plan-only EXPLAIN with {sc['allowed_workers'][0]} workers allowed and "
            f"min_parallel_table_scan_size scaled by SF/70 to {sc['min_parallel_table_scan_kb'][0]} kB, so "
            "that table sizes stand to it as S1's did at SF 70."
        )
    fp = t["ssb_fingerprints"]
    if fp.height:
        changes = plan_changes(fp)
        lines.append(
            "- **Plans across versions** (fingerprints of EXPLAIN (COSTS OFF)): "
            + ("; ".join(changes) if changes else "the same plan on every version for every query")
            + "."
        )
    return "\n".join(lines)


# -- charts -----------------------------------------------------------------------------------------------------


def charts(tables) -> list[alt.TopLevelMixin]:
    d = Data(tables)
    ceilings = {d.ceiling(w) for s in d.servers if (w := d.workers(s)) is not None}
    lo = d.load.filter(pl.col("table") == "lineorder")
    sf = dict(zip(lo["server"], lo["sf"], strict=True)) if not lo.is_empty() else None  # labels the scale factors
    out = [
        ssb_charts.times(d.summary, sf),
        ssb_charts.speedup(d.speedup, ceiling=ceilings.pop() if len(ceilings) == 1 else None, sf=sf),
    ]
    if not ssb_charts.jit_frame(d.jit).is_empty():
        out.append(ssb_charts.jit(d.jit))
    out.append(ssb_charts.workers(d.plans, d.study_plans))  # why q4.3 gets fewer workers
    if not d.sweep_summary.is_empty():
        out.append(ssb_charts.sweep(d.sweep_summary, cores=d.cores))
    return out


# -- findings ---------------------------------------------------------------------------------------------------


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from the run's tables (`Study.judge`, which stores them once)."""
    return findings_table(verdicts.findings_rows(tables))


def answers(tables, f: pl.DataFrame) -> list[str]:
    """Plain sentences for the report's first screen: versions, parallel query, JIT (with scale and cores)."""
    from ...core.stats import findings as fnd

    # each server's scale: the JIT servers may hold a larger one than the versions (ssb.jit_sf)
    sf_of = (
        dict(tables["ssb_load"].group_by("server").agg(pl.col("sf").max()).iter_rows()) if "ssb_load" in tables else {}
    )
    at = f"SSB SF {min(sf_of.values()):g}" if sf_of else "SSB"
    out = []
    ser, par = fnd.measured(f, "newer_version_serial"), fnd.measured(f, "newer_version_parallel")
    if ser or par:
        b, a = (ser or par)[0]["server"].split(" vs ")
        ways = [f"{fnd.shown(r)} {how}" for rows, how in ((ser, "serially"), (par, "in parallel")) for r in rows]
        out.append(f"{b} against {a} on the 13 SSB queries: {' and '.join(ways)} here ({at}).")
    pa = fnd.measured(f, "parallel_a")
    if pa:
        x = [1 / r["our_value"] for r in pa]
        out.append(
            f"Parallel query runs them {fnd.span(x)}× faster than serial on "
            f"{', '.join(r['server'] for r in pa)} ({at}; the studies' 2–5× came from many more cores)."
        )
    jpq = fnd.measured(f, "jit_per_query")
    if jpq:  # one sentence for every JIT server, so the first screen stays short
        on = " and ".join(f"{fnd.shown(r)} on {r['server']}" for r in jpq)
        sfs = sorted({sf_of[r["server"]] for r in jpq if r["server"] in sf_of})
        where = f"SSB SF {'/'.join(f'{x:g}' for x in sfs)}" if sfs else "SSB"
        pair = tables["ssb_paired"] if "ssb_paired" in tables else pl.DataFrame()
        if paired_tables.jit_mode(pair) == "parallel_jit":
            how, regime = "JIT at the default thresholds,", "where the plans inline and optimise"
        else:  # net of compiling (paired_tables.with_net_of_compile)
            how, regime = "JIT's execution, net of compiling,", "inlining and optimisation forced as at SF 70"
        out.append(
            f"{how} against parallel without it, on the 13 SSB queries: {on} "
            f"({where}, {regime}; S4 saw 4–32 % less time)."
        )
    jit = f.filter(pl.col("finding").str.starts_with("jit_"), pl.col("verdict") == fnd.NOT_TESTABLE)
    if jit.height and not jpq:
        need = jit["evidence"][0].rsplit("(needs ", 1)[-1].rstrip(")")
        out.append(f"The studies' JIT gains on SSB are not testable at {at}: JIT needs {need} to inline and optimise.")
    return out

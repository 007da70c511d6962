"""The report's section for study S2 (what auto_explain costs): method, charts and findings from the derived
tables of notebook 40 alone (`data/derived/<profile>/auto_explain_*.csv` and `environment_servers`); no
server, no raw store. The findings are judged from the stage's evidence table (`auto_explain_evidence`: each
claim, our figure and its noise floor) by `verdicts.judge`."""

from __future__ import annotations

import json

import polars as pl

from ...core import replicas
from ...core.stats import between_runs, method_notes, paired
from ...core.stats.noise import MIN_AA_PAIRS
from . import charts as auto_explain_charts
from . import verdicts as auto_explain_verdicts
from .derive import TXNS_PER_RUN

TABLES = (
    "auto_explain_evidence",
    "auto_explain_ratios",
    "auto_explain_summary",
    "auto_explain_latencies",
    "auto_explain_plans",
    "auto_explain_servers",
    "auto_explain_noise",
    "environment_servers",
)
LOADING = {
    "shared_preload": "`shared_preload_libraries` (a restart to switch, as the study)",
    "session_preload": "`session_preload_libraries` per connection (no restart)",
}


def _list(values) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


def _span(values: pl.Series, unit: str) -> str:
    lo, hi = values.min(), values.max()
    return f"{lo} {unit}" if lo == hi else f"{lo}-{hi} {unit}"


def _condition_settings(lat: pl.DataFrame) -> dict[str, str]:
    """condition → its auto_explain.* settings as the connections carried them (item settings left out)."""
    out = {}
    for cond, g in lat.sort("condition", "item", "repetition").group_by("condition", maintain_order=True):
        raw = g["session_settings"].drop_nulls()
        s = json.loads(raw[0]) if raw.len() else {}
        ae = {k.removeprefix("auto_explain."): v for k, v in sorted(s.items()) if k.startswith("auto_explain.")}
        out[cond[0]] = ", ".join(f"{k} = {json.dumps(v)}" for k, v in ae.items()) or "no auto_explain setting"
    return out


def _plans_text(plans: pl.DataFrame) -> tuple[str, str]:
    """(plan shape per item, the table's size) from the untimed EXPLAIN ANALYZE of each server and item."""
    shapes = []
    for (item,), g in plans.sort("item", "server").group_by(["item"], maintain_order=True):
        r = g.row(0, named=True)
        workers = (
            f", workers planned / launched {_list(g['workers_planned'])} / {_list(g['workers_launched'])}"
            if (g["workers_planned"] > 0).any()
            else ""
        )
        shapes.append(f"{item}: `{r['nodes']}`{workers}")
    size = ""
    serial = plans.filter(pl.col("nodes") == "Aggregate > Seq Scan")
    if serial.height:  # the scan returns every row of tab1, the aggregate one more
        size = f"{round(serial['rows_processed'].min()) - 1:,} rows"
    return "; ".join(shapes), size


def _statistics(tables, baseline: str, per_run: str) -> str:
    """The statistics bullet: pairing, A/A noise floor, drift."""
    noise = tables["auto_explain_noise"]
    drift = tables.optional("auto_explain_drift")
    every = noise.filter(pl.col("server") == "all")
    floors = "; ".join(
        f"{r['server']} {r['metric'].removeprefix('latency, ')} ±{r['floor']:.1%}"
        for r in noise.filter(pl.col("server") != "all").iter_rows(named=True)
        if r["floor"] is not None
    ).replace("%", " %")
    fdr = (
        f"{every['false_difference_rate'][0]:.0%} of {every['n_pairs'][0]} A/A comparisons".replace("%", " %")
        if every.height and every["false_difference_rate"][0] is not None
        else "no A/A comparison"
    )
    moved = ""
    if drift.height and drift["drift"].drop_nulls().len():
        d = drift["drift"].drop_nulls()
        moved = (
            f" The baseline moved by {d.min():.2f}× to {d.max():.2f}× between the first and the second half of "
            "the rounds (per server and item, `auto_explain_drift`): pairing cancels what both sides shared."
        )
    fast = paired.is_fast(tables["auto_explain_ratios"]["method"])
    how = (
        "Every comparison is made in the machine's fast mode: the 10 % quantile of every transaction of a cell "
        f"(all rounds, at most {TXNS_PER_RUN} per run, evenly spaced) over *{baseline}*'s (or a logged "
        "condition's over its nothing-logged twin), the interval from resampling the rounds (both sides alike): "
        "on this VM whole 1-s runs went ~2× slow, which no per-run value survives"
        if fast
        else f"Every comparison is paired within rounds: per round a condition's latency over *{baseline}*'s (or a "
        "logged condition's over its nothing-logged twin), the geometric mean of the round ratios, and an "
        "interval over the rounds: min–max below 10 rounds, labelled so, a 95 % bootstrap from 10"
    )
    return (
        f"- **Statistics**: {per_run}. {how}. Verdicts by the one rule of `pglab.verdicts` (docs/verdicts.md); "
        '"costs nothing" claims as no change within ±5 %. **Noise floor** from an A/A control (the baseline '
        f"twice, interleaved): {floors or 'none'}; intervals excluding 1: {fdr}. A claim is gated by its item's "
        f"floor where that rests on at least {MIN_AA_PAIRS} A/A pairs, else by the item's over every server, else "
        "by its server's over all items (else every server's), never below the item's values' resolution. An "
        f"effect below the floor decides nothing.{moved}"
    )


def clusters_markdown(ratios: pl.DataFrame, noise: pl.DataFrame | None = None) -> str | None:
    """What each comparison rests on when every server was measured on several clusters (params
    servers.clusters): per base server, clusters × rounds and the between-cluster sd; None for one cluster."""
    text = between_runs.clusters_text(ratios)
    pairs = ""
    if noise is not None and noise.height:
        per = noise.filter((pl.col("server") != "all") & (pl.col("metric") == "latency, all items"))
        pairs = "; ".join(f"{r['server']} {r['n_pairs']}" for r in per.sort("server").iter_rows(named=True))
        pairs = f" (A/A pairs: {pairs})" if pairs else ""
    tables = "per-cluster tables: latencies, summary, log checks, plans, timer, drift"
    over = "all its comparisons but the A/A control's, whose two sides share a cluster"
    more = (
        "The findings are pooled the same way: a ratio claim with its comparison's variance, a scale-free quantity "
        "(ns per row, share removed, the serial over the parallel overhead) from each cluster's rounds with the "
        "variance of the quantities' own disagreement between clusters; the noise floor of a server is over its A/A "
        f"pairs, each pooled over its clusters as the comparisons are{pairs}."
    )
    return method_notes.clusters_paragraph([text] if text else [], "`tab1`", tables, over, more=more)


def _servers_text(srv: pl.DataFrame, version: dict[str, str]) -> str:
    """'pg15 = PostgreSQL 15.10' per server; a server measured on several clusters once, with its clusters."""
    names = srv["server"].to_list()
    bases = replicas.base_names(names)
    out = []
    for base in sorted(set(bases.values())):
        mine = sorted((n for n in names if bases[n] == base), key=lambda n: replicas.split_name(n)[1])
        v = next((version[n] for n in [base, *mine] if n in version), "version not recorded")
        out.append(f"{base} = {v}" + (f" ({len(mine)} clusters: {', '.join(mine)})" if len(mine) > 1 else ""))
    return "; ".join(out)


def _per_run_text(lat: pl.DataFrame) -> str:
    """What one run's latency is: the median of its transactions' (runs that logged them) or 1000 / tps."""
    mean = "1000 / tps (pgbench's `latency average` before its rounding to 3 decimals)"
    if "value_is" in lat.columns and set(lat["value_is"].drop_nulls()) == {"median"}:
        return (
            f"each run's latency = the median of its transactions' latencies (`pgbench -l`; a random sample "
            f"of about 1,000 kept where a run has more), robust to a burst of other load over part of a run; "
            f"the mean, {mean}, is kept beside it"
        )
    return f"each run's latency = {mean}"


def method(tables) -> str:
    env, srv = tables["environment_servers"], tables["auto_explain_servers"]
    summ, lat = tables["auto_explain_summary"], tables["auto_explain_latencies"]
    plans, ratios = tables["auto_explain_plans"], tables["auto_explain_ratios"]
    logs = tables.optional("auto_explain_log_summary")  # no log reachable: none
    version = {r["server"]: r["version_string"].split(" on ")[0] for r in env.iter_rows(named=True)}
    servers = _servers_text(srv, version)
    loading = []
    for (how,), g in srv.sort("server").group_by(["loading"], maintain_order=True):
        loading.append(
            f"through {LOADING.get(how, how)} on {', '.join(g['server'])} "
            f"({_span(g['restarts'], 'restarts')} per server)"
        )
    skipped = [f"{r['server']} skipped: {r['skipped']}" for r in srv.iter_rows(named=True) if r.get("skipped")]
    shapes, size = _plans_text(plans)
    measured = lat.filter(~pl.col("warmup").cast(pl.Boolean))
    warm = lat.filter(pl.col("warmup").cast(pl.Boolean)).group_by("server", "condition", "item").len()["len"]
    settings = _condition_settings(lat)
    labels = (
        summ.group_by("condition", "label", "condition_order")
        .agg(pl.col("item").unique().sort())
        .sort("condition_order")
    )
    conds = "; ".join(
        f"*{r['label']}* ({settings.get(r['condition'], '?')}; {', '.join(r['item'])})"
        for r in labels.iter_rows(named=True)
    )
    base = ratios.filter(pl.col("comparison") == "overhead")["baseline"]
    baseline = summ.filter(pl.col("condition") == base[0])["label"][0] if base.len() else "none"
    commands = " / ".join(f"`{c}`" for c in sorted(set(measured["command"].drop_nulls())))
    clients = _list(measured["client_version"].drop_nulls())
    proof = ""
    if logs.width and logs.height:
        runs, passed = int(logs["runs"].sum()), int(logs["passed"].sum())
        # the log the servers wrote, where recorded (runs since the stage logs to stderr as the study did)
        checks = tables.optional("auto_explain_log_checks")
        dests = sorted(set(checks["log_destination"].drop_nulls())) if "log_destination" in checks.columns else []
        kind = f" ({', '.join(dests)}{', as the study’s' if dests == ['stderr'] else ''})" if dests else ""
        proof = (
            f" Every run's server log{kind} was checked against what its condition must log (a plan per "
            f"transaction or none): {passed} of {runs} runs passed."
        )
    statistics = _statistics(tables, baseline, _per_run_text(lat))
    clusters = clusters_markdown(ratios, tables.optional("auto_explain_noise"))
    per = "cluster" if clusters else "server"
    return "\n".join(
        [
            f"Notebook 40 ran the study's matrix with one client and one thread on each server, `tab1(c1 int)` with "
            f"{size or 'the params’ rows'}.",
            "",
            f"- **Servers**: {servers}; auto_explain loaded {'; '.join(loading)}"
            f"{''.join('; ' + x for x in skipped)}. Server settings: the params' `auto_explain.server_settings` (the "
            "study's postgresql.conf by default), for this stage only.",
            f"- **Items** (plans from one untimed EXPLAIN ANALYZE per server): {shapes}.",
            f"- **Conditions**, auto_explain settings per connection: {conds}.",
            f"- **Runs**: {commands} with pgbench of {clients}; {_span(summ['n'], 'run(s)')} per {per}, condition and "
            f"item after {_span(warm, 'warm-up run(s)') if warm.len() else 'no warm-up run'}, every condition in every "
            f"round, servers interleaved.{proof}",
            statistics,
            *([clusters] if clusters else []),
        ]
    )


def charts(tables) -> list:
    """Overhead per condition (ratio with its interval, the study's as a tick) and latency per condition."""
    ratios, summ = tables["auto_explain_ratios"], tables["auto_explain_summary"]
    out = []
    if ratios.height and ratios["ratio"].drop_nulls().len():
        out.append(auto_explain_charts.overhead_chart(ratios))
    if summ.height:
        out.append(auto_explain_charts.latency_chart(summ))
    return out


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from its evidence table (`verdicts.judge`; `Study.judge` stores them once)."""
    return auto_explain_verdicts.judge(tables["auto_explain_evidence"])


def _quantities(f: pl.DataFrame, finding: str, unit: str) -> str | None:
    """'50–52': our figures of a quantity claim over its servers, read from the evidence ('Our 51.7 ns per row')."""
    import re

    rows = f.filter(pl.col("finding") == finding) if f.height else f
    xs = [float(m.group(1)) for e in rows["evidence"] if (m := re.match(rf"Our ([\d.]+) {re.escape(unit)}", e))]
    if not xs:
        return None
    lo, hi = f"{min(xs):.2g}", f"{max(xs):.2g}"
    return lo if lo == hi else f"{lo}–{hi}"


def _range(ratios: list[float]) -> str:
    """Time ratios in words, from the least change to the most: '2–21 % faster', '3 % slower', 'up to 21 %
    faster', 'between 4 % faster and 9 % slower'."""
    from ...core.stats import findings as fnd

    lo, hi = min(ratios), max(ratios)
    same = fnd.change(1.0)
    if lo < 1 < hi and same not in (fnd.change(lo), fnd.change(hi)):
        return f"between {fnd.change(lo)} and {fnd.change(hi)}"
    near, far = (hi, lo) if fnd.change(hi) == same or hi <= 1 else (lo, hi)
    a, b = fnd.change(near), fnd.change(far)
    if a == b:
        return a
    if a == same:
        return f"up to {b}"
    if 0.5 < far < 2:  # both in percent: one unit
        word = "faster" if far < 1 else "slower"
        return f"{abs(near - 1) * 100:.0f}–{abs(far - 1) * 100:.0f} % {word}"
    return f"{a} to {b}"


def answers(tables, f: pl.DataFrame) -> list[str]:
    """Plain sentences for the report's first screen: what loading, logging and timing cost."""
    from ...core.stats import findings as fnd

    out = []
    load = fnd.measured(f, "loading")
    if load:
        worst = max(r["our_high"] or r["our_value"] for r in load)
        # the figures first, then the upper end the widest interval leaves open (pg15's bursts can stretch it)
        out.append(
            f"Loading auto_explain (logging nothing) leaves a tiny query at {fnd.servers_text(load)}"
            + (f"; within the intervals it could cost up to {fnd.change(worst, 'more')}." if worst > 1 else ".")
        )
    log = fnd.measured(f, "logging_analyze")
    if log:
        if all(fnd.holds_one(r) for r in log):
            # every interval holds no change: the figures alone would read as an effect that is not shown
            out.append(
                f"Logging every plan with log_analyze: no clear change for a tiny query "
                f"({fnd.servers_text(log)}; every interval holds 1, together "
                f"{min(r['our_low'] for r in log):.2f}–{max(r['our_high'] for r in log):.2f}×)."
            )
        else:
            # the range only over the servers whose interval shows a change; noise is "no clear change", named
            shown = [r for r in log if not fnd.holds_one(r)]
            noise = "; ".join(
                f"{r['server']} {fnd.shown(r).removeprefix('no clear change ')}" for r in log if fnd.holds_one(r)
            )
            out.append(
                f"Logging every plan with log_analyze makes a tiny query {_range([r['our_value'] for r in shown])}"
                f" ({fnd.servers_text(shown)}){f'; no clear change on {noise}' if noise else ''}."
            )
    # the scale-free quantities (ns per row, share removed) are in the evidence, not in the ratio columns
    per_row = _quantities(f, "analyze_count_serial", "ns per row")
    removed = _quantities(f, "timing_count_serial", "of the overhead removed")
    if per_row:
        out.append(
            f"log_analyze costs about {per_row} ns per row on a serial count (the study: 45 ns)"
            + (f"; log_timing = off removes {removed} of it (the study: 0.87)." if removed else ".")
        )
    return out

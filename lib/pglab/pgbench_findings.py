"""What our pgbench data says next to what studies S3 and S4 reported, computed from the derived tables.

Each finding is one row: topic, what the study found, what our data says. A difference is stated only
when its 95 % interval excludes 1; otherwise the sentence says so ("no detectable difference", "too few
repetitions to tell"), never a win."""

from __future__ import annotations

import polars as pl

from . import stats

STUDY = {
    "degradation": "S3: 7.3-8.2 lost throughput run after run without vacuum; from 8.3 on (HOT) no "
    "degradation was visible over 15 runs.",
    "select_only": "S3: at scales 1 and 10 the oldest version (7.3) was fastest (data in the OS cache, "
    "small default shared_buffers); at scale 100 newer versions won. Each version ran its own defaults.",
    "scaling": "S4: on 72 cores v11 gave +5 % reference (select) and +10 % update throughput over v10 "
    "across the client counts.",
    "load": "S3: load time mostly improved with newer versions, but too unstable for a firm conclusion.",
    "growth": "S3: du -sk of the data directory before and after the 15 runs: the cluster grows without vacuum.",
}


def ratio_text(ratio, low, high, verdict) -> str:
    if ratio is None:
        return "no data"
    ci = f"95 % CI {low:.2f}-{high:.2f}; " if low is not None and high is not None else ""
    return f"{ratio:.2f}x ({ci}{verdict})"


def _degradation(trend: pl.DataFrame, series: pl.DataFrame) -> str:
    if trend.is_empty():
        return "The series did not run."
    parts, fell, rose, unclear = [], [], [], []
    for r in trend.iter_rows(named=True):
        who = f"{r['server']} scale {r['scale']}"
        failed = f", {r['failed_runs']} failed run(s)" if r["failed_runs"] else ""
        if r["verdict"] == stats.LOWER:
            fell.append(who)
        elif r["verdict"] == stats.HIGHER:
            rose.append(who)
        elif r["verdict"] != stats.NO_DIFFERENCE:
            unclear.append(who)
        parts.append(
            f"{who}: tps of the last {r['window']} / first {r['window']} of {r['runs']} runs = "
            f"{ratio_text(r['ratio_last_first'], r['ci_low'], r['ci_high'], r['verdict'])}{failed}"
        )
    if fell:
        head = f"Throughput fell over the series on {', '.join(fell)}."
    elif unclear and len(unclear) == trend.height:
        head = "Our data cannot tell: too few runs in the series for an interval (raise series.runs)."
    else:
        head = "No server shows a detectable degradation over the series, as the study found for 8.3 and later."
    wide = [(1 - r["ci_low"], f"{r['server']} scale {r['scale']}") for r in trend.iter_rows(named=True)
            if r["verdict"] == stats.NO_DIFFERENCE and r["ci_low"] is not None and r["ci_low"] < 0.9]
    if wide:
        drop, who = max(wide)
        head += (f" {'Elsewhere the' if fell else 'But the'} intervals are wide: a drop of up to {drop:.0%} "
                 f"({who}) is not excluded, so this run cannot confirm 'no degradation' there either (more runs "
                 "or series repetitions narrow it).")
    if rose:
        head += f" Throughput rose on {', '.join(rose)} (caches still warming after the load?)."
    if unclear and len(unclear) < trend.height:
        head += f" Too few runs to tell on {', '.join(unclear)}."
    note = (" Runs of one series are consecutive, not independent repetitions: read the interval as a guide "
            "to the noise, not a test.")  # fmt: skip
    return head + " " + "; ".join(parts) + "." + _shared_drift(series) + note


def _shared_drift(series: pl.DataFrame) -> str:
    """Do the servers' run-to-run curves move together? Then the swings are the machine's, not the engines'."""
    out = []
    for (scale,), g in series.filter(pl.col("series") == 0).group_by(["scale"], maintain_order=True):
        wide = g.pivot(on="server", index="run", values="tps").drop("run").drop_nulls()
        if wide.width < 2 or wide.height < 4:
            continue
        a, b = wide.columns[:2]
        r = wide.select(pl.corr(a, b)).item()
        if r is not None and r > 0.5:
            out.append(f"scale {scale}: r = {r:.2f} between {a} and {b}")
    if not out:
        return ""
    return (" The servers' curves rise and fall together (" + "; ".join(out) + "): much of the run-to-run "
            "swing is the machine's, which interleaving spreads over every server instead of blaming one.")


def _versus(versions: pl.DataFrame, what: str, none_msg: str) -> str:
    rows = versions.filter(pl.col("what") == what) if not versions.is_empty() else versions
    if rows.is_empty():
        return none_msg
    return "; ".join(
        f"{r['group']}: {r['server']} vs {r['baseline']} "
        f"= {ratio_text(r['ratio'], r['ci_low'], r['ci_high'], r['verdict'])}"
        for r in rows.iter_rows(named=True)
    ) + "."


def _scaling(summary: pl.DataFrame, versions: pl.DataFrame) -> str:
    if summary.is_empty():
        return "The scaling experiment did not run."
    peaks = []
    for (server, mode), g in summary.drop_nulls("median").group_by(["server", "mode"], maintain_order=True):
        top = g.sort("median", descending=True).row(0, named=True)
        peaks.append(f"{server} {mode} peaks at {top['clients']} clients ({top['median']:,.0f} tps median)")
    out = "; ".join(sorted(peaks)) + "."
    if not versions.is_empty():
        top_clients = summary["clients"].max()
        at_max = versions.filter((pl.col("what") == "scaling tps") & pl.col("group").str.ends_with(f"={top_clients}"))
        if not at_max.is_empty():
            out += " At the most clients: " + _versus(at_max, "scaling tps", "")
    return out


def _growth(trend: pl.DataFrame) -> str:
    rows = trend.drop_nulls("db_growth") if not trend.is_empty() else trend
    if rows.is_empty():
        return "No sizes recorded."
    parts = []
    for r in rows.iter_rows(named=True):
        dd = f", data directory x{r['datadir_growth']:.2f}" if r["datadir_growth"] is not None else ""
        parts.append(f"{r['server']} scale {r['scale']}: database x{r['db_growth']:.2f}{dd}")
    return "Over the series (fresh load to last run): " + "; ".join(parts) + "."


def findings(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    v = tables["pgbench_versions"]
    one = "Only one server: no version comparison."
    rows = [
        ("No-vacuum degradation", STUDY["degradation"],
         _degradation(tables["pgbench_series_trend"], tables["pgbench_series"])),
        ("Select-only by version", STUDY["select_only"],
         _versus(v, "select-only tps", one) + " Here every server runs the same explicit settings."),
        ("Scale-up with clients", STUDY["scaling"], _scaling(tables["pgbench_scaling_summary"], v)),
        ("Load time", STUDY["load"], _versus(v, "load time", one) + " (below 1: faster than the baseline)"),
        ("Cluster growth", STUDY["growth"], _growth(tables["pgbench_series_trend"])),
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=["topic", "study", "our data"], orient="row")


def as_markdown(df: pl.DataFrame) -> str:
    return "\n\n".join(f"**{r['topic']}.** *{r['study']}*\n\nOurs: {r['our data']}" for r in df.iter_rows(named=True))

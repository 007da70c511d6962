"""What our pgbench data says next to what studies S3 and S4 reported, as `pglab.core.findings` rows computed
from the stage's tables (notebook 30 and the report's section share them).

One row per (finding, server): the study's claim with its numbers, a verdict from the fixed vocabulary and
our evidence with its 95 % interval. A difference is stated only when its interval excludes 1; an interval
that contains 1 is "no detectable difference", which supports neither a win nor a tie. A claim that
something does *not* happen (no degradation) is supported only when the interval excludes more than a
small effect (`DROP`), not merely because it contains 1."""

from __future__ import annotations

import math
import re

import polars as pl

from ...core import findings as fs
from ...core import stats

DROP = 0.10  # "no degradation" holds when the interval excludes a loss of more than 10 %
STUDY_SCALES = (1, 10, 100)  # the scales S3 ran; its select-only claim differs below and above the OS cache

CLAIMS = {
    "no_vacuum_tps": "S3: from 8.3 on (HOT), 15 consecutive `pgbench -n -c 30 -t 100` runs without vacuum showed "
    "no visible loss of tps at scales 1, 10 and 100 (9.0+'s slight dip read as noise); every version on its "
    "defaults, so autovacuum on from 8.3.",
    "no_vacuum_before_hot": "S3: 7.3-8.2 lost tps run after run over the same 15 runs without vacuum (7.3 and "
    "7.4 the classic downward curve), 8.3 with HOT no longer.",
    "select_only_small": "S3: at scale {scale} the oldest version, 7.3, had the highest select-only tps "
    "(`pgbench -S -c 30 -t 1000`, 3 runs): the data sat in the OS cache, where 7.3's small default "
    "shared_buffers helps.",
    "select_only_large": "S3: at scale {scale} (beyond the OS cache) select-only tps rose with every newer version.",
    "load_time": "S3: `time pgbench -i` mostly got faster with newer versions, but varied too much for more than "
    "'it seems so'.",
    "cluster_growth": "S3: `du -sk $PGDATA` after the load and again after the 15 runs without vacuum (charted, no "
    "figures in the text): the cluster grows while nothing vacuums.",
    "scaleup": "S4: on 72 cores, v11 gave about {gain} {what} throughput than v10 across the client counts of its "
    "scale-up curve (newer version above older).",
}
_S4 = {"select-only": ("+5 % more", "reference (select-only)"), "tpcb": ("+10 % more", "update (TPC-B)")}


# -- formatting ---------------------------------------------------------------------------------------------------


def ratio_text(ratio, low, high) -> str:
    """'1.31× [1.25–1.38]' (95 % interval, `stats.ratio_with_interval`), or the ratio alone with the reason there
    is no interval."""
    text = stats.ratio_with_interval(ratio, low, high, none="no data")
    return text + (" (too few repetitions for an interval)" if ratio is not None and not stats.interval(low, high)
                   else "")  # fmt: skip


def _num(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def _mib(b) -> str:
    return f"{b / 2**20:,.1f} MiB"


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f} %"


_UNIT_BYTES = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 2**20, "GB": 2**30}


def setting_text(settings: pl.DataFrame, server: str, name: str, default: str = "server default") -> str:
    """A setting as the server reported it, sizes in readable units; `default` when it was not set."""
    if settings.is_empty():
        return "not recorded"
    r = settings.filter((pl.col("server") == server) & (pl.col("name") == name))
    if r.is_empty():
        return default
    value, unit = r["setting"][0], r["unit"][0] or ""
    if unit in _UNIT_BYTES and str(value).lstrip("-").isdigit():
        b = int(value) * _UNIT_BYTES[unit]
        for u in ("GB", "MB", "kB"):
            if b >= _UNIT_BYTES[u] and b % _UNIT_BYTES[u] == 0:
                return f"{b // _UNIT_BYTES[u]} {u}"
        return f"{b} B"
    return f"{value}{unit}"


# -- versions -----------------------------------------------------------------------------------------------------


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """(major, minor) from 'postgres (PostgreSQL) 15.18 (Debian ...)' or 'PostgreSQL 9.1.24 on ...'."""
    m = re.search(r"PostgreSQL\)?\s+(\d+)(?:\.(\d+))?", text or "")
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def _has_hot(v: tuple[int, int] | None) -> bool | None:
    return None if v is None else v >= (8, 3)


# -- the no-vacuum series -------------------------------------------------------------------------------------------


def _verdict_no_drop(r: dict) -> tuple[str, str]:
    if r["ci_low"] is None:
        return fs.UNDETERMINED, "too few runs in the series for an interval (raise series.runs)"
    if r["verdict"] == stats.LOWER:
        return fs.NOT_SUPPORTED, "tps fell over the series"
    if r["ci_low"] >= 1 - DROP:
        return fs.SUPPORTED, f"a loss of more than {DROP * 100:.0f} % is excluded"
    loss = (1 - r["ci_low"]) * 100
    return fs.UNDETERMINED, (f"no detectable change, but a loss of up to {loss:.0f} % is not excluded (more runs "
                             "or series repetitions narrow it)")  # fmt: skip


def _verdict_drop(r: dict) -> tuple[str, str]:
    if r["ci_low"] is None:
        return fs.UNDETERMINED, "too few runs in the series for an interval"
    if r["verdict"] == stats.LOWER:
        return fs.SUPPORTED, "tps fell over the series"
    if r["ci_low"] >= 1 - DROP:
        return fs.NOT_SUPPORTED, f"a loss of more than {DROP * 100:.0f} % is excluded"
    return fs.UNDETERMINED, "no detectable change"


def correlation_ci(x: list[float], y: list[float]) -> tuple[float, float, float] | None:
    """Pearson r with its 95 % interval (Fisher z); None below 4 pairs or without variance."""
    n = len(x)
    if n < 4:
        return None
    r = pl.DataFrame({"x": x, "y": y}).select(pl.corr("x", "y")).item()
    if r is None or math.isnan(r) or abs(r) >= 1:
        return None
    z, se = math.atanh(r), 1 / math.sqrt(n - 3)
    return r, math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se)


def shared_drift(series: pl.DataFrame, scale: int) -> str:
    """Do the servers' run-to-run curves rise and fall together? Then the swings are the machine's."""
    g = series.filter((pl.col("series") == 0) & (pl.col("scale") == scale))
    if g.is_empty() or g["server"].n_unique() < 2:
        return ""
    wide = g.pivot(on="server", index="run", values="tps", sort_columns=True).sort("run").drop("run").drop_nulls()
    a, b = wide.columns[:2]
    c = correlation_ci(wide[a].to_list(), wide[b].to_list())
    if c is None or c[1] <= 0:
        return ""
    return (f" The servers' curves at scale {scale} rise and fall together "
            f"(r = {c[0]:.2f} {stats.interval(c[1], c[2])} between {a} and {b}): much of the run-to-run swing is "
            "the machine's, which interleaving spreads over every server.")  # fmt: skip


def _series_rows(tables: dict, versions: dict[str, str]) -> list[dict]:
    trend, series, settings = tables["pgbench_series_trend"], tables["pgbench_series"], tables["pgbench_settings"]
    if trend.is_empty():
        return [
            _row("S3", "no_vacuum_tps", CLAIMS["no_vacuum_tps"], "all", fs.NOT_RUN, "The series did not run."),
            _row("S3", "no_vacuum_before_hot", CLAIMS["no_vacuum_before_hot"], "all", fs.NOT_RUN,
                 "The series did not run."),
        ]  # fmt: skip
    rows, before_hot = [], []
    for r in trend.sort("server", "scale").iter_rows(named=True):
        hot = _has_hot(version_tuple(versions.get(r["server"])))
        verdict, why = (_verdict_drop if hot is False else _verdict_no_drop)(r)
        failed = f", {r['failed_runs']} failed run(s)" if r["failed_runs"] else ""
        av = setting_text(settings, r["server"], "autovacuum", "on (the server default)")
        text = (
            f"scale {r['scale']}: tps of the last {r['window']} / first {r['window']} of {r['runs']} runs "
            f"({r['series']} series) = {ratio_text(r['ratio_last_first'], r['ci_low'], r['ci_high'])}: {why}; "
            f"tps min / mean / max {_num(r['tps_min'])} / {_num(r['tps_mean'])} / {_num(r['tps_max'])}{failed}; "
            f"autovacuum: {av}; -n skips only pgbench's own vacuum.{shared_drift(series, r['scale'])} Consecutive "
            "runs are not independent repetitions: read the interval as a guide to the noise."
        )
        key = f"no_vacuum_tps_scale_{r['scale']}"
        if hot is False:
            before_hot.append(_row("S3", f"no_vacuum_before_hot_scale_{r['scale']}", CLAIMS["no_vacuum_before_hot"],
                                   r["server"], verdict, text))  # fmt: skip
        else:
            rows.append(_row("S3", key, CLAIMS["no_vacuum_tps"], r["server"], verdict, text))
    if not before_hot:
        known = [f"{s} ({'.'.join(map(str, v))})" for s in sorted(trend["server"].unique())
                 if (v := version_tuple(versions.get(s)))]  # fmt: skip
        which = f" ({', '.join(known)})" if known else ""
        before_hot.append(_row(
            "S3", "no_vacuum_before_hot", CLAIMS["no_vacuum_before_hot"], "all", fs.NOT_RUN,
            f"Every server here{which} has HOT (8.3+); the pre-HOT curve needs a 7.3-8.2 build.",
        ))  # fmt: skip
    return rows + before_hot


def cluster_growth(sizes: pl.DataFrame) -> pl.DataFrame:
    """Per server, scale and series: database and data-directory size after the fresh load (run 0) and after
    the last run, and in how many runs the database grew."""
    if sizes.is_empty():
        return pl.DataFrame()
    s = sizes.sort("server", "scale", "series", "run")
    return s.group_by("server", "scale", "series", maintain_order=True).agg(
        (pl.col("run").max()).alias("runs"),
        pl.col("db_bytes").first().alias("db_first"), pl.col("db_bytes").last().alias("db_last"),
        pl.col("datadir_bytes").first().alias("dir_first"), pl.col("datadir_bytes").last().alias("dir_last"),
        (pl.col("db_bytes").diff() > 0).sum().alias("runs_grew"),
    )  # fmt: skip


def _growth_rows(tables: dict) -> list[dict]:
    g = cluster_growth(tables["pgbench_series_sizes"])
    if g.is_empty():
        return [_row("S3", "cluster_growth", CLAIMS["cluster_growth"], "all", fs.NOT_RUN, "No sizes recorded.")]
    rows = []
    for (server, scale), d in g.group_by(["server", "scale"], maintain_order=True):
        d = d.drop_nulls(["db_first", "db_last"])
        if d.is_empty():
            rows.append(_row("S3", f"cluster_growth_scale_{scale}", CLAIMS["cluster_growth"], server, fs.NOT_RUN,
                             "No database sizes recorded."))  # fmt: skip
            continue
        grew = (d["db_last"] > d["db_first"]).sum()
        verdict = fs.SUPPORTED if grew == d.height else fs.NOT_SUPPORTED if grew == 0 else fs.UNDETERMINED
        r = d.row(0, named=True)
        text = (f"database (pg_database_size) {_mib(r['db_first'])} after the fresh load, {_mib(r['db_last'])} after "
                f"{r['runs']} runs ({_pct(r['db_last'] / r['db_first'])}), larger after {r['runs_grew']} of them")
        if r["dir_first"] is not None and r["dir_last"] is not None:
            text += (f"; data directory (du: WAL and the cluster's other databases included, as the study's du) "
                     f"{_mib(r['dir_first'])} to {_mib(r['dir_last'])} ({_pct(r['dir_last'] / r['dir_first'])})")
        if d.height > 1:
            ratios = (d["db_last"] / d["db_first"])
            text += (f". Over {d.height} series the database grew {_pct(ratios.min())} to {_pct(ratios.max())} "
                     f"(first series shown), in {grew} of {d.height}.")  # fmt: skip
        else:
            text += ". One series: sizes are exact, no spread across series (series.repetitions > 1 gives one)."
        rows.append(_row("S3", f"cluster_growth_scale_{scale}", CLAIMS["cluster_growth"], server, verdict, text))
    return rows


# -- versions side by side ----------------------------------------------------------------------------------------


def _vs(versions: pl.DataFrame, what: str) -> pl.DataFrame:
    if versions.is_empty() or "ratio" not in versions.columns:
        return pl.DataFrame()
    return versions.filter(pl.col("what") == what)


def _group(text: str) -> dict[str, str]:
    """'mode=tpcb clients=4' → {'mode': 'tpcb', 'clients': '4'} (pgbench_tables.versions' group column)."""
    return dict(kv.split("=", 1) for kv in text.split(" "))


def _one_server(tables: dict) -> bool:
    servers = set()
    for n in ("pgbench_init_summary", "pgbench_select_only_summary", "pgbench_scaling_summary"):
        if not tables[n].is_empty():
            servers |= set(tables[n]["server"])
    return len(servers) < 2


def _select_only_rows(tables: dict) -> list[dict]:
    v, settings = _vs(tables["pgbench_versions"], "select-only tps"), tables["pgbench_settings"]
    ran = tables["pgbench_select_only_summary"]
    scales = sorted(ran["scale"].unique().to_list()) if not ran.is_empty() else []
    rows = []
    for scale in STUDY_SCALES:
        key = f"select_only_scale_{scale}"
        claim = CLAIMS["select_only_small" if scale < 100 else "select_only_large"].format(scale=scale)
        older_wins = scale < 100
        if scale not in scales:
            rows.append(_row("S3", key, claim, "all", fs.NOT_RUN,
                             f"Scale {scale} not in this profile (select-only ran at scales {scales or 'none'})."))
            continue
        g = v.filter(pl.col("group") == f"scale={scale}") if not v.is_empty() else v
        if g.is_empty():
            why = "Only one server: no version comparison." if _one_server(tables) else "No comparison recorded."
            rows.append(_row("S3", key, claim, "all", fs.NOT_RUN, why))
            continue
        for r in g.sort("server").iter_rows(named=True):
            newer_faster = {stats.HIGHER: True, stats.LOWER: False}.get(r["verdict"])
            if newer_faster is None:
                verdict = fs.UNDETERMINED
                result = ("no detectable difference: the interval allows either version to be the faster"
                          if r["verdict"] == stats.NO_DIFFERENCE else r["verdict"])
            else:
                verdict = fs.SUPPORTED if newer_faster != older_wins else fs.NOT_SUPPORTED
                result = f"{r['server'] if newer_faster else r['baseline']} is faster"
            sb = {setting_text(settings, s, "shared_buffers") for s in (r["server"], r["baseline"])}
            same = (f"both with shared_buffers = {sb.pop()}" if len(sb) == 1
                    else f"shared_buffers differ ({', '.join(sorted(sb))})")  # fmt: skip
            text = (f"{r['server']} / {r['baseline']} (the oldest here) select-only tps at scale {scale}: "
                    f"{ratio_text(r['ratio'], r['ci_low'], r['ci_high'])} (medians {_num(r['median'])} vs "
                    f"{_num(r['median_baseline'])} tps, {r['n']} / {r['n_baseline']} runs): {result}. Both ran the "
                    f"same explicit settings ({same}), so the study's explanation, older versions' smaller "
                    "default shared_buffers, is not what this compares.")  # fmt: skip
            rows.append(_row("S3", key, claim, r["server"], verdict, text))
    return rows


def _load_rows(tables: dict) -> list[dict]:
    v = _vs(tables["pgbench_versions"], "load time")
    if v.is_empty():
        why = ("Only one server: no version comparison." if _one_server(tables) else "The load did not run.")
        return [_row("S3", "load_time", CLAIMS["load_time"], "all", fs.NOT_RUN, why)]
    rows = []
    for r in v.sort("server").iter_rows(named=True):
        scale = _group(r["group"])["scale"]
        verdict = {stats.LOWER: fs.SUPPORTED, stats.HIGHER: fs.NOT_SUPPORTED}.get(r["verdict"], fs.UNDETERMINED)
        result = {stats.LOWER: f"{r['server']} loads faster", stats.HIGHER: f"{r['server']} loads slower",
                  stats.NO_DIFFERENCE: "no detectable difference"}.get(r["verdict"], r["verdict"])  # fmt: skip
        text = (f"{r['server']} / {r['baseline']} (the oldest here) wall time of `pgbench -i -s {scale}` (below 1 = "
                f"faster): {ratio_text(r['ratio'], r['ci_low'], r['ci_high'])} (medians {r['median']:.2f} s vs "
                f"{r['median_baseline']:.2f} s, {r['n']} / {r['n_baseline']} loads): {result}. One pgbench client "
                "loaded every server.")  # fmt: skip
        rows.append(_row("S3", f"load_time_scale_{scale}", CLAIMS["load_time"], r["server"], verdict, text))
    return rows


def _scaleup_rows(tables: dict) -> list[dict]:
    summary, v = tables["pgbench_scaling_summary"], _vs(tables["pgbench_versions"], "scaling tps")
    if summary.is_empty():
        return [_row("S4", "scaleup", CLAIMS["scaleup"].format(gain="+5-10 % more", what="reference and update"),
                     "all", fs.NOT_RUN, "The scaling experiment did not run.")]  # fmt: skip
    rows = []
    for mode in sorted(summary["mode"].unique().to_list()):
        gain, what = _S4.get(mode, ("more", mode))
        claim, key = CLAIMS["scaleup"].format(gain=gain, what=what), f"scaleup_{mode}"
        peaks = []
        for (server,), g in summary.filter(pl.col("mode") == mode).drop_nulls("median").group_by(
            ["server"], maintain_order=True
        ):
            top = g.sort("median", descending=True).row(0, named=True)
            ci = stats.interval(top["ci_low"], top["ci_high"], ",.0f")
            ci = f" {ci}" if ci else ""
            peaks.append(f"{server} peaks at {top['clients']} clients ({_num(top['median'])}{ci} tps median)")
        peak_text = "; ".join(sorted(peaks))
        g = v.filter(pl.col("group").str.starts_with(f"mode={mode} ")) if not v.is_empty() else v
        if g.is_empty():
            rows.append(_row("S4", key, claim, "all", fs.NOT_RUN,
                             f"Only one server: no version comparison. {peak_text}."))  # fmt: skip
            continue
        g = g.with_columns(pl.col("group").map_elements(lambda t: int(_group(t)["clients"]), return_dtype=pl.Int64)
                           .alias("clients"))  # fmt: skip
        for (server,), d in g.sort("server", "clients").group_by(["server"], maintain_order=True):
            counted = d.filter(pl.col("verdict").is_in([stats.HIGHER, stats.LOWER, stats.NO_DIFFERENCE]))
            hi = (counted["verdict"] == stats.HIGHER).sum()
            lo = (counted["verdict"] == stats.LOWER).sum()
            k = counted.height
            if k and hi * 2 > k and lo == 0:
                verdict = fs.SUPPORTED
            elif k and (lo * 2 > k or (lo and not hi)):
                verdict = fs.NOT_SUPPORTED
            else:
                verdict = fs.UNDETERMINED
            per = ", ".join(f"{r['clients']}: {ratio_text(r['ratio'], r['ci_low'], r['ci_high'])}"
                            for r in d.iter_rows(named=True))  # fmt: skip
            baseline = d["baseline"][0]
            text = (f"{server} / {baseline} (the oldest here) {mode} tps by clients, {per}; higher at {hi}, lower at "
                    f"{lo} of {k} client counts with an interval. {peak_text}. The study's machine had 72 cores; "
                    "read the shape and the ratio, not the tps.")  # fmt: skip
            rows.append(_row("S4", key, claim, server, verdict, text))
    return rows


# -- all of them --------------------------------------------------------------------------------------------------

TABLES = ("pgbench_init_summary", "pgbench_select_only_summary", "pgbench_scaling_summary", "pgbench_series",
          "pgbench_series_sizes", "pgbench_series_trend", "pgbench_versions", "pgbench_settings")  # fmt: skip


def _row(study: str, finding: str, claim: str, server: str, verdict: str, evidence: str) -> dict:
    return {"study": study, "finding": finding, "claim": claim, "server": server, "verdict": verdict,
            "evidence": evidence}  # fmt: skip


def findings(tables: dict[str, pl.DataFrame], versions: dict[str, str] | None = None) -> pl.DataFrame:
    """The findings of S3 and S4's scale-up on the stage's tables (TABLES), in `pglab.core.findings`' schema.
    `versions`: server → its version text (`postgres --version` or `version()`), to tell HOT from pre-HOT."""
    versions = versions or {}
    rows = (_series_rows(tables, versions) + _select_only_rows(tables) + _load_rows(tables)
            + _growth_rows(tables) + _scaleup_rows(tables))  # fmt: skip
    return fs.table(rows)


def as_markdown(df: pl.DataFrame) -> str:
    """Findings as a list: each claim once, then per server its verdict and evidence."""
    out = []
    for (finding, claim), g in df.group_by(["finding", "claim"], maintain_order=True):
        out.append(f"**{finding}.** *{claim}*\n")
        out += [f"- {r['server']}: **{r['verdict']}**: {r['evidence']}" for r in g.iter_rows(named=True)]
        out.append("")
    return "\n".join(out)

"""The report's section for study S3 (pgbench across versions) and S4's scale-up: method, charts and
findings from the derived tables of notebook 30 alone (`data/derived/<profile>/pgbench_*.csv` and
`environment_servers`); no server, no raw store. Deterministic: the same tables give the same text."""

from __future__ import annotations

import polars as pl

from ...core import replicas
from ...core.stats import method_notes
from . import charts as pgbench_charts
from . import paired_tables as pgbench_paired
from . import verdicts as pgbench_verdicts

TABLES = (
    "pgbench_init",
    "pgbench_select_only",
    "pgbench_scaling",
    "pgbench_series",
    "pgbench_series_summary",
    "pgbench_series_sizes",
    "pgbench_scaling_summary",
    "pgbench_settings",
    "pgbench_runs",
    "pgbench_paired",
    "pgbench_noise",
    "pgbench_drift",
    "pgbench_no_vacuum",
    "pgbench_version_curve",
    "pgbench_servers",
    "environment_servers",
)
SETTINGS = (
    "shared_buffers",
    "effective_cache_size",
    "work_mem",
    "max_wal_size",
    "checkpoint_completion_target",
    "autovacuum",
)
_UNIT_BYTES = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 2**20, "GB": 2**30}


# written only by a run that recorded telemetry (issue 32): shown when there, never required (a run of an older
# kit, the committed reference among them, has none and its section reads as before)
TELEMETRY = ("pgbench_timeline", "pgbench_latency", "pgbench_telemetry")
# S3's mechanism (the buffers experiment): only a run that asked for it has them, the committed reference none
BUFFERS = ("pgbench_buffers", "pgbench_buffers_paired")


def _tables(tables) -> dict[str, pl.DataFrame]:
    # the environment is optional to the findings (notebook 30 run alone has none; the report needs it): its
    # versions' text then falls back to the server names; telemetry only where the run recorded it
    out = {n: tables[n] for n in TABLES if n != "environment_servers"}
    out["environment_servers"] = tables.optional("environment_servers")
    for n in (*TELEMETRY, *BUFFERS):
        if (t := tables.optional(n)).height:
            out[n] = t
    return out


def _mib(b) -> str:
    return "not recorded" if b is None else f"{b / 2**20:.0f} MiB"


def _ratio_text(r: dict) -> str:
    if r["ratio"] is None:
        return "(no paired rounds)"
    ends = f" [{r['low']:.2f}–{r['high']:.2f}]" if r["low"] is not None and r["high"] is not None else ""
    return f"{r['ratio']:.2f}×{ends} ({r['method']})"


def buffers_method(t: dict) -> str | None:
    """The buffers experiment in words: where, how, and small over large per scale (None where it did not run)."""
    runs, bp = t.get("pgbench_buffers"), t.get("pgbench_buffers_paired")
    if runs is None or runs.is_empty():
        return None
    server = _list(runs["server"])
    values = runs.unique("shared_buffers").sort("shared_buffers_bytes")["shared_buffers"].to_list()
    asked = runs.drop_nulls("shared_buffers_shown").unique(["shared_buffers", "shared_buffers_shown"])
    odd = asked.filter(pl.col("shared_buffers") != pl.col("shared_buffers_shown"))
    shown = (
        "each as set"
        if odd.is_empty() and asked.height
        else ", ".join(f"{r['shared_buffers_shown']} for {r['shared_buffers']}" for r in asked.iter_rows(named=True))
        or "nothing"
    )
    sizes = runs.group_by("scale").agg(pl.col("db_bytes").median()).sort("scale")
    db = ", ".join(f"{_mib(r['db_bytes'])} at scale {r['scale']}" for r in sizes.iter_rows(named=True))
    ratios = (
        "; ".join(
            f"scale {r['scale']}: {r['shared_buffers']} over {r['baseline']} {_ratio_text(r)}"
            for r in bp.iter_rows(named=True)
        )
        if bp is not None and bp.height
        else "no paired rounds"
    )
    cmd = _command(t["pgbench_runs"], "pgbench_buffers")
    per_cell = _runs_text(runs.with_columns(warmup=False), ["scale", "shared_buffers"])
    return (
        f"- **shared_buffers, S3's explanation**: S3 put 7.3 first at scales 1 and 10 down to its tiny default "
        f"shared_buffers while the data sat in the OS cache; the version curve runs every server with the same "
        f"setting, so it cannot test that. On {server} alone, {cmd} at scales {_list(runs['scale'])} with "
        f"shared_buffers {', '.join(values)} (the server reported {shown}): per round each value in shuffled order, "
        f"the server restarted with it, a warm-up run per scale, then the measured run; {per_cell} per cell, the "
        f"server back on its own shared_buffers afterwards. The databases ({db}) stay in the OS cache. Small over "
        f"large, within rounds: {ratios}."
    )


def _telemetry_method(t: dict) -> str | None:
    """What the telemetry of the measured runs says, in words: checkpoints inside runs, busy-machine flags."""
    runs = t.get("pgbench_telemetry")
    if runs is None or runs.is_empty():
        return None
    cp = runs.filter(pl.col("checkpoint").fill_null(False))
    flagged = runs.filter(pl.col("system_flag").is_not_null())
    cp_text = (
        "none had a checkpoint inside"
        if cp.is_empty()
        else f"{cp.height} had a checkpoint inside (flagged on the run, ▼ on its second): "
        + ", ".join(
            f"{r['server']} {r['experiment'].removeprefix('pgbench_')} {r['condition']} {r['item']} r{r['repetition']}"
            for r in cp.head(8).iter_rows(named=True)
        )
        + (" …" if cp.height > 8 else "")
    )
    flag_text = (
        "the /proc sampler flagged none for steal or iowait"
        if flagged.is_empty()
        else f"the /proc sampler flagged {flagged.height} for a busy machine ("
        + "; ".join(sorted(set(flagged["system_flag"])))
        + ")"
    )
    return (
        f"- **Inside each run**: every measured run kept pgbench's per-transaction log (per-second tps and latency, "
        f"exact percentiles; pgbench's 0 µs entries left out of latencies), the server's statistics before and after, "
        f"and /proc about once a second. Of {runs.height} runs, {cp_text}; {flag_text}."
    )


def _paired_method(t: dict) -> str:
    """The paired analysis, its noise floor and the drift between blocks, in words from the tables."""
    nz, dr = t["pgbench_noise"], t["pgbench_drift"]
    floor = pgbench_verdicts.floor_of(nz)
    all_ = nz.filter(pl.col("server") == "all")
    if all_.height and floor is not None:
        r = all_.row(0, named=True)
        aa = (
            f"The A/A control (select-only cells run twice per round under two labels) gives a false-difference "
            f"rate of {r['false_difference_rate']:.0%} over {r['n_pairs']} A/A pair(s) and a noise floor of "
            f"±{floor:.1%}; a select-only effect below it supports nothing (load times and the TPC-B-like runs, "
            f"with no A/A of their own, are judged on their intervals pooled over clusters)."
        ).replace("%", " %")
    else:
        aa = "No A/A control ran: no noise floor was measured."
    d = dr.drop_nulls("drift")
    drift = (
        f" Drift between the first and second half of the rounds (per server and experiment): "
        f"{d['drift'].min():.2f}× to {d['drift'].max():.2f}×."
        if d.height
        else ""
    )
    bad = dr.filter(pl.col("collapsed_runs") > 0)
    collapsed = (
        "; ".join(
            f"{r['what']} on {r['server']}: {r['collapsed_runs']} run(s) below a third of the median"
            for r in bad.iter_rows(named=True)
        )
        if bad.height
        else "none"
    )
    return (
        "- **Paired analysis**: versions are compared within each round (the schedule's round; run k of the "
        "no-vacuum series; (clients, round) blocks for the scale-up): per round one ratio to the oldest server, "
        "their geometric mean, with a bootstrap interval from 10 rounds on, else the min–max of the rounds, "
        f"labelled so. {aa}{drift} Collapsed runs (kept, not averaged away): {collapsed}."
    )


def clusters_markdown(t: dict) -> str | None:
    """What each paired interval rests on when every server was measured on several clusters (params
    servers.clusters): per experiment, clusters × rounds and the between-cluster sd; None for one cluster."""
    parts = []
    for table in (t["pgbench_paired"], t["pgbench_no_vacuum"]):
        if "n_clusters" not in table.columns or table.is_empty():
            continue
        pooled = table.filter(pl.col("n_clusters") > 1)
        whats = (
            pooled.group_by("what", maintain_order=True)
            if "what" in pooled.columns
            else [(("no-vacuum trend",), pooled)]
        )
        for (what,), g in whats:
            if g.is_empty():
                continue
            per = (g["n_rounds"] // g["n_clusters"]).unique().sort().to_list()
            sd = g["cluster_sd"].drop_nulls()
            parts.append(
                f"{what}: {g['n_clusters'].max()} clusters × {'/'.join(map(str, per))} rounds"
                + (f", between-cluster sd {sd[0]:.1%}".replace("%", " %") if sd.len() else ", no between-cluster sd")
            )
    over, how = "every version, one estimate per experiment", " (a version's cluster k over the baseline's)"
    return method_notes.clusters_paragraph(parts, "pgbench tables", "per-run tables", over, how=how)


def _servers(t: dict) -> list[str]:
    names = set()
    for n in ("pgbench_init", "pgbench_select_only", "pgbench_scaling", "pgbench_series", "pgbench_buffers"):
        if n in t and not t[n].is_empty():
            names |= set(t[n]["server"])
    return sorted(names)


def versions(t: dict) -> dict[str, str]:
    """server → version() as the server reported it (environment_servers), without the build details."""
    env = t["environment_servers"]
    if env.is_empty():
        return {}
    return {r["server"]: r["version_string"].split(" on ")[0] for r in env.iter_rows(named=True)}


def builds_markdown(t: dict) -> str | None:
    """How the versions compared were built (environment_servers: source, compiler, optimisation), beside how S3's
    were, and how to compare source builds at -O2 instead; None where the run recorded no build."""
    env = t["environment_servers"]
    names = set(_servers(t))
    if env.is_empty() or "build_opt" not in env.columns:
        return None
    bases = replicas.base_names(sorted(names))  # one line per server, not per replica cluster
    env = env.filter(pl.col("server").is_in([n for n in names if bases[n] == n]))
    if env.is_empty():
        return None
    groups: dict[tuple, list[str]] = {}
    for r in env.sort("major", "server").iter_rows(named=True):
        how = (r["source"], r["build_compiler"] or "compiler not recorded", r["build_opt"] or "flags not recorded")
        groups.setdefault(how, []).append(r["server"])
    said = {"download": "downloaded (npm packages)", "build": "built here from source", "debian": "Debian's package"}
    parts = [f"{', '.join(ss)}: {said.get(src, src)}, {cc} {opt}" for (src, cc, opt), ss in groups.items()]
    os_builds = any(opt == "-Os" for _, _, opt in groups)
    size = (
        " -Os optimises for size, so tps here may sit below an -O2 build's of the same version, and a ratio holds "
        "for these builds."
        if os_builds
        else ""
    )
    return (
        "- **Builds**: the versions compared are " + "; ".join(parts) + ". S3 compared each version's own build, "
        "compiled from source on its machine (PostgreSQL's default -O2), with its own pgbench; here every server "
        "is judged against one built the same way (a pair built otherwise reads *not comparable*)." + size + " To "
        "compare -O2 source builds instead, list each version as a source install, e.g. `servers.installs: "
        "- {name: pg16, source: {tarball: <release URL>, sha256: <its sha256>}, studies: [pgbench]}`, built alike "
        "by `servers.build: {cflags: -O2}` (about 4 minutes each on 2 cores, once, into the install cache), and "
        "set `pgbench.builds: any`, which takes the run's install of a version where there is one."
    )


def _list(values) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


def _measured(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(~pl.col("warmup").cast(pl.Boolean)) if "warmup" in df.columns and df.height else df


def _runs_text(df: pl.DataFrame, by: list[str]) -> str:
    """'3 runs' / '2-3 runs' per cell (measured runs, failures included)."""
    n = _measured(df).group_by(by).len()["len"]
    return f"{n.min()} run{'s' if n.max() > 1 else ''}" if n.min() == n.max() else f"{n.min()}-{n.max()} runs"


def _command(runs: pl.DataFrame, experiment: str) -> str:
    """The exact command of the experiment's first measured run (the others differ in -c, -T or -s only)."""
    r = runs.filter(
        (pl.col("experiment") == experiment)
        & ~pl.col("warmup").cast(pl.Boolean)
        & ((pl.col("item") != "init") | (pl.col("experiment") == "pgbench_init"))
    ).sort("server", "round", "condition", "item", "repetition")
    return f"`{r['command'][0]}`" if r.height and r["command"][0] else "(no command recorded)"


def _setting_text(settings: pl.DataFrame, server: str, name: str, default: str) -> str:
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


def _settings_text(t: dict, servers: list[str]) -> str:
    def one(s, n):  # a setting not in pg_settings' non-default list is at its built-in default
        return _setting_text(t["pgbench_settings"], s, n, "on (default)" if n == "autovacuum" else "default")

    per = {s: tuple(one(s, n) for n in SETTINGS) for s in servers}
    distinct = set(per.values())
    if len(distinct) == 1:
        vals = distinct.pop()
        return "the same on every server: " + ", ".join(f"{n} = {v}" for n, v in zip(SETTINGS, vals, strict=True))
    return "; ".join(f"{s}: " + ", ".join(f"{n} = {v}" for n, v in zip(SETTINGS, per[s], strict=True)) for s in servers)


def method(tables) -> str:
    t = _tables(tables)
    servers, ver = _servers(t), versions(t)
    clients = t["pgbench_settings"].filter(pl.col("name") == "(pgbench client)")
    client = _list(clients["setting"]) if clients.height else "not recorded"
    lines = [
        f"Notebook 30 ran pgbench against {len(servers)} server(s) on one machine, all with the same explicit "
        "settings and driven by one pgbench binary (S3 used each version's defaults and its own pgbench).",
        "",
        "- **Servers**: "
        + "; ".join(f"{s} = {ver.get(s, 'version not recorded')}" for s in servers)
        + f". pgbench client: {client}. Server settings {_settings_text(t, servers)}.",
    ]
    init, so, sc, se = t["pgbench_init"], t["pgbench_select_only"], t["pgbench_scaling"], t["pgbench_series"]
    runs = t["pgbench_runs"]
    if init.height:
        lines.append(
            f"- **Load**: {_command(runs, 'pgbench_init')} at scales {_list(init['scale'])}, "
            f"{_runs_text(init.with_columns(warmup=False), ['server', 'scale'])} per server and scale; "
            "the wall time of the whole command, as the study's `time`."
        )
    if so.height and "item" in so.columns:  # the A/A control's second label is said in the paired analysis
        so = so.filter(pl.col("item") != pgbench_paired.ITEM_AA)
    if so.height:
        warm = so.filter(pl.col("warmup").cast(pl.Boolean))
        warm_text = f", after one warm-up run of {_list(warm['duration_s'])} s" if warm.height else ""
        lines.append(
            f"- **Select-only**: {_command(runs, 'pgbench_select_only')} ({_list(_measured(so)['clients'])}"
            f" clients for {_list(_measured(so)['duration_s'])} s) at scales {_list(so['scale'])}, "
            f"{_runs_text(so, ['server', 'scale'])} per server and scale{warm_text}."
        )
    if sc.height:
        m = _measured(sc)
        lines.append(
            f"- **Client scaling (S4)**: modes {_list(m['mode'])} at {_list(m['clients'])} clients, "
            f"scale {_list(m['scale'])}, {_list(m['duration_s'])} s each, "
            f"{_runs_text(sc, ['server', 'mode', 'clients'])} per cell; e.g. "
            f"{_command(runs, 'pgbench_scaling')}."
        )
    if se.height:
        length = (
            f"{_list(se['transactions'].drop_nulls())} transactions per client"
            if se["transactions"].drop_nulls().len()
            else f"{_list(se['duration_s'].drop_nulls())} s"
        )
        runs_per = _list(se.group_by("server", "scale", "series").len()["len"])
        series_per = _list(se.group_by("server", "scale").agg(pl.col("series").n_unique())["series"])
        lines.append(
            f"- **No-vacuum series**: from a fresh load, {runs_per} consecutive "
            f"{_command(runs, 'pgbench_series')} runs ({_list(se['clients'])} clients, {length}) at scales "
            f"{_list(se['scale'])}, {series_per} series per server and scale; database and data-directory "
            "sizes after the load and after every run."
        )
    if (builds := builds_markdown(t)) is not None:
        lines.append(builds)
    if (buffers := buffers_method(t)) is not None:
        lines.append(buffers)
    lines.append(_paired_method(t))
    if (clusters := clusters_markdown(t)) is not None:
        lines.append(clusters)
    if (telemetry := _telemetry_method(t)) is not None:
        lines.append(telemetry)
    notes = t["pgbench_servers"]["client_note"].drop_nulls()
    if notes.len():
        lines.append("- **pgbench client**: " + "; ".join(notes.unique().sort()) + ".")
    return "\n".join(lines)


def charts(tables) -> list:
    """The version curve beside S3's readings, the scale-up, the no-vacuum series and the database's own size; the
    buffers experiment where it ran; with telemetry, tps beside its latency percentiles per cell and every run's
    per-second timeline."""
    t = _tables(tables)
    out = []
    if t["pgbench_version_curve"].height:
        out.append(pgbench_charts.version_curve(t["pgbench_version_curve"]))
    if t["pgbench_scaling_summary"].height:
        out.append(pgbench_charts.scaling(t["pgbench_scaling_summary"]))
    if t["pgbench_series"].height:
        out.append(pgbench_charts.degradation(t["pgbench_series_summary"], t["pgbench_series"]))
    if t["pgbench_series_sizes"]["db_bytes"].drop_nulls().len():
        out.append(pgbench_charts.db_size(t["pgbench_series_sizes"]))
    if "pgbench_buffers" in t:
        out.append(pgbench_charts.buffers(t["pgbench_buffers"]))
    if "pgbench_latency" in t and t["pgbench_latency"].height:
        out.append(pgbench_charts.latency(t["pgbench_latency"]))
    if "pgbench_timeline" in t and t["pgbench_timeline"].height:
        out.append(pgbench_charts.timeline(t["pgbench_timeline"]))
    return out


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from the run's tables (`Study.judge`, which stores them once)."""
    return pgbench_verdicts.findings(_tables(tables))


def answers(tables, f: pl.DataFrame) -> list[str]:
    """A plain sentence for the report's first screen: tps across versions against the oldest server, with whether
    the builds allow the comparison (`Study.comparisons`)."""
    from ...core.stats import findings as fnd
    from ...core.stats import verdicts as v

    parts, servers, gated, scale = [], [], [], None
    for finding, what in (("tpcb_versions_scale_", "TPC-B-like"), ("select_only_scale_", "select-only")):
        rows = (
            f.filter(pl.col("finding").str.starts_with(finding), pl.col("our_value").is_not_null()) if f.height else f
        )
        if rows.is_empty():
            continue
        scale = scale or rows["finding"][0].rsplit("_", 1)[-1]
        parts.append((fnd.span(rows["our_value"].to_list(), "{:.2f}"), what))
        servers += rows["server"].to_list()
        gated += rows.filter(pl.col("verdict") == v.NOT_COMPARABLE)["server"].to_list()
    if not parts:
        return []
    base = tables["pgbench_paired"]["baseline"].drop_nulls()[0] if "pgbench_paired" in tables else "the oldest"
    odd = ", ".join(dict.fromkeys(gated))
    caveat = f"; {odd} built otherwise than {base}, so no version claim is scored on it" if gated else ""
    said = " and ".join(
        f"{x}× {base + chr(39) + 's' if i == 0 else 'its'} {what} tps" for i, (x, what) in enumerate(parts)
    )
    who = min(servers) if min(servers) == max(servers) else f"{min(servers)}–{max(servers)}"  # one server: once
    return [f"pgbench at scale {scale}: {who} {'gives' if who == min(servers) else 'give'} {said} here{caveat}."]

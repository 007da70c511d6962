"""Paired, blocked derivations of the pgbench stage (issue 16), from its derived tables alone (no server):

* `pgbench_paired`: every version against the baseline (the oldest), compared within rounds
  (`paired.paired_compare`): load time and select-only tps by the schedule's round, the no-vacuum series by
  its run (run k of every server ran in the same round), S4's scale-up by (clients, round) blocks, so one
  ratio per mode across the client counts, as the study stated it. A scale-up point faster than the cores allow
  (tps at c clients over 1 client above min(c, cores)) is flagged (`noise.ceiling_check`).
* `pgbench_noise`: the A/A control (select-only cells run twice per round under two labels) as false-difference
  rate and noise floor (`noise.aa_comparisons`, `noise.noise_floor`), per server and over all ("all").
* `pgbench_drift`: how far each server's runs moved between the first and second half of the rounds
  (`paired.drift`), and runs that collapsed (below a third of their cell's median): kept, never averaged away.
* `pgbench_no_vacuum`: per server and scale, the trend of the no-vacuum series: the fitted last-over-first
  ratio of a straight line through log tps against the run (every run counts, a t interval).
* `pgbench_version_curve`: per server (its major version) the median load time, select-only tps and series
  (TPC-B-like, no vacuum) tps with an honest interval (`paired.median_interval`: min–max below 10 values).
* `pgbench_buffers_paired`: S3's mechanism on one server: per scale, select-only tps under each smaller
  shared_buffers over the largest, within rounds (a round restarts the server once per value), with the medians
  beside it and the database's size (does the large value hold it, the small one not?)."""

from __future__ import annotations

import math
import os

import numpy as np
import polars as pl

from ...core import replicas
from ...core.stats import between_runs, cluster_priors, noise, paired

ITEM, ITEM_AA = "select-only", "select-only-aa"
COLLAPSE = 1 / 3  # a run below a third of its cell's median has collapsed (a stall, a neighbour), not varied

_F, _I, _S = pl.Float64, pl.Int64, pl.String
PAIRED = {"what": _S, "group": _S, "server": _S, "baseline": _S, "better": _S, **paired.PAIRED_SCHEMA, "flag": _S}
DRIFT = {
    "what": _S,
    "server": _S,
    "scale": _I,
    "n_rounds": _I,
    "drift": _F,
    "low": _F,
    "high": _F,
    "method": _S,
    "collapsed_runs": _I,
    "lowest_over_median": _F,
}
TREND = {"server": _S, "scale": _I, **paired.PAIRED_SCHEMA, "tps_first": _F, "tps_last": _F}
BUFFERS_PAIRED = {
    "server": _S,
    "scale": _I,
    "shared_buffers": _S,
    "baseline": _S,
    **paired.PAIRED_SCHEMA,
    "shared_buffers_bytes": _I,
    "baseline_bytes": _I,
    "tps_median": _F,
    "baseline_tps_median": _F,
    "db_bytes": _I,
}
BUFFERS = {"server": _S, "scale": _I, "shared_buffers": _S, "shared_buffers_bytes": _I, "round": _I, "tps": _F}
CURVE = {"server": _S, "major": _I, "what": _S, "scale": _I, "n": _I, "median": _F, "low": _F, "high": _F, "method": _S}


def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def _measured(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(~pl.col("warmup").cast(pl.Boolean)) if "warmup" in df.columns else df


def select_only(t: dict) -> pl.DataFrame:
    """Measured select-only runs of the first label (the A/A control's second label left out)."""
    df = _measured(t["pgbench_select_only"])
    return df.filter(pl.col("item") != ITEM_AA) if "item" in df.columns else df


def series_rounds(series: pl.DataFrame) -> pl.DataFrame:
    """The series with a round column: run k of series s is one round for every server."""
    return series.with_columns(round=pl.col("series") * 1000 + pl.col("run"))


def _baseline(df: pl.DataFrame, baseline: str | None, majors: dict[str, int]) -> str | None:
    names = sorted(set(df["server"]))
    if baseline in names:
        return baseline
    return min(names, key=lambda s: (majors.get(s, 10**6), s)) if names else None


def ceiling_flags(scaling: pl.DataFrame, cores: int | None) -> dict[tuple[str, str], str]:
    """(server, mode) → a flag when tps at c clients over tps at 1 client (medians) exceeds min(c, cores)."""
    out = {}
    med = _measured(scaling).group_by("server", "mode", "clients").agg(pl.col("tps").median())
    for (server, mode), g in med.group_by("server", "mode"):
        one = g.filter(pl.col("clients") == 1)["tps"]
        if one.is_empty() or not one[0]:
            continue
        # in client order, so that the flag kept (the largest count's) is the same in every derive
        for r in g.filter(pl.col("clients") > 1).sort("clients").iter_rows(named=True):
            flag = noise.ceiling_check(r["tps"] / one[0] if r["tps"] else None, r["clients"], cores)
            if flag:
                out[(server, mode)] = f"{r['clients']} clients: {flag}"
    return out


def _clusters(names) -> dict[int, list[str]]:
    """{cluster index: its servers} (params servers.clusters; one cluster: {1: every server})."""
    bases = replicas.base_names(names)
    out: dict[int, list[str]] = {}
    for n in names:
        out.setdefault(replicas.split_name(n)[1] if bases[n] != n else 1, []).append(n)
    return dict(sorted(out.items()))


def paired_versions(t: dict, baseline: str | None, majors: dict[str, int], cores: int | None) -> pl.DataFrame:
    """Every version over the baseline, within rounds. With replica clusters (params servers.clusters): cluster
    k of each version over cluster k of the baseline, then pooled per base server (`between_runs.pool_shared`:
    one between-cluster variance per experiment from every version's clusters)."""
    scaling = _measured(t["pgbench_scaling"]).with_columns(round=pl.col("clients") * 100_000 + pl.col("round"))
    specs = [  # what, data, group column, value, which way is better
        ("load time", t["pgbench_init"], "scale", "load_s", "lower"),
        ("select-only tps", select_only(t), "scale", "tps", "higher"),
        ("series tps", series_rounds(t["pgbench_series"]), "scale", "tps", "higher"),
        ("scale-up tps", scaling, "mode", "tps", "higher"),
    ]
    flags = ceiling_flags(t["pgbench_scaling"], cores) if t["pgbench_scaling"].height else {}
    frames = []
    for what, df, by, value, better in specs:
        df = df.filter(pl.col(value).is_not_null())
        clusters = _clusters(df["server"].unique(maintain_order=True).to_list()) if df.height else {}
        first = df.filter(pl.col("server").is_in(clusters.get(1, [])))
        base = _baseline(first, baseline, majors) if first.height else None
        if base is None or first["server"].n_unique() < 2:
            continue
        parts = []
        for k, names in clusters.items():
            base_k = replicas.replica_name(base, k)
            sub = df.filter(pl.col("server").is_in(names))
            if base_k not in names or sub["server"].n_unique() < 2:
                continue
            # a series run or a client count is a position in a trend, not an exchangeable round: no artefact rule
            trend = what in ("series tps", "scale-up tps")
            c = paired.paired_compare(sub, [by], "server", base_k, "round", value, artefacts=not trend)
            c = c.with_columns(
                flag=pl.struct("server", by).map_elements(
                    lambda r, by=by, base=base_k: flags.get((r["server"], r[by])) or flags.get((base, r[by])),
                    return_dtype=_S,
                )
            )
            parts.append(
                c.select(
                    pl.lit(what).alias("what"),
                    (pl.lit(f"{by}=") + pl.col(by).cast(_S)).alias("group"),
                    "server",
                    pl.lit(base).alias("baseline"),
                    pl.lit(better).alias("better"),
                    *paired.PAIRED_SCHEMA,
                    "flag",
                )
            )
        prior = cluster_priors.shared(f"pgbench_paired:{what}")
        frames.append(
            parts[0] if len(parts) == 1 else between_runs.pool_shared(pl.concat(parts), ["what", "group"], prior=prior)
        )
    if not frames:
        return _frame([], PAIRED)
    return pl.concat(frames, how="diagonal_relaxed") if len({f.width for f in frames}) > 1 else pl.concat(frames)


def noise_table(t: dict) -> pl.DataFrame:
    """The A/A control's false-difference rate and floor, per server and over all servers ("all")."""
    df = _measured(t["pgbench_select_only"])
    if "item" not in df.columns or df.filter(pl.col("item") == ITEM_AA).is_empty():
        return noise.table([])
    aa = noise.aa_comparisons(df, ["server", "scale"], "item", ITEM, ITEM_AA, "round", "tps")
    return noise.server_table("S3", aa, "select-only tps")


def drift_table(t: dict) -> pl.DataFrame:
    specs = [
        ("load time", t["pgbench_init"], "load_s"),
        ("select-only tps", select_only(t), "tps"),
        ("series tps", series_rounds(t["pgbench_series"]), "tps"),
    ]
    rows = []
    for what, df, value in specs:
        for server in sorted(set(df["server"])):
            g = df.filter(pl.col("server") == server)
            d = paired.drift(g, ["scale"], "server", server, "round", value, artefacts=what != "series tps")
            med = g.group_by("scale").agg(pl.col(value).median().alias("_m"))
            for r in d.iter_rows(named=True):
                m = med.filter(pl.col("scale") == r["scale"])["_m"][0]
                v = g.filter(pl.col("scale") == r["scale"])[value].drop_nulls()
                low = v.min() if v.len() else None
                # a collapsed run is a slow one: for a time that is a long one
                share = (low / m if value != "load_s" else m / v.max()) if m and low else None
                bad = (v < m * COLLAPSE).sum() if value != "load_s" else (v > m / COLLAPSE).sum()
                rows.append(
                    {"what": what, "server": server, **r, "collapsed_runs": int(bad), "lowest_over_median": share}
                )
    return _frame(rows, DRIFT)


def trend(runs: list[int], tps: list[float]) -> dict:
    """Fitted ratio of the last run over the first from a straight line through log tps against the run, with
    its 95 % t interval (n - 2 degrees of freedom; below 3 runs no interval)."""
    from scipy import stats

    x, y = np.asarray(runs, dtype=float), np.log(np.asarray(tps, dtype=float))
    n, span = x.size, float(x.max() - x.min()) if x.size else 0.0
    out = {"n_rounds": n, "ratio": None, "low": None, "high": None, "coverage": None, "method": "too few runs"}
    if n < 2 or span == 0:
        return out
    slope, icept = np.polyfit(x, y, 1)
    out["ratio"] = math.exp(slope * span)
    if n < 3:
        return out
    resid = y - (slope * x + icept)
    se = math.sqrt(resid @ resid / (n - 2) / ((x - x.mean()) @ (x - x.mean())))
    q = stats.t.ppf(0.975, n - 2)
    return {
        **out,
        "low": math.exp((slope - q * se) * span),
        "high": math.exp((slope + q * se) * span),
        "coverage": 0.95,
        "method": f"95 % t interval of a log-linear trend over {n} runs",
    }


def no_vacuum(series: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for (server, scale), g in series.drop_nulls("tps").filter(pl.col("tps") > 0).group_by("server", "scale"):
        first, last = g["run"].min(), g["run"].max()
        rows.append(
            {
                "server": server,
                "scale": scale,
                **trend(g["run"].to_list(), g["tps"].to_list()),
                "tps_first": g.filter(pl.col("run") == first)["tps"].median(),
                "tps_last": g.filter(pl.col("run") == last)["tps"].median(),
            }
        )
    out = _frame(rows, TREND).sort("server", "scale")
    # with replica clusters: per base server and scale, over its clusters (one between-cluster variance)
    return (
        between_runs.pool_shared(out, ["scale"], prior=cluster_priors.shared("pgbench_no_vacuum"))
        if out.height
        else out
    )


def version_curve(t: dict, majors: dict[str, int]) -> pl.DataFrame:
    specs = [
        ("load time, s", t["pgbench_init"], "load_s"),
        ("select-only tps", select_only(t), "tps"),
        ("TPC-B-like tps, no vacuum", t["pgbench_series"], "tps"),
    ]
    rows = []
    for what, df, value in specs:
        for (server, scale), g in df.group_by("server", "scale"):
            mi = paired.median_interval(g[value].drop_nulls().to_list())
            rows.append(
                {
                    "server": server,
                    "major": majors.get(server),
                    "what": what,
                    "scale": scale,
                    "n": mi["n"],
                    "median": mi["median"],
                    "low": mi["low"],
                    "high": mi["high"],
                    "method": mi["method"],
                }
            )
    return _frame(rows, CURVE).sort("what", "scale", "major", "server")


def buffers_paired(buffers: pl.DataFrame) -> pl.DataFrame:
    """Per server and scale, select-only tps under each smaller shared_buffers over the largest of that server's,
    paired within rounds (`paired.paired_compare`: the geometric mean of the round ratios, min–max below 10 rounds);
    the medians and the database's size (pg_database_size before the runs, median) beside it."""
    if buffers.is_empty():
        return _frame([], BUFFERS_PAIRED)
    sizes = buffers.group_by("shared_buffers").agg(pl.col("shared_buffers_bytes").first())
    size = dict(zip(sizes["shared_buffers"], sizes["shared_buffers_bytes"], strict=True))
    med = buffers.group_by("server", "scale", "shared_buffers").agg(
        pl.col("tps").median().alias("tps_median"), pl.col("db_bytes").median().cast(_I).alias("db_bytes")
    )
    frames = []
    for _, g in buffers.group_by("server", maintain_order=True):
        large = g.sort("shared_buffers_bytes")["shared_buffers"][-1]  # from every run, failed ones too
        ok = g.filter(pl.col("tps").is_not_null())
        if ok.is_empty():
            continue
        c = paired.paired_compare(ok, ["server", "scale"], "shared_buffers", large, "round", "tps")
        frames.append(c)
    if not frames:
        return _frame([], BUFFERS_PAIRED)
    c = pl.concat(frames)
    base = med.rename({"shared_buffers": "baseline", "tps_median": "baseline_tps_median"}).drop("db_bytes")
    out = (
        c.join(med, on=["server", "scale", "shared_buffers"], how="left")
        .join(base, on=["server", "scale", "baseline"], how="left")
        .with_columns(
            pl.col("shared_buffers").replace_strict(size, return_dtype=_I).alias("shared_buffers_bytes"),
            pl.col("baseline").replace_strict(size, return_dtype=_I).alias("baseline_bytes"),
        )
    )
    return out.select(list(BUFFERS_PAIRED)).cast(BUFFERS_PAIRED).sort("server", "scale", "shared_buffers_bytes")


def tables(t: dict, baseline: str | None, cores: int | None = None) -> dict[str, pl.DataFrame]:
    srv = t.get("pgbench_servers")
    majors = {r["server"]: r["major"] for r in srv.iter_rows(named=True)} if srv is not None else {}
    cores = cores or os.cpu_count()
    return {
        "pgbench_paired": paired_versions(t, baseline, majors, cores),
        "pgbench_noise": noise_table(t),
        "pgbench_drift": drift_table(t),
        "pgbench_no_vacuum": no_vacuum(t["pgbench_series"]),
        "pgbench_version_curve": version_curve(t, majors),
        "pgbench_buffers_paired": buffers_paired(t.get("pgbench_buffers", pl.DataFrame(schema=BUFFERS))),
    }

"""Where a study's minutes decide (methodology rule 16): each study's variance components and the Kalibera–Jones
allocation of clusters × rounds × executions that they and the runs' own costs give.

- `STUDIES`: each study's main quantity read from one derived run folder (`ssb`, `pgbench`, `auto_explain`,
  `jit_operators`, `parallel_index`, `partitioning`): one row per timed execution (its cluster, cell, round,
  execution within the round, y = log of the value), artefact rounds left out (`core.artefacts`), and what one
  unit of each level cost in that run (`Costs`, from the run's own records).
- `components`: the variance components on the log scale, level by level (kind, run, cluster, round, execution),
  by Kalibera and Jones' recursion (ISMM 2013, "Rigorous benchmarking in reasonable time"): S²_i the pooled
  variance of level-i means within their parent (within a cell), T²_1 = S²_1 and T²_i = S²_i − S²_{i−1} / n_{i−1}
  (n the harmonic mean count of units per parent), negative estimates read as 0. A level with one unit per
  parent everywhere (one execution a round) has no component of its own: it is inside the level above.
- `allocate`: r_i = sqrt(c_{i+1} / c_i · T²_i / T²_{i+1}), from executions up, each ratio given the rounded
  level below (a unit's cost then includes its r units below, its variance their T² / r): the textbook formula
  where the level below is free to move, defined where a cost is 0.
- `cheapest`, `most_precise`, `next_step`: whole designs (clusters ≥ 2, rounds ≥ 3) as precise within a run as
  the current one for the fewest minutes, the most precise for no more minutes, and the one step (a cluster, a
  round or an execution more) that removes the most variance per minute; `table`: the Markdown table of
  docs/methodology.md's "Dimensioning".

    python -m pglab.report.dimensioning --archives "<run ids>" [--out build/dimensioning] [--params FILE]

Each archived run is derived anew (`stability.derive_run`, no server) into `<out>/<id>/data/derived/default/`
unless that already holds it; a run folder it unpacked into data/raw/ is removed again. Host kinds:
`calibration.by_kind`; the current design: the params file (params/default.yaml)."""

from __future__ import annotations

import argparse
import itertools
import math
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from ..core import paths
from ..core.run.estimate import COST
from ..core.stats import artefacts, cluster_priors
from . import calibration

LEVELS = ("kind", "run", "cluster", "round", "execution")
MIN_CLUSTERS, MIN_ROUNDS = 2, 3  # a between-cluster variance needs two; min–max intervals were simulated from 3
_BASE = pl.col("cluster").str.replace(r"_c\d+$", "")


@dataclass(frozen=True)
class Costs:
    """Seconds per server of one more unit of each level in one run, the units below it not counted: a cluster
    (its start, load and warm-up), a round (its executions where the study times one a round, else what it costs
    beyond them), an execution (one of every cell: a pass; None where a round times one)."""

    cluster: float
    round: float
    execution: float | None
    servers: int


def _measured(folder: Path, table: str, experiment: str, metric: str) -> pl.DataFrame:
    m = pl.read_csv(folder / f"{table}_measurements.csv", infer_schema_length=None)
    m = m.filter(pl.col("experiment") == experiment, pl.col("metric") == metric, pl.col("value") > 0)
    return m.rename({"server": "cluster"}).with_columns(
        cell=pl.concat_str("condition", "item", separator="|"), warmup=pl.col("warmup").cast(pl.Boolean)
    )


def _timed(m: pl.DataFrame, execution: str | None = None) -> pl.DataFrame:
    """The measured rows as executions, artefact rounds (their value: the median execution) left out."""
    m = m.filter(~pl.col("warmup")).select(
        "cluster",
        "cell",
        "round",
        (pl.col(execution) if execution else pl.lit(0)).cast(pl.Int64).alias("execution"),
        pl.col("value").cast(pl.Float64),
    )
    rv = m.group_by("cluster", "cell", "round").agg(pl.col("value").median())
    bad = artefacts.flag(rv, cell=["cluster", "cell"]).filter("artefact")
    return m.join(bad.select("cluster", "cell", "round"), on=["cluster", "cell", "round"], how="anti").with_columns(
        y=pl.col("value").log()
    )


def _per_cluster(values: pl.DataFrame, col: str) -> float:
    """The mean over clusters of a column summed per cluster (0 where there is none)."""
    return float(values.group_by("cluster").agg(pl.col(col).sum())[col].mean() or 0.0) if values.height else 0.0


def _round_wall(rows: pl.DataFrame, clusters: int) -> float:
    """A round's wall time per cluster from the rows' end stamps (ts): rounds run every cluster's cells in turn,
    so the time from one round's last end to the next's, over the clusters."""
    ends = rows.group_by("round").agg(pl.col("ts").str.to_datetime(time_zone="UTC").max()).sort("ts")["ts"]
    gaps = ends.diff().drop_nulls().dt.total_seconds(fractional=True)
    return float(gaps.mean()) / clusters


def _load_s(load: pl.DataFrame) -> float:
    """The mean SSB load of a cluster: generate and COPY, VACUUM ANALYZE, prewarm (ssb_load, one row a table)."""
    return float(load.select(pl.sum_horizontal("load_total_s", "vacuum_analyze_s", "prewarm_s")).mean().item())


def _servers(t: pl.DataFrame) -> int:
    return t.select(_BASE.n_unique()).item()


def ssb(folder: Path, jit: bool) -> tuple[pl.DataFrame, Costs]:
    """SSB query times per server × mode × query: at SF 1 (versions) or on the JIT installs at SF 10."""
    m = _measured(folder, "ssb", "ssb", "time")
    jit_servers = m.filter(pl.col("condition") == "parallel_jit").select(_BASE.unique()).to_series()
    m = m.filter(_BASE.is_in(jit_servers.implode()) == jit)
    t = _timed(m)
    clusters = t["cluster"].unique()
    ex = pl.read_csv(folder / "ssb_executions.csv", infer_schema_length=None).filter(
        pl.col("server").is_in(clusters.implode()), ~pl.col("warmup"), pl.col("error").is_null()
    )
    load = pl.read_csv(folder / "ssb_load.csv", infer_schema_length=None).filter(
        pl.col("server").is_in(clusters.implode())
    )
    cluster = _load_s(load.unique("server")) + _per_cluster(m.filter("warmup"), "value") + COST["server"]
    return t, Costs(cluster, _round_wall(ex, clusters.len()), None, _servers(t))


def pgbench(folder: Path) -> tuple[pl.DataFrame, Costs]:
    """pgbench select-only tps per version (and its A/A copy): the version curve."""
    m = _measured(folder, "pgbench", "pgbench_select_only", "throughput")
    t = _timed(m)
    runs = pl.read_csv(folder / "pgbench_runs.csv", infer_schema_length=None).rename({"server": "cluster"})
    first_load = runs.filter(pl.col("experiment") == "pgbench_init", pl.col("repetition") == 0)
    so = runs.filter(pl.col("experiment") == "pgbench_select_only")
    cluster = _per_cluster(first_load, "wall_s") + _per_cluster(so.filter("warmup"), "wall_s") + COST["server"]
    return t, Costs(cluster, _round_wall(so.filter(~pl.col("warmup")), t["cluster"].n_unique()), None, _servers(t))


def auto_explain(folder: Path) -> tuple[pl.DataFrame, Costs]:
    """auto_explain's latency ratios: each condition's run over the baseline's of the same cluster and round."""
    base = pl.read_csv(folder / "auto_explain_ratios.csv", infer_schema_length=None)["baseline"][0]
    m = _measured(folder, "auto_explain", "auto_explain", "time")
    r = paired(_timed(m), base)
    lat = pl.read_csv(folder / "auto_explain_latencies.csv", infer_schema_length=None).rename({"server": "cluster"})
    cluster = _per_cluster(lat.filter("warmup"), "elapsed_s") + COST["ae_setup"] + COST["server"]
    return r, Costs(cluster, _round_wall(lat.filter(~pl.col("warmup")), r["cluster"].n_unique()), None, _servers(r))


def jit_operators(folder: Path) -> tuple[pl.DataFrame, Costs]:
    """JIT per-operator times (wall) per condition × operator; a round's passes are its executions."""
    m = _measured(folder, "jit_operators", "jit_operators", "time")
    t = _timed(m, execution="repetition")
    rows = pl.read_csv(folder / "jit_operators_setup.csv", infer_schema_length=None)["rows"].max()
    cluster = COST["jit_table_row"] * rows + _per_cluster(m.filter("warmup"), "value") + COST["server"]
    passes = t.group_by("cluster", "round", "execution").agg(pl.col("value").sum())
    return t, Costs(cluster, 0.0, float(passes["value"].mean()), _servers(t))  # a round beyond its passes: none


def paired(t: pl.DataFrame, baseline: str) -> pl.DataFrame:
    """Each execution of a cell (condition|item) over its baseline's mean in the same cluster and round (log
    scale): the ratio a study's comparisons judge, paired as they are."""
    t = t.with_columns(
        pl.col("cell").str.split("|").list.get(0).alias("_c"), pl.col("cell").str.split("|").list.get(1).alias("_i")
    )
    b = t.filter(pl.col("_c") == baseline).group_by("cluster", "_i", "round").agg(yb=pl.col("y").mean())
    r = t.filter(pl.col("_c") != baseline).join(b, on=["cluster", "_i", "round"])
    return r.with_columns(y=pl.col("y") - pl.col("yb")).drop("_c", "_i", "yb")


def _rounds_summed(folder: Path, table: str, load_s: float) -> tuple[pl.DataFrame, Costs]:
    m = _measured(folder, table, table, "time")
    t = _timed(m)
    rounds = t.group_by("cluster", "round").agg(pl.col("value").sum())
    cluster = load_s + _per_cluster(m.filter("warmup"), "value") + COST["server"]
    return t, Costs(cluster, float(rounds["value"].mean()), None, _servers(t))


def parallel_index(folder: Path) -> tuple[pl.DataFrame, Costs]:
    """Index build times per workers × key width; a cluster's load is lineorder at SF 1 (the run's SSB SF 1 loads:
    the index stage's own are not in the derived tables)."""
    load = pl.read_csv(folder / "ssb_load.csv", infer_schema_length=None).filter(pl.col("sf") == 1).unique("server")
    return _rounds_summed(folder, "parallel_index", _load_s(load))


def partitioning(folder: Path) -> tuple[pl.DataFrame, Costs]:
    """Partitioned count times per worker count."""
    s = pl.read_csv(folder / "partitioning_setup.csv", infer_schema_length=None)
    return _rounds_summed(folder, "partitioning", float((s["load_s"] + s["vacuum_s"]).mean()))


@dataclass(frozen=True)
class Study:
    name: str
    quantity: str
    frames: Callable[[Path], tuple[pl.DataFrame, Costs]]
    design: Callable[[dict], tuple[int, int, int]]  # (clusters, rounds a cluster, executions a round) from params
    baseline: str | None = None  # a condition: the cells' ratios to it, paired in cluster and round, get a row too


def _clusters(p: dict) -> int:
    return int(p["servers"].get("clusters", 1))


STUDIES = (
    Study(
        "SSB SF 1",
        "query time per version × mode × query",
        lambda f: ssb(f, False),
        lambda p: (_clusters(p), p["ssb"]["repetitions"], 1),
        "serial",
    ),
    Study(
        "SSB SF 10 (JIT)",
        "query time per install × mode × query",
        lambda f: ssb(f, True),
        lambda p: (p["ssb"]["jit_clusters"], p["ssb"]["jit_repetitions"], 1),
        "parallel",
    ),
    Study(
        "pgbench",
        "select-only tps per version",
        pgbench,
        lambda p: (_clusters(p), p["pgbench"]["select_only"]["repetitions"], 1),
    ),
    Study(
        "auto_explain",
        "latency ratio per condition × item",
        auto_explain,
        lambda p: (_clusters(p), p["auto_explain"]["run"]["repetitions"], 1),
    ),
    Study(
        "jit_operators",
        "time per condition × operator",
        jit_operators,
        lambda p: (_clusters(p), p["jit_operators"]["repetitions"], p["jit_operators"]["executions"]),
        "off",
    ),
    Study(
        "parallel_index",
        "build time per workers × key width",
        parallel_index,
        lambda p: (_clusters(p), p["parallel_index"]["repetitions"], 1),
        "workers=0",
    ),
    Study(
        "partitioning",
        "count time per worker count",
        partitioning,
        lambda p: (_clusters(p), p["partitioning"]["repetitions"], 1),
        "serial",
    ),
)


# -- the components -------------------------------------------------------------------------------------------------


def components(df: pl.DataFrame) -> dict[str, float | None]:
    """{level: T²} of executions (columns cell, kind, run, cluster, round, execution, y) by K&J's recursion; None
    for a level with one unit per parent everywhere (no component of its own) or none to compare."""
    keys = ["cell", *LEVELS[:-1]]
    means = df.select(*keys, "y")
    out: dict[str, float | None] = {}
    below = 0.0  # S²_{i−1} / n_{i−1}: what the level below adds to a level-i mean
    for depth in range(len(keys), 0, -1):  # executions within a round first, kinds within a cell last
        parent = keys[:depth]
        g = means.group_by(parent).agg(pl.col("y").var(ddof=1).alias("var"), pl.len().alias("n"), pl.col("y").mean())
        dof = int((g["n"] - 1).sum())
        level = LEVELS[depth - 1]
        if dof == 0:
            out[level] = None
        else:
            s2 = float((g["var"].fill_null(0) * (g["n"] - 1)).sum() / dof)
            out[level] = max(0.0, s2 - below)
            below = s2 / (len(g) / float((1 / g["n"].cast(pl.Float64)).sum()))
        means = g.select(*parent, "y")
    return {lv: out.get(lv) for lv in LEVELS}


def _merge(folders: dict[str, Path], frames: Callable) -> tuple[pl.DataFrame, dict[str, float]]:
    """The study's executions over every run, with kind and run; its costs, the median over the runs, and a run's
    (its wall time over the study's servers: what a re-run costs where a cluster of each server costs `cluster`)."""
    kind = {run: label for label, runs in calibration.by_kind(folders).items() for run in runs}
    parts, costs = [], []
    for run, folder in folders.items():
        t, c = frames(folder)
        parts.append(
            t.select("cluster", "cell", "round", "execution", "y").with_columns(
                kind=pl.lit(kind[run]), run=pl.lit(run), cluster=pl.lit(run + "/") + pl.col("cluster")
            )
        )
        costs.append(c)
    med = {f: float(np.median([getattr(c, f) for c in costs])) for f in ("cluster", "round", "servers")}
    execs = [c.execution for c in costs if c.execution is not None]
    med["execution"] = float(np.median(execs)) if execs else None
    med["run"] = float(np.median([run_seconds(r, f) for r, f in folders.items()])) / med["servers"]
    return pl.concat(parts), med


def run_seconds(run_id: str, folder: Path) -> float:
    """A run's wall time: from its id's start stamp (profile-YYYYMMDD-HHMMSS, UTC) to the last sample of its last
    stage (the stages' `*_machine.csv`)."""
    start = datetime.strptime(run_id[-15:], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    samples = [pl.read_csv(f, infer_schema_length=0) for f in folder.glob("*_machine.csv")]
    end = max(t["time"].str.to_datetime(time_zone="UTC").max() for t in samples if "time" in t.columns)
    return (end - start).total_seconds()


# -- the allocation -------------------------------------------------------------------------------------------------


def allocate(t2: dict[str, float | None], cost: dict[str, float | None]) -> dict[str, float]:
    """K&J's optimum per level: executions a round, rounds a cluster, clusters a run (r_i of the docstring above),
    each given the level below rounded up (K&J's ⌈r⌉, at least 1); inf where the level above has no variance."""
    out: dict[str, float] = {}
    var, unit = 0.0, 0.0  # the variance and cost a unit of the level below brings, with its own units
    for level, upper in (("execution", "round"), ("round", "cluster"), ("cluster", "run")):
        if t2.get(level) is None or cost.get(level) is None:
            out[level] = 1.0
            continue
        var, unit = t2[level] + var, cost[level] + unit
        above = t2.get(upper) or 0.0
        r = math.inf if above == 0 else math.sqrt(cost[upper] / unit * var / above) if unit > 0 else 1.0
        out[level] = r
        n = max(1, math.ceil(r)) if math.isfinite(r) else 1
        var, unit = var / n, unit * n
    return out


def within_variance(t2: dict[str, float | None], design: tuple[int, int, int]) -> float:
    """The variance a design (clusters, rounds, executions) leaves in a run's cell mean; kind and run stay."""
    c, r, e = design
    return (t2["cluster"] or 0) / c + (t2["round"] or 0) / (c * r) + (t2["execution"] or 0) / (c * r * e)


def design_seconds(cost: dict[str, float | None], design: tuple[int, int, int]) -> float:
    """What a design costs a run, every server of the study."""
    c, r, e = design
    return cost["servers"] * c * (cost["cluster"] + r * (cost["round"] + e * (cost["execution"] or 0)))


def _designs(t2: dict, now: tuple[int, int, int], top: int = 40) -> list[tuple[int, int, int]]:
    """Every whole design searched: clusters 2-8, rounds 3-top, executions 1-top where the study has that level."""
    execs = range(1, top + 1) if t2["execution"] is not None else (now[2],)
    return list(itertools.product(range(MIN_CLUSTERS, 9), range(MIN_ROUNDS, top + 1), execs))


def cheapest(t2: dict, cost: dict, now: tuple[int, int, int]) -> tuple[int, int, int]:
    """The cheapest whole design no less precise within a run than `now` (`now` where none is)."""
    ok = [d for d in _designs(t2, now) if within_variance(t2, d) <= within_variance(t2, now) * (1 + 1e-9)]
    return min(ok, key=lambda d: (design_seconds(cost, d), d), default=now)


def most_precise(t2: dict, cost: dict, now: tuple[int, int, int]) -> tuple[int, int, int]:
    """The most precise whole design (within a run) that costs no more than `now`."""
    ok = [d for d in _designs(t2, now) if design_seconds(cost, d) <= design_seconds(cost, now) * (1 + 1e-9)]
    return min(ok, key=lambda d: (within_variance(t2, d), design_seconds(cost, d)), default=now)


def next_step(t2: dict, cost: dict, now: tuple[int, int, int]) -> tuple[int, int, int]:
    """Where the next minutes go furthest: one more cluster, round or execution, whichever removes the most
    within-run variance per second."""
    c, r, e = now
    steps = [(c + 1, r, e), (c, r + 1, e)] + ([(c, r, e + 1)] if t2["execution"] is not None else [])
    gain = {
        d: (within_variance(t2, now) - within_variance(t2, d)) / (design_seconds(cost, d) - design_seconds(cost, now))
        for d in steps
    }
    return max(steps, key=gain.get)


# -- the table ------------------------------------------------------------------------------------------------------


def _ratios(s: Study) -> Callable[[Path], tuple[pl.DataFrame, Costs]]:
    def frames(folder: Path) -> tuple[pl.DataFrame, Costs]:
        t, cost = s.frames(folder)
        return paired(t, s.baseline), cost

    return frames


def _quantities():
    """(study, quantity, frames): each study's main quantity, then its ratios to its baseline where it has one."""
    for s in STUDIES:
        yield s, s.quantity, s.frames
        if s.baseline:
            yield s, f"its ratio to {s.baseline}", _ratios(s)


def dimension(folders: dict[str, Path], params: dict) -> list[dict]:
    """Per study: its components (t2: T², log scale), costs (s), K&J's optimum (kj), the current design (now), the
    cheapest as precise within a run (cheap), the most precise as costly (precise) and the next step (next)."""
    rows = []
    for s, quantity, frames in _quantities():
        df, cost = _merge(folders, frames)
        t2 = components(df)
        now = tuple(int(x) for x in s.design(params))
        rows.append(
            {
                "study": s.name,
                "quantity": quantity,
                "t2": t2,
                "cost": cost,
                "kj": allocate(t2, cost),
                "now": now,
                "cheap": cheapest(t2, cost, now),
                "precise": most_precise(t2, cost, now),
                "next": next_step(t2, cost, now),
            }
        )
    return rows


def _sd(v: float | None) -> str:
    return "—" if v is None else f"{100 * math.sqrt(v):.1f}"


def _design(r: dict, key: str) -> str:
    """A design, its within-run sd and its minutes per default run against the current design's."""
    d = r[key]
    text = " × ".join(map(str, d)) + f", {_sd(within_variance(r['t2'], d))} %"
    if key == "now":
        return text + f", {design_seconds(r['cost'], d) / 60:.1f} min"
    minutes = round((design_seconds(r["cost"], d) - design_seconds(r["cost"], r["now"])) / 60, 1) or 0.0  # not -0.0
    return "the same" if d == r["now"] else text + f", {minutes:+.1f} min"


def table(rows: list[dict]) -> str:
    """The Markdown table of docs/methodology.md's "Dimensioning"."""
    lines = [
        "| study | quantity | sd % kind / run / cluster / round / execution | s a cluster / round / execution "
        "| K&J clusters × rounds × executions | default now (within-run sd, min) | as precise, cheapest "
        "| as costly, most precise | the next minutes best spent |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        sd = " / ".join(_sd(r["t2"][lv]) for lv in LEVELS)
        cost = " / ".join("—" if r["cost"][lv] is None else f"{r['cost'][lv]:.3g}" for lv in LEVELS[2:])
        kj = [("∞" if math.isinf(v) else f"{v:.1f}") for v in (r["kj"][lv] for lv in LEVELS[2:])]
        kj[2] = kj[2] if r["t2"]["execution"] is not None else "—"
        lines.append(
            f"| {r['study']} | {r['quantity']} | {sd} | {cost} | {' × '.join(kj)} | {_design(r, 'now')} "
            f"| {_design(r, 'cheap')} | {_design(r, 'precise')} | {_design(r, 'next')} |"
        )
    return "\n".join(lines)


def _folder(run_id: str, out: Path) -> Path | None:
    """The run's derived folder under `out`, derived anew unless already there; data/raw/<id>/ removed again
    where this unpacked it."""
    from .stability import derive_run

    folder = out / run_id / "data" / "derived" / "default"
    if (folder / "MANIFEST.json").is_file():
        return folder
    unpacked = not (paths.raw_dir() / run_id).exists()
    data = derive_run(run_id, "default", out)
    if unpacked:
        shutil.rmtree(paths.raw_dir() / run_id, ignore_errors=True)
    return folder if data else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.report.dimensioning", description=__doc__.split("\n\n")[0])
    default = " ".join(r for k in cluster_priors.KINDS for r in k.runs)
    ap.add_argument("--archives", default=default, help="run ids, space-separated (default: cluster_priors.KINDS')")
    ap.add_argument("--out", default="build/dimensioning", help="where the runs are derived")
    ap.add_argument("--params", default="params/default.yaml", help="the current design")
    args = ap.parse_args(argv)
    out = paths.resolve(args.out)
    folders = {}
    for run in args.archives.split():
        if (f := _folder(run, out)) is None:
            print(f"error: could not derive run {run}", file=sys.stderr)
            return 1
        folders[run] = f
    params = yaml.safe_load(paths.resolve(args.params).read_text())
    print(table(dimension(folders, params)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

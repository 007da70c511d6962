"""S4 test C (parallel B-tree build) under the one verdict rule (`core.stats.verdicts`, issue 16).

Every comparison is paired within rounds (`core.stats.paired`): a round built every (key, workers) cell of a server
within a minute or two, so drift of the machine cancels. An A/A control — each key's serial build twice per
round, "workers=0" and "workers=0_aa" — gives the noise floor (`core.stats.noise`).

* "Time falls as workers are added": the time to build every key once (a round's builds summed), at the most
  workers against serial, direction only.
* "Close to 1/N": at each worker count w against the ideal t0 / (w + 1) capped at the machine's cores (the
  leader sorts a share too; no more processes run at once than there are cores); "close" read as within ±20 %.
  A speed-up above min(w + 1, cores) is flagged (`noise.ceiling_check`): undetermined. One verdict over the
  worker counts (`verdicts.overall`: the common one; mixed or direction only where they decided apart; else
  undetermined).
* Index size: the study's 1 ≈ 2 < 3 ≈ 4 columns (distinct combinations 150 M, 150 M, 600 M, 600 M) is tested
  at its step, 2 → 3 columns: the serial build of 3 columns against 2 in the same round, direction only, with
  our index sizes beside it.

Derived tables, from the raw store alone: `parallel_index_paired` (per key), `parallel_index_paired_suite`,
`parallel_index_size_paired`, `parallel_index_drift`, `parallel_index_noise`."""

from __future__ import annotations

import polars as pl

from ...core import replicas
from ...core.stats import between_runs as br
from ...core.stats import cluster_priors, method_notes, noise, paired
from ...core.stats import findings as fnd
from ...core.stats import verdicts as vd
from ...core.store import RunStore
from .params import AA_SUFFIX, CLAIMS, EXPERIMENT, STUDY, STUDY_COMBINATIONS

BASE = "workers=0"
NEAR_MARGIN = 0.20  # "close to inversely proportional", read as within ±20 % of the ideal
FRAME = {
    "server": pl.String,
    "condition": pl.String,
    "workers": pl.Int64,
    "key_columns": pl.Int64,
    "round": pl.Int64,
    "seconds": pl.Float64,
    "index_bytes": pl.Int64,
}
SIZE_CLAIM = (
    "S4 test C: the larger the index, the longer the build: 1 ≈ 2 < 3 ≈ 4 key columns (distinct "
    "combinations "
    + ", ".join(f"{n / 1e6:,.0f} M" for n in STUDY_COMBINATIONS.values())
    + "); tested at the step from 2 to 3 columns."
)


def frame(store: RunStore) -> pl.DataFrame:
    """Timed, successful builds with their condition label (A/A copy included) and round."""
    df = store.records(EXPERIMENT) if store.file.exists() else pl.DataFrame()
    if df.is_empty() or "value" not in df.columns:
        return pl.DataFrame(schema=FRAME)
    df = df.filter(~pl.col("warmup").cast(pl.Boolean) & pl.col("value").is_not_null())
    return df.select(
        *(
            pl.col("value" if c == "seconds" else c).cast(t).alias(c)
            if c in df.columns or c == "seconds"
            else pl.lit(None, dtype=t).alias(c)
            for c, t in FRAME.items()
        )
    )


def suite_frame(f: pl.DataFrame) -> pl.DataFrame:
    """Per server, condition and round: every key built once, summed (only rounds where every key built)."""
    n_keys = f["key_columns"].n_unique()
    return (
        f.group_by("server", "condition", "round")
        .agg(pl.col("seconds").sum(), pl.len().alias("_n"))
        .filter(pl.col("_n") == n_keys)
        .drop("_n")
        .sort("server", "condition", "round")
    )


def _workers(c: pl.Expr) -> pl.Expr:
    return c.str.split("=").list.get(1).str.replace(AA_SUFFIX, "", literal=True).cast(pl.Int64)


def tables(store: RunStore) -> dict[str, pl.DataFrame]:
    f = frame(store)
    per_key = paired.paired_compare(f, ["server", "key_columns"], "condition", BASE, "round", "seconds")
    suite = paired.paired_compare(suite_frame(f), ["server"], "condition", BASE, "round", "seconds")
    serial = f.filter(pl.col("condition") == BASE)
    keys = sorted(set(serial["key_columns"]))
    size = paired.paired_compare(
        serial, ["server"], "key_columns", 2 if 2 in keys else (keys or [0])[0], "round", "seconds"
    )
    aa = noise.aa_comparisons(f, ["server", "key_columns"], "condition", BASE, BASE + AA_SUFFIX, "round", "seconds")
    if br.has_replicas(f["server"].unique().to_list()):
        # params servers.clusters: one row per base server and comparison, its interval with the between-cluster
        # variance from how its clusters disagreed over the keys' builds (the A/A copy left out: both its sides
        # share a cluster); the suite (every key once) and the size step take that variance too; the A/A floor
        # over the A/A pairs pooled over the clusters (`noise.server_table`)
        var = br.cluster_variances(
            per_key, ["key_columns", "condition"], variance_rows=pl.col("condition") != BASE + AA_SUFFIX
        )
        prior = cluster_priors.priors  # each table its own: how far its figures move between runs differs
        per_key = br.pool_clusters(
            per_key, ["key_columns", "condition"], variances=var, priors=prior("parallel_index_paired")
        )
        suite = br.pool_clusters(suite, ["condition"], variances=var, priors=prior("parallel_index_paired_suite"))
        size = br.pool_clusters(size, ["key_columns"], variances=var, priors=prior("parallel_index_size_paired"))
    return {
        "parallel_index_paired": per_key.with_columns(workers=_workers(pl.col("condition"))),
        "parallel_index_paired_suite": suite.with_columns(workers=_workers(pl.col("condition"))),
        "parallel_index_size_paired": size,
        "parallel_index_drift": paired.drift(f, ["server", "key_columns"], "condition", BASE, "round", "seconds"),
        "parallel_index_noise": noise.server_table(STUDY, aa, "seconds").sort("server"),
    }


# -- findings ---------------------------------------------------------------------------------------------------------


def _with(v: vd.Verdict, extra: str) -> vd.Verdict:
    return vd.Verdict(v.label, v.reason + extra, v.needs)


def _within_rounds(r: dict) -> str:
    """'paired within rounds', and on how many clusters when pooled over replicas (params servers.clusters)."""
    return "paired within rounds" + br.on_clusters(r)


def time_falls(suite: pl.DataFrame, server: str, floor: float | None) -> dict:
    claim = vd.Claim(CLAIMS["time_falls"], vd.LOWER)
    par = suite.filter((pl.col("server") == server) & (pl.col("workers") > 0)).sort("workers")
    if par.is_empty():
        return vd.finding_row(STUDY, "time_falls", claim, server, vd.not_run("no build with workers in this profile"))
    r = par.row(-1, named=True)
    ev = vd.Evidence.from_row(r)
    v = vd.verdict(claim, ev, floor)
    return vd.finding_row(
        STUDY,
        "time_falls",
        claim,
        server,
        _with(v, f"; every key built once, {r['workers']} workers over serial, {_within_rounds(r)}"),
        ev,
    )


def near_inverse(suite: pl.DataFrame, server: str, floor: float | None, cores: int) -> dict:
    statement = CLAIMS["near_inverse"] + f" (ideal t0 / (w + 1), at most the {cores} cores; 'close' read as ±20 %)"
    par = suite.filter((pl.col("server") == server) & (pl.col("workers") > 0)).sort("workers")
    if par.is_empty():
        claim = vd.Claim(statement, vd.LOWER)
        return vd.finding_row(STUDY, "near_inverse", claim, server, vd.not_run("no build with workers"))
    labels, parts, claim, ev = [], [], None, None
    for r in par.iter_rows(named=True):
        w = r["workers"]
        ideal = min(w + 1, cores)
        claim = vd.Claim(statement, vd.LOWER, 1 / ideal, NEAR_MARGIN) if ideal > 1 else None
        speed = 1 / r["ratio"] if r["ratio"] else None
        ev = vd.Evidence.from_row(r, [noise.ceiling_check(speed, w + 1, cores)])
        if claim is None:  # one core: no parallel gain to expect
            v = vd.not_testable("one core: no two processes run at once", "needs ≥ 2 cores")
        else:
            v = vd.verdict(claim, ev, floor)
        labels.append(v.label)
        parts.append(f"{w} worker{'s' if w != 1 else ''} (ideal {1 / ideal:.2f}×): {v.label}: {v.text()}")
    label = vd.overall(labels)
    final = vd.Verdict(label, f"every key built once, {_within_rounds(r)}; " + "; ".join(parts))
    claim = claim or vd.Claim(statement, vd.LOWER)
    return vd.finding_row(STUDY, "near_inverse", claim, server, final, ev)


def size_step(size: pl.DataFrame, builds: pl.DataFrame, server: str, floor: float | None) -> dict:
    claim = vd.Claim(SIZE_CLAIM, vd.HIGHER)
    # an empty table read back from CSV has String columns: compare as text
    r = size.filter(
        (pl.col("server") == server)
        & (pl.col("key_columns").cast(pl.String) == "3")
        & (pl.col("baseline").cast(pl.String) == "2")
    )
    if r.is_empty():
        return vd.finding_row(
            STUDY, "size", claim, server, vd.not_run("the profile did not build both 2 and 3 key columns serially")
        )
    r = r.row(0, named=True)
    ev = vd.Evidence.from_row(r)
    v = vd.verdict(claim, ev, floor)
    mib = (
        builds.filter((pl.col("server") == server) & (pl.col("workers") == 0))
        .group_by("key_columns")
        .agg(pl.col("index_bytes").median())
    )
    b = {k: x for k, x in mib.iter_rows()}
    sizes = ""
    if b.get(2) and b.get(3):
        sizes = (
            f"; our index of 3 columns is {b[3] / b[2]:.2f}× the size of 2 ({b[2] / 2**20:.0f} → "
            f"{b[3] / 2**20:.0f} MiB; the study's distinct combinations "
            f"{STUDY_COMBINATIONS[3] / STUDY_COMBINATIONS[2]:.1f}×)"
        )
    return vd.finding_row(
        STUDY,
        "size",
        claim,
        server,
        _with(v, f"; serial build of 3 over 2 key columns, {_within_rounds(r)}" + sizes),
        ev,
    )


def findings_from(
    setup: pl.DataFrame, builds: pl.DataFrame, suite: pl.DataFrame, size: pl.DataFrame, noise_tab: pl.DataFrame
) -> pl.DataFrame:
    rows = []
    cores = int(setup["cores"][0])
    bases = replicas.base_names(setup["server"].to_list())
    # params servers.clusters: the paired tables hold base servers only (pooled over clusters): one finding each
    for server in sorted(s for s in setup["server"] if bases[s] == s):
        floor = noise.server_floor(noise_tab, server, "seconds")
        rows += [
            time_falls(suite, server, floor),
            near_inverse(suite, server, floor, cores),
            size_step(size, builds, server, floor),
        ]
    return fnd.table(rows)


def method_text(noise_tab: pl.DataFrame, drift: pl.DataFrame) -> str:
    parts = []
    drift = br.base_servers(drift)
    for r in noise_tab.iter_rows(named=True):
        d = drift.filter(pl.col("server") == r["server"])["drift"].drop_nulls()
        dd = f", serial drift 2nd / 1st half of rounds {d.min():.2f}–{d.max():.2f}×" if d.len() else ""
        fl = "no interval" if r["floor"] is None else f"±{r['floor']:.1%}".replace("%", " %")
        fdr = r["false_difference_rate"]
        rate = f", false-difference rate {fdr:.0%}".replace("%", " %") if fdr is not None else ""
        parts.append(f"{r['server']}: noise floor {fl} over {r['n_pairs']} A/A pair(s){rate}{dd}")
    return (
        "- Verdicts: every comparison paired within rounds (geometric mean of the round ratios; min–max below "
        "10 rounds, labelled so); an A/A control (each key's serial build twice per round) gives the noise "
        "floor: " + "; ".join(parts) + f"; a server's own gates its claims where it rests on at least "
        f"{noise.MIN_AA_PAIRS} pairs, else every server's (all)."
    )


def clusters_markdown(per_key: pl.DataFrame) -> str | None:
    """What each interval rests on when every server was measured on several clusters (params servers.clusters):
    None for a run of one cluster per server."""
    text = br.clusters_text(per_key)
    over = "the keys' builds; the suite and the size step take the same"
    return method_notes.clusters_paragraph([text] if text else [], "lineorder", "per-build tables", over)

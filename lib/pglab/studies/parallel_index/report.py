"""Report section of study S4 test C (parallel B-tree index build on lineorder), computed from the derived
tables only: no server, no raw store.

How the verdicts are reached (docs/methodology.md, rule 4):

* Speed-up = t0 / t(workers), medians, with a 95 % bootstrap interval. An interval that contains 1 is "no
  detectable difference", and a claim that needs a difference is then "undetermined".
* The claims about workers are judged on the time to build every key once (the round's builds of a worker
  count summed over the keys): one figure per server and worker count rather than one test per key; the
  per-key speed-ups go beside it in the evidence.
* "Close to 1/N" is judged against a ceiling: w workers plus the leader, which sorts its own share, make w + 1
  processes (hence the ideal t0 / (w + 1), not the issue's t0 / w, which is undefined at 0 workers and would
  ask one worker to halve the time of a leader that works too), and no more of them run at once than the
  machine has cores. As in the SSB section, a speed-up whose interval lies at or above 2/3 of that ceiling
  matches, one whose interval lies wholly below it does not, anything else cannot tell. The claim is supported
  when every worker count matches, not supported when one falls short, undetermined otherwise.
* "Time falls" is judged at the largest worker count: faster (interval above 1) supports it, slower refutes it.
* "Time follows the index size": the serial build of the longest key against the shortest, ratio with interval.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ...core import findings as fnd
from ...core import stats
from ...core.derived import profile_dir, read_table
from . import verdicts as piv
from .charts import size_chart, speedup_chart, time_chart
from .derive import FASTER, SLOWER
from .params import CLAIMS, STUDY, columns_label

TITLE = "S4 · Parallel B-tree index build (test C)"
TABLES = ("parallel_index_setup", "parallel_index_builds", "parallel_index_summary", "parallel_index_speedup",
          "parallel_index_suite_speedup")
NEAR_CEILING = stats.NEAR_CEILING  # share of the ceiling a speed-up must reach to count as "close to 1/N"
ORDER = {"time_falls": 0, "near_inverse": 1, "size": 2}  # reading order of the findings (the table sorts by key)


# columns that read back as text when every value is empty (e.g. no interval with one repetition)
_FLOATS = ("seconds", "median", "min", "max", "ci_low", "ci_high", "t0", "ideal_s", "ideal_cores_s", "index_mib",
           "speedup", "ideal", "ceiling", "efficiency", "median_s", "t0_s", "spill_mib")
_INTS = ("planned_workers", "launched_workers", "participant_mem_kb", "spill_kb", "index_bytes", "planned_min",
         "planned_max", "launched_min", "launched_max")


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    df = read_table(name, profile, root=root)
    return df.with_columns([pl.col(c).cast(pl.Float64) for c in _FLOATS if c in df.columns]
                           + [pl.col(c).cast(pl.Int64) for c in _INTS if c in df.columns])


def _paired(profile: str, root: Path | None) -> bool:
    """Whether the run derived the paired tables (newer runs); the committed older data has none."""
    return (profile_dir(profile, root) / "parallel_index_noise.csv").exists()


def _mib(b) -> str:
    return f"{b / 2**20:,.0f} MiB" if b is not None else "? MiB"


def _ci(r: dict) -> str:
    """The speed-up with its interval (`stats.ratio_with_interval`: an end that would read 1.00 gets a third
    decimal, which side of 1 it lies on decides the verdict)."""
    if r["ci_low"] is None or r["ci_high"] is None:
        return f"{r['speedup']:.2f}× (too few repetitions for an interval)"
    return stats.ratio_with_interval(r["speedup"], r["ci_low"], r["ci_high"])


def method(profile: str, root: Path | None = None) -> str:
    setup = _read("parallel_index_setup", profile, root).sort("server")
    builds = _read("parallel_index_builds", profile, root)
    first = setup.row(0, named=True)
    servers = "; ".join(f"{r['server']} (PostgreSQL {r['server_version']})" for r in setup.iter_rows(named=True))
    keys = first["key_columns"].split(",")
    sets = [int(k) for k in str(first["column_counts"]).split(",")]
    workers = str(first["worker_counts"]).replace(",", ", ")
    n_src = ("this machine's cores" if first["n_workers_default"] == "this machine's cores" else "set in params")
    seed = first["shuffle_seed"]
    obs = builds.filter(pl.col("launched_workers").is_not_null())
    below = obs.filter(pl.col("launched_workers") < pl.col("planned_workers")).height
    above = obs.filter(pl.col("launched_workers") > pl.col("workers")).height
    short_plan = obs.filter(pl.col("planned_workers") < pl.col("workers")).height
    errors = builds.filter(pl.col("error").is_not_null()).height
    serial = builds.filter((pl.col("workers") == 0) & pl.col("sort").is_not_null())
    in_memory = serial.filter(pl.col("sort") == "internal sort").height
    spill = builds.filter((pl.col("workers") > 0) & pl.col("spill_kb").is_not_null())["spill_kb"].median()
    spill_txt = f"{spill / 1024:,.0f} MiB (median)" if spill is not None else "an unobserved amount"
    before = int(setup["lineorder_indexes_before"].max() or 0)
    others = "no other index" if before == 0 else f"{before} other index(es) on it during the builds"
    warm = ", pg_prewarm'd into shared_buffers" if setup["prewarm"].all() else ""
    in_force = "; ".join(
        f"{r['server']}: maintenance_work_mem {r['maintenance_work_mem']}, max_worker_processes "
        f"{r['max_worker_processes']}, max_parallel_workers {r['max_parallel_workers']}, "
        f"parallel_leader_participation {r['parallel_leader_participation']}, wal_level {r['wal_level']}, "
        f"shared_buffers {r['shared_buffers']}" for r in setup.iter_rows(named=True))  # fmt: skip
    return "\n".join([
        f"- Servers: {servers}; {first['cores']} CPU cores.",
        f"- Data: SSB SF {first['sf']:g} (seed {first['seed']}), `lineorder` {first['lineorder_rows']:,} rows, "
        f"{_mib(first['lineorder_bytes'])}, {others}; loaded by the SSB stage{warm}.",
        "- Builds: `CREATE INDEX` on lineorder's first k of (" + ", ".join(f"`{c}`" for c in keys) + ") for k = "
        + ", ".join(map(str, sets)) + f", at `max_parallel_maintenance_workers` = {workers} (N = "
        f"{first['n_workers']}, {n_src}; the study's own counts are not in its text).",
        f"- In force (server settings through the kit, memory per build session): {in_force}. A parallel build "
        "gives each of its w + 1 participants maintenance_work_mem / (w + 1).",
        "- Timing: client wall time of each `CREATE INDEX` from send to completion, commit (the sync of the new "
        "index) included, one connection per build; the index dropped untimed between builds. "
        f"{first['repetitions']} repetitions after {first['warmups']} warm-up round(s), interleaved across servers, "
        f"key columns and worker counts{f' (shuffled within rounds, seed {seed})' if seed is not None else ''}.",
        f"- Workers, observed in every build: planned from the server's DEBUG1 message `building index … with "
        f"request for N parallel workers`, launched by counting the parallel workers' own `trace_sort` messages. "
        f"{obs.height} of {builds.height} builds observed; launched < planned in {below}, planned < allowed in "
        f"{short_plan}, launched > allowed in {above}; {errors} failed build(s).",
        f"- Sorts, from the same messages: {in_memory} of {serial.height} serial builds sorted in memory; the "
        f"parallel builds passed {spill_txt} of sorted runs to the leader through temporary files.",
        "- Ideal: t0 / (w + 1), since the leader sorts a share itself; on this machine at most "
        f"{first['cores']} of the w + 1 processes run at once.",
        *([piv.method_text(read_table("parallel_index_noise", profile, root=root),
                           read_table("parallel_index_drift", profile, root=root))] if _paired(profile, root) else []),
    ])  # fmt: skip


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    summ = _read("parallel_index_summary", profile, root)
    spd = _read("parallel_index_speedup", profile, root)
    if summ.is_empty():
        return []
    return [time_chart(summ), speedup_chart(spd), size_chart(summ)]


# -- findings -------------------------------------------------------------------------------------------------


def _row(finding: str, server: str, verdict: str, evidence: str) -> dict:
    return {"study": STUDY, "finding": finding, "claim": CLAIMS[finding], "server": server, "verdict": verdict,
            "evidence": evidence}  # fmt: skip


def _per_key(sp: pl.DataFrame, w: int) -> str:
    rows = sp.filter(pl.col("workers") == w).sort("key_columns").iter_rows(named=True)
    return ", ".join(f"{r['key_columns']} col. {_ci(r)}" for r in rows)


def _time_falls(server: str, suite: pl.DataFrame, sp: pl.DataFrame) -> dict:
    par = suite.filter(pl.col("workers") > 0)
    if par.is_empty():
        return _row("time_falls", server, fnd.NOT_RUN, f"{server}: no build with workers in this profile")
    r = par.sort("workers").row(-1, named=True)
    w = r["workers"]
    verdict = {FASTER: fnd.SUPPORTED, SLOWER: fnd.NOT_SUPPORTED}.get(r["verdict"], fnd.UNDETERMINED)
    return _row("time_falls", server, verdict,
                f"{server}: building every key once took {r['median_s']:.2f} s at {w} workers against "
                f"{r['t0_s']:.2f} s serially, a speed-up of {_ci(r)} ({r['verdict']}). Per key: {_per_key(sp, w)}.")


def _near_inverse(server: str, suite: pl.DataFrame, sp: pl.DataFrame, cores: int) -> dict:
    par = suite.filter(pl.col("workers") > 0).sort("workers")
    if par.is_empty():
        return _row("near_inverse", server, fnd.NOT_RUN, f"{server}: no build with workers in this profile")
    match, short, parts = 0, 0, []
    for r in par.iter_rows(named=True):
        w, c = r["workers"], r["ceiling"]
        thr = NEAR_CEILING * c
        kind = stats.against_threshold(r["ci_low"], r["ci_high"], thr)
        match, short = match + (kind == stats.NEAR), short + (kind == stats.BELOW)
        state = {stats.NEAR: "reaches it", stats.BELOW: "falls short"}.get(kind, "cannot tell")
        capped = f", capped at {cores} cores" if c < w + 1 else ""
        parts.append(f"{w} worker{'s' if w != 1 else ''}: {_ci(r)} against a ceiling of {c:g}×{capped} (a match "
                     f"needs ≥ {thr:.2f}×: {state}; per key {_per_key(sp, w)})")  # fmt: skip
    verdict = fnd.SUPPORTED if match == par.height else fnd.NOT_SUPPORTED if short else fnd.UNDETERMINED
    return _row("near_inverse", server, verdict,
                f"{server}, speed-up of building every key once: " + "; ".join(parts) + ".")  # fmt: skip


def _size(server: str, builds: pl.DataFrame, summ: pl.DataFrame) -> dict:
    serial = builds.filter((pl.col("server") == server) & (pl.col("workers") == 0) & ~pl.col("warmup"))
    ks = sorted(set(serial.drop_nulls("seconds")["key_columns"]))
    if len(ks) < 2:
        return _row("size", server, fnd.NOT_RUN, f"{server}: fewer than two column sets built serially")
    lo, hi = ks[0], ks[-1]
    r = stats.ratio_ci(serial.filter(pl.col("key_columns") == hi)["seconds"],
                       serial.filter(pl.col("key_columns") == lo)["seconds"])  # fmt: skip
    mib = {row["key_columns"]: row["index_mib"] for row in summ.filter(
        (pl.col("server") == server) & (pl.col("workers") == 0)).iter_rows(named=True)}  # fmt: skip
    sizes = ", ".join(f"{k}: {mib[k]:.0f} MiB" for k in ks if mib.get(k) is not None)
    if r["verdict"] == stats.HIGHER:
        verdict = fnd.SUPPORTED
    elif r["verdict"] == stats.LOWER:
        verdict = fnd.NOT_SUPPORTED
    else:
        verdict = fnd.UNDETERMINED
    ratio = stats.ratio_with_interval(r["ratio"], r["ci_low"], r["ci_high"], none="n/a")
    ci = "" if stats.interval(r["ci_low"], r["ci_high"]) else " (no interval)"
    return _row("size", server, verdict,
                f"{server}: the serial build on {columns_label(hi)} takes {ratio}{ci} the time of "
                f"{columns_label(lo)} ({r['verdict']}); index sizes by key columns {sizes}.")  # fmt: skip


def findings_from(setup: pl.DataFrame, builds: pl.DataFrame, summ: pl.DataFrame, sp: pl.DataFrame,
                  suite: pl.DataFrame) -> pl.DataFrame:
    rows = []
    cores = int(setup["cores"][0])
    for server in sorted(setup["server"]):
        mine, whole = sp.filter(pl.col("server") == server), suite.filter(pl.col("server") == server)
        rows += [_time_falls(server, whole, mine), _near_inverse(server, whole, mine, cores),
                 _size(server, builds, summ)]  # fmt: skip
    return fnd.table(rows)


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    if _paired(profile, root):  # the one verdict rule on paired rounds with the A/A noise floor
        return piv.findings_from(_read("parallel_index_setup", profile, root),
                                 _read("parallel_index_builds", profile, root),
                                 *(read_table(f"parallel_index_{n}", profile, root=root) for n in
                                   ("paired_suite", "size_paired", "noise")))  # fmt: skip
    return findings_from(*(_read(n, profile, root) for n in TABLES))

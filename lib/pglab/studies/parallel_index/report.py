"""Report section of study S4 test C (parallel B-tree index build on lineorder), computed from the derived
tables only: no server, no raw store. The verdicts are the one rule's on the paired tables
(`pglab.studies.parallel_index.verdicts`)."""

from __future__ import annotations

import altair as alt
import polars as pl

from . import verdicts as piv
from .charts import size_chart, speedup_chart, time_chart

TABLES = (
    "parallel_index_setup",
    "parallel_index_builds",
    "parallel_index_summary",
    "parallel_index_speedup",
    "parallel_index_paired_suite",
    "parallel_index_size_paired",
    "parallel_index_noise",
    "parallel_index_drift",
)
ORDER = {"time_falls": 0, "near_inverse": 1, "size": 2}  # reading order of the findings (the table sorts by key)


def _mib(b) -> str:
    return f"{b / 2**20:,.0f} MiB" if b is not None else "? MiB"


def method(tables) -> str:
    setup = tables["parallel_index_setup"].sort("server")
    builds = tables["parallel_index_builds"]
    first = setup.row(0, named=True)
    servers = "; ".join(f"{r['server']} (PostgreSQL {r['server_version']})" for r in setup.iter_rows(named=True))
    keys = first["key_columns"].split(",")
    sets = [int(k) for k in str(first["column_counts"]).split(",")]
    workers = str(first["worker_counts"]).replace(",", ", ")
    n_src = "this machine's cores" if first["n_workers_default"] == "this machine's cores" else "set in params"
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
        f"shared_buffers {r['shared_buffers']}"
        for r in setup.iter_rows(named=True)
    )
    return "\n".join(
        [
            f"- Servers: {servers}; {first['cores']} CPU cores.",
            f"- Data: SSB SF {first['sf']:g} (seed {first['seed']}), `lineorder` {first['lineorder_rows']:,} rows, "
            f"{_mib(first['lineorder_bytes'])}, {others}; loaded by the SSB stage{warm}.",
            "- Builds: `CREATE INDEX` on lineorder's first k of ("
            + ", ".join(f"`{c}`" for c in keys)
            + ") for k = "
            + ", ".join(map(str, sets))
            + f", at `max_parallel_maintenance_workers` = {workers} (N = "
            f"{first['n_workers']}, {n_src}; the study's own counts are not in its text).",
            f"- In force (server settings through the kit, memory per build session): {in_force}. A parallel build "
            "gives each of its w + 1 participants maintenance_work_mem / (w + 1).",
            "- Timing: client wall time of each `CREATE INDEX` from send to completion, commit (the sync of the new "
            "index) included, one connection per build; the index dropped untimed between builds. "
            f"{first['repetitions']} repetitions after {first['warmups']} warm-up round(s), "
            "interleaved across servers, "
            f"key columns and worker counts{f' (shuffled within rounds, seed {seed})' if seed is not None else ''}.",
            f"- Workers, observed in every build: planned from the server's DEBUG1 message `building index … with "
            f"request for N parallel workers`, launched by counting the parallel workers' own `trace_sort` messages. "
            f"{obs.height} of {builds.height} builds observed; launched < planned in {below}, planned < allowed in "
            f"{short_plan}, launched > allowed in {above}; {errors} failed build(s).",
            f"- Sorts, from the same messages: {in_memory} of {serial.height} serial builds sorted in memory; the "
            f"parallel builds passed {spill_txt} of sorted runs to the leader through temporary files.",
            "- Ideal: t0 / (w + 1), since the leader sorts a share itself; on this machine at most "
            f"{first['cores']} of the w + 1 processes run at once.",
            piv.method_text(
                tables["parallel_index_noise"],
                tables["parallel_index_drift"],
            ),
            *filter(None, [piv.clusters_markdown(tables["parallel_index_paired"])]),
        ]
    )


def charts(tables) -> list[alt.TopLevelMixin]:
    summ = tables["parallel_index_summary"]
    spd = tables["parallel_index_speedup"]
    if summ.is_empty():
        return []
    return [time_chart(summ), speedup_chart(spd), size_chart(summ)]


def findings(tables) -> pl.DataFrame:
    """Every claim of the study judged from the run's tables (`Study.judge`, which stores them once)."""
    setup, builds = (tables[f"parallel_index_{n}"] for n in ("setup", "builds"))
    paired_tables = (tables[f"parallel_index_{n}"] for n in ("paired_suite", "size_paired", "noise"))
    return piv.findings_from(setup, builds, *paired_tables)


def answers(tables, f: pl.DataFrame) -> list[str]:
    """Plain sentences for the report's first screen: what a parallel worker does to an index build."""
    from ...core.stats import findings as fnd

    rows = fnd.measured(f, "time_falls")
    if not rows:
        return []
    each = ", ".join(f"{fnd.shown(r)} on {r['server']}" for r in rows)
    return [f"A B-tree build on lineorder with parallel workers, against serial: {each}."]

# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: pglab (.venv)
#     language: python
#     name: pglab
# ---

# %% [markdown]
# # 60 · Parallel B-tree index build on lineorder (study S4, test C)
#
# **The study** (S4 in `docs/studies.md`, PGECons WG1 2018, test C; PostgreSQL 11, SSB at scale factor 100,
# ≈ 600 M lineorder rows, on the consortium's 72-core server) ran `CREATE INDEX` on the fact table with 1, 2, 3
# and 4 key columns
# (`lo_orderkey`; + `lo_custkey`; + `lo_partkey`; + `lo_suppkey`) at increasing numbers of parallel workers. It
# found the time to fall as workers were added, "close to inversely proportional" to their number, and the time
# to depend on the size of the index built, i.e. its number of distinct key combinations (150 M for 1 and 2
# columns, ≈ 600 M for 3 and 4). Its report gives the chart only: no seconds, no worker counts, no repetitions.
#
# **Our method.** The study's indexes (all four by default; a profile may pick fewer) on the SSB `lineorder` the
# other SSB notebooks use (loaded by notebook 10; loading is skipped when that dataset is there), at
# `max_parallel_maintenance_workers` = 0 … N on every server, N = this machine's cores unless params say
# otherwise. Every build is timed (client wall time, send to completion, the commit that syncs the index
# included), warm-up first, then repetitions interleaved across servers, keys and worker counts; the index is
# dropped between builds. For every build we also record what the server *did*: the
# workers it planned (its DEBUG1 message) and the workers that really ran (their own `trace_sort` messages). The
# result per cell is the median with min–max, and the speed-up over the serial build paired within rounds (the
# comparison the findings judge) with its interval.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None
servers = None  # e.g. ["pg18"]; None: every server of the params
max_workers = None  # N; None: parallel_index.max_workers of the params (null there: this machine's cores)
repetitions = None
sf = None  # None: ssb.sf of the params (the dataset notebook 10 loads)
seed = None

# %%
import polars as pl
from IPython.display import Markdown, display

from pglab import params
from pglab.core import charts, derived
from pglab.core.run import outcomes, session
from pglab.studies.parallel_index import STUDY
from pglab.studies.parallel_index import charts as pic
from pglab.studies.parallel_index import derive as pires
from pglab.studies.parallel_index import report as report
from pglab.studies.parallel_index.build import create_sql
from pglab.studies.parallel_index.params import with_overrides

charts.setup()
s = session.begin(params.load(params_file), run_id, study="parallel_index")
s.override(
    servers,
    ssb=dict(sf=sf, seed=seed),
    parallel_index=with_overrides(s.params.parallel_index, max_workers=max_workers, repetitions=repetitions),
)
p, pi = s.params.ssb, s.params.parallel_index
print(
    f"run {s.run_id}: SSB SF {p.sf:g} (seed {p.seed}) on {[t.name for t in s.servers]}; workers {pi.workers()}, "
    f"{pi.repetitions} repetitions after {pi.warmups} warm-up round(s) ({pi.warmup_cells} cells)"
)

# %% [markdown]
# ## The indexes
#
# One index per key, named by the kit (only an index of that name is ever dropped):

# %%
# NBVAL_CHECK_OUTPUT
for k, cols in pi.column_sets().items():
    print(f"{k} key column{'s' if k > 1 else ' '}: {create_sql(cols).as_string()}")

# %% [markdown]
# ## Running the builds
#
# Each server gets the SSB stage's settings and the dataset (loaded here only where notebook 10 did not); a
# server that cannot hold it, or an external one the params do not let the kit create and drop an index on, is
# skipped with the reason. Then the builds, and the servers go back to the SSB stage's settings.

# %%
result = STUDY.run(s)
outcomes.report_skipped(s.store, [STUDY.name], "parallel_index_skipped", s.profile)
if not result.servers:
    s.close()
    outcomes.stop_notebook("no server to build indexes on: nothing to measure (the skips are above)")

# %%
# every table (the setup too) from the raw store alone, as `python -m pglab derive` does; the skips are above
tables = STUDY.derive(s.store, s.params)
derived.write(tables, s.profile, skip=("parallel_index_skipped",))  # the skips: report_skipped above
STUDY.record_findings(s.profile)  # judged once from the tables as written: the report and make compare read them
b = tables["parallel_index_builds"]
failed = b.filter(pl.col("error").is_not_null())
print(
    f"{result.steps_run} builds now, {result.wall_s:.0f} s; {b.height} recorded ({b.filter('warmup').height} "
    f"warm-up), {failed.height} failed"
)
failed.select("server", "key_columns", "workers", "repetition", "error")

# %% [markdown]
# ## What the builds ran under
#
# Server settings through the kit: the SSB stage's own (`wal_level = minimal`: the new index is synced to disk at
# commit rather than written to the WAL) plus worker slots for N workers (`max_worker_processes`,
# `max_parallel_workers`); per build session: the worker count under test and `maintenance_work_mem`, which a
# parallel build shares among its participants (each needs ≥ 32 MB, else PostgreSQL plans fewer workers: the
# params' value is raised to 32 MB × (N + 1) if below, the same for every worker count). Read back from each
# server in a build's own session at N workers, before the builds:

# %%
tables["parallel_index_setup"].select(
    "server",
    "server_version",
    "cores",
    "lineorder_rows",
    (pl.col("lineorder_bytes") / 2**20).alias("MiB"),
    "lineorder_indexes_before",
    "maintenance_work_mem",
    "max_worker_processes",
    "max_parallel_workers",
    "parallel_leader_participation",
    "wal_level",
    "configure_status",
)

# %% [markdown]
# ## Did the server use the workers it was allowed?
#
# Per build: *planned* is what the planner asked for (from the table's size, `max_parallel_maintenance_workers`
# and `maintenance_work_mem`), *launched* the workers whose own sort messages arrived. Launched falls short of
# planned only when no background-worker slot is free.

# %%
check = pires.workers_check(b)
check

# %%
# NBVAL_CHECK_OUTPUT
for r in check.iter_rows(named=True):
    print(
        f"{r['server']}: {r['workers']} allowed -> planned {r['planned_min']}"
        + (f"-{r['planned_max']}" if r["planned_max"] != r["planned_min"] else "")
    )

# %%
# NBVAL_CHECK_OUTPUT
# the index each build left behind, as the catalog described it before it was dropped
b.group_by("server", "key_columns").agg(pl.col("index_columns").unique().sort().str.join(" | ")).sort(
    "server", "key_columns"
)

# %% [markdown]
# ## Time against workers
#
# Median of the timed builds with min–max; dashed, the ideal **t0 / (workers + 1)**: a parallel build's leader
# scans and sorts a share of the table beside its workers (`parallel_leader_participation = on`), so w workers
# make w + 1 participants, and perfect scaling divides the serial time t0 by w + 1. (The "1/N" would give
# one worker half of a leader that works too; t0 / w is also undefined at 0.) On this machine no more than its
# cores can run at once, so beyond cores − 1 workers the ideal is out of reach by construction.

# %%
summ = tables["parallel_index_summary"]
summ.with_columns(cell=pl.col("server") + " w=" + pl.col("workers").cast(pl.String)).pivot(
    on="cell", index="label", values="median", sort_columns=True
).sort("label")

# %%
pic.time_chart(summ)

# %% [markdown]
# ## Speed-up over the serial build
#
# `speed-up = t0 / t(workers)`: the inverse of `parallel_index_paired`'s ratio, each round's parallel build over
# the same round's serial one, with its interval (min–max below 10 rounds, pooled over a server's clusters).
# Dashed: workers + 1; dotted: the same capped at the machine's cores.

# %%
spd = tables["parallel_index_speedup"].filter(pl.col("workers") > 0)
spd.select(
    "server", "label", "workers", pl.col("speedup", "ci_low", "ci_high", "efficiency").round(2), "coverage", "ceiling"
)

# %%
pic.speedup_chart(tables["parallel_index_speedup"])

# %% [markdown]
# ## Where a parallel build spends more
#
# The server's own account of each sort (`trace_sort`): a serial build hands the whole `maintenance_work_mem` to
# one sort, which here stays in memory; a parallel build splits it among its w + 1 participants, and their sorted
# runs always reach the leader through temporary files, which the leader then merges alone. That extra writing
# and reading and the serial final merge (besides w + 1 processes sharing this machine's cores) are paid before
# any gain.

# %%
summ.select("server", "label", "workers", "sort", pl.col("spill_mib").round(1), pl.col("median").round(3)).sort(
    "server", "label", "workers"
)

# %% [markdown]
# ## Time and the size of the index
#
# The study explained the differences between keys by the size of the index (its distinct key combinations).
# Here every key has the same rows; B-tree deduplication (PostgreSQL 13+) stores repeated keys once, so the size
# tracks the distinct combinations, as in the study's table.

# %%
pic.size_chart(summ)

# %%
pires.size_table(summ)  # the study's distinct key combinations at SF 100, our index sizes at this SF

# %% [markdown]
# ## Did the warm-up matter?
#
# Each warm-up build against the median of the timed builds of its cell (ratio > 1: the warm-up was slower).

# %%
wu = pires.warmup_effect(b)
wu.group_by("server").agg(
    pl.len().alias("warmup_builds"),
    pl.col("ratio").median().alias("median_ratio"),
    pl.col("ratio").min().alias("min"),
    pl.col("ratio").max().alias("max"),
).sort("server")

# %% [markdown]
# ## Paired by round, and this machine's noise floor
#
# Every comparison within rounds: each round built every cell of a server within a minute or two, so what the
# machine did then touched all of them. An A/A control (each key's serial build twice per round, `workers=0`
# and `workers=0_aa`) shows how far identical builds stray here: the noise floor every verdict uses.

# %%
# NBVAL_CHECK_OUTPUT
for r in tables["parallel_index_noise"].iter_rows(named=True):
    fl = "none" if r["floor"] is None else f"±{r['floor']:.1%}"
    fdr = "—" if r["false_difference_rate"] is None else f"{r['false_difference_rate']:.0%}"
    print(f"{r['server']}: noise floor {fl}, A/A false-difference rate {fdr} of {r['n_pairs']} pair(s)")

# %%
display(
    tables["parallel_index_paired_suite"].select(
        "server", "condition", "n_rounds", pl.col("ratio", "low", "high").round(3), "method"
    )
)
tables["parallel_index_drift"]

# %% [markdown]
# ## Findings beside the study's
#
# Computed by the report's section (`pglab.parallel_index_report`) from the derived tables just written, by the
# one rule of `pglab.verdicts` (docs/verdicts.md): "close to 1/N" against t0 / (w + 1) capped at the cores
# (±20 %), a speed-up above that ceiling flagged; the index size claim at its step, 2 → 3 key columns.

# %%
display(Markdown(report.method(derived.Tables(s.profile))))
f = STUDY.findings(derived.Tables(s.profile))  # as stored above: regimes and build gate applied
text = []
for (claim,), g in f.sort(pl.col("finding").replace_strict(report.ORDER), "server").group_by(
    ["claim"], maintain_order=True
):
    text.append(f"**{claim}**\n")
    text += [f"- {r['server']}: **{r['verdict']}**. {r['evidence']}" for r in g.iter_rows(named=True)]
    text.append("")
display(Markdown("\n".join(text)))

# %%
s.close()

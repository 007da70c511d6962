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
# # 30 · pgbench across versions: load, select-only, scale-up and the no-vacuum series
#
# **What the studies measured.** S3 (see `docs/studies.md`) installed nine PostgreSQL versions, 7.3 to 9.1, on one
# machine and ran, with every version's *default* settings and its own pgbench, at scale factors 1, 10 and
# 100: `time pgbench -i -s S` (load time); 3 × `pgbench -S -c 30 -t 1000` (select-only); `du -sk $PGDATA`;
# 15 × `pgbench -n -c 30 -t 100` — TPC-B-like with **no vacuum between runs**, to watch throughput degrade
# — and `du -sk` again. Its headline: from 8.3 on (HOT) the series shows no degradation at all. S4
# (PGECons WG1, 2018) measured scale-up: reference (select) and update throughput against the number of
# clients on 72 cores, v11 about 5 % (reference) and 10 % (update) above v10.
#
# **How we measure.** Every server the params name runs the same experiments with the *same explicit
# settings* (the author of S3 regretted relying on defaults) and by default the *same pgbench binary* (the
# newest found; `client: own` reproduces S3's choice). Repetitions are interleaved: repetition r of every
# server and scale runs before repetition r + 1 of any, after a warm-up round. Every run is kept: its full
# output as raw data, its command line, the client version, the WAL it wrote and sizes before and after.
# The no-vacuum series starts from a freshly loaded database and runs k of every server before run k + 1
# of any. Versions are compared *within each round* (paired, blocked: one ratio per round to the oldest
# server, their geometric mean; below 10 rounds the interval is the min–max of the rounds, labelled so). An A/A
# control — every select-only cell run twice per round under two labels — measures this machine's noise floor,
# and every claim goes through the one verdict rule of `pglab.verdicts` (docs/verdicts.md).

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None
only = None  # e.g. ['load', 'series'] to run these experiments only, in this order (None: pgbench.experiments)

# %%
import polars as pl
from IPython.display import Markdown, display

from pglab import params
from pglab.core import charts, derived
from pglab.core.run import outcomes, session
from pglab.core.stats import findings
from pglab.studies.pgbench import STUDY
from pglab.studies.pgbench import charts as pgbench_charts
from pglab.studies.pgbench import derive as pgbench_tables
from pglab.studies.pgbench.run import EXPERIMENT_NAMES, Stage

charts.setup()
s = session.begin(params.load(params_file), run_id, study="pgbench")
s.override(pgbench=dict(experiments=only))  # a name that is not an experiment is refused here
plan = Stage(s)  # what will run, before any server starts
print(
    f"profile {s.profile}, run {s.run_id}, servers: {[x.name for x in plan.servers]}, "
    f"pgbench client: {s.params.pgbench.client}, baseline for comparisons: {plan.baseline()}"
)
pl.from_dicts(plan.plan())

# %% [markdown]
# ## Running the experiments
#
# The servers start with the params' settings; what each reports as non-default is kept with the run
# (`pgbench/servers/<name>.json`) together with the pgbench client that drives it. Then every experiment, in
# the order of `pgbench.experiments`. A server the kit may not write to (an external one without
# `allow_destructive`) is skipped, with the reason.

# %%
s.start()
result = STUDY.run(s)
outcomes.report_skipped(s.store, list(EXPERIMENT_NAMES.values()), "pgbench_skipped", s.profile)
if not result.servers:
    s.close()
    outcomes.stop_notebook("no server may run pgbench: nothing to measure (the skips are above)")

# %%
st = result.seen["stage"]
# every table from the raw store alone, as `python -m pglab derive` does
tables = STUDY.derive(s.store, s.params)
derived.write(tables, s.profile)
STUDY.record_findings(s.profile)  # judged once from the tables as written: the report and make compare read them
print(f"{result.steps_run} pgbench runs now, {result.wall_s:.0f} s")
pl.from_dicts(
    [
        {
            "server": x.name,
            "version": x.install.version if x.install else "external",
            "pgbench client": st.bench.client_install(x).version,
        }
        for x in st.servers
    ]
)

# %% [markdown]
# ## Load: `pgbench -i -s S`
#
# A fresh database per scale, `CHECKPOINT` first, then the load timed from the outside (as the study's
# `time`); pgbench 13+ also prints the time of each step. Sizes are read before (empty database) and after.

# %%
pgbench_charts.load_time(tables["pgbench_init_summary"])

# %%
if tables["pgbench_init_steps"].height:
    display(pgbench_charts.load_steps(tables["pgbench_init_steps"]))
tables["pgbench_init_summary"].select(
    "server",
    "scale",
    "n",
    "n_missing",
    pl.col("median", "min", "max", "ci_low", "ci_high").round(3),
    (pl.col("db_bytes_median") / 2**20).round(1).alias("database MiB"),
    (pl.col("datadir_growth_median") / 2**20).round(1).alias("data dir growth MiB"),
)

# %% [markdown]
# ## Select-only: `pgbench -S`
#
# C clients for T seconds on each scale's database; one warm-up run per server and scale, then the
# repetitions round-robin over every server and scale.

# %%
pgbench_charts.select_only(tables["pgbench_select_only_summary"])

# %%
tables["pgbench_select_only_summary"].select(
    "server",
    "scale",
    "n",
    "n_missing",
    pl.col("median", "min", "max", "ci_low", "ci_high").round(0),
    (((pl.col("max") - pl.col("min")) / pl.col("median")) * 100).round(1).alias("spread %"),
    "latency_avg_ms_median",
)

# %% [markdown]
# ## Scale-up with clients (S4)
#
# Select-only and TPC-B at 1, 2, 4, … clients on one scale (pgbench vacuums the small tables before each
# run, as by default). On this machine's cores, the curve flattens early; what matters is the shape and
# the ratio between versions, not the absolute numbers.

# %%
pgbench_charts.scaling(tables["pgbench_scaling_summary"])

# %%
tables["pgbench_scaling_summary"].select(
    "server",
    "mode",
    "clients",
    "n",
    "n_missing",
    pl.col("median", "min", "max", "ci_low", "ci_high").round(0),
    "latency_avg_ms_median",
).sort("mode", "clients", "server")

# %% [markdown]
# ## The no-vacuum series
#
# From a fresh load, K consecutive `pgbench -n` TPC-B runs with no vacuum in between: dead tuples and the
# history table accumulate, and a version without HOT slows down run after run. Run k of every server
# goes before run k + 1 of any. Each point below is one run; the line is the median over repeated series,
# the band their min–max when the series was repeated.

# %%
pgbench_charts.degradation(tables["pgbench_series_summary"], tables["pgbench_series"])

# %% [markdown]
# Does throughput fall over the series? The fitted ratio of the last run over the first (a straight line through
# log tps against the run, every run counts) with its 95 % t interval.

# %%
tables["pgbench_no_vacuum"].select(
    "server",
    "scale",
    "n_rounds",
    pl.col("tps_first", "tps_last").round(0),
    pl.col("ratio", "low", "high").round(3),
    "method",
)

# %% [markdown]
# ### The database's own size
#
# The pgbench database's size (`pg_database_size`, no other database, no WAL) after the fresh load and after
# the last run of the series, shown and not scored: the inserts of the series guarantee growth, and the
# study's `du -sk $PGDATA` counted the cluster's other databases and the WAL too.

# %%
pgbench_charts.db_size(tables["pgbench_series_sizes"])

# %%
sizes = tables["pgbench_series_sizes"]
first_last = sizes.group_by("server", "scale", "series").agg(
    (pl.col("db_bytes").sort_by("run").first() / 2**20).round(1).alias("db MiB after load"),
    (pl.col("db_bytes").sort_by("run").last() / 2**20).round(1).alias("db MiB after series"),
    (pl.col("datadir_bytes").sort_by("run").first() / 2**20).round(1).alias("data dir MiB after load"),
    (pl.col("datadir_bytes").sort_by("run").last() / 2**20).round(1).alias("data dir MiB after series"),
)
first_last.sort("server", "scale", "series")

# %% [markdown]
# ## shared_buffers: S3's explanation of 7.3's select-only lead
#
# S3 found the oldest version fastest in select-only at scales 1 and 10 and explained it: with all the data surely in
# the OS cache and a read-only load, the smaller shared_buffers the better (7.3's default was 64 buffers, 512 kB). The
# curve above gives every server the same shared_buffers, so it cannot test that. Here one server (`pgbench.buffers`:
# the newest of pgbench's, its first cluster) runs `pgbench -S` at each scale under each shared_buffers value: per
# round every value in shuffled order, the server restarted with it, a warm-up run per scale, then the measured run;
# afterwards the server is back on its own shared_buffers. Below, every round's tps per value (median and min–max),
# then the smaller value over the largest, paired within rounds, beside the database's size: the mechanism needs the
# large value to hold the database and the small one not to.

# %%
buffers = tables["pgbench_buffers"]
if buffers.is_empty():
    print("the buffers experiment did not run in this session (not in pgbench.experiments)")
else:
    display(pgbench_charts.buffers(buffers))
    display(
        tables["pgbench_buffers_paired"].select(
            "server",
            "scale",
            "shared_buffers",
            "baseline",
            "n_rounds",
            pl.col("ratio", "low", "high").round(3),
            "method",
            pl.col("tps_median", "baseline_tps_median").round(0),
            (pl.col("db_bytes") / 2**20).round(1).alias("database MiB"),
        )
    )

# %% [markdown]
# ## Inside each run: per second, latency percentiles, checkpoints and the machine
#
# With `telemetry` (on by default) every measured run keeps pgbench's per-transaction log, the server's statistics
# before and after, and /proc about once a second (`pgbench/*.txlog.csv`, `.counters.json`, `.system.json`). Per
# cell below: median tps beside p50 / p95 / p99 / max latency, each percentile with its interval over the rounds
# (pgbench's 0 µs entries, a lazy clock's, left out); a cell in red had a checkpoint or a busy machine (steal,
# iowait) in one of its runs. Then every run second by second, one panel per server; ▼ marks the second a
# checkpoint began.

# %%
if "pgbench_latency" not in tables:
    print("no telemetry in this run (pgbench.telemetry is false, or the run was recorded by an older kit)")
else:
    display(pgbench_charts.latency(tables["pgbench_latency"]))
    display(pgbench_charts.timeline(tables["pgbench_timeline"]))
    display(pgbench_tables.latency_view(tables["pgbench_latency"]))

# %% [markdown]
# The runs whose figure has a reason beside it: a checkpoint inside the run (from the checkpointer's counters and
# pg_control's time of the last one), or the sampler's flag when steal or iowait took a large share of the CPU.

# %%
if "pgbench_telemetry" in tables:
    display(pgbench_tables.flagged_runs(tables["pgbench_telemetry"]))

# %% [markdown]
# ## Within each run (aggregate logs)
#
# With `aggregate_log_s` > 0, every timed run writes pgbench's `--aggregate-interval` log (kept raw);
# throughput per interval shows a ramp-up, a checkpoint dip or a stall that the run's single tps hides.
# Below, the select-only runs (one line per run; the partial first and last interval left out). The
# series and scaling runs are in the table `pgbench_timeseries` too; a series run of a second or two
# has too few intervals to draw.

# %%
ts = tables["pgbench_timeseries"]
if ts.filter(pl.col("experiment") == "pgbench_select_only").height == 0:
    print("no aggregate logs of select-only runs in this run (pgbench.aggregate_log_s is 0)")
else:
    display(pgbench_charts.timeseries(ts, "pgbench_select_only"))

# %% [markdown]
# ## Versions side by side
#
# Our curve by major version beside S3's readings for 7.3 … 9.1 (its results are charts; the text gives one
# figure, 9.1 more than 3× 7.3). Then every server against the oldest, paired within rounds (for load time
# below 1 is faster; for tps above 1 is faster), the A/A noise floor and the drift between the halves of the
# rounds, with the runs that collapsed (below a third of their cell's median).

# %%
display(pgbench_charts.version_curve(tables["pgbench_version_curve"]))
v = tables["pgbench_paired"]
v.select(
    "what", "group", "server", "baseline", "n_rounds", pl.col("ratio", "low", "high").round(3), "method", "flag"
) if v.height else print("only one server: nothing to compare")

# %% [markdown]
# ## Noise floor, drift and failed runs
#
# The A/A control's false-difference rate and floor (per server and over all), the drift of each server between
# the first and second half of its rounds with the collapsed runs, then the failed runs. A run that failed
# (pgbench error, refused step, timeout) is recorded with its error and counted as missing in the
# summaries (`n_missing`), never dropped.

# %%
display(tables["pgbench_noise"])
display(tables["pgbench_drift"])
failed = tables["pgbench_runs"].filter(pl.col("error").is_not_null())
print(f"{failed.height} failed of {tables['pgbench_runs'].height} runs")
failed.select("server", "experiment", "condition", "item", "repetition", "error").head(20)

# %% [markdown]
# ## What our data says next to the studies
#
# Computed from the tables above (the report's section shows the same findings): per claim of the study,
# a verdict per server by the one rule of `pglab.verdicts` with the A/A noise floor (docs/verdicts.md). Read
# the absolute numbers as this machine's, the shapes and ratios as the comparison.

# %%
display(Markdown(findings.markdown(STUDY.findings(derived.Tables(s.profile)))))

# %%
spread = tables["pgbench_select_only_summary"].select(
    "server", "scale", pl.lit("select-only").alias("experiment"), "n", pl.col("min", "median", "max").round(0)
)
print("wall time of each experiment in this session (s):", {k: round(v, 1) for k, v in st.timings.items()})
print("tps spread over repetitions (min / median / max):")
spread

# %%
s.close()

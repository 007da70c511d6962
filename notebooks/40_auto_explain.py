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
# # 40 · What auto_explain costs: the study's matrix, our numbers beside theirs, proof from the log
#
# **The study** (S2 in `docs/studies.md`, PostgreSQL 14.1 on a 4-vCPU Hyper-V guest) asked what the `auto_explain`
# module costs a running system. It filled `tab1(c1 int)` with 1e6 rows and ran two one-statement pgbench
# scripts with one client: `limit` (`SELECT c1 FROM tab1 LIMIT 1;`, one row) 5,000,000 times and `count`
# (`SELECT COUNT(c1) FROM tab1;`, a million rows, a parallel plan with 2 workers) 50,000 times, `count` also
# with `max_parallel_workers_per_gather = 0`. It compared pgbench's `latency average`:
#
# | condition | settings | limit | count parallel | count serial |
# |---|---|---|---|---|
# | not loaded | — | 0.110 | | |
# | loaded, disabled | `shared_preload_libraries = auto_explain`, `log_min_duration = -1` | 0.111 | 22.521 | 50.726 |
# | EXPLAIN only, nothing logged | `log_min_duration = 10000` | 0.112 | 22.532 | 51.448 |
# | EXPLAIN ANALYZE, nothing logged | + `log_analyze = on` | 0.112 | 38.268 | 96.212 |
# | ANALYZE without timing | + `log_timing = off` | 0.111 | 24.396 | 56.766 |
# | EXPLAIN, every plan logged | `log_min_duration = 0` | 0.146 | | |
# | EXPLAIN ANALYZE, every plan logged | `log_min_duration = 0`, `log_analyze = on` | 0.149 | | |
#
# Its findings: loading costs nothing; `log_analyze` costs in proportion to the rows processed (two clock
# reads per node per row), worse without parallelism; `log_timing = off` removes most of it; writing the
# log costs ≈ 30 % on tiny queries. Each number is one run, without spread.
#
# **Our method.** The same table, scripts and base settings (applied to the kit's servers for this stage and reset
# afterwards), on every server the params name, with one pgbench binary for all. auto_explain is loaded through
# `shared_preload_libraries` as in the study (a restart; conditions are grouped so that each round restarts a server
# once) or, as an option and always on an external server, per connection through `session_preload_libraries`. The
# conditions that load auto_explain are **interleaved in one pgbench run** per server, item and round: blocks of a
# `SET` of a condition's settings (a transaction of its own, in no query's latency) and two queries, the conditions'
# blocks in a Williams order (each directly after each other equally often), so that a slow stretch of this shared
# VM falls on every condition alike; *not loaded* runs alone. Every condition runs in every round (repetition r of
# all before r + 1 of any, servers interleaved, after a warm-up round); the table is prewarmed after every restart.
# Runs are transaction counts (`-t` per condition: 5,000 for limit, 100 for the counts) on a table of 1e5 rows (the
# study's 1e6 rows and counts take hours; `count` keeps its 2-worker plan). Every run is kept, with up to 1,000 of
# each condition's transaction latencies (`pgbench -l`). Every comparison is made in the machine's **fast
# mode** (params `estimate: fast`): the 10 % quantile of every transaction of a condition, all rounds pooled, over
# the baseline's (*loaded, disabled*), with an interval from resampling the rounds, the same rounds for both. On
# this shared VM whole 1-s runs went ~2× slow, which no per-run value survives; the fast mode is what a query costs
# when the machine is not slowed (`estimate: round` compares one value per run within rounds instead, as runs that
# kept no latencies are). An **A/A control** (the baseline again under another label, interleaved like the rest)
# measures what this machine calls a difference when there is none: its false-difference rate and **noise floor**.
# The drift of the baseline between the first and second half of the rounds is reported. Each claim of the study
# gets a verdict by the one rule of `pglab.verdicts`. (A condition's median latency in a run is its value; the
# mean of its transactions is kept beside it.) And every run is checked against the server's log: the plans a
# condition must log are there, one per transaction (the log's plans follow the queries' order), and parse; where
# none may be logged there are none.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None

# %%
import time

import polars as pl
from IPython.display import Markdown, display

from pglab import params
from pglab.core import charts, derived
from pglab.core.run import outcomes, session
from pglab.core.stats import findings
from pglab.studies.auto_explain import STUDY
from pglab.studies.auto_explain import charts as aec
from pglab.studies.auto_explain import derive as aer

charts.setup()
s = session.begin(params.load(params_file), run_id, study="auto_explain")
cfg = s.params.auto_explain
r = cfg.run
length = f"-T {r.duration_s}" if r.mode == "time" else "-t " + ", ".join(f"{k} {v}" for k, v in r.transactions.items())
print(f"profile {s.profile}, run {s.run_id}, servers: {[x.name for x in s.servers]}")
print(
    f"tab1: {cfg.rows:,} rows; loading: {cfg.loading}; pgbench -c 1 -j 1 {length}; "
    f"{r.repetitions} repetitions after {r.warmups} warm-up round(s); baseline: {cfg.baseline}"
)
aec.items_table(cfg)

# %% [markdown]
# The conditions, as the params define them (the defaults are the study's; `analyze_no_timing_logged` is
# ours: it shows in the log that plans written with `log_timing = off` carry no times):

# %%
aec.conditions_table(cfg)

# %% [markdown]
# ## Running the matrix
#
# The study's base settings go to each kit server (`shared_buffers 2GB`, `autovacuum off`,
# `max_parallel_workers_per_gather 2`, `max_parallel_workers 4`, `work_mem 5242kB`, `random_page_cost 1.1`,
# …); an external server keeps its own and gets what a session may set.

# %%
s.start()
t0 = time.monotonic()
result = STUDY.run(s)
# a stage that measured on no server leaves no tables: the report then says it was not run (skips: below)
# every table from the raw store alone, as `python -m pglab derive` does (the skips are written below)
tables = STUDY.derive(s.store, s.params)
written = derived.write(tables, s.profile, skip=("auto_explain_skipped",))
STUDY.record_findings(s.profile)  # judged once from the tables as written: the report and make compare read them
print(f"stage: {result.steps_run} pgbench runs now, {result.wall_s:.0f} s; derived tables: {', '.join(written)}")
outcomes.report_skipped(s.store, [STUDY.name], "auto_explain_skipped", s.profile)
result.seen["servers"]

# %%
if result.seen["servers"].filter(pl.col("skipped").is_null()).is_empty():
    s.close()
    outcomes.stop_notebook("every server was skipped: nothing was measured (the reasons are above)")

# %% [markdown]
# ## The plans
#
# One untimed `EXPLAIN (ANALYZE, BUFFERS)` per server and item, recorded next to the times: the shape,
# the workers, and the rows every node returned (over all loops and processes), which is what ANALYZE pays
# for.

# %%
tables["auto_explain_plans"]

# %% [markdown]
# ## Latency per condition
#
# Median with min–max of every recorded run (warm-ups excluded), and the median's interval (`ci_method`:
# min–max below 10 runs).
# The black ticks are the study's single runs (another machine, PostgreSQL 14.1): compare ratios, not
# milliseconds.

# %%
aec.latency_chart(tables["auto_explain_summary"])

# %%
tables["auto_explain_summary"].sort("server", "item", "condition_order").select(
    "server",
    "item",
    "label",
    "n",
    "n_missing",
    pl.col("median", "min", "max", "ci_low", "ci_high").round(4),
    "ci_method",
    "study_ms",
)

# %% [markdown]
# ## The study's table, our ratios beside
#
# Per item: the study's latency and its ratio to *loaded, disabled*, then ours per server (in the fast mode, or
# paired by round; the method column says which) with its interval (the baseline row shows our median latency).

# %%
aer.study_table_wide(tables["auto_explain_study"], list(cfg.items))

# %%
aec.overhead_chart(tables["auto_explain_ratios"])

# %% [markdown]
# ## What writing the plans costs
#
# A condition that logs every plan against the same condition with nothing logged (only
# `log_min_duration` differs), and the bytes the log grew by per transaction.

# %%
logging = aer.logging_costs(tables)
logging.select(
    "server",
    "item",
    "condition",
    "baseline",
    pl.col("median", "median_baseline", "ratio", "ci_low", "ci_high").round(4),
    "coverage",
    "study_ratio",
    *(["log_bytes_per_txn"] if "log_bytes_per_txn" in logging.columns else []),
)

# %% [markdown]
# ## Proof from the log
#
# For every run the server log written during it (from the offsets before the run to a marker logged
# after it) is read with `pglab.serverlog`: the auto_explain entries of the study's database are counted
# against pgbench's transactions, and a sample of them parsed with `pglab.explain` — the right query, actual
# rows under ANALYZE, per-node times only with `log_timing` on. On an external server the log is not
# reachable and the check says so.

# %%
ls = tables["auto_explain_log_summary"]
if ls.width:
    display(
        ls.select(
            "server",
            "label",
            "item",
            "expect_plans",
            "runs",
            "passed",
            "failed",
            "other",
            "plans_logged",
            "transactions",
            "plans_parsed",
            "with_actual_rows",
            "with_times",
            pl.col("log_bytes_per_txn").round(1),
            "first_reason",
        )
    )
failed = tables["auto_explain_log_checks"].filter(pl.col("log_check") == "failed") if ls.width else pl.DataFrame()
print(f"log checks failed: {failed.height}" + ("" if failed.is_empty() else f" — {failed['log_reason'].to_list()[:3]}"))
print(f"warnings and errors the servers logged during the stage: {result.seen['log_problems'].height}")
result.seen["log_problems"]

# %% [markdown]
# ## Why ANALYZE costs: the clock
#
# With `log_analyze` on, every node's every call (one per row it returns) is timed: two clock reads. The
# study explained its overhead that way. Below, per server: the rows and node calls of each plan, one
# clock read's cost from `pg_test_timing`, the extra latency over the baseline per row processed, and the
# timing part alone (ANALYZE minus ANALYZE without timing) per clock read — next to what pg_test_timing
# predicts (reads × ns per read, spread over the processes of a parallel plan as far as there are cores for
# them: `parallelism`).

# %%
tm = tables["auto_explain_timer"]
result.seen["timer"] if tm.is_empty() else tm.select(
    "server",
    "item",
    "rows_processed",
    "clock_reads",
    "processes",
    "parallelism",
    "per_loop_ns",
    pl.col("baseline_ms", "analyze_ms", "no_timing_ms", "extra_ms", "predicted_timing_ms").round(3),
    pl.col("extra_ns_per_row", "timing_ns_per_clock_read").round(1),
)

# %% [markdown]
# ## The noise floor and the drift
#
# The A/A control: the baseline condition twice per round under two labels, compared like any condition. Its
# ratio should be 1; how far it strays, per server and item, is the floor below which an effect decides
# nothing. The drift: the baseline's second half of rounds over its first half.

# %%
display(tables["auto_explain_noise"])
tables["auto_explain_drift"]

# %% [markdown]
# ## The study's findings, tested on our data
#
# Each claim as S2 states it, with its figures, scored by the one rule of `pglab.verdicts` (docs/verdicts.md)
# on the paired ratio: *supported* (the interval shows the direction and contains the study's ratio),
# *direction only* (the direction, not the size), *contradicted*, *undetermined* (too wide, too few rounds,
# below the noise floor, or a flagged measurement), *not run* (a condition this profile's matrix lacks). A claim
# that something costs nothing is "no change within ±5 %" (`negligible`): the whole interval must lie within it.
# "Writing the log costs ≈ 30 %" reads "≈" as the study's ratio ± 5 %. The clock explanation above is shown,
# not scored: the study explained, it did not measure it. The report's section shows these same findings.

# %%
display(Markdown(findings.markdown(STUDY.findings(derived.Tables(s.profile)))))

# %%
s.close()
print(f"stage wall time {result.wall_s:.0f} s; notebook {time.monotonic() - t0:.0f} s after start")

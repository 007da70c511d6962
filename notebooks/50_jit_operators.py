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
# # 50 · JIT per operator: what compiling a simple aggregate saves, and what it costs
#
# **The study** (S4 in `docs/studies.md`, PGECons WG1 2018; PostgreSQL 11 on a 36-core Xeon Gold 6140, 256 GB) asked
# which kinds of query JIT compilation speeds up. Test 1 ran simple queries — arithmetic and aggregates, e.g.
# `SELECT sum(col1) FROM …` — with JIT off and on, after `pg_prewarm`, through psql, and reported the time
# reduction per operator:
#
# | mul | sub | sum | avg | max | count | count(\*) | stddev | var_samp |
# |---|---|---|---|---|---|---|---|---|
# | 18.2 % | 19.5 % | 25.0 % | 30.3 % | 32.4 % | 30.8 % | 16.5 % | 27.8 % | 27.5 % |
#
# Its conclusion: JIT works for every operator, roughly 20–30 % less time regardless of the query's duration.
# The seed names neither the table, its size, the JIT thresholds nor the parallel settings, and gives one number
# per operator without spread.
#
# **Our method.** A generated table `public.jit_ops(c1, c2)` (deterministic, `generate_series`, row count from params),
# frozen and analysed, `pg_prewarm`'d as the study did. `mul` and `sub` are the arithmetic inside an aggregate:
# `sum(c1 * c2)`, `sum(c1 - c2)`. The conditions are session settings given at connection start: *off*
# (`jit = off`), *on* (`jit = on`, `jit_above_cost = 0` so that JIT really runs, inlining and optimisation at
# PostgreSQL's default thresholds of 500,000 — which plans of our size stay below, so expressions and tuple
# deforming are compiled without LLVM optimisation), and *on_optimized* (inlining and optimisation forced, as a
# plan over the study's much larger table would have got them). Parallel query is off in every condition
# (`max_parallel_workers_per_gather = 0`): each parallel worker compiles its own code, which would mix the
# worker count into the comparison. Only servers with JIT take part (`pg_jit_available()` with `jit = on`);
# the others are recorded as *not available*. Every run is kept: a warm-up round, then interleaved rounds
# (every condition and operator in every round, shuffled with a recorded seed; `executions` passes per round,
# each over every operator with an operator's conditions together, so a cell's executions are a pass apart),
# timed from the client as psql's
# `\timing` does, with the backend's own CPU time over the same statement beside it (`/proc/<pid>/schedstat`
# of the server process, on the kit's local servers). That is the time the backend spent on a CPU, JIT
# compilation included; it leaves out time spent waiting for a CPU, but it is not immune to other load: on
# this shared VM it stayed within a fraction of a millisecond of the wall time and jumped with it from round to
# round. A failed run (e.g. a statement timeout) is no sample in either time; it is counted as missing. The
# findings use the metric params name (`metric`, wall time — the study's measure — by default); both are
# shown. The charts show `reduction = 1 − JIT / off` from the ratio the verdicts judge, JIT / off in the machine's
# fast mode (below), with its interval and an A/A control (the baseline measured twice per round) for its noise
# floor.
# Where the time goes comes from one separate,
# untimed `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` per server, condition and operator, whose JIT block gives the
# functions compiled and the generation / inlining / optimisation / emission times.

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
from pglab.studies.jit_operators import STUDY
from pglab.studies.jit_operators import charts as jc
from pglab.studies.jit_operators import derive as jres
from pglab.studies.jit_operators import report as jr

charts.setup()
s = session.begin(params.load(params_file), run_id, study="jit_operators")
p = s.params.jit_operators
print(f"profile {s.profile}, run {s.run_id}, servers: {[x.name for x in s.servers]}")
print(
    f"jit_ops: {p.rows:,} rows of {p.column_type}; operators {p.operators}; {p.repetitions} rounds of "
    f"{p.executions} execution(s) per cell (round value: {p.round_value}) after "
    f"{p.warmups} warm-up round(s), shuffle seed {p.shuffle_seed}; baseline {p.baseline!r}, "
    f"study condition {p.study_condition!r}; findings in {p.metric} time"
)
jres.conditions(p)

# %% [markdown]
# ## Running the stage
#
# Which servers can JIT, the table on each of them, then every (server, condition, operator) cell in
# interleaved rounds, then the plans.

# %%
s.start()
t0 = time.monotonic()
result = STUDY.run(s)
# every table (the findings too) from the raw store alone, as `python -m pglab derive` does; a stage that
# measured on no server leaves no tables: the report then says it was not run (skips: below)
tables = STUDY.derive(s.store, s.params)
written = derived.write(tables, s.profile, skip=("jit_operators_skipped",))  # the skips: report_skipped below
STUDY.record_findings(s.profile)  # judged once from the tables as written: the report and make compare read them
runs = tables.get("jit_operators_runs", pl.DataFrame(schema=jres.RUNS_SCHEMA))
errors = runs.filter(pl.col("error").is_not_null())
print(
    f"stage: {result.steps_run} runs now, {result.wall_s:.0f} s; {errors.height} failed runs; "
    f"derived tables: {', '.join(written)}"
)
outcomes.report_skipped(s.store, [STUDY.name], "jit_operators_skipped", s.profile)
errors.select("server", "condition", "operator", "repetition", "error")

# %%
if not result.servers:
    s.close()
    outcomes.stop_notebook("no server can run the stage: nothing was measured (the reasons are above)")

# %%
# NBVAL_CHECK_OUTPUT
setup = tables["jit_operators_setup"].sort("server")
for r in setup.iter_rows(named=True):
    state = "JIT available" if r["jit_available"] and r["reason"] is None else f"not available ({r['reason']})"
    size = f", table {r['rows']:,} rows" if r["table_bytes"] is not None else ""
    print(f"{r['server']}: PostgreSQL {r['version_num'] // 10000}: {state}{size}")

# %% [markdown]
# ## Do JIT off and on return the same answers?
#
# Every timed run kept the one value its aggregate returned; per server and operator there must be exactly one
# distinct value over all conditions and repetitions.

# %%
# NBVAL_CHECK_OUTPUT
checks = tables["jit_operators_results"]
bad = checks.filter(~pl.col("agree"))
print(
    "yes: every operator returned the same value with JIT off and on"
    if bad.is_empty() and checks.height
    else f"RESULTS DIFFER for {bad['label'].to_list()}"
    if checks.height
    else "nothing was run"
)
print(checks.select("server", "label", "conditions", "distinct_results", "result").sort("server", "label"))

# %% [markdown]
# ## Time per query
#
# Median of the timed runs per condition, backend CPU time and client wall time side by side; the rules
# span min–max. The two move together: where both spread widely, the machine was busy with something else,
# and CPU time does not filter that out.

# %%
summ = tables["jit_operators_summary"]
order = [jr.label(op) for op in p.operators]
display(jc.times_chart(summ, order))
summ.pivot(on="condition", index=["server", "metric", "label"], values="median").sort("server", "metric", "label")

# %% [markdown]
# ## Time reduction per operator, beside the study's
#
# `reduction = 1 − JIT / off` in percent from the ratio the findings judge (paired within rounds, in the fast mode
# or one value per round), with its interval; in the findings' metric the ratio of `jit_operators_paired`, the other
# metric compared the same way. The medians are beside it; the black ticks are the study's figures (another
# machine, version and table: compare the direction and rough size, not the decimals).

# %%
red = tables["jit_operators_reduction"]
display(jc.reduction_chart(red))
red.sort("server", "metric", "condition", "operator_order").select(
    "server",
    "metric",
    "condition",
    "label",
    pl.col("median_baseline").round(2).alias("off_ms"),
    pl.col("median").round(2).alias("jit_ms"),
    pl.col("reduction_pct").round(1).alias("reduction_%"),
    pl.col("reduction_ci_low").round(1).alias("ci_low_%"),
    pl.col("reduction_ci_high").round(1).alias("ci_high_%"),
    pl.col("study_pct").alias("study_%"),
    "coverage",
)

# %% [markdown]
# ## Where JIT time goes
#
# Per operator, left bar: the JIT phases of the plan's compilation (EXPLAIN ANALYZE's JIT block); right bar:
# the execution time the compiled code saved, i.e. `median(off) − median(JIT) + JIT total` (medians in the
# findings' metric). JIT pays off where
# the right bar is taller than the left. Optimisation and inlining are what make *on_optimized* expensive; their
# cost is fixed per query, while the saving grows with the rows processed — which is why the study, on a much
# larger table, could afford them.

# %%
jt = tables["jit_operators_jit_time"]
display(jc.jit_time_chart(jt))
jt.sort("server", "condition", "operator_order").select(
    "server",
    "metric",
    "condition",
    "label",
    "jit_functions",
    "jit_inlining",
    "jit_optimization",
    pl.col(
        "generation_ms",
        "inlining_ms",
        "optimization_ms",
        "emission_ms",
        "jit_total_ms",
        "off_median_ms",
        "on_median_ms",
        "saved_ms",
        "compiled_code_saved_ms",
    ).round(2),
)

# %% [markdown]
# ## The plans
#
# One plan per server, condition and operator: the JIT block is there exactly when JIT is on, with inlining and
# optimisation as the thresholds decide from the plan's total cost.

# %%
# NBVAL_CHECK_OUTPUT
plans = tables["jit_operators_plans"]
for (server, cond), g in plans.group_by("server", "condition", maintain_order=True):
    inl, opt = g["jit_inlining"].fill_null(False).sum(), g["jit_optimization"].fill_null(False).sum()
    print(
        f"{server} {cond}: JIT block in {g['jit'].sum()} of {g.height} plans; inlining in {inl}, optimisation "
        f"in {opt}; plan errors {g['error'].is_not_null().sum()}"
    )

# %%
plans.sort("server", "condition", "label").select(
    "server",
    "condition",
    "label",
    "nodes",
    "total_cost",
    "workers_planned",
    "jit_functions",
    pl.col("execution_ms", "jit_total_ms").round(2),
    "shared_hit_blocks",
    "shared_read_blocks",
)

# %% [markdown]
# ## The fast mode, and this machine's noise floor
#
# On this shared VM the CPU runs ~2× slower for stretches of 0.5–2 s, at times most of a round, so JIT on vs off
# is compared in the machine's fast mode (params `estimate: fast`): the 10 % quantile of all of a cell's
# executions (every round) over the baseline's, with an interval from resampling the rounds, the same rounds
# for both: what the query costs when the machine is not slowed. (`estimate: round` compares the rounds'
# fastest executions within each round instead.) An A/A control — the baseline measured twice per round
# under two labels — shows how far two identical conditions stray here: its false-difference rate and the noise
# floor every verdict uses. Drift: the baseline's second half of rounds over its first.

# %%
# NBVAL_CHECK_OUTPUT
nz = tables["jit_operators_noise"]
for r in nz.iter_rows(named=True):
    fl = "none" if r["floor"] is None else f"±{r['floor']:.1%}"
    fdr = "—" if r["false_difference_rate"] is None else f"{r['false_difference_rate']:.0%}"
    print(f"{r['server']} ({r['metric']}): noise floor {fl}, A/A false-difference rate {fdr} of {r['n_pairs']} pairs")

# %%
pair = tables["jit_operators_paired"].filter(pl.col("condition") != p.aa_condition)
pair.sort("server", "condition", "operator").select(
    "server", "metric", "condition", "operator", "n_rounds", pl.col("ratio", "low", "high").round(3), "method"
)

# %%
dr = tables["jit_operators_drift"]
dr.select("server", "metric", "operator", "n_rounds", pl.col("drift", "low", "high").round(3))

# %% [markdown]
# ## The study's findings, tested on our data
#
# One rule for every study (`pglab.verdicts`, docs/verdicts.md): per operator, the study's reduction as a ratio
# JIT / off (18.2 % less = 0.818×) against our paired ratio and its interval, with the A/A noise floor:
# *supported* when our interval shows less time and holds the study's ratio; *direction only* when it shows less
# time but not within the study's size; *contradicted* when it excludes it and shows no gain (or a loss);
# *undetermined* when too wide, too few rounds, or below the noise floor. The summary ("roughly 20–30 %") is
# judged on all operators pooled (the geometric mean of the operators' ratios: every operator weighs alike) against
# 0.70–0.80×. A server
# without JIT cannot test the claims: *not testable here* (needs a build with JIT).

# %%
f = STUDY.findings(derived.Tables(s.profile))  # as stored above: regimes and build gate applied
display(Markdown(jr.method(derived.Tables(s.profile))))
display(Markdown(findings.markdown(f)))

# %%
s.close()
print(f"stage wall time {result.wall_s:.0f} s; notebook {time.monotonic() - t0:.0f} s after start")

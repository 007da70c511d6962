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
# # pglab compare: run B against run A
#
# Two derived datasets side by side — two runs of one experiment, two machines, two settings, two versions. A and
# B are each a profile (`data/derived/<profile>/`), a run id (any run in `data/raw/` or `data/raw-archive/`, derived
# on the fly when its tables are not in a profile folder) or a folder of derived tables; no server is needed.
#
# **How to read it.** For every table of medians both runs hold (the `*_summary` tables), B / A is the ratio
# of the two medians. Its interval is the *ratio of bounds*, low B / high A … high B / low A, from each run's
# 95 % confidence interval (min–max where a table has none): every ratio the two intervals allow, so it is
# conservative, wider than a bootstrap interval of the ratio. A ratio counts as a change only when that
# interval excludes 1. Whether higher is better depends on the table: times (`ssb`, `auto_explain`,
# `jit_operators`, `parallel_index`, `partitioning`, `pgbench_init`) are better lower, tps (`pgbench_*`)
# higher; the tables and the chart say *B better* or *B worse* in that sense, *no change* where the interval
# holds 1.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
a = "default"  # profile, run id or folder (relative to the project root)
b = "default"
force = False  # true: compare runs of other workloads too (make compare with FORCE set)

# %%
from IPython.display import Markdown, display

from pglab.core import charts
from pglab.core.charts import table
from pglab.report import compare

charts.setup()
A, B = compare.resolve(a), compare.resolve(b)
studies = compare.check_comparable(A, B, force=force)
params_diff = compare.params_differences(A, B)
env = compare.environment_differences(A, B)
verdicts = compare.verdict_changes(A, B)
plans = compare.plan_changes(A, B)
ratios = compare.ratios(A, B)
print(f"A: {A.shown()}\nB: {B.shown()}\nstudies in both: {', '.join(studies)}")
if force and params_diff.filter(kind="workload").height:
    print("FORCED: these runs measured other workloads (below); their medians are not comparable as measurements")

# %% [markdown]
# ## Did each effect hold?
#
# Two runs of one experiment (or study) are first compared by their *effects*: each condition against its baseline,
# measured within the same rounds of one run (an experiment's work_mem=64MB / work_mem=1MB, a study's parallel /
# serial), from the `*_paired` tables. Pairing takes out what the machine did during the run, so an effect can hold
# while every median moved with the host's load. An effect **held** when its intervals in A and in B lie on the same
# side of 1 and overlap (*held, other size*: same side, no overlap); *not reproduced*: A's interval excludes 1, B's
# holds it; *appeared*: the other way round; *reversed*: opposite sides; *no effect in either*: both hold 1. The A/A
# controls are the noise floor, not effects, and are left out.

# %%
effects = compare.effects(A, B)
display(Markdown(compare.effects_markdown(effects)))

# %%
table(compare.effects_held(effects)) if effects.height else print("no effect both runs measured")

# %%
compare.effect_chart(effects, k=30) if effects.height else print("no effect both runs measured")

# %% [markdown]
# ## Params
#
# Every key of the two runs' params files that differs: *workload* keys (a study's sizes and rounds) change what is
# measured, so such runs are refused unless forced; *settings* (server settings, servers, initdb) are what a
# comparison is usually about. Empty where a side's raw data is not here (only its derived tables).

# %%
table(params_diff) if params_diff.height else print("no params difference (or a side's raw data is not here)")

# %% [markdown]
# ## What changed
#
# How many differences of each kind, then the largest changes of a median beyond its interval: B's medians against
# A's, measured at other times. For two runs on one machine this is mostly the machine's drift (another load on the
# host, another cache state); for two machines or versions it is the comparison itself.

# %%
table(compare.what_changed(env, verdicts, plans, ratios, params_diff))

# %%
largest = compare.largest_changes(ratios, k=10)
table(largest) if largest.height else print("no median moved beyond its interval")

# %% [markdown]
# ## Environment
#
# Machine, servers as they describe themselves, and settings that differ (a dash: absent on that side). What the
# kit picks per cluster or clone (port, socket and cluster folders, install paths) and the capture time are left
# out, and so are server properties only one side records (a newer kit records more, the server is the same).

# %%
table(env) if env.height else print("no difference in machine, servers or settings")

# %% [markdown]
# ## Per study
#
# Medians compared per study, how many moved beyond their interval (B higher / B lower), the geometric mean of
# B / A, and the verdict and plan changes below.

# %%
table(compare.by_study(ratios, verdicts, plans))

# %%
compare.ratio_chart(ratios, k=30, per_metric=5)

# %% [markdown]
# ## Verdict changes
#
# Findings (same study, finding and server) whose verdict differs, with each run's evidence.

# %%
table(verdicts) if verdicts.height else print("no verdict changed")

# %% [markdown]
# ## Plan changes
#
# Plan fingerprints and shape columns (node shape, workers planned, Gather placement) that differ for the same
# server and query or condition.

# %%
table(plans) if plans.height else print("no plan changed")

# %% [markdown]
# ## Every effect
#
# Each effect in A and in B (condition / baseline within rounds, with its interval), B's effect over A's, and
# whether it held.

# %%
table(effects.drop("headline")) if effects.height else print("no effect both runs measured")

# %% [markdown]
# ## Every ratio
#
# All medians both runs hold (in their unit), B / A with its interval and what it means for B.

# %%
table(ratios.with_columns(compare.outcome()).drop("study", "change", "better"))

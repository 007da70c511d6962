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
# # Five PostgreSQL performance studies, reproduced on this machine
#
# Each row is a claim of a published study (S1 … S5, `docs/studies.md`), in its own words, beside what our
# measurements say; the sections below give the evidence, the appendix the data.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None

# %%
from IPython.display import Markdown, display

from pglab import params
from pglab.core import charts
from pglab.core.charts import table
from pglab.report import appendix as report_appendix
from pglab.report import sections as report_sections
from pglab.report import summary as report_summary
from pglab.report.environment import machine_table, run_header, servers_table, timer_chart
from pglab.studies import report_order

p = params.load(params_file, check_servers=False)
charts.setup()
everything = report_sections.all_findings(p.profile)
Markdown(run_header(p.profile, p))

# %% [markdown]
# ## The answers, claim by claim

# %%
report_summary.show(everything, report_sections.answers(p.profile))

# %% [markdown]
# ## Findings at a glance

# %%
report_summary.show_glance(everything)

# %% [markdown]
# ## How to read it
#
# Times are medians of interleaved, warmed-up repetitions. Every comparison is a ratio B / A measured in pairs,
# with its interval: a 95 % bootstrap interval from 10 rounds on, else the min–max of the rounds, labelled so.
# SSB, S2 and the JIT operators compare in the machine's *fast mode*: the 10 % quantile of every execution of a
# condition over the baseline's (what it costs when this shared VM is not slowed), the rounds resampled, its
# coverage stated (at most what min–max of the rounds covers). A
# verdict puts the study's claim beside that interval (`docs/verdicts.md`): **supported** (our interval shows the
# direction and contains the study's size), **contradicted** (it excludes the size and does not show the
# direction), **direction only** (right direction, size not shown), **undetermined** (too wide, too few rounds, below
# the machine's noise floor, or a measurement problem), **not comparable** (it compares servers built otherwise
# than in their version: compiler, optimisation, assertions …; the difference named, our figure kept), **not
# testable here** (this machine, scale or build cannot test it; it says what would) and **not run** (not in this
# profile). A claim measured on several servers gets one verdict: theirs when they agree, else undetermined.
#
# Everything here is read from `data/derived/<profile>/` only: no server is needed, and re-running this notebook
# on the committed data reproduces it exactly (CI checks that with nbval). The studies ran on their authors'
# machines at much larger sizes: compare shapes and ratios, not seconds; each section says what differs.

# %% [markdown]
# ## The machine and the servers
#
# Recorded by `00_environment` at the start of the run. Every server ran with the same explicit settings of the
# params file; the timer's cost per read explains part of what `EXPLAIN ANALYZE` and auto_explain's
# `log_analyze` cost.

# %%
table(machine_table(p.profile))

# %%
table(servers_table(p.profile))

# %%
timer_chart(p.profile)

# %%
# every study's section, in the order of the studies S1 … S5 (pglab.studies.report_order)
for study in report_order():
    display(Markdown(f"## {study.section.title}"))
    report_sections.show(study, p.profile)
report_sections.show_experiments(p.profile)  # the params file's own experiments, when it has any

# %% [markdown]
# ## Appendix: the data behind this report
#
# The rounds left out as artefacts; then every derived table this report read, with its row count and SHA-256
# checksum from the manifest (checked here), the run that measured it and the kit revision that derived it.

# %%
# not NBVAL_CHECK_OUTPUT: checksums of a quick run's tables; the committed report is checked strictly anyway
from IPython.display import Markdown

Markdown(
    report_appendix.artefacts_markdown(p.profile)
    + "\n\n"
    + report_appendix.provenance_markdown(p.profile)
    + "\n\n"
    + report_appendix.inventory_markdown(p.profile)
)

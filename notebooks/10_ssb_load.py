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
# # 10 · SSB data: generate and load
#
# The Star Schema Benchmark's five tables, generated deterministically from (scale factor, seed) by
# `pglab.ssb` and streamed into each server through `COPY … (FREEZE)` — nothing is written to disk first, and
# generation runs in a second process beside the load. Every server gets byte-identical rows. A database that
# already holds the same dataset is not loaded again (only pre-warmed, as study S1 did with `pg_prewarm`).
#
# Rules: `docs/studies.md` (Star Schema Benchmark). Data: `data/derived/<profile>/ssb_load.csv`, `ssb_selectivity.csv`.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None
servers = None  # e.g. ["pg18"]; None: every server of the params
sf = None  # None: ssb.sf of the params
seed = None
query_set = None  # pg_ssb_run | ssb_paper
prewarm = None

# %%
from pglab import params
from pglab.core import charts, derived
from pglab.core.run import outcomes, session
from pglab.datasets.ssb import selectivity as ssb_selectivity
from pglab.datasets.ssb import stage as ssb_stage
from pglab.studies.ssb import derive as ssb_derive
from pglab.studies.ssb import run as ssb_run

charts.setup()
s = session.begin(params.load(params_file), run_id, study="ssb")
s.override(servers, ssb=dict(sf=sf, seed=seed, query_set=query_set, prewarm=prewarm))
p, targets = s.params.ssb, s.servers
print(f"run {s.run_id}: SSB SF {p.sf:g}, seed {p.seed}, query set {p.query_set}, on {[t.name for t in targets]}")
ssb_stage.prepare(targets, p)

# %% [markdown]
# ## Load

# %%
# each server's load is recorded as soon as it is done; a server that may not hold the dataset is skipped
# ssb.jit_sf: the servers added for their JIT only hold SSB at that scale (the JIT claims' regime)
sf_of = ssb_run.scales(targets, p)
results = ssb_stage.load_all(targets, p, s.store, sf_of)
ssb_derive.record_load(s.store, results)  # each server's load as this run first saw it
targets = ssb_stage.holding(targets, results)
outcomes.report_skipped(s.store, [ssb_stage.EXP_LOAD], "ssb_load_skipped", s.profile)
if not targets:
    s.close()
    outcomes.stop_notebook("no server holds the SSB dataset: nothing more to do here (the skips are above)")

# %%
loads = ssb_derive.load(s.store, s.params)["ssb_load"]  # from the raw store, as `python -m pglab derive` does
derived.write_table(loads, "ssb_load", s.profile)
loads.select("server", "table", "rows", "seconds", "table_bytes", "skipped")

# %%
# NBVAL_CHECK_OUTPUT
# the generator is deterministic: the same rows on every server, whatever the run
print(loads.select("server", "table", "rows").sort("server", "table"))

# %%
import polars as pl

totals = loads.group_by("server", "skipped", "load_total_s", "prewarm_s", "database_bytes").agg(pl.sum("rows"))
totals.with_columns(
    rows_per_s=pl.col("rows") / pl.col("load_total_s"), database_mib=pl.col("database_bytes") / 2**20
).sort("server")

# %% [markdown]
# ## Selectivity: the data against the benchmark's rules
#
# For each query, the fraction of lineorder rows that pass all its predicates, counted on the loaded data,
# beside the figure the generation rules imply and the one the SSB paper publishes. The published figures
# assume years uniform over 1992–1998; our orders stop at 1998-08-02 as TPC-H's do, and the paper's q1.3 is the
# `36 and 40` variant (pg_ssb_run's `26 and 35` selects about twice as many rows).

# %%
# NBVAL_CHECK_OUTPUT
for t in targets:  # counted on each server's data, kept in the raw store
    rows = ssb_selectivity.measure_rows(t, sf_of[t.name], p.query_set, p.query_ids())
    ssb_derive.record_selectivity(s.store, t.name, rows)
sel = ssb_derive.load(s.store, s.params)["ssb_selectivity"]
derived.write_table(sel, "ssb_selectivity", s.profile)
sel.select("server", "query", "passing_rows", "measured", "expected", "published", "within_tolerance")

# %%
# NBVAL_CHECK_OUTPUT
outside = sel.filter(~pl.col("within_tolerance"))
print(
    "every query's measured filter factor is within sampling tolerance of the rules"
    if outside.is_empty()
    else f"OUTSIDE TOLERANCE: {outside.select('server', 'query').rows()}"
)

# %%
import altair as alt

alt.Chart(sel.filter(server=targets[0].name)).transform_fold(["measured", "expected", "published"]).mark_point(
    filled=True, size=60
).encode(
    x=alt.X("query:N", title=None),
    y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="fraction of lineorder rows passing"),
    color=alt.Color("key:N", title=None),
    shape=alt.Shape("key:N", title=None),
).properties(title=f"SSB filter factors, SF {p.sf:g}", width=520)

# %%
s.close()

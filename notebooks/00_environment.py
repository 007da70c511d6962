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
# # 00 · Environment: the machine and the PostgreSQL servers
#
# Every figure in this report is only as good as the record of where it was measured. This notebook finds
# the PostgreSQL installations on this machine, starts a throwaway cluster for each (same explicit initdb
# options and settings for all), and records what methodology §5 asks for: versions, non-default settings,
# JIT, encoding, locale, checksums, the machine, and the cost of one clock read (`pg_test_timing`).

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None

# %%
from pglab import params
from pglab.core import charts, derived
from pglab.core.installs.installs import discover
from pglab.core.run import session
from pglab.pgtools import environment

charts.setup()
s = session.begin(params.load(params_file), run_id)
print(f"profile {s.profile}, run {s.run_id}, servers: {[x.name for x in s.servers]}")

# %% [markdown]
# ## Installations found

# %%
# NBVAL_CHECK_OUTPUT
import polars as pl

installs = pl.from_dicts([i.as_record() for i in discover()])
installs.select("name", "source", "version", "jit", "has_auto_explain", "has_pg_prewarm", "has_pg_stat_statements")

# %% [markdown]
# ## The servers of this run, as they describe themselves

# %%
s.start()
environment.record(s.store, *environment.capture(s.servers, s.params.environment.pg_test_timing_seconds))
tables = environment.derive(s.store, s.params)  # from the raw store alone, as `python -m pglab derive` does
derived.write(tables, s.profile)

# %%
# NBVAL_CHECK_OUTPUT
tables["environment_servers"].select(
    "server", "kind", "version_num", "encoding", "collate", "data_checksums", "jit_available"
)

# %% [markdown]
# Settings that differ from PostgreSQL's defaults, per server (what the kit set, and what each build sets):

# %%
tables["environment_settings"].pivot(on="server", index="name", values="setting").sort("name")

# %% [markdown]
# ## Timer cost
#
# EXPLAIN ANALYZE reads the clock twice per node per row, so the cost of one clock read explains much of
# its overhead (the auto_explain study).

# %%
tables["environment_timing"]

# %% [markdown]
# ## The machine

# %%
tables["environment_machine"]

# %%
s.close()

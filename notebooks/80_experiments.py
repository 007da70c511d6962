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
# # 80 · Your own experiments
#
# The `experiments:` of the params file (docs/experiments.md), each a question of its own, measured like the
# studies: the data once per server, every combination of the factors' values as a condition, the baseline
# measured twice (an A/A control: the noise floor), warm-up rounds then interleaved rounds over servers,
# conditions and queries, every execution kept, each SQL cell's plan kept, and each condition compared with the
# baseline within rounds (B / A with its interval). An SQL experiment answers per query too: both medians in ms,
# the query's verdict beside the suite's, and why (plan change, spill, buffers, from one untimed EXPLAIN ANALYZE
# per query and condition). A setup or query that fails is an error named in full. A params file without
# experiments runs nothing here.

# %% tags=["parameters"]
# Parameters (papermill injects its own values after this cell)
params_file = "params/default.yaml"  # relative to the project root
run_id = None

# %%
from IPython import get_ipython

from pglab import params
from pglab.core import charts, derived
from pglab.core.run import session

p = params.load(params_file)
if not p.experiments:  # nothing to run, and nothing to show: every later cell is skipped
    get_ipython().input_transformers_post.append(lambda lines: ["pass\n"])

# %%
from pglab.studies.experiments import derive as xderive
from pglab.studies.experiments import report as xreport
from pglab.studies.experiments import run as xrun

charts.setup()
s = session.begin(p, run_id, study="experiments")
print(f"profile {s.profile}, run {s.run_id}, experiments: {[e.name for e in p.experiments]}")

# %%
s.start()
try:
    for r in xrun.run_all(s):
        print(
            f"{r.experiment}: {r.steps_run} measurements now on {r.servers}, {r.wall_s:.0f} s; "
            f"{r.count('error')} cell(s) in error, {r.count('not testable here')} not testable here"
        )
finally:
    s.close()
tables = xderive.derive(s.store, s.params)  # from the raw store alone, as `python -m pglab derive` does
print("derived tables:", ", ".join(derived.write(tables, s.profile)))

# %%
try:
    env = derived.read_table("environment_servers", s.profile)
except (OSError, KeyError, ValueError):
    env = None  # the environment notebook did not run for this profile: no builds to set side by side
_ = xreport.show_all(tables, env)  # the count it returns is not the reader's business (no stray "1")

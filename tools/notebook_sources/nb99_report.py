"""Cells of notebooks/99_report.ipynb (regenerate with `python tools/make_notebooks.py`)."""

from nbbuild import code, md, params_cell

CELLS = [
    md("""
# 99 · Report

What `data/derived/` holds for this profile, with its checksums, and the environment the numbers were
measured in. Every table here is read from the committed derived data, so this notebook re-renders
the report without any server.
"""),
    params_cell(),
    code('''
from pglab import charts, derived, params

p = params.load(params_file, check_servers=False)
charts.setup()
print(f"profile {p.profile}")
'''),
    md("""
## Derived datasets
"""),
    code('''
# NBVAL_CHECK_OUTPUT
inventory = derived.inventory().filter(profile=p.profile).drop("sha256")
print(inventory)
problems = derived.verify(p.profile)
print("manifest:", "all files match" if not problems else f"MISMATCH {problems}")
'''),
    md("""
## Servers compared in this report
"""),
    code('''
servers = derived.read_table("environment_servers", p.profile)
servers.select("server", "version_string", "data_checksums", "jit_available")
'''),
    md("""
## Cost of one clock read per server
"""),
    code('''
import altair as alt

timing = derived.read_table("environment_timing", p.profile)
alt.Chart(timing).mark_bar().encode(
    x=alt.X("per_loop_ns:Q", title="ns per clock read (pg_test_timing)"),
    y=alt.Y("server:N", title=None),
).properties(height=40 * max(1, timing.height), title="Timer overhead")
'''),
]

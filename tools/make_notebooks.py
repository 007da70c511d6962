"""Writes the source notebooks of notebooks/ from the cell texts below (run once after editing them).

Keeping the cells here as plain text makes them easy to review; the .ipynb files are what users open."""

import sys
from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parents[1]


def md(text):
    return nbf.v4.new_markdown_cell(text.strip())


def code(text, tags=()):
    c = nbf.v4.new_code_cell(text.strip())
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def params_cell():
    return code(
        '''
# Parameters (papermill injects its own values after this cell)
params_file = "../params/default.yaml"
run_id = None
''',
        tags=["parameters"],
    )

NOTEBOOKS = {
    "00_environment": [
        md("""
# 00 · Environment: the machine and the PostgreSQL servers

Every figure in this report is only as good as the record of where it was measured. This notebook finds
the PostgreSQL installations on this machine, starts a throwaway cluster for each (same explicit initdb
options and settings for all), and records what methodology §5 asks for: versions, non-default settings,
JIT, encoding, locale, checksums, the machine, and the cost of one clock read (`pg_test_timing`).
"""),
        params_cell(),
        code('''
from pglab import charts, derived, environment, session
from pglab.installs import discover

charts.setup()
s = session.begin(params_file, run_id)
print(f"profile {s.profile}, run {s.run_id}, servers: {[x.name for x in s.servers]}")
'''),
        md("## Installations found"),
        code('''
import polars as pl

installs = pl.from_dicts([i.as_record() for i in discover()])
installs.select("name", "source", "version", "jit", "has_auto_explain", "has_pg_prewarm", "has_pg_stat_statements")
'''),
        md("## The servers of this run, as they describe themselves"),
        code('''
s.start()
tables, raw = environment.capture(s.servers, s.params.environment.pg_test_timing_seconds)
s.store.save_json("environment.json", raw)
for name, df in tables.items():
    derived.write_table(df, name, s.profile)
tables["environment_servers"].select(
    "server", "kind", "version_num", "encoding", "collate", "data_checksums", "jit_available"
)
'''),
        md("Settings that differ from PostgreSQL's defaults, per server (what the kit set, and what each build sets):"),
        code('''
tables["environment_settings"].pivot(on="server", index="name", values="setting").sort("name")
'''),
        md("""
## Timer cost

EXPLAIN ANALYZE reads the clock twice per node per row, so the cost of one clock read explains much of
its overhead (the auto_explain study).
"""),
        code('''
tables["environment_timing"]
'''),
        md("## The machine"),
        code('''
tables["environment_machine"]
'''),
        code('''
s.close()
'''),
    ],
    "99_report": [
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
        md("## Derived datasets"),
        code('''
# NBVAL_CHECK_OUTPUT
inventory = derived.inventory().filter(profile=p.profile).drop("sha256")
print(inventory)
problems = derived.verify(p.profile)
print("manifest:", "all files match" if not problems else f"MISMATCH {problems}")
'''),
        md("## Servers compared in this report"),
        code('''
servers = derived.read_table("environment_servers", p.profile)
servers.select("server", "version_string", "data_checksums", "jit_available")
'''),
        md("## Cost of one clock read per server"),
        code('''
import altair as alt

timing = derived.read_table("environment_timing", p.profile)
alt.Chart(timing).mark_bar().encode(
    x=alt.X("per_loop_ns:Q", title="ns per clock read (pg_test_timing)"),
    y=alt.Y("server:N", title=None),
).properties(height=40 * max(1, timing.height), title="Timer overhead")
'''),
    ],
}


def main() -> int:
    for name, cells in NOTEBOOKS.items():
        nb = nbf.v4.new_notebook()
        nb.cells = cells
        for i, cell in enumerate(nb.cells):  # stable ids: regenerating must not churn the files
            cell.id = f"{name}-{i:02d}"
        nb.metadata["kernelspec"] = {"name": "pglab", "display_name": "pglab (.venv)", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nbf.write(nb, path)
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())

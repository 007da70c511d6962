"""Cells of notebooks/99_report.ipynb (regenerate with `python tools/make_notebooks.py 99`).

One section per study, in the order of the studies S1 … S5 (docs/studies.md); each heading comes from the section
module's TITLE and each body from `report_sections.show()`, so the notebook stays a table of contents."""

import sys
from pathlib import Path

from nbbuild import code, md, params_cell

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
from pglab import report_sections  # noqa: E402

STUDY_CELLS = []
for name in report_sections.SECTIONS:
    STUDY_CELLS += [
        md(f"## {report_sections.section(name).TITLE}"),
        code(f'report_sections.show("{name}", p.profile)'),
    ]

CELLS = [
    md("""
# pglab report: PostgreSQL performance studies, reproduced on this machine

Five published studies, S1 … S5, asked what a PostgreSQL version, setting or feature does to performance
(`docs/studies.md` describes each, with its citation: S1 and S3 entries of the PostgreSQL Advent Calendar, S2 a
blog post, S4 the PostgreSQL Enterprise Consortium's WG1 report for 2018, S5 a blog entry for the 2017
Advent Calendar). This report answers the same questions on the machine and servers described below, from
the measurements of one run of every experiment notebook (`notebooks/00`–`70`, where each measurement is taken
and stored; their executed copies sit next to this one).

**How to read it.** Times are medians of interleaved, warmed-up repetitions, shown with their min–max range.
Every comparison is a ratio with a 95 % bootstrap confidence interval; a difference whose interval contains 1
is reported as *no detectable difference*, never as a win. Each finding puts the source study's claim beside
our evidence and a verdict: **supported**, **not supported**, **undetermined** (our interval is too wide to
tell) or **not run** (not in this profile, or the server cannot run it, e.g. no JIT).

Everything below is read from `data/derived/<profile>/` only — no server is needed, and re-running this
notebook on the committed data reproduces it exactly (CI checks that with nbval).
"""),
    params_cell(),
    code('''
import polars as pl

from pglab import charts, derived, params, report_sections
from pglab.charts import table
from pglab.environment_report import machine_table, servers_table, timer_chart

p = params.load(params_file, check_servers=False)
charts.setup()
print(f"profile {p.profile}: data/derived/{p.profile}/")
'''),
    md("""
## The data behind this report

Every derived table with its row count; the manifest holds their SHA-256 checksums, checked here.
"""),
    code('''
# NBVAL_CHECK_OUTPUT
with pl.Config(tbl_rows=-1):
    print(derived.inventory().filter(profile=p.profile).drop("sha256", "profile"))
problems = derived.verify(p.profile)
print("manifest:", "every table matches its checksum" if not problems else f"MISMATCH {problems}")
'''),
    md("""
## The machine and the servers

Recorded by `00_environment` at the start of the run. Every server ran with the same explicit settings of the
params file (listed per study below where they matter); the timer's cost per read explains part of what
`EXPLAIN ANALYZE` and auto_explain's `log_analyze` cost.
"""),
    code('''
table(machine_table(p.profile))
'''),
    code('''
table(servers_table(p.profile))
'''),
    code('''
timer_chart(p.profile)
'''),
    md("""
## Findings at a glance

How many of each study's findings our data supports, contradicts or cannot decide; the sections below give
each one with its numbers.
"""),
    code('''
everything = report_sections.all_findings(p.profile)
table(report_sections.verdict_counts(everything))
'''),
    code('''
table(everything.select("study", "finding", "server", "verdict"))
'''),
    *STUDY_CELLS,
]

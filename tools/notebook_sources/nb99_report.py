"""Cells of notebooks/99_report.ipynb (regenerate with `python tools/make_notebooks.py 99`).

Answers first (report_summary: one row per claim, then the tally), then one section per study in the order of the
studies S1 … S5 (docs/studies.md), each heading from the section module's TITLE and each body from
`report_sections.show()`, then the data inventory (report_appendix): the notebook stays a table of contents."""

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
# Five PostgreSQL performance studies, reproduced on this machine

Each row is a claim of a published study (S1 … S5, `docs/studies.md`), in its own words, beside what our
measurements say; the sections below give the evidence, the appendix the data.
"""),
    params_cell(),
    code('''
from pglab import charts, params, report_appendix, report_sections, report_summary
from pglab.charts import table
from pglab.environment_report import machine_table, servers_table, timer_chart

p = params.load(params_file, check_servers=False)
charts.setup()
everything = report_sections.all_findings(p.profile)
'''),
    md("## The answers, claim by claim"),
    code('''
report_summary.show(everything)
'''),
    md("## Findings at a glance"),
    code('''
report_summary.show_glance(everything)
'''),
    md("""
## How to read it

Times are medians of interleaved, warmed-up repetitions. Every comparison is a ratio B / A measured in pairs,
with its interval: a 95 % bootstrap interval from 10 rounds on, else the min–max of the rounds, labelled so. A
verdict puts the study's claim beside that interval (`docs/verdicts.md`): **supported** (our interval shows the
direction and contains the study's size), **contradicted** (it excludes the size and does not show the
direction), **direction only** (right direction, other size), **undetermined** (too wide, too few rounds, below
the machine's noise floor, or a measurement problem), **not testable here** (this machine, scale or build
cannot test it; it says what would) and **not run** (not in this profile). A claim measured on several servers
gets one verdict: theirs when they agree, else undetermined.

Everything here is read from `data/derived/<profile>/` only: no server is needed, and re-running this notebook
on the committed data reproduces it exactly (CI checks that with nbval). The studies ran on their authors'
machines at much larger sizes: compare shapes and ratios, not seconds; each section says what differs.
"""),
    md("""
## The machine and the servers

Recorded by `00_environment` at the start of the run. Every server ran with the same explicit settings of the
params file; the timer's cost per read explains part of what `EXPLAIN ANALYZE` and auto_explain's
`log_analyze` cost.
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
    *STUDY_CELLS,
    md("""
## Appendix: the data behind this report

Every derived table this report read, with its row count and SHA-256 checksum from the manifest (checked
here), the run that measured it and the kit revision that derived it.
"""),
    code('''
# not NBVAL_CHECK_OUTPUT: checksums of a quick run's tables; the committed report is checked strictly anyway
from IPython.display import Markdown

Markdown(report_appendix.provenance_markdown(p.profile) + "\\n\\n" + report_appendix.inventory_markdown(p.profile))
'''),
]

"""S3's section says how the versions it compares were built, beside how S3's were, and how to compare -O2 source
builds instead (issue 57): read from the committed reference's environment_servers, no server."""

import polars as pl

from pglab.core.derived import Tables
from pglab.studies.pgbench import report as pgbench_report


def test_the_section_names_each_servers_build_and_the_way_to_o2(committed_copy):
    t = pgbench_report._tables(Tables("default", committed_copy))
    env = t["environment_servers"].filter(pl.col("server").is_in(pgbench_report._servers(t)))
    note = pgbench_report.builds_markdown(t)
    for r in env.filter(~pl.col("server").str.contains("_c")).iter_rows(named=True):
        assert f"{r['build_compiler']} {r['build_opt']}" in note and r["server"] in note
    assert "_c2" not in note  # a server once, not once per cluster
    if (env["build_opt"] == "-Os").any():
        assert "-Os optimises for size" in note
    assert "S3 compared each version's own build" in note and "pgbench.builds: any" in note
    assert "cflags: -O2" in note and note in pgbench_report.method(Tables("default", committed_copy))


def test_no_build_recorded_no_note(committed_copy):
    t = pgbench_report._tables(Tables("default", committed_copy)) | {"environment_servers": pl.DataFrame()}
    assert pgbench_report.builds_markdown(t) is None

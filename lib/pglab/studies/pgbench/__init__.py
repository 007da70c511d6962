"""S3 (pgbench on nine versions) and S4's client scaling: pgbench init, select-only, scaling and series.

params (the study's params section), run (server work, resumable) with measure (one pgbench run) and databases,
derive (raw -> tables) with paired_tables, reference, charts, verdicts, report (the report section)."""

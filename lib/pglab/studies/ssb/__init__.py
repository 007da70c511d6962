"""S1 (and S4's SSB tests): SSB queries with parallel query and JIT across PostgreSQL versions.

params (the study's params section), experiment and study_plans (server work), derive (raw -> tables),
reference, report_data, charts, findings, report (the report section)."""

"""S1 (and S4's SSB tests): SSB queries with parallel query and JIT across PostgreSQL versions.

params (the study's params section), experiment and study_plans (server work), derive (raw -> tables),
reference, paired_tables, report_data, report_text (the method text and charts), charts, verdicts (the claims under
the one rule), report (the report section)."""

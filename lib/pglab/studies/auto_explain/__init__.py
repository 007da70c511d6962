"""S2: the overhead of auto_explain on pgbench's select-only and custom scripts, with the log as proof.

params (the study's params section), prepare (server setup), run (server work, resumable) with logcheck,
derive (raw -> tables), verdicts (the claims under the one rule), charts, report (the report section)."""

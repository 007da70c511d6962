"""S4 test 1: JIT per operator (scans, sorts, aggregates, joins) with JIT on and off.

params (the study's params section), run (server work, resumable), derive (raw -> tables), verdicts, charts,
report (the report section)."""

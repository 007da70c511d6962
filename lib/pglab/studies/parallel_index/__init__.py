"""S4 test C: parallel CREATE INDEX with 0 to N maintenance workers.

params (the study's params section), build (one index build), run (server work, resumable), derive
(raw -> tables), verdicts, charts, report (the report section)."""

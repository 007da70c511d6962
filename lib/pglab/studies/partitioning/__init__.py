"""S5: hash partitioning and Parallel Append (PostgreSQL 11), partitioned against plain tables.

params (the study's params section), prepare (tables and partitions), run (server work, resumable), derive
(raw -> tables) with plans, verdicts, report (the report section)."""

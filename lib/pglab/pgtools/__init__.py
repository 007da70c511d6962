"""Tools around PostgreSQL programs: EXPLAIN parsing, the server log, pgbench and pg_test_timing output,
the environment capture."""

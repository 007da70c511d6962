"""Results that travel: a run's derived tables exported as Parquet with a manifest of what ran where (`export`),
every exported run queried together with DuckDB (`index`), and a run loaded into a PostgreSQL results schema where
runs of many machines meet (`publish`). `python -m pglab.results export|query|publish`; no kit server is needed.

Above `report` and `derive` in the layers: an export derives a run from its archive when its tables are not in
data/derived/ (pglab.derive), and names each server's version and build as the report does (report.environment)."""

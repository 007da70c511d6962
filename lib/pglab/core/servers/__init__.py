"""PostgreSQL servers the kit starts or reaches: clusters (initdb, start, stop, settings), their processes and
sockets, connections and timed statements, which servers a run uses, and cleaning up after them."""

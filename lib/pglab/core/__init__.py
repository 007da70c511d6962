"""The foundation: paths, params types, servers and clusters, the store, statistics and verdicts; knows no study."""

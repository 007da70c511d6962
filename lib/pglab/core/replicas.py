"""Replica clusters: one server measured on several independently made clusters within a run (params
`servers.clusters`, issue 30).

A run's figure otherwise rests on one initdb, one data load, one ANALYZE sample and one physical layout per
server; a re-run on fresh clusters moves it by more than its rounds say. With `clusters: N` every kit server is
started as N clusters, each with its own data directory, port, socket and load: the first keeps the server's
name (`pg17`), the others are named `<server>_c<k>` (`pg17_c2`, `pg17_c3`): letters, digits and `_` only, so
the name is as safe as the server's in file names, database names, table values and chart labels.
`split_name` maps any name back to (base server, cluster index); the between-cluster interval
(`between_runs.pool_clusters`) pools the rows of one base server.

Imports nothing of the kit: params, servers and derive code all use it."""

from __future__ import annotations

import re

SUFFIX = "_c"
MAX_CLUSTERS = 8
_REPLICA = re.compile(rf"(?P<base>.+){SUFFIX}(?P<k>[2-9]|[1-9][0-9]+)")


def replica_name(base: str, k: int) -> str:
    """The name of cluster `k` (1-based) of server `base`: the base itself for the first, `<base>_c<k>` after."""
    if k < 1:
        raise ValueError(f"cluster index starts at 1, not {k}")
    return base if k == 1 else f"{base}{SUFFIX}{k}"


def split_name(name: str) -> tuple[str, int]:
    """(base server, cluster index) of a server name: ('pg17', 1) for pg17, ('pg17', 2) for pg17_c2."""
    m = _REPLICA.fullmatch(name)
    return (m["base"], int(m["k"])) if m else (name, 1)


def looks_like_replica(name: str) -> bool:
    """Whether `name` reads as a replica's (`<base>_c<k>`, k ≥ 2): a server of the user's may not be so named
    when the run makes replicas, or its data would be pooled with another server's."""
    return split_name(name)[1] > 1


def base_names(names) -> dict[str, str]:
    """Every name mapped to its base server, taking a name as a replica only when its base is among `names` too
    (a server of the user's named `x_c2` in a run without `x` stays itself)."""
    names = list(names)
    present = set(names)
    out = {}
    for n in names:
        base, k = split_name(n)
        out[n] = base if k > 1 and base in present else n
    return out

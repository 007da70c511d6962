"""Whether two servers are built alike in all but their version: the gate of a claim that compares servers.

A version curve whose binaries come from different compilers, optimisation levels or assertion settings
measures the builds as much as the versions, so such a comparison is named *not comparable* with the difference
(the figure still shown). The identity comes from the environment capture (`pgtools.environment.build_identity`)."""

from __future__ import annotations

# (column, how the reader reads it): held equal between the servers of a version comparison. The compiler counts by
# name and major.minor; configure options are not held equal (distributions enable features that do not touch
# the measured paths), LLVM only where JIT is what is compared.
HELD_EQUAL = (
    ("build_compiler", "compiler"),
    ("build_opt", "optimisation"),
    ("debug_assertions", "assertions"),
    ("block_size", "block size"),
    ("wal_segment_size", "WAL segment size"),
    ("data_checksums", "checksums"),
)
JIT = (("build_llvm", "LLVM"),)


def difference(a: dict, b: dict, jit: bool = False) -> str | None:
    """None when servers a and b (environment_servers rows) are built alike in what is held equal; else what
    differs, e.g. "builds differ: compiler gcc 4.4 (pg10) vs gcc 7.5 (pg11)"."""
    names = (a.get("server", "A"), b.get("server", "B"))
    missing = [n for n, r in zip(names, (a, b), strict=True) if not r.get("build_compiler")]
    if missing:
        return f"build of {' and '.join(missing)} not recorded"
    diffs = [
        f"{label} {a.get(col)} ({names[0]}) vs {b.get(col)} ({names[1]})"
        for col, label in HELD_EQUAL + (JIT if jit else ())
        if a.get(col) != b.get(col)
    ]
    return "builds differ: " + "; ".join(diffs) if diffs else None


def matched_groups(servers: list[dict], jit: bool = False) -> list[list[str]]:
    """The servers in groups built alike (each group comparable within itself), largest first."""
    groups: list[list[dict]] = []
    for s in servers:
        for g in groups:
            if difference(g[0], s, jit) is None:
                g.append(s)
                break
        else:
            groups.append([s])
    return [[s["server"] for s in g] for g in sorted(groups, key=len, reverse=True)]

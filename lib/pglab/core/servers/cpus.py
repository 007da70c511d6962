"""Which CPU a one-client run's client and server backend run on.

    with cpus.split(server) as placement:   # "client CPU 1, server backend CPU 0", or None: not pinned (why)
        pgbench.run(...)                     # started from this thread: it inherits the client's CPU

A one-client run of a query that takes tens of µs is bimodal where the scheduler places client and backend freely:
on one CPU each query costs a context switch, on two a cross-CPU wake-up; on a 2-vCPU guest the two read 13 and
70 µs for one `LIMIT 1`, and a run flipped between them for 0-56 % of its transactions. Runs that cannot share one
pgbench run (a restart apart) then differ by where their processes landed, not by what they measure. `split` puts
the client on the last CPU and the backend of every connection opened meanwhile on the first, for the whole run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from .cluster_procs import postmaster_pid


def why_not(server) -> str | None:
    """Why `server`'s backends cannot be placed from here (None: they can)."""
    if server.cluster is None:
        return "an external server: its processes are on its own machine"
    if len(os.sched_getaffinity(0)) < 2:
        return "fewer than 2 CPUs available"
    if postmaster_pid(server.cluster.data) is None:
        return "the server is not running"
    return None


@contextmanager
def split(server) -> Iterator[str | None]:
    """While open: this thread (and what it starts) on the last CPU it may use, the postmaster of `server` on the
    first, so that each backend forked meanwhile starts there; both put back on leaving. Yields what was done, or
    None where nothing could be (`why_not`, or the OS refused)."""
    if why_not(server) is not None:
        yield None
        return
    mine = os.sched_getaffinity(0)
    first, last = min(mine), max(mine)
    pm = postmaster_pid(server.cluster.data)
    try:
        theirs = os.sched_getaffinity(pm)
        os.sched_setaffinity(pm, {first})
    except OSError:
        yield None
        return
    try:
        os.sched_setaffinity(0, {last})
        yield f"client CPU {last}, server backend CPU {first}"
    finally:
        os.sched_setaffinity(0, mine)
        try:
            os.sched_setaffinity(pm, theirs)
        except OSError:
            pass  # the server stopped meanwhile: nothing to put back

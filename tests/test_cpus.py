"""core.servers.cpus on a real server: while split, this thread's children run on the last CPU and every backend
forked meanwhile on the first; afterwards both are back where they were."""

import os
import subprocess

import pytest

from pglab.core.servers import cpus
from pglab.core.servers.cluster import Cluster
from pglab.core.servers.cluster_procs import postmaster_pid
from pglab.core.servers.servers import Server

EVERY = os.sched_getaffinity(0)


def _allowed(pid: int | str) -> str:
    """A process's CPUs as the kernel lists them (/proc/<pid>/status), read by a child of this thread."""
    out = subprocess.run(["grep", "Cpus_allowed_list", f"/proc/{pid}/status"], capture_output=True, text=True)
    return out.stdout.split()[-1]


def _backend_cpus(cluster: Cluster) -> set[int]:
    with cluster.connect() as conn:
        return os.sched_getaffinity(conn.execute("SELECT pg_backend_pid()").fetchone()[0])


@pytest.mark.skipif(len(EVERY) < 2, reason="one CPU: nothing to split")
def test_split_puts_client_and_new_backends_on_cpus_of_their_own(embedded):
    c = Cluster(embedded, name="pytest-cpus")
    c.start({"shared_buffers": "128MB"})
    try:
        server = Server("pytest-cpus", embedded, c)
        pm = postmaster_pid(c.data)
        assert cpus.why_not(server) is None
        with cpus.split(server) as placement:
            assert placement == f"client CPU {max(EVERY)}, server backend CPU {min(EVERY)}"
            assert _backend_cpus(c) == {min(EVERY)}
            assert _allowed("self") == str(max(EVERY))  # a child of this thread: pgbench runs like this
        assert os.sched_getaffinity(0) == EVERY and os.sched_getaffinity(pm) == EVERY
        assert _backend_cpus(c) == EVERY  # a connection opened afterwards runs anywhere again
    finally:
        c.stop()
    # a stopped server's backends cannot be placed: the run goes on unplaced and says so
    assert cpus.why_not(server) == "the server is not running"
    with cpus.split(server) as placement:
        assert placement is None and os.sched_getaffinity(0) == EVERY


def test_an_external_server_is_not_placed():
    server = Server("elsewhere")
    assert cpus.why_not(server).startswith("an external server")
    with cpus.split(server) as placement:
        assert placement is None

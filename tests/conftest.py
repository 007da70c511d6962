"""Shared fixtures: real PostgreSQL servers started by the kit itself (never mocks).

The tests keep their clusters and data under build/test/pytest (not the user's .pglab/ or data/): a folder
inside the checkout, so that the unprivileged server user can reach it when the tests run as root."""

import contextlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# one home per pytest-xdist worker (make test runs several): the shared fixtures' cluster names would clash
TEST_HOME = ROOT / "build" / "test" / "pytest" / os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["PGLAB_STATE_DIR"] = str(TEST_HOME / "state")
os.environ["PGLAB_DATA_DIR"] = str(TEST_HOME / "data")

from pglab.core.cluster import Cluster  # noqa: E402
from pglab.core.installs import discover  # noqa: E402

INSTALLS = discover()


def postmasters(data_dir: Path) -> list[int]:
    """PIDs of live postmasters serving `data_dir` (read from /proc, not from the kit's own records)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"postgres") and str(data_dir).encode() in args:
            pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="session")
def installs():
    return INSTALLS


@pytest.fixture(scope="session", params=INSTALLS, ids=lambda i: i.name)
def install(request):
    return request.param


@pytest.fixture(scope="session")
def embedded():
    return next(i for i in INSTALLS if i.source == "embedded")


@pytest.fixture(scope="session")
def cluster(install):
    """A running cluster per install, shared by the tests that only query it."""
    c = Cluster(install, name=f"shared-{install.name}")
    c.start({"shared_buffers": "128MB"})
    yield c
    c.stop()


@pytest.fixture(scope="module")
def committed_copy(tmp_path_factory):
    """A copy of the committed reference run's derived data (data/derived/default) to read or alter; the
    committed files themselves must come out untouched."""
    import shutil

    from pglab.core import derived

    committed = ROOT / "data" / "derived"
    root = tmp_path_factory.mktemp("derived")
    shutil.copytree(committed / "default", root / "default")
    yield root
    assert derived.verify("default", committed) == []


@contextlib.contextmanager
def ssb_servers(installs, prefix: str, sf: float, seed: int, settings: dict):
    """A kit server per install with the same SSB dataset loaded, stopped however the tests end."""
    from pglab.core.servers import Server
    from pglab.datasets.ssb.load import load

    out = []
    try:
        for inst in installs:
            cluster = Cluster(inst, name=f"{prefix}-{inst.name}")
            srv = Server(inst.name, install=inst, cluster=cluster, settings=settings)
            srv.start()
            out.append(srv)
            load(srv, sf, seed, prewarm=False)
        yield out
    finally:
        for s in out:
            s.stop()


# test_derive_run re-derives test_report's quick pass when one exists (else it measures its own, ~4 minutes),
# test_stability compares a second quick run with it and test_report_nbval re-executes its notebooks: all run after
# test_report, on the same make test worker.
_QUICK_PASS = ("test_report.py", "test_stability.py", "test_derive_run.py", "test_report_nbval.py")
# make test's workers take the longest files first (their CI durations), so that they finish together
_LONGEST = (*_QUICK_PASS, "test_pg_build.py", "test_resume_kill.py", "test_external_servers.py", "test_lab.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(_LONGEST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """make test's pytest-xdist schedule: each file whole on one worker (its module fixtures made once), the
    quick-pass files together, in collection order. (Not xdist_group marks: under pytest 9.2 they silently group
    nothing, pytest-xdist issue 1386.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Files(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
            return "quick-pass" if name in _QUICK_PASS else name

    config.option.loadscopereorder = False
    return Files(config, log)


def pytest_terminal_summary(terminalreporter):
    """The figures tests print for the notes (coverage of a simulated interval, a cold build's time, agreement of
    two quick runs): under pytest-xdist a passing test's output never reaches the terminal, so they are gathered
    from the reports here, one block per test."""
    printed = [
        (r.nodeid, text.strip())
        for r in terminalreporter.stats.get("passed", [])
        if r.when == "call"
        for name, text in r.sections
        if name == "Captured stdout call" and text.strip()  # the test's own lines, not its fixtures'
    ]
    if not printed:
        return
    terminalreporter.section("what the passing tests printed")
    for nodeid, text in sorted(printed):
        terminalreporter.write_line(nodeid)
        for line in text.splitlines():
            terminalreporter.write_line(f"    {line}")


def captured_identities(installs, prefix: str) -> list[dict]:
    """The environment_servers rows (build identity included) the kit records from a started server of each
    install, each stopped again."""
    from pglab.core.servers import Server
    from pglab.pgtools import environment

    rows = []
    for inst in installs:
        srv = Server(inst.name, install=inst, cluster=Cluster(inst, name=f"{prefix}-{inst.name}"), settings={})
        srv.start()
        try:
            rows.append(environment.server(srv)[0])
        finally:
            srv.stop()
    return rows

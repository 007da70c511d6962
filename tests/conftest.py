"""Shared fixtures: real PostgreSQL servers started by the kit itself (never mocks).

The tests keep their clusters and data under build/test/pytest (not the user's .pglab/ or data/): a folder
inside the checkout, so that the unprivileged server user can reach it when the tests run as root."""

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# one home per pytest-xdist worker (make test runs several): the shared fixtures' cluster names would clash
TEST_HOME = ROOT / "build" / "test" / "pytest" / os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["PGLAB_STATE_DIR"] = str(TEST_HOME / "state")
os.environ["PGLAB_DATA_DIR"] = str(TEST_HOME / "data")

from pglab.core.installs.installs import discover  # noqa: E402
from pglab.core.servers.cluster import INITDB_NO_SYNC_ENV, Cluster  # noqa: E402

# the tests' clusters (and their subprocesses' and the quick pass's) skip initdb's final fsync, as pg_regress does:
# about 1.3 s of waiting on the disk per cluster, and a session makes hundreds
os.environ[INITDB_NO_SYNC_ENV] = "1"

INSTALLS = discover()


def postmasters(data_dir: Path) -> list[int]:
    """PIDs of live postmasters serving `data_dir` (read from /proc, not from the kit's own records). A child the
    postmaster has just forked shows the postmaster's command line until it sets its own process title (on a loaded
    machine long enough to be read: a backend was taken for a second postmaster), so a match whose parent is
    itself a match is a child, not a postmaster."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if args and args[0].endswith(b"postgres") and str(data_dir).encode() in args:
            found[int(proc.name)] = ppid
    return sorted(pid for pid, ppid in found.items() if ppid not in found)


CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver"
)


def unbuildable_params(folder: Path) -> Path:
    """params/quick.yaml with a source install that cannot be built (its git folder does not exist): what loads it
    with the machine's checks fails, what only reads it does not."""
    out = folder / "unbuildable.yaml"
    own = f"  installs: [{{name: own, source: {{git: {folder / 'no-repo'}, ref: x}}}}]"
    out.write_text((ROOT / "params" / "quick.yaml").read_text().replace("  installs: []", own))
    return out


@contextlib.contextmanager
def chromium(*args: str, performance_log: bool = False):
    """Headless Chromium under selenium. Its temporary files (chromedriver's profile among them) go to a folder of
    its own, removed after: left to itself it leaves a singleton folder in /tmp per browser."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    home = Path(tempfile.mkdtemp(prefix="pglab-chromium-"))
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", *args):
        opts.add_argument(a)
    if performance_log:
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # DevTools Network events
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER, env=os.environ | {"TMPDIR": str(home)}))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(home, ignore_errors=True)


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
    from pglab.core.servers.servers import Server
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


# -- the quick pass: `make report PARAMS=params/quick.yaml` once per test session, read by every test that needs one --

# build/test/quick/<session>/: the pass's report/, data/ and state/, and done.json, the done-marker saying how it
# went. One folder per session: several sessions may share a checkout, and one must not remove a pass another is
# still reading (each session holds a shared lock on <session>.inuse while it lives; make test removes build/test)
QUICK_ROOT = ROOT / "build" / "test" / "quick"
# the same on every pytest-xdist worker of a session, and short (the clusters' socket paths have a length limit)
_SESSION = (os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex)[:12]
# make test's second session (the tests marked alone) reads the first one's pass: PGLAB_TEST_QUICK_PASS=keep takes
# the newest complete pass there is instead of making one (a pass of an earlier session may be of older code)
QUICK_PASS_KEEP = "PGLAB_TEST_QUICK_PASS"
_IN_USE: list = []  # the open lock files: closed (the locks let go) when the worker exits


@dataclass(frozen=True)
class QuickPass:
    """How the session's quick pass went. Read it, never change it: a test that must alter a run copies it."""

    home: Path  # build/test/quick/<session>: a test may put its own folders beside report/, data/ and state/
    returncode: int
    output: str  # the end of the driver's stdout and stderr
    elapsed_s: float
    run_id: str | None  # the complete raw run it made
    left_running: list[str]  # the kit's clusters with a live postmaster right after the driver exited

    @property
    def report(self) -> Path:
        return self.home / "report"

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def state(self) -> Path:
        return self.home / "state"

    def require(self) -> "QuickPass":
        """Itself, or the test fails here with the driver's output when the pass did not complete."""
        if self.returncode != 0 or self.run_id is None:
            pytest.fail(f"the session's quick pass failed (exit {self.returncode}):\n{self.output}")
        return self


def _complete_run(data: Path) -> str | None:
    raw = data / "raw"
    done = [p.name for p in raw.iterdir() if (p / "COMPLETE").is_file()] if raw.is_dir() else []
    return done[0] if len(done) == 1 else None


def _make_quick_pass(home: Path) -> dict:
    shutil.rmtree(home, ignore_errors=True)
    # relative, as a user may give them: from the project root, for the driver and the kernels (in notebooks/) alike
    rel = home.relative_to(ROOT)
    env = os.environ | {"PGLAB_DATA_DIR": str(rel / "data"), "PGLAB_STATE_DIR": str(rel / "state")}
    cmd = [sys.executable, "-m", "pglab.report", "--params", "params/quick.yaml", "--out", str(home / "report")]
    t0 = time.monotonic()
    try:
        run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
        code, output = run.returncode, run.stdout[-6000:] + run.stderr[-6000:]
    except subprocess.TimeoutExpired as e:
        code, output = -1, f"timed out after {e.timeout} s"
    elapsed = time.monotonic() - t0
    clusters = home / "state" / "clusters"
    left = [c.name for c in clusters.iterdir() if postmasters(c / "data")] if clusters.is_dir() else []
    done = {"returncode": code, "output": output, "elapsed_s": round(elapsed, 1), "left_running": left}
    return done | {"run_id": _complete_run(home / "data")}


def _hold(session: str) -> None:
    """This worker reads session's pass: a shared lock that no one removing a pass gets past."""
    f = open(QUICK_ROOT / f"{session}.inuse", "a")  # noqa: SIM115 - open for the worker's life
    fcntl.flock(f, fcntl.LOCK_SH)
    _IN_USE.append(f)


def _remove_unused_passes(keep: str) -> None:
    for inuse in QUICK_ROOT.glob("*.inuse"):
        session = inuse.name.removesuffix(".inuse")
        if session == keep:
            continue
        with open(inuse, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live session reads it
            shutil.rmtree(QUICK_ROOT / session, ignore_errors=True)
            inuse.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def quick_pass() -> QuickPass:
    """The session's one quick pass. Each pytest-xdist worker has its own session fixtures, so the first worker to
    ask makes it under a file lock and leaves the done-marker; the others wait on the lock, then read the marker."""
    QUICK_ROOT.mkdir(parents=True, exist_ok=True)
    with open(QUICK_ROOT / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes, or the worker dies
        session = _SESSION
        if os.environ.get(QUICK_PASS_KEEP) == "keep":
            made = sorted(QUICK_ROOT.glob("*/done.json"), key=lambda p: p.stat().st_mtime)
            session = made[-1].parent.name if made else session
        _hold(session)
        marker = QUICK_ROOT / session / "done.json"
        if not marker.is_file():
            _remove_unused_passes(keep=session)  # earlier sessions' (about 0.5 GB each)
            done = _make_quick_pass(QUICK_ROOT / session)
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(done, indent=1))
            tmp.replace(marker)
        done = json.loads(marker.read_text())
    return QuickPass(home=QUICK_ROOT / session, **done)


# The files whose tests read the quick pass (test_stability's one is marked alone: make test runs it in its second
# session), kept on one worker: the lock makes any schedule correct, this one keeps a second worker from waiting
# idle on it while the first makes the pass.
_QUICK_PASS = ("test_report.py", "test_derive_run.py", "test_stability.py")
# make test's workers take the longest files first (their CI durations), so that they finish together
_LONGEST = (
    *_QUICK_PASS,
    "test_pg_build.py",
    "test_resume_kill.py",
    "test_external_servers.py",
    "test_lab.py",
    "test_report_nbval.py",
)


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
    from pglab.core.servers.servers import Server
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

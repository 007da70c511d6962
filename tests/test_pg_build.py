"""PostgreSQL built from source (core.installs.pg_build), for real: Debian's source package of PostgreSQL 15 (`apt-get
source`) built with a minimal configuration (-O0, no readline, zlib, ICU or LLVM) while a second process asks for the
same build and waits for it, after a crashed build's leftovers; a cluster started on it records its build; the same
source and flags again come from the cache; a git ref of a repository made from that source is another build.

The tests' install cache (in the temp folder, readable by every user) is emptied first, so every run builds cold:
2 minutes on 2 idle cores (3 beside other work), the git build's objects coming from ccache (which .ci/run
installs). Skipped, with the reason, where no deb-src entry lists postgresql-15 or a build tool is missing."""

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT

from pglab import params
from pglab.core.config import BuildParam, SourceParam
from pglab.core.installs import installs, pg_build
from pglab.core.servers import clean, servers
from pglab.core.servers.cluster import Cluster
from pglab.pgtools import environment

# outside the checkout, in a folder every user can enter: run as root in a private home, the service user must reach
# the built binaries (the kit's own cache for root is /var/cache/pglab; a test cache inside the clone is not)
CACHE = Path(tempfile.gettempdir()) / f"pglab-test-build-{os.getuid()}" / "cache"
MINIMAL = {"cflags": "-O0", "configure": ["--without-readline", "--without-zlib", "--without-icu"], "llvm": False}
BUILD = BuildParam(**MINIMAL)
DEBIAN = SourceParam(debian="postgresql-15")


def _cannot_build() -> str | None:
    flags = pg_build.flags_of(BUILD)
    missing = dict(pg_build.missing_tools("debian", flags) + pg_build.missing_tools("git", flags))
    if missing:
        return f"cannot build PostgreSQL here: {', '.join(missing)} missing (.ci/run installs them)"
    out = subprocess.run(["apt-get", "source", "--print-uris", "-qq", "postgresql-15"], capture_output=True, text=True)
    if out.returncode != 0:
        return (
            f"no deb-src entry lists postgresql-15 (`apt-get source` says: {out.stderr.strip()[:200]}); .ci/run "
            "adds one for bookworm"
        )
    return None


CANNOT = _cannot_build()
needs_build = pytest.mark.skipif(CANNOT is not None, reason=CANNOT or "")


@pytest.fixture(scope="module")
def cache():
    """The tests' own install cache, empty: PGLAB_CACHE_DIR for this module (params, installs and the CLI use it)."""
    shutil.rmtree(CACHE.parent, ignore_errors=True)
    CACHE.mkdir(parents=True)
    for folder in (CACHE.parent, CACHE):
        folder.chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PGLAB_CACHE_DIR", str(CACHE))
        yield CACHE / "postgres"
    shutil.rmtree(CACHE.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def debian_build(cache, tmp_path_factory):
    """Debian's PostgreSQL 15 built cold by the command line while params.load asks for it too (and waits), after a
    killed build's leftovers; (folder, seconds, what params.load logged, the loaded params)."""
    key = pg_build.key_of(pg_build.resolve(DEBIAN), pg_build.flags_of(BUILD))
    dest = cache / f"build-{key}"
    (cache / f".build-{key}.work-killed" / "src").mkdir(parents=True)  # a killed build's work folder ...
    (dest / "bin").mkdir(parents=True)  # ... and a folder of that name without its record
    cli = [
        sys.executable,
        "-m",
        "pglab.core.installs.pg_build",
        "--debian",
        "postgresql-15",
        "--cflags=-O0",
        "--llvm=false",
        *(f"--configure={o}" for o in MINIMAL["configure"]),
    ]
    t0 = time.monotonic()
    proc = subprocess.Popen(cli, cwd=ROOT, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = cache / f"build-{key}.log"
    while not log.exists() and proc.poll() is None:  # made under the lock: the command line builds now
        time.sleep(0.2)
    yaml = tmp_path_factory.mktemp("pg_build") / "source.yaml"
    yaml.write_text(
        "profile: build-test\nservers:\n  use: [pg15-src]\n  installs:\n"
        "    - {name: pg15-src, source: {debian: postgresql-15}}\n"
        f"  build: {json.dumps(MINIMAL)}\n"
    )
    said, logger = _Said(), logging.getLogger("pglab.core.installs.pg_download")
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    try:
        p = params.load(yaml)  # checks the machine: builds what params name, or waits for it
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
    stdout, stderr = proc.communicate(timeout=60)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.strip() == str(dest)
    return dest, seconds, said.messages, p


class _Said(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@needs_build
def test_a_debian_source_package_builds_once_for_two_runs_and_serves_a_cluster(debian_build):
    dest, seconds, logged, p = debian_build
    print(f"\ncold build of Debian's postgresql-15 (-O0, minimal): {seconds:.0f} s")
    assert any("waiting for another process" in m for m in logged), logged  # params.load shared the CLI's build
    left = {x.name for x in dest.parent.iterdir() if not x.name.endswith(".lock")}
    assert left == {dest.name, f"{dest.name}.log"} | ({".ccache"} if shutil.which("ccache") else set())  # no crash
    record = json.loads((dest / pg_build.RECORD).read_text())
    assert record["source"]["identity"].startswith("postgresql-15=15.")
    assert record["flags"]["cflags"] == "-O0" and record["flags"]["llvm"] is None
    assert record["configure_args"] == [*MINIMAL["configure"], "CFLAGS=-O0"]
    for tool in installs.TOOLS + ("pg_config",):
        assert (dest / "bin" / tool).exists(), tool
    assert not (dest / "bin" / "pg_dump").exists()  # only what a server of the kit needs
    assert "make -j" in (dest.parent / record["log"]).read_text()

    [srv] = servers.select(p)  # named and found as params name it, like a bin_dir install
    assert (srv.name, srv.install.source, srv.install.bin_dir) == ("pg15-src", "build", dest / "bin")
    assert srv.install.built_from.startswith("Debian source postgresql-15 15.")
    assert all(srv.install.extensions.values()), srv.install.extensions
    srv.cluster = Cluster(srv.install, name="pg-build-debian")
    srv.start()
    try:
        rec, _ = environment.server(srv)
    finally:
        srv.stop()
    assert rec["source"] == "build" and rec["built_from"] == srv.install.built_from
    assert (rec["build_opt"], rec["build_llvm"], rec["jit_available"]) == ("-O0", "none", False)
    assert rec["build_configure"] == "--without-icu --without-readline --without-zlib"
    assert rec["build_compiler"].startswith("gcc ") and rec["version_string"].startswith("PostgreSQL 15.")


@needs_build
def test_the_same_source_and_flags_come_from_the_cache(debian_build, cache):
    dest = debian_build[0]
    t0 = time.monotonic()
    again = installs.built("again", DEBIAN, BUILD)
    seconds = time.monotonic() - t0
    assert again.bin_dir == dest / "bin" and seconds < 5, seconds
    o1 = pg_build.key_of(pg_build.resolve(DEBIAN), pg_build.flags_of(BuildParam(**MINIMAL | {"cflags": "-O1"})))
    assert f"build-{o1}" != dest.name  # other flags: another build
    out = subprocess.run(
        [sys.executable, "-m", "pglab.core.installs.pg_build", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert dest.name in out and "Debian source postgresql-15 15." in out, out
    assert "CFLAGS=-O0 --without-readline --without-zlib --without-icu no LLVM" in out and " MB" in out, out
    assert clean.binary_copies() == []  # what `make clean` removes from the cache: builds are not among it


@needs_build
def test_a_git_ref_of_the_same_tree_is_another_build(debian_build, cache, tmp_path):
    """A repository made from Debian's unpacked source (as a checkout: without the files its .gitignore names, which
    the build generates with bison, flex and perl), tagged: another source identity, so another build."""
    tree = pg_build.fetch_source(DEBIAN, tmp_path)
    git = ["git", "-C", str(tree), "-c", "user.name=pglab", "-c", "user.email=pglab@localhost"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Debian's postgresql-15"], check=True)
    subprocess.run([*git, "tag", "pg15-test"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    t0 = time.monotonic()
    inst = installs.built("pg15-git", SourceParam(git=str(tree), ref="pg15-test"), BUILD)
    print(f"\ngit build of the same tree: {time.monotonic() - t0:.0f} s")
    assert inst.bin_dir.parent != debian_build[0] and inst.major == 15
    assert inst.built_from == f"git {tree} pg15-test ({sha[:12]})"
    assert json.loads((inst.bin_dir.parent / pg_build.RECORD).read_text())["source"]["identity"] == sha
    with Cluster(inst, name="pg-build-git") as c:
        c.start()
        with c.connect() as conn:
            assert conn.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 15.")


def test_a_missing_tool_stops_the_build_naming_its_debian_package(tmp_path, monkeypatch):
    """Before anything is fetched or written: a PATH with the compiler, make, perl and pkg-config but no bison or
    flex."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcc", "make", "perl", "pkg-config"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    tarball = tmp_path / "postgresql-99.0.tar.bz2"
    tarball.write_bytes(b"never read")
    source = SourceParam(tarball=str(tarball), sha256="ab" * 32)
    with pytest.raises(pg_build.BuildError) as e:
        pg_build.ensure_build(source, BuildParam(), tmp_path / "cache")
    assert (
        "cannot build PostgreSQL from source here: bison (Debian package bison), flex (Debian package flex) are "
        "missing; install with: apt-get install bison flex" in str(e.value)
    )
    assert not (tmp_path / "cache").exists()
    git_source = SourceParam(git=str(tmp_path), ref="main")
    with pytest.raises(pg_build.BuildError, match=r"git \(Debian package git\)"):
        pg_build.ensure_build(git_source, BuildParam(), tmp_path / "cache")

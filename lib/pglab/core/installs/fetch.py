"""What downloads and builds share: a URL streamed to a file under a progress bar and hashed on the way, a file's
digest, a tar unpacked through one of tarfile's filters, and a folder made readable by everyone. Each failure is
raised as the caller's exception (DownloadError, BuildError, UnpackError), the message saying what failed."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import tarfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import IO

from .. import progress

log = logging.getLogger(__name__)

TIMEOUT_S = 30


def download(url: str, dest: Path, algorithm: str, desc: str, show_progress: bool | None, error: type[Exception]):
    """Stream `url` to the file `dest`, hashing it with `algorithm` on the way; returns the hash."""
    h = hashlib.new(algorithm)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(dest, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            log.info("downloading %s (%s) from %s", desc, f"{total / 1e6:.1f} MB" if total else "size unknown", url)
            with progress.bar(total=total, unit="B", unit_scale=True, desc=desc, disable=show_progress is False) as bar:
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
                    h.update(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise error(f"downloading {url} failed: {getattr(e, 'reason', e)}") from e
    if total and (got := dest.stat().st_size) != total:
        raise error(f"downloading {url} stopped after {got} of {total} bytes (a truncated tarball)")
    return h


def digest_of(path: Path, algorithm: str):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm)


def extract(archive: Path | IO[bytes], dest: Path, what: str, error: type[Exception], filter=tarfile.data_filter):
    """Unpack the tar `archive` (a file, compressed or not, or a stream) into `dest` through `filter`; tarfile's
    data filter refuses absolute names, '..', links leading out of `dest` and device files."""
    try:
        stream = not isinstance(archive, Path)
        with tarfile.open(fileobj=archive, mode="r|*") if stream else tarfile.open(archive, "r:*") as tar:
            tar.extractall(dest, filter=filter)
    except tarfile.FilterError as e:
        raise error(f"refused a member of {what}: {e}") from e
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise error(f"{what} is truncated or corrupt ({type(e).__name__}: {e})") from e
    except OSError as e:
        raise error(f"unpacking {what}: {e}") from e


def readable(root: Path) -> None:
    # as root the servers run as another user, which must read the install whatever the umask was
    for d, _dirs, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            p = Path(d) / f
            if not p.is_symlink():
                mode = p.stat().st_mode
                os.chmod(p, mode | 0o444 | (0o111 if mode & 0o100 else 0))


def size_of(d: Path) -> int:
    """The bytes of the files below `d` (links not followed)."""
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and not p.is_symlink())

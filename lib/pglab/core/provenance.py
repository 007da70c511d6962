"""Which revision of the kit made a number: the one that measured it (environment data) and the one that
derived the table it stands in (the manifest of data/derived/<profile>/). A revision with uncommitted changes
is marked `+dirty`: a committed reference run must show none."""

from __future__ import annotations

import functools
import subprocess

from . import paths


@functools.cache
def git_revision() -> str:
    """The checkout's commit, `+dirty` when tracked files other than the kit's outputs (report/, data/derived/)
    differ from it; "unknown" outside git. Cached: a process derives with the code it started with."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(paths.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            # the kit's own outputs don't count: `make report` rewrites report/ (and a resumed run may find a
            # partial notebook there) while its later notebooks still measure and derive
            [
                "git",
                "-C",
                str(paths.ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)report",
                ":(exclude)data/derived",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "uncommitted") + ("+dirty" if dirty else "")

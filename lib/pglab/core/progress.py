"""Progress bars for long work. In a terminal they refresh every second; in a notebook run by papermill
(stderr is not a terminal) rarely, so the executed notebook keeps a few progress lines, not hundreds.

When `make report` runs the notebook (PGLAB_PROGRESS_FILE is set), a bar writes its latest state to that
file instead, which the driver shows on its terminal line (report/progress.py): the executed notebook then
keeps no progress output at all."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tqdm.std import tqdm

PROGRESS_ENV = "PGLAB_PROGRESS_FILE"


def bar(iterable=None, **kwargs) -> tqdm:
    mirror = os.environ.get(PROGRESS_ENV)
    if mirror:
        kwargs.setdefault("file", _LatestLine(Path(mirror)))
        kwargs.setdefault("mininterval", 1.0)
        kwargs.setdefault("ncols", 90)
        return tqdm(iterable, **kwargs)
    interactive = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    kwargs.setdefault("mininterval", 1.0 if interactive else 15.0)
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", interactive)
    if not interactive:
        kwargs.setdefault("ncols", 100)
    return tqdm(iterable, **kwargs)


class _LatestLine:
    """A file-like target for tqdm that keeps only its latest line, in the file the driver watches."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, s: str) -> int:
        lines = [x.strip() for x in s.replace("\r", "\n").split("\n") if x.strip()]
        if lines:
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            try:
                tmp.write_text(lines[-1])
                os.replace(tmp, self.path)
            except OSError:
                pass  # the driver's folder is gone (its run is over): nothing to mirror to
        return len(s)

    def flush(self) -> None:
        pass

"""Progress bars for long work. In a terminal they refresh every second; in a notebook run by papermill
(stderr is not a terminal) rarely, so the executed notebook keeps a few progress lines, not hundreds."""

from __future__ import annotations

import sys

from tqdm.std import tqdm


def bar(iterable=None, **kwargs) -> tqdm:
    interactive = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    kwargs.setdefault("mininterval", 1.0 if interactive else 15.0)
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", interactive)
    if not interactive:
        kwargs.setdefault("ncols", 100)
    return tqdm(iterable, **kwargs)

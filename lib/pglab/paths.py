"""The project's directories, resolved from this file's location so that notebooks, tests and the
command line agree whatever the current working directory.

`PGLAB_DATA_DIR` and `PGLAB_STATE_DIR` override the data and state roots (the tests use them so that a
test run never touches the committed `data/derived/` or the user's clusters)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib"
NOTEBOOKS = ROOT / "notebooks"
PARAMS = ROOT / "params"
REPORT = ROOT / "report"


def data_dir() -> Path:
    return Path(os.environ.get("PGLAB_DATA_DIR", ROOT / "data"))


def raw_dir() -> Path:
    return data_dir() / "raw"


def derived_dir() -> Path:
    return data_dir() / "derived"


def state_dir() -> Path:
    """Clusters and other machine-local state the kit creates (git-ignored, removed by `make clean`)."""
    return Path(os.environ.get("PGLAB_STATE_DIR", ROOT / ".pglab"))


def clusters_dir() -> Path:
    return state_dir() / "clusters"


def resolve(path: str | Path) -> Path:
    """A path from params or the command line: absolute as given, relative to the project root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p

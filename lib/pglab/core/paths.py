"""The project's directories, resolved from this file's location so that notebooks, tests and the
command line agree whatever the current working directory.

`PGLAB_DATA_DIR` and `PGLAB_STATE_DIR` override the data and state roots (the tests use them so that a
test run never touches the committed `data/derived/` or the user's clusters). A relative PGLAB_*_DIR is taken from
the project root, as a params path is (the notebooks' kernels run in notebooks/ and must find the same folder);
an empty one counts as unset."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ROOT / "notebooks"
PARAMS = ROOT / "params"
REPORT = ROOT / "report"


def _env_dir(name: str) -> Path | None:
    """The folder a PGLAB_*_DIR variable names, normalised; None where it is unset or empty."""
    value = os.environ.get(name)
    if not value:
        return None
    try:
        p = resolve(value)
    except RuntimeError:  # ~nosuchuser: a folder of that name, as the shell leaves it
        p = ROOT / value
    return Path(os.path.normpath(p))


def data_dir() -> Path:
    return _env_dir("PGLAB_DATA_DIR") or ROOT / "data"


def raw_dir() -> Path:
    return data_dir() / "raw"


def derived_dir() -> Path:
    """`PGLAB_DERIVED_DIR` while `make report` runs: its working copy, swapped in when the run succeeds."""
    return _env_dir("PGLAB_DERIVED_DIR") or data_dir() / "derived"


def state_dir() -> Path:
    """Clusters and other machine-local state the kit creates (git-ignored, removed by `make clean`)."""
    return _env_dir("PGLAB_STATE_DIR") or ROOT / ".pglab"


def clusters_dir() -> Path:
    return state_dir() / "clusters"


def machine_state_dir() -> Path:
    """Root only: where clusters go when the service user cannot reach the project (see reach.py).
    `PGLAB_MACHINE_STATE_DIR` overrides it."""
    return _env_dir("PGLAB_MACHINE_STATE_DIR") or Path("/var/lib/pglab")


def shown(path: str | Path) -> str:
    """A path for the data and the report: relative to the project root when inside it (a reader's clone
    is elsewhere), else absolute."""
    p = Path(path)
    return str(p.relative_to(ROOT)) if p.is_absolute() and p.is_relative_to(ROOT) else str(p)


def resolve(path: str | Path) -> Path:
    """A path from params or the command line: absolute as given, relative to the project root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p


def install_cache_dir() -> Path:
    """PostgreSQL installs the kit downloads or copies, shared by every clone of this user.

    `PGLAB_CACHE_DIR` overrides it. As root the servers run as the unprivileged service user, which cannot
    enter root's home: root's cache is then `/var/cache/pglab`, readable by everyone; anyone else's is the
    XDG cache folder."""
    if given := _env_dir("PGLAB_CACHE_DIR"):
        return given
    if os.geteuid() == 0:
        return Path("/var/cache/pglab")
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "pglab"


def postgres_cache_dir() -> Path:
    """One folder per PostgreSQL build: `<cache>/postgres/<version or key>/{bin,lib,share}`."""
    return install_cache_dir() / "postgres"

"""Is every notebooks/*.ipynb in step with its source notebooks/*.py (jupytext py:percent, paired by jupytext.toml)?

The .py files are what we edit and review; papermill and nbval run the .ipynb. A pair is in step when both hold
the same cells: type, source and tags (papermill finds its `parameters` cell by tag), and the same kernelspec.
`make lint` runs this; tests/test_notebook_sync.py too. Exit status 1 and, per file, the command that re-syncs it.

Usage: python tools/check_notebooks.py [folder]   (default: notebooks/)
"""

import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
FORMAT = "py:percent"  # as jupytext.toml pairs them


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def cells(nb) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def difference(ipynb, text) -> str | None:
    """Where the .ipynb (`ipynb`) and the notebook jupytext reads from the .py (`text`) first differ, or None."""
    a, b = cells(ipynb), cells(text)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        for what, u, v in zip(("type", "source", "tags"), x, y, strict=True):
            if u != v:
                return f"cell {i} ({x[0]}) differs in its {what}"
    if len(a) != len(b):
        return f"{len(a)} cells in the .ipynb, {len(b)} in the .py"
    if ipynb.metadata.get("kernelspec") != text.metadata.get("kernelspec"):
        return "kernelspec differs"
    return None


def problems(folder: Path) -> list[str]:
    """One line per notebook out of step with its source (or without one), saying how to re-sync it."""
    folder = Path(folder).resolve()
    ipynbs = {p.stem: p for p in folder.glob("*.ipynb")}
    sources = {p.stem: p for p in folder.glob("*.py")}
    out = []
    for stem in sorted(ipynbs.keys() | sources.keys()):
        nb, py = folder / f"{stem}.ipynb", folder / f"{stem}.py"
        if stem not in sources:
            out.append(f"{_shown(nb)} has no source {py.name}: create it with `.venv/bin/jupytext --sync {_shown(nb)}`")
            continue
        if stem not in ipynbs:
            out.append(f"{_shown(py)} has no {nb.name} (what papermill runs): `make notebooks`")
            continue
        diff = difference(nbformat.read(nb, as_version=4), jupytext.read(py, fmt=FORMAT))
        if diff:
            out.append(
                f"{_shown(nb)} is out of step with its source {_shown(py)} ({diff}). The .py is the source: "
                f"after editing it, `make notebooks` (`.venv/bin/jupytext --sync {_shown(py)}`: the file changed last "
                f"wins). To rebuild the .ipynb from the .py whatever their times: "
                f"`.venv/bin/jupytext --to ipynb --update {_shown(py)}`."
            )
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "notebooks"
    found = problems(folder)
    for line in found:
        print(line, file=sys.stderr)
    n = len(list(Path(folder).glob("*.ipynb")))
    print(f"check_notebooks: {len(found)} of {n} notebooks out of step with their .py sources", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

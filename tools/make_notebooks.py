"""Writes notebooks/NN_name.ipynb from tools/notebook_sources/nbNN_name.py (each defines CELLS), and
notebooks/compare.ipynb from nbcompare.py (no number: `make report` runs only the numbered ones).

Keeping the cells as plain Python text makes them easy to review and diff; the .ipynb files are what
papermill runs and users open. Run after editing a source: `python tools/make_notebooks.py [NN ...]`
(only the notebooks whose number or name starts with one of the arguments; all without arguments)."""

import importlib
import sys
from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(HERE / "notebook_sources")]


def main(only: list[str]) -> int:
    sources = HERE / "notebook_sources"
    for src in sorted([*sources.glob("nb[0-9][0-9]_*.py"), sources / "nbcompare.py"]):
        name = src.stem[2:]
        if only and not any(name.startswith(o) for o in only):
            continue
        nb = nbf.v4.new_notebook()
        nb.cells = importlib.import_module(src.stem).CELLS
        for i, cell in enumerate(nb.cells):  # stable ids: regenerating must not churn the files
            cell.id = f"{name}-{i:02d}"
        nb.metadata["kernelspec"] = {"name": "pglab", "display_name": "pglab (.venv)", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        nbf.write(nb, ROOT / "notebooks" / f"{name}.ipynb")
        print(f"notebooks/{name}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""notebooks/*.py (jupytext py:percent) are the sources of notebooks/*.ipynb, which papermill and nbval run: every
pair must hold the same cells (type, source, tags). Fast: reads files only, no server, no kernel."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
_spec = importlib.util.spec_from_file_location("check_notebooks", ROOT / "tools" / "check_notebooks.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def test_every_notebook_is_in_step_with_its_py_source():
    found = check.problems(NOTEBOOKS)
    assert not found, "re-sync these (the .py is the source):\n" + "\n".join(found)


def test_every_notebook_has_a_source_and_a_parameters_cell():
    ipynbs = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    assert ipynbs and ipynbs == sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
    for stem in ipynbs:
        nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1 and tagged[0].cell_type == "code", f"{stem}: papermill needs one parameters cell"
        assert nb.metadata["kernelspec"]["name"] == "pglab", stem


@pytest.fixture
def pair(tmp_path):
    for suffix in (".py", ".ipynb"):
        shutil.copy(NOTEBOOKS / f"00_environment{suffix}", tmp_path)
    assert check.problems(tmp_path) == []
    return tmp_path / "00_environment.ipynb", tmp_path / "00_environment.py"


def test_an_ipynb_edited_alone_is_reported_with_the_command_to_resync(pair):
    ipynb, py = pair
    nb = nbformat.read(ipynb, as_version=4)
    nb.cells[2].source += "\nprint('edited in the .ipynb only')"
    nbformat.write(nb, ipynb)
    [line] = check.problems(ipynb.parent)
    assert str(ipynb) in line and "cell 2 (code) differs in its source" in line
    assert f"jupytext --sync {py}" in line and "make notebooks" in line
    # as `make lint` runs it: exit status 1, the file named
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_notebooks.py"), str(ipynb.parent)], capture_output=True, text=True
    )
    assert run.returncode == 1 and str(ipynb) in run.stderr, run.stderr


def test_a_lost_parameters_tag_is_reported(pair):
    ipynb, _ = pair
    nb = nbformat.read(ipynb, as_version=4)
    [cell] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    del cell.metadata["tags"]
    nbformat.write(nb, ipynb)
    [line] = check.problems(ipynb.parent)
    assert "cell 1 (code) differs in its tags" in line


def test_a_py_edited_alone_and_a_missing_half_are_reported(pair):
    ipynb, py = pair
    py.write_text(py.read_text() + "\n# %%\nprint('a new cell in the .py only')\n")
    [line] = check.problems(ipynb.parent)
    assert "cells in the .ipynb" in line
    py.unlink()
    [line] = check.problems(ipynb.parent)
    assert "has no source 00_environment.py" in line

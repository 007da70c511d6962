"""`make report PARAMS=params/quick.yaml` end to end: every notebook executed through papermill on the
real servers, environment data derived, nothing left running. Leaves the executed notebooks in
build/test/report for the nbval step of `make test`."""

import json
import os
import shutil
import subprocess
import sys
import time

import polars as pl
import pytest
from conftest import ROOT, postmasters

from pglab import derived
from pglab.installs import discover

OUT = ROOT / "build" / "test"


def test_quick_report_end_to_end():
    shutil.rmtree(OUT / "report", ignore_errors=True)
    env = os.environ | {"PGLAB_DATA_DIR": str(OUT / "data"), "PGLAB_STATE_DIR": str(OUT / "state")}
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", "params/quick.yaml", "--out", str(OUT / "report")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    assert run.returncode == 0, run.stdout + run.stderr
    print(f"quick report: {elapsed:.1f} s")  # a figure for the notes, not a timed assertion (busy machines)

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for nb in notebooks:
        executed = json.loads((OUT / "report" / nb.name).read_text())
        errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{nb.name}: {errors}"

    servers = derived.read_table("environment_servers", "quick", root=OUT / "data" / "derived")
    assert sorted(servers["server"]) == sorted(i.name for i in discover())
    assert set(servers["data_checksums"]) == {"off"}
    timing = derived.read_table("environment_timing", "quick", root=OUT / "data" / "derived")
    assert timing.height == servers.height and (timing["per_loop_ns"] > 0).all()
    settings = derived.read_table("environment_settings", "quick", root=OUT / "data" / "derived")
    sb = settings.filter(pl.col("name") == "shared_buffers")
    assert sb.height == servers.height
    assert derived.verify("quick", root=OUT / "data" / "derived") == []
    # the run is complete and recorded its environment in the raw store
    runs = [p for p in (OUT / "data" / "raw").iterdir() if p.is_dir()]
    assert any((r / "COMPLETE").exists() and (r / "environment.json").exists() for r in runs)
    # nothing of the kit is left running
    for cdir in (OUT / "state" / "clusters").iterdir():
        assert postmasters(cdir / "data") == [], cdir


def _outputs(nb_path):
    return [c.get("outputs", []) for c in json.loads(nb_path.read_text())["cells"]]


def test_report_notebook_alone_reproduces_and_writes_self_contained_html():
    """After the quick pass: the report notebook re-rendered alone (no server, no new run) gives the same
    outputs byte for byte, and its HTML opens without the network."""
    from pglab.report_html import external_references

    first = OUT / "report" / "99_report.ipynb"
    if not first.exists():
        pytest.skip("needs the quick report of test_quick_report_end_to_end")
    env = os.environ | {"PGLAB_DATA_DIR": str(OUT / "data"), "PGLAB_STATE_DIR": str(OUT / "state")}
    raw_before = sorted(p.name for p in (OUT / "data" / "raw").iterdir())
    again = OUT / "report-again"
    run = subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", "params/quick.yaml", "--out", str(again), "--only", "99"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in (OUT / "data" / "raw").iterdir()) == raw_before, "the report started a run"
    assert _outputs(again / "99_report.ipynb") == _outputs(first)
    html = (again / "report.html").read_text()
    assert external_references(html) == []
    assert html.count('data-mime-type="image/svg+xml"') >= 2 and "Findings at a glance" in html
    assert (again / "report.html").read_bytes() == (OUT / "report" / "report.html").read_bytes()

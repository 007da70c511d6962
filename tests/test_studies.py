"""The one list of studies (pglab.studies.STUDIES) and the Study interface: everything that names the studies
names the same ones in the same order, and a new study goes through make report's driver like the others."""

import json
import sys
import tomllib
import uuid
from pathlib import Path

import nbformat

from pglab import params, studies
from pglab.core import derived
from pglab.studies.base import Study

ROOT = Path(__file__).resolve().parents[1]


def test_params_pyproject_and_notebooks_name_the_studies_of_STUDIES_in_its_order():
    names = [s.name for s in studies.studies()]
    assert list(params.SECTIONS) == [s.params_key for s in studies.studies()] == names
    fields = [f for f in params.Params.model_fields if f in names]  # Params' study sections, in field order
    assert fields == names
    contracts = {
        c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    }
    packages = [f"pglab.studies.{n}" for n in names]
    assert contracts["studies-independent"]["modules"] == packages
    assert contracts["only-studies-and-params-import-a-study"]["forbidden_modules"] == packages
    assert contracts["within-study-layers"]["containers"] == packages
    on_disk = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py") if not p.stem.startswith("99"))
    assert on_disk == [s.notebook for s in studies.STUDIES]
    for s in studies.studies():
        text = (ROOT / "notebooks" / f"{s.notebook}.py").read_text()
        assert f"from pglab.studies.{s.name} import STUDY" in text and "STUDY.run(s)" in text, s.notebook
    assert "report_order()" in (ROOT / "notebooks" / "99_report.py").read_text()  # no section named by hand


STUDY_MODULE = '''
"""A minimal study for tests: one tiny table, one query timed for 2 rounds, one claim."""
import time

import polars as pl

from pglab.core.stats import findings
from pglab.core.run.stage import StageResult
from pglab.studies.base import Section, Study


class TinyStudy(Study):
    def run_stage(self, session):
        t0, rows = time.monotonic(), []
        for server in session.servers:
            with server.connect() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS tiny AS SELECT g FROM generate_series(1, 100) g")
                for r in range(2):
                    t = time.perf_counter()
                    n = conn.execute("SELECT count(*) FROM tiny").fetchone()[0]
                    rows.append({"server": server.name, "round": r, "ms": (time.perf_counter() - t) * 1e3, "n": n})
        session.store.save_json("tiny/runs.json", rows)
        return StageResult(steps_run=len(rows), wall_s=time.monotonic() - t0, servers=[s.name for s in session.servers])

    def derive_tables(self, store, params):
        return {"tiny_runs": pl.from_dicts(store.load_json("tiny/runs.json"))}

    def judge(self, tables):
        runs = tables["tiny_runs"]
        return findings.table([{"study": "T1", "finding": "count", "server": r["server"], "claim": "100 rows",
                                "verdict": "supported" if r["n"] == 100 else "contradicted", "evidence": "count(*)"}
                               for r in runs.filter(pl.col("round") == 0).iter_rows(named=True)])

    @property
    def report_tables(self):
        return ("tiny_runs",)

    def method(self, tables):
        return "one count(*), 2 rounds"

    def charts(self, tables):
        return []

    def estimate_s(self, params, servers):
        return 1.0


STUDY = TinyStudy(name="tiny", notebook=NOTEBOOK, tables=("tiny_runs",),
                  section=Section("T1 · tiny", ("S1",), "Does count(*) count?", {}, None, "", ""))
'''

NOTEBOOK_CELLS = [
    'params_file = "params/quick.yaml"\nrun_id = None',
    "import sys\nsys.path.insert(0, {folder!r})\nfrom tiny_study import STUDY\n\n"
    "from pglab import params\nfrom pglab.core import derived\nfrom pglab.core.run import session\n"
    "from pglab.core.derived import Tables\n\n"
    "s = session.begin(params.load(params_file), run_id)\ns.start()\nresult = STUDY.run(s)\n"
    "tables = STUDY.derive(s.store, s.params)\nderived.write(tables, s.profile)\n"
    "STUDY.record_findings(s.profile)\nverdicts = STUDY.findings(Tables(s.profile))\ns.close()\n"
    "assert verdicts['verdict'].to_list() == ['supported']",
]


def test_a_minimal_study_runs_through_the_report_driver(tmp_path, embedded, monkeypatch):
    from pglab.report import driver

    nb_path = tmp_path / "05_tiny"
    (tmp_path / "tiny_study.py").write_text(STUDY_MODULE.replace("NOTEBOOK", repr(str(nb_path))))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "pglab", "display_name": "pglab", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c.format(folder=str(tmp_path))) for c in NOTEBOOK_CELLS]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nbformat.write(nb, nb_path.with_suffix(".ipynb"))
    sys.path.insert(0, str(tmp_path))
    try:
        from tiny_study import STUDY
    finally:
        sys.path.remove(str(tmp_path))
    assert isinstance(STUDY, Study)
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(
        (ROOT / "params" / "quick.yaml")
        .read_text()
        .replace("profile: quick", "profile: tiny")
        .replace("use: all", f"use: [{embedded.name}]")
    )
    out = tmp_path / "out"
    run_id = f"tiny-{uuid.uuid4().hex[:8]}"  # fresh: never resume a run an earlier test left unfinished
    code = driver.main(["--params", str(yaml), "--out", str(out), "--only", "05", "--run-id", run_id], stages=(STUDY,))
    assert code == 0
    assert (out / "05_tiny.ipynb").is_file()
    t = derived.Tables("tiny")
    assert t["tiny_runs"].height == 2 and set(t["tiny_runs"]["n"]) == {100}
    # judged once and stored: what the report and make compare read (Study.findings)
    assert t["tiny_findings"]["verdict"].to_list() == ["supported"] and STUDY.findings(t).equals(t["tiny_findings"])
    # the machine was sampled over the stage (Study.run) and derived beside the study's own table
    machine = t["tiny_machine"]
    assert machine.height >= 1 and machine["attempt"].to_list() == [1] * machine.height
    assert ((machine["cpu_user"] + machine["cpu_idle"]) <= 1.0001).all() and machine["time"].is_not_null().all()

    # the notebook's time is kept for the next run's time left (report/pace.py) ...
    from pglab.core import paths

    pace_file = paths.state_dir() / "pace" / "tiny.json"
    learnt = json.loads(pace_file.read_text())
    assert learnt["05_tiny.ipynb"]["run_id"] == run_id and learnt["05_tiny.ipynb"]["took_s"] > 0
    # ... but not by a run resumed with measurements kept: it skips them, and would teach a pace too fast
    kept = {"server": embedded.name, "experiment": "tiny", "condition": "c", "item": "i", "repetition": 0,
            "warmup": False, "value": 1.0, "unit": "s", "ts": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    with (paths.raw_dir() / run_id / "measurements.jsonl").open("a") as f:
        f.write(json.dumps(kept) + "\n")
    before = pace_file.read_bytes()
    code = driver.main(["--params", str(yaml), "--out", str(out), "--only", "05", "--run-id", run_id], stages=(STUDY,))
    assert code == 0 and pace_file.read_bytes() == before


def test_a_study_notebook_judges_without_the_environment_stage(committed_copy, tmp_path):
    """`make report ONLY=30` (or a killed run resumed with only some notebooks) has no 00_environment tables: the
    notebooks that judge and show their findings (`STUDY.record_findings`) must still do so; only the report's
    section needs them."""
    import shutil

    from pglab.core.derived import Tables

    folder = tmp_path / "noenv"
    shutil.copytree(committed_copy / "default", folder)
    for f in folder.glob("environment_*.csv"):
        f.unlink()
    tables = Tables("noenv", tmp_path)
    for s in studies.studies():
        if "STUDY.findings(" in (ROOT / "notebooks" / f"{s.notebook}.py").read_text():
            assert s.judge(tables).height, s.name

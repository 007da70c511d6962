"""What the kit creates on an external server it names when it creates it and drops when the run ends, or keeps
on request (`keep_created: true`) and says so. End to end through `make experiment`'s driver: a kit cluster plays
the user's own server, reached only by its dsn with `allow_destructive: true`, as the DBA who found a 22 MB
pgbench_s1 left there did."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from pglab import params
from pglab.core.servers import servers
from pglab.core.servers.cluster import Cluster


@pytest.fixture(scope="module")
def external(embedded):
    c = Cluster(embedded, name="ext-cleanup")
    c.delete()  # a fresh server: nothing an earlier run left there
    c.start({"shared_buffers": "128MB"})
    try:
        yield c
    finally:
        c.delete()


@pytest.fixture
def work():
    # inside the checkout, not /tmp: the kit's clusters there must be reachable by its service user
    d = ROOT / "build" / "test" / f"ext-cleanup-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    yield d
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def _databases(c: Cluster) -> set[str]:
    with c.connect() as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def _experiment(work: Path, external: Cluster, keep: bool) -> tuple[Path, str]:
    """A one-table SQL experiment on the external server only; the database it creates: x_<name>."""
    name = f"cleanup_{'keep' if keep else 'drop'}"
    (work / "setup.sql").write_text("CREATE TABLE t AS SELECT g AS id, g % 7 AS k FROM generate_series(1, 20000) g;")
    (work / "q.sql").write_text("SELECT k, count(*) FROM t GROUP BY k")
    ext = {"name": "ext", "dsn": external.conninfo(), "allow_destructive": True}
    if keep:
        ext["keep_created"] = True
    doc = {
        "profile": f"extcleanup{'keep' if keep else 'drop'}",
        "servers": {"use": ["ext"], "installs": [], "external": [ext]},
        "experiments": [
            {
                "name": name,
                "question": "Does work_mem change a small GROUP BY?",
                "data": {"sql": "setup.sql"},
                "workload": {"sql": "q.sql"},
                "factors": {"work_mem": ["4MB", "64MB"]},
                "baseline": {"work_mem": "4MB"},
                "rounds": 2,
                "warmups": 0,
            }
        ],
    }
    f = work / "ext.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f, f"x_{name}"


def _run(work: Path, f: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {
        "PGLAB_DATA_DIR": str(work / "data"),
        "PGLAB_STATE_DIR": str(work / "state"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pglab.report.experiment", "--params", str(f), "--out", str(work / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _executed(work: Path) -> str:
    return (work / "out" / "80_experiments.ipynb").read_text()


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_a_database_made_on_an_external_server_is_named_and_dropped_or_kept(external, work, keep):
    f, dbname = _experiment(work, external, keep)
    before = _databases(external)
    assert dbname not in before
    run = _run(work, f)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    # before anything runs: what the run may do on the server
    fate = "kept after the run (keep_created: true)" if keep else "dropped when the run ends"
    assert f"external server ext: the databases the run creates there are named as they are created and {fate}" in out
    # as it is created (in the experiment notebook): its name, and what becomes of it
    said = "it is kept after the run" if keep else "it will be dropped when the run ends"
    assert f"pglab: creating database {dbname} on external server ext; {said}" in _executed(work)
    # it was measured there: the experiment's setup names the database
    raw = next(p for p in (work / "data" / "raw").iterdir() if p.is_dir())
    assert (raw / "experiments" / dbname[2:] / "setup.json").exists()
    # when the run ends
    after = _databases(external)
    if keep:
        assert after == before | {dbname}
        assert f"pglab report: kept database {dbname} (" in out and "DROP DATABASE" in out
    else:
        assert after == before
        assert f"pglab report: dropped database {dbname} (" in out and "this run created it" in out
        with external.connect() as conn:  # tidy for the module's other case
            conn.execute(f"DROP DATABASE IF EXISTS {dbname}")
    assert not (raw / servers.CREATED_FILE).exists()  # nothing left to do for a resume


def test_keep_created_without_allow_destructive_is_refused(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("servers: {use: [ext], external: [{name: ext, dsn: 'host=localhost', keep_created: true}]}\n")
    with pytest.raises(params.ParamsError, match="keep_created: true needs allow_destructive: true"):
        params.load(f)

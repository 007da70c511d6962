"""External servers end to end: `python -m pglab.report` on a server reached only by dsn, over TCP with a
scram password, as a user would set one up (a kit cluster plays the server: a plain role owning a database).

* password in `PGPASSWORD`, `allow_destructive: false`: every notebook runs or records why it skipped the
  server, and nothing on the server changes (databases, roles, relations, extensions compared);
* password in the dsn, `allow_destructive: true`: the stages run there, pgbench's measurements are numbers.

Neither run leaves the password in any file of its data and state folders, in any executed notebook, or in
what the report printed."""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import ROOT

from pglab.core import derived
from pglab.core.servers.cluster import Cluster

PASSWORD = "Ext-pw-" + uuid.uuid4().hex[:12]
# the experiment notebooks and the skip table each writes (an external server may be skipped by any of them)
SKIP_TABLES = {
    "10": "ssb_load_skipped",
    "20": "ssb_skipped",
    "30": "pgbench_skipped",
    "40": "auto_explain_skipped",
    "50": "jit_operators_skipped",
    "60": "parallel_index_skipped",
    "70": "partitioning_skipped",
}


@pytest.fixture(scope="module")
def external(embedded):
    """A kit cluster as the external server: role `ext` (scram password, may create databases, no superuser)
    owning database `extdb`; TCP on 127.0.0.1 needs the password (the kit's pg_hba)."""
    c = Cluster(embedded, name="ext-servers")
    c.delete()  # a fresh server: what an earlier run's role left there must not stand in the way
    c.start({"shared_buffers": "128MB"})
    try:
        with c.connect() as conn:
            conn.execute("DROP DATABASE IF EXISTS extdb")
            conn.execute("DROP ROLE IF EXISTS ext")
            conn.execute(f"CREATE ROLE ext LOGIN CREATEDB PASSWORD '{PASSWORD}'")
            conn.execute("CREATE DATABASE extdb OWNER ext")
        yield c
    finally:
        c.delete()


def _snapshot(c: Cluster) -> dict:
    """What a run could change on the server: databases, roles, and per database its relations and extensions."""
    with c.connect() as conn:
        dbs = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datallowconn ORDER BY 1")]
        out = {"databases": dbs, "roles": [r[0] for r in conn.execute("SELECT rolname FROM pg_roles ORDER BY 1")]}
    for db in dbs:
        with c.connect(db) as conn:
            relations = conn.execute(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'"
                " ORDER BY 1, 2"
            ).fetchall()
            out[db] = relations + conn.execute("SELECT 'extension', extname, '' FROM pg_extension").fetchall()
    return out


def _params(path: Path, profile: str, dsn: str, destructive: bool, small: dict | None = None) -> Path:
    p = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())
    p["profile"] = profile
    p["servers"] = {
        "use": ["ext"],
        "installs": [],
        "external": [{"name": "ext", "dsn": dsn, "allow_destructive": destructive}],
    }
    for section, values in (small or {}).items():
        p[section] |= values
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return path


def _report(params: Path, work: Path, env_extra: dict) -> subprocess.CompletedProcess:
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        | env_extra
        | {"PGLAB_DATA_DIR": str(work / "data"), "PGLAB_STATE_DIR": str(work / "state")}
    )
    return subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", str(params), "--out", str(work / "report")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _files_holding(folder: Path, secret: str) -> list[str]:
    hits = []
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if secret.encode() in p.read_bytes():
                    hits.append(str(p))
            except OSError:
                pass
    return hits


@pytest.fixture
def work():
    # inside the checkout, not /tmp: the kit's clusters there must be reachable by its service user
    d = ROOT / "build" / "test" / f"external-{uuid.uuid4().hex[:8]}"
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _check_no_password(work: Path, run: subprocess.CompletedProcess) -> None:
    assert PASSWORD not in run.stdout + run.stderr
    assert _files_holding(work, PASSWORD) == []  # data, state, executed notebooks, report.html, logs


def _executed_errors(work: Path) -> list:
    import json

    out = []
    for nb in sorted((work / "report").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        out += [(nb.name, o["ename"]) for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    return out


def test_password_in_the_environment_and_nothing_may_change(external, work, tmp_path):
    dsn = f"host=127.0.0.1 port={external.port} dbname=extdb user=ext"
    params = _params(tmp_path / "ext-env.yaml", "extenv", dsn, destructive=False)
    before = _snapshot(external)
    run = _report(params, work, {"PGPASSWORD": PASSWORD})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert _executed_errors(work) == []
    assert _snapshot(external) == before
    root = work / "data" / "derived"
    for nb, table in SKIP_TABLES.items():
        skips = derived.read_table(table, "extenv", root=root)
        assert set(skips["server"]) == {"ext"}, (nb, skips)
        reason = skips["reason"][0]
        assert "allow_destructive" in reason or "JIT not available" in reason, (nb, reason)
        executed = (work / "report").glob(f"{nb}_*.ipynb")
        assert any(f"SKIPPED ext for {skips['experiment'][0]}" in p.read_text() for p in executed), nb
    servers = derived.read_table("environment_servers", "extenv", root=root)
    assert servers.select("server", "kind", "source").row(0) == ("ext", "external", "external")
    _check_no_password(work, run)


def test_password_in_the_dsn_and_the_stages_run_there(external, work, tmp_path):
    dsn = f"host=127.0.0.1 port={external.port} dbname=extdb user=ext password={PASSWORD}"
    small = {
        "ssb": {"sf": 0.01, "worker_sweep": [0, 1], "repetitions": 1},
        "parallel_index": {"column_counts": [1], "repetitions": 1},
        "partitioning": {"rows": 100000, "repetitions": 2},
    }
    params = _params(tmp_path / "ext-dsn.yaml", "extdsn", dsn, destructive=True, small=small)
    run = _report(params, work, {})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert _executed_errors(work) == []
    raw = next(p for p in (work / "data" / "raw").iterdir() if p.is_dir())
    recs = pl.read_ndjson(raw / "measurements.jsonl", infer_schema_length=None)
    pgbench = recs.filter(pl.col("experiment").str.starts_with("pgbench_"))
    assert pgbench.height > 0 and pgbench["value"].null_count() == 0, pgbench.filter(pl.col("value").is_null())
    assert set(recs["experiment"]) >= {"ssb_load", "ssb", "pgbench_select_only", "parallel_index", "partitioning"}
    # what could not run there says why: auto_explain needs a superuser to preload it per session
    skips = derived.read_table("auto_explain_skipped", "extdsn", root=work / "data" / "derived")
    assert "session_preload_libraries" in skips["reason"][0]
    _check_no_password(work, run)

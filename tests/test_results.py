"""Results that travel (issue 32): the committed reference run (data/derived/default) and a second run derived from
its archive exported as Parquet into a temporary data folder, queried together with DuckDB, and published twice
into a kit-started PostgreSQL; the five queries of docs/results.md run on both engines. Nothing is written into
the real data/ (PGLAB_DATA_DIR points at the test's own folder)."""

import json
import re
import shutil

import polars as pl
import psycopg
import pytest
from conftest import ROOT

from pglab.core import derived
from pglab.core.servers.cluster import Cluster
from pglab.results import export, index
from pglab.results.__main__ import main


def _reference() -> str:
    """The run of data/derived/default, as its MANIFEST.json names it."""
    manifest = json.loads((ROOT / "data" / "derived" / "default" / derived.MANIFEST).read_text())
    runs = {e["run_id"] for e in manifest.values() if isinstance(e, dict) and e.get("run_id")}
    assert len(runs) == 1, f"data/derived/default holds tables of {sorted(runs)}: re-derive it from one run"
    return runs.pop()


REFERENCE = _reference()  # test_docs checks that README and docs name it
# another default run, only in data/raw-archive/: the first fresh run of the reference's design (192f7e1), whose
# tables and servers (6 versions on two clusters) it shares
SECOND = "default-20261207-115750"
PASSWORD = "s3cret-results"
TPS_BY_BUILD = """
SELECT s.run_id, s.server, v.version, v.build, s.median AS tps
FROM pgbench_select_only_summary s JOIN servers v ON v.run_id = s.run_id AND v.server = s.server
ORDER BY s.run_id, s.server"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data folder of the test's own: the reference's derived tables, both runs' archives, both runs exported."""
    root = tmp_path_factory.mktemp("results") / "data"
    shutil.copytree(ROOT / "data" / "derived" / "default", root / "derived" / "default")
    (root / "raw-archive").mkdir()
    for run in (REFERENCE, SECOND):
        shutil.copy(ROOT / "data" / "raw-archive" / f"{run}.tar.xz", root / "raw-archive")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PGLAB_DATA_DIR", str(root))
        mp.delenv("PGLAB_DERIVED_DIR", raising=False)
        assert main(["export", "--run-id", "default"]) == 0  # a profile stands for its run
        assert main(["export", "--run-id", SECOND]) == 0
        yield root
    assert derived.verify("default", ROOT / "data" / "derived") == []


def _docs_queries() -> dict[str, str]:
    text = (ROOT / "docs" / "results.md").read_text()
    return dict(re.findall(r"^### (.+?)\n.*?```sql\n(.*?)```", text, flags=re.S | re.M))


def test_export_writes_every_table_with_its_run_id_and_a_manifest(data):
    ref, second = data / "export" / REFERENCE, data / "export" / SECOND
    written = json.loads((data / "derived" / "default" / derived.MANIFEST).read_text())
    tables = sorted(n.removesuffix(".csv") for n in written if (data / "derived" / "default" / n).stat().st_size)
    assert sorted(p.stem for p in ref.glob("*.parquet")) == tables == sorted(p.stem for p in second.glob("*.parquet"))
    for name in tables:
        df = pl.read_parquet(ref / f"{name}.parquet")
        assert df.columns[0] == "run_id" and df["run_id"].unique().to_list() == ([REFERENCE] if df.height else [])
        assert df.height == written[f"{name}.csv"]["rows"]
    # a table whose column all runs leave empty but one stays typeless, so that the runs' tables union
    empty = [
        (n, c)
        for n in tables
        for c, col in pl.read_csv(data / "derived" / "default" / f"{n}.csv", infer_schema_length=None).to_dict().items()
        if col.len() and col.null_count() == col.len()
    ]
    assert empty and any(pl.read_parquet_schema(ref / f"{n}.parquet")[c] == pl.Null for n, c in empty), empty

    m = json.loads((ref / export.MANIFEST).read_text())
    assert (m["run_id"], m["profile"]) == (REFERENCE, "default")
    assert m["machine"]["cpu_cores"] == 2 and m["machine"]["cpu_model"] and m["machine"]["os"]
    n_servers = pl.read_csv(data / "derived" / "default" / "environment_servers.csv").height
    assert len(m["servers"]) == n_servers
    assert all(s["version"].startswith("PostgreSQL") and s["build"] for s in m["servers"])
    assert m["params"]["ssb"]["sf"] == 1.0 and m["tables"]["ssb_summary"]["rows"] > 0
    text = (ref / export.MANIFEST).read_text() + (second / export.MANIFEST).read_text()
    assert '"dsn"' not in text and "password" not in text
    m2 = json.loads((second / export.MANIFEST).read_text())
    assert m["source"].endswith("derived/default") and m2["source"].endswith(f"raw-archive/{SECOND}.tar.xz")
    assert not (data / "raw").exists()  # the archive was unpacked into a temporary folder, not data/raw/


def test_one_query_gives_tps_per_server_and_build_of_every_run(data, capsys):
    got = index.query(TPS_BY_BUILD)
    assert got.group_by("run_id").len().sort("run_id").rows() == sorted([(REFERENCE, 12), (SECOND, 12)])
    assert [b.split(",")[0] for b in got.filter(pl.col("server") == "pg10")["build"]] == ["gcc 4.4", "gcc 4.4"]
    committed = pl.read_csv(data / "derived" / "default" / "pgbench_select_only_summary.csv")
    mine = got.filter(pl.col("run_id") == REFERENCE).sort("server")
    assert mine["tps"].to_list() == committed.sort("server")["median"].to_list()
    # the same from the command line, from an export folder named with --from only
    assert main(["query", TPS_BY_BUILD, "--from", str(data / "export"), "--only-from", "--csv"]) == 0
    out = capsys.readouterr().out
    assert out.count(REFERENCE) == 12 and out.count(SECOND) == 12  # 6 versions × 2 clusters
    assert main(["query"]) == 0 and "2 runs" in capsys.readouterr().out  # no SQL: what there is
    assert main(["query", "SELECT nope FROM runs"]) == 2 and "nope" in capsys.readouterr().err


def test_the_five_documented_queries_run_on_the_index(data):
    queries = _docs_queries()
    assert len(queries) == 5
    for name, sql in queries.items():
        assert index.query(sql).width, name
    settings = index.query(queries["which runs used which settings"])
    assert settings.filter(pl.col("key") == "settings.work_mem")["runs"].to_list() == [2]


def _snapshot(conn: psycopg.Connection, schema: str) -> set:
    """Every schema, database, role, extension and function, and each relation outside `schema` (its tables' own
    TOAST tables live in pg_toast and come and go with them)."""
    return set(
        conn.execute(
            "SELECT 'rel', n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname <> %s AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%' "
            "UNION ALL SELECT 'schema', nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_temp%%' "
            "AND nspname NOT LIKE 'pg_toast_temp%%' "
            "UNION ALL SELECT 'db', datname FROM pg_database UNION ALL SELECT 'role', rolname FROM pg_roles "
            "UNION ALL SELECT 'ext', extname FROM pg_extension "
            "UNION ALL SELECT 'proc', p.oid::regprocedure::text FROM pg_proc p",
            [schema],
        ).fetchall()
    )


def _counts(conn: psycopg.Connection, run_id: str, tables: list[str], schema: str = "pglab_results") -> dict:
    return {
        t: conn.execute(f"SELECT count(*) FROM {schema}.{t} WHERE run_id = %s", [run_id]).fetchone()[0] for t in tables
    }


def test_publish_replaces_a_run_keeps_the_others_and_creates_nothing_outside_it(
    data, embedded, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("PGLAB_DATA_DIR", str(data))
    cluster = Cluster(embedded, name="results-publish")
    cluster.start()
    try:
        monkeypatch.setenv("PGLAB_RESULTS_DSN", cluster.conninfo() + f" password={PASSWORD}")  # trust: not checked
        with cluster.connect() as conn:
            conn.execute("DROP SCHEMA IF EXISTS pglab_results, other, shared CASCADE")
            # a table of the same name and a row of the same run in another schema: publish must not touch it
            conn.execute(
                "CREATE SCHEMA other; CREATE TABLE other.runs (run_id text); "
                f"INSERT INTO other.runs VALUES ('{REFERENCE}')"
            )
            before = _snapshot(conn, "pglab_results")
        ref = json.loads((data / "export" / REFERENCE / export.MANIFEST).read_text())["tables"]
        n_servers = pl.read_csv(data / "derived" / "default" / "environment_servers.csv").height  # the reference's
        want = {t: e["rows"] for t, e in ref.items()} | {"runs": 1, "servers": n_servers}

        assert main(["publish", "--run-id", REFERENCE]) == 0
        assert main(["publish", "--run-id", REFERENCE]) == 0  # again: replaces, does not add
        out = capsys.readouterr()
        assert "replacing" in out.out and PASSWORD not in out.out + out.err
        with cluster.connect() as conn:
            assert _counts(conn, REFERENCE, list(want)) == want
        assert main(["publish", "--run-id", SECOND]) == 0
        with cluster.connect() as conn:
            assert _counts(conn, REFERENCE, list(want)) == want
            assert _counts(conn, SECOND, ["runs", "pgbench_select_only_summary"]) == {
                "runs": 1,
                "pgbench_select_only_summary": 12,
            }
            after = _snapshot(conn, "pglab_results")
            assert after - before == {("schema", "pglab_results")} and before - after == set()
            assert conn.execute("SELECT run_id FROM other.runs").fetchall() == [(REFERENCE,)]
            conn.execute("SET search_path TO pglab_results")
            for name, sql in _docs_queries().items():  # the documented queries hold in PostgreSQL too
                assert conn.execute(sql).description, name
            tps = conn.execute(TPS_BY_BUILD).fetchall()
            assert sorted({r[0] for r in tps}) == sorted([REFERENCE, SECOND]) and len(tps) == 24
            # every study's verdicts in one view, as the results index has them
            verdicts = {t: e["rows"] for t, e in ref.items() if t.endswith("_findings")}
            got = dict(conn.execute("SELECT run_id, count(*) FROM findings GROUP BY run_id").fetchall())
            assert len(verdicts) == 6 and got[REFERENCE] == sum(verdicts.values()), (got, verdicts)

        # a newer kit's export of the run, from another machine: one more column, one table fewer
        newer = tmp_path / SECOND
        shutil.copytree(data / "export" / SECOND, newer)
        s = pl.read_parquet(newer / "pgbench_select_only_summary.parquet")
        s.with_columns(pl.lit(1.5).alias("newer_column")).write_parquet(newer / "pgbench_select_only_summary.parquet")
        m = json.loads((newer / export.MANIFEST).read_text())
        del m["tables"]["ssb_sweep"]
        (newer / export.MANIFEST).write_text(json.dumps(m))
        assert main(["publish", "--run-id", str(newer)]) == 0
        assert "pgbench_select_only_summary.newer_column added (double precision)" in capsys.readouterr().out
        with cluster.connect() as conn:
            assert _counts(conn, REFERENCE, list(want)) == want  # untouched, its new column empty
            assert conn.execute(
                "SELECT count(*), count(newer_column) FROM pglab_results.pgbench_select_only_summary WHERE run_id = %s",
                [REFERENCE],
            ).fetchone() == (12, 0)
            assert _counts(conn, SECOND, ["ssb_sweep", "pgbench_select_only_summary"]) == {
                "ssb_sweep": 0,
                "pgbench_select_only_summary": 12,
            }

            # a schema holding a table of that name that pglab did not make: refused, nothing created there
            conn.execute("CREATE SCHEMA shared; CREATE TABLE shared.runs (run_id text)")
        assert main(["publish", "--run-id", REFERENCE, "--schema", "shared"]) == 2
        assert "not made by pglab" in capsys.readouterr().err
        with cluster.connect() as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'shared'").fetchone() == (1,)
            conn.execute("DROP SCHEMA pglab_results, other, shared CASCADE")
    finally:
        cluster.stop()

    # a server that is not there: exit 1, and neither the DSN nor its password in what is printed
    dsn = f"host=127.0.0.1 port=1 user=nobody password={PASSWORD} connect_timeout=3"
    monkeypatch.setenv("PGLAB_RESULTS_DSN", dsn)
    assert main(["publish", "--run-id", REFERENCE]) == 1
    out = capsys.readouterr()
    assert "publish failed" in out.err and PASSWORD not in out.out + out.err and dsn not in out.err


def test_a_bad_run_id_is_a_clear_error_and_exit_2(data, monkeypatch, capsys):
    monkeypatch.setenv("PGLAB_DATA_DIR", str(data))
    assert main(["export", "--run-id", "no-such-run"]) == 2
    err = capsys.readouterr().err
    assert (
        "no run no-such-run" in err
        and f"  default: {', '.join(sorted([REFERENCE, SECOND]))}" in err  # derived.runs_listing, oldest first
        and "profiles: default" in err
    )
    assert main(["export", "--run-id", "../etc"]) == 2 and "not a run id" in capsys.readouterr().err
    monkeypatch.setenv("PGLAB_RESULTS_DSN", "host=127.0.0.1 port=1")
    assert main(["publish", "--run-id", "no-such-run"]) == 2 and "no run no-such-run" in capsys.readouterr().err
    # a profile whose tables come from two runs names them and asks for one
    mixed = data / "derived" / "mixed"
    shutil.copytree(data / "derived" / "default", mixed)
    m = json.loads((mixed / derived.MANIFEST).read_text())
    m["ssb_summary.csv"]["run_id"] = SECOND
    (mixed / derived.MANIFEST).write_text(json.dumps(m))
    assert main(["export", "--run-id", "mixed"]) == 2
    assert f"holds tables of 2 runs ({', '.join(sorted([REFERENCE, SECOND]))})" in capsys.readouterr().err
    shutil.rmtree(mixed)
    assert not (data / "raw").exists()


def test_an_empty_table_keeps_its_typed_columns_through_write_read_export_and_query(tmp_path, monkeypatch):
    """A run with one server version has no version comparison: the SSB stage returns ssb_versions_paired without
    any column (the 1-byte file of issue 60). Written, it keeps the columns the reference records for it; read, it
    is an empty frame of the reference's types; exported and queried, it answers no rows rather than an error."""
    ref = ROOT / "data" / "derived"
    root = tmp_path / "data" / "derived"
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(derived.RUN_ID_ENV, "quick-20990101-000000")
    summary = derived.read_table("ssb_summary", "default", ref)
    derived.write({"ssb_versions_paired": pl.DataFrame(), "ssb_summary": summary}, "quick", root=root)
    columns = derived.manifest(ref / "default")["ssb_versions_paired.csv"]["columns"]
    assert (root / "quick" / "ssb_versions_paired.csv").read_text() == ",".join(columns) + "\n"
    empty = derived.read_table("ssb_versions_paired", "quick", root)
    assert empty.height == 0 and empty.schema == derived.read_table("ssb_versions_paired", "default", ref).schema
    assert derived.Tables("quick", root).optional("ssb_versions_paired").columns == columns

    assert main(["export", "--run-id", "quick"]) == 0
    out = tmp_path / "data" / "export" / "quick-20990101-000000"
    parquet = pl.read_parquet(out / "ssb_versions_paired.parquet")
    assert parquet.height == 0 and parquet.columns == ["run_id", *columns]
    assert parquet.schema["ratio"] == pl.Float64 and parquet.schema["n_rounds"] == pl.Int64
    assert json.loads((out / export.MANIFEST).read_text())["tables"]["ssb_versions_paired"]["rows"] == 0
    answer = index.query("SELECT count(*) AS n, count(ratio) AS ratios FROM ssb_versions_paired")
    assert answer.rows() == [(0, 0)]


def test_an_empty_table_written_without_columns_by_an_older_pglab_still_reads_and_exports(tmp_path, monkeypatch):
    """A 1-byte table already on disk (derived before empty tables kept their columns) reads as a frame without
    columns and exports as a run_id column without rows: `make export` of an older quick run does not crash."""
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(derived.RUN_ID_ENV, "quick-20990101-000001")
    root = tmp_path / "data" / "derived"
    derived.write({"ssb_summary": derived.read_table("ssb_summary", "default", ROOT / "data" / "derived")}, "q", root)
    (root / "q" / "odd_table.csv").write_text("\n")  # as derived.write left such a table before
    m = derived.manifest(root / "q")
    m["odd_table.csv"] = m["ssb_summary.csv"] | {"columns": [], "types": {}, "rows": 0}
    (root / "q" / derived.MANIFEST).write_text(json.dumps(m))
    assert derived.read_table("odd_table", "q", root).shape == (0, 0)
    assert main(["export", "--run-id", "q"]) == 0
    got = pl.read_parquet(tmp_path / "data" / "export" / "quick-20990101-000001" / "odd_table.parquet")
    assert got.columns == ["run_id"] and got.height == 0


def test_every_table_of_the_quick_pass_reads_and_exports(quick_pass, tmp_path, monkeypatch):
    """The first run a newcomer makes: every derived table of the session's quick pass reads (an empty one with
    its typed columns, no table without a header) and `make export RUN_ID=quick` exports every one of them."""
    qp = quick_pass.require()
    shutil.copytree(qp.data / "derived" / "quick", tmp_path / "data" / "derived" / "quick")
    monkeypatch.setenv("PGLAB_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "data" / "derived" / "quick"
    tables = sorted(p.stem for p in folder.glob("*.csv"))
    headerless = [t for t in tables if not (folder / f"{t}.csv").read_text().strip()]
    assert headerless == [], f"tables written without columns: {headerless}"
    frames = {t: derived.read_table(t, "quick", folder.parent) for t in tables}
    empty = sorted(t for t, df in frames.items() if df.height == 0)
    assert all(frames[t].width for t in empty)
    assert main(["export", "--run-id", "quick"]) == 0
    out = tmp_path / "data" / "export" / qp.run_id
    assert sorted(p.stem for p in out.glob("*.parquet")) == tables
    for t in empty:
        assert pl.read_parquet(out / f"{t}.parquet").columns == ["run_id", *frames[t].columns]
    print(f"quick pass: {len(tables)} tables read and exported, {len(empty)} empty with their columns: {empty}")

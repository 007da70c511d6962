"""An external server (reached by dsn) is never started, stopped, reconfigured or written to destructively
unless params allow it, and its password is never stored. The 'external' server here is a kit cluster
reached only through its dsn."""

import pytest

from pglab import params
from pglab.core.servers import servers
from pglab.core.servers.servers import DestructiveStepRefused


@pytest.fixture
def external_params(tmp_path, cluster):
    dsn = cluster.conninfo() + " password=s3cret"
    f = tmp_path / "ext.yaml"
    f.write_text(
        "servers:\n  use: [lab, labw]\n  external:\n"
        f"    - {{name: lab, dsn: '{dsn}'}}\n"
        f"    - {{name: labw, dsn: '{dsn}', allow_destructive: true}}\n"
    )
    return params.load(f)


def test_external_server_is_used_but_never_managed(external_params, cluster):
    lab, labw = servers.select(external_params)
    assert (lab.kind, lab.managed, lab.allow_destructive) == ("external", False, False)
    assert labw.allow_destructive
    lab.start()  # a no-op
    with lab.connect(settings={"work_mem": "7MB"}) as conn:
        assert conn.execute("SHOW work_mem").fetchone()[0] == "7MB"  # session settings do apply
    res = lab.configure({"shared_preload_libraries": "auto_explain"})
    assert res["status"] == "skipped" and "external" in res["reason"]
    with pytest.raises(DestructiveStepRefused, match="allow_destructive"):
        lab.require_destructive("drop database ssb_sf1")
    labw.require_destructive("drop database ssb_sf1")  # allowed by params
    lab.stop()  # a no-op: the server is still there
    with lab.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert cluster.running


def test_password_never_appears_in_what_is_stored(external_params):
    lab = servers.select(external_params)[0]
    assert "s3cret" not in repr(lab.describe())
    assert "s3cret" not in repr(lab)
    assert "s3cret" not in repr(external_params)


def test_pgbench_gets_the_password_through_its_environment_never_argv(external_params, cluster, tmp_path, monkeypatch):
    from pglab.pgtools import pgbench

    lab = servers.select(external_params)[0]
    env = pgbench._env(lab, "bench", None)
    assert env["PGPASSWORD"] == "s3cret" and env["PGDATABASE"] == "bench"
    # a dsn without one: the PGPASSWORD the kit's own connections use reaches pgbench too (not for kit servers)
    monkeypatch.setenv("PGPASSWORD", "fr0m-env")
    f = tmp_path / "env.yaml"
    f.write_text(f"servers: {{use: [lab], external: [{{name: lab, dsn: '{cluster.conninfo()}'}}]}}\n")
    env = pgbench._env(servers.select(params.load(f))[0], "bench", None)
    assert env["PGPASSWORD"] == "fr0m-env"


def test_scrub_removes_known_passwords_and_password_pairs(external_params, monkeypatch):
    from pglab.core.servers.db import scrub

    servers.select(external_params)  # registers the dsn's password
    monkeypatch.setenv("PGPASSWORD", "fr0m-env")
    text = "failed for host=x password=abc got s3cret and fr0m-env; password='a b'"
    assert scrub(text) == "failed for host=x password=*** got *** and ***; password=***"

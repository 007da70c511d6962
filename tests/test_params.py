"""A bad params file stops the run before any server starts, with one message naming file, key and
expectation. A password never appears in it."""

import socket
import subprocess
import sys
import threading
import time

import pytest

from pglab import params, paths
from pglab.params import ParamsError


def _load(tmp_path, text, **kw):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return params.load(f, **kw)


def test_shipped_params_are_valid():
    for f in sorted(paths.PARAMS.glob("*.yaml")):
        p = params.load(f)
        assert p.profile == f.stem


@pytest.mark.parametrize(
    "text, expected",
    [
        ("bogus: 1\n", r"p.yaml: bogus: unknown key"),
        ("servers: {instals: []}\n", r"servers.instals: unknown key"),
        ("settings: {work_mem: [1]}\n", r"settings.work_mem: expected text, a number or true/false"),
        ("environment: {pg_test_timing_seconds: 0}\n", r"environment.pg_test_timing_seconds: .*greater than"),
        ("initdb: {data_checksums: maybe}\n", r"initdb.data_checksums: .*boolean"),
        ("profile: 'has space'\n", r"profile: .*pattern"),
        ("- a list\n", r"expected a mapping"),
        ("a: [unclosed\n", r"not valid YAML"),
        ("servers: {installs: [{name: x, bin_dir: /nonexistent}]}\n",
         r"servers.installs\[0\].bin_dir: expected a folder with PostgreSQL's postgres"),
        ("servers: {use: [pg99]}\n", r"servers.use: expected 'all' or names among .*pg99"),
    ],
)  # fmt: skip
def test_errors_name_file_key_and_expectation(tmp_path, text, expected):
    with pytest.raises(ParamsError, match=expected):
        _load(tmp_path, text)


def test_missing_file(tmp_path):
    with pytest.raises(ParamsError, match="no such params file"):
        params.load(tmp_path / "nope.yaml")


def test_dsn_that_refuses_is_reported_without_its_password(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ParamsError) as e:
        _load(tmp_path, f"servers: {{external: [{{name: x, dsn: 'host=127.0.0.1 port={port} password=hunter2'}}]}}\n")
    assert "servers.external[0].dsn" in str(e.value)
    assert "hunter2" not in str(e.value)


def test_dsn_that_never_answers_fails_within_the_timeout(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)  # accepts the TCP connection, never speaks the protocol
    held = []
    threading.Thread(target=lambda: held.append(srv.accept()), daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(ParamsError, match=r"answering within 1s"):
        _load(tmp_path, f"servers: {{connect_timeout_s: 1, external: [{{name: x, dsn: 'host=127.0.0.1 "
              f"port={srv.getsockname()[1]} password=pw1 user=u'}}]}}\n")  # fmt: skip
    assert time.monotonic() - t0 < 10
    srv.close()


def test_report_refuses_bad_params_before_starting_anything(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: {installs: [{name: x, bin_dir: /nonexistent}]}\n")
    out = subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", str(bad), "--out", str(tmp_path / "r")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2
    assert "servers.installs[0].bin_dir" in out.stderr
    assert not (tmp_path / "r").exists()
    assert not paths.clusters_dir().joinpath("x").exists()

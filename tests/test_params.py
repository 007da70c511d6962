"""A bad params file stops the run before any server starts, with one message naming file, key and
expectation. A password never appears in it."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import TEST_HOME

from pglab import params
from pglab.core import paths
from pglab.params import ParamsError


def _load(tmp_path, text, **kw):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return params.load(f, **kw)


def test_shipped_params_are_valid():
    for f in sorted(paths.PARAMS.glob("*.yaml")):
        p = params.load(f, check_servers=False)
        # the machine's checks too, but not a source build's minutes (where a compiler is present, the default's
        # pg18llvm would be built here: 9 min with the other tests on 2 cores); test_pg_build builds one
        if not any(i.source for i in p.servers.installs):
            p = params.load(f)
        assert p.profile == f.stem
        # what a run records of its params reads back as the same params (a key left empty, as None, too)
        doc = p.model_dump(mode="json")
        assert type(p).model_validate(doc).model_dump(mode="json") == doc, f.name


@pytest.mark.parametrize(
    "text, expected",
    [
        ("bogus: 1\n", r"p.yaml: bogus: unknown key"),
        ("servers: {instals: []}\n", r"servers.instals: unknown key"),
        ("settings: {work_mem: [1]}\n", r"settings.work_mem: expected text, a number or true/false"),
        ("environment: {pg_test_timing_seconds: 0}\n", r"environment.pg_test_timing_seconds: .*greater than"),
        ("initdb: {data_checksums: maybe}\n", r"initdb.data_checksums: .*boolean"),
        ("profile: 'has space'\n", r"profile: expected a profile name"),
        ("- a list\n", r"expected a mapping"),
        ("a: [unclosed\n", r"not valid YAML"),
        (
            "servers: {installs: [{name: x, bin_dir: /nonexistent}]}\n",
            r"servers.installs\[0\].bin_dir: expected a folder with PostgreSQL's postgres",
        ),
        ("servers: {use: [pg99]}\n", r"servers.use: expected 'all' or names among .*pg99"),
    ],
)
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
        _load(
            tmp_path,
            f"servers: {{connect_timeout_s: 1, external: [{{name: x, dsn: 'host=127.0.0.1 "
            f"port={srv.getsockname()[1]} password=pw1 user=u'}}]}}\n",
        )
    assert time.monotonic() - t0 < 10
    srv.close()


def test_report_refuses_bad_params_before_starting_anything(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: {installs: [{name: x, bin_dir: /nonexistent}]}\n")
    out = subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", str(bad), "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "servers.installs[0].bin_dir" in out.stderr
    assert not (tmp_path / "r").exists()
    assert not paths.clusters_dir().joinpath("x").exists()


# -- the rules of issue 13 (the corpus of bad files is in test_bad_params.py) ----------------------------------


def test_the_kit_owned_settings_cover_what_the_cluster_sets(embedded):
    from pglab.core.paramtypes import KIT_OWNED_SETTINGS
    from pglab.core.servers.cluster import Cluster

    assert set(Cluster(embedded, name="owned")._base_settings()) <= KIT_OWNED_SETTINGS


def test_a_relative_bin_dir_is_taken_from_the_params_files_folder(tmp_path):
    debian = Path("/usr/lib/postgresql/15/bin")
    if not (debian / "postgres").exists():
        pytest.skip("no Debian PostgreSQL 15")
    folder = tmp_path / "params"
    folder.mkdir()
    f = folder / "p.yaml"
    f.write_text(f"servers: {{installs: [{{name: mine, bin_dir: {os.path.relpath(debian, folder)}}}]}}\n")
    p = params.load(f)
    assert p.servers.installs[0].bin_dir == str(debian)  # absolute: the notebooks run in notebooks/


@pytest.mark.parametrize(
    "dsn, secrets",
    [
        ("host=127.0.0.1 password=sec ret user=x", ["sec", "ret"]),
        ("postgresql://u:p%20w@h/db", ["p%20w", "p w"]),
        ("postgresql://u:s3cr%20t@127.0.0.1:1/db", ["s3cr", "s3cr%20t"]),
        ("host=127.0.0.1 port=1 password='quoted secret'", ["quoted", "secret"]),
    ],
)
def test_a_dsn_error_never_shows_any_piece_of_the_password(tmp_path, dsn, secrets):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"servers": {"connect_timeout_s": 1, "external": [{"name": "x", "dsn": dsn}]}}))
    with pytest.raises(ParamsError) as e:
        params.load(f)
    assert "servers.external[0].dsn: expected" in str(e.value)
    assert not [s for s in secrets if s in str(e.value)], str(e.value)


def test_versions_are_majors_or_exact_versions(tmp_path):
    p = _load(tmp_path, "servers: {versions: [16, '15.8', '17', 10, 18]}\n", check_servers=False)
    assert p.servers.versions == [16, "15.8", 17, 10, 18]
    expected = r"servers\.versions: expected .*(10, 11, 12, 13, 14, 15, 16, 17, 18|list)"
    for bad in ("[9]", "[19]", "['16.x']", "[16.5]", "[true]", "['9.6.24']", "16"):
        with pytest.raises(ParamsError, match=expected):
            _load(tmp_path, f"servers: {{versions: {bad}}}\n", check_servers=False)


def test_yaml_merge_keys_are_no_duplicates(tmp_path):
    text = (
        "ssb: {stage_settings: &s {wal_level: minimal, max_wal_senders: 0}}\n"
        "partitioning: {server_settings: {<<: *s, max_wal_senders: 1}}\n"
    )
    p = _load(tmp_path, text, check_servers=False)
    assert p.partitioning.server_settings == {"wal_level": "minimal", "max_wal_senders": 1}


def test_every_setting_is_checked_by_each_selected_install(tmp_path, installs):
    """A setting PostgreSQL 18 has and 15 has not: refused with pg15 named, accepted with pg18 alone; the check
    leaves no folder behind. One `postgres -C` per install with every setting of the default params."""
    from pglab.core.run import params_checks

    if not {"pg15", "pg18"} <= {i.name for i in installs}:
        pytest.skip("needs pg15 and pg18")
    refused = r"settings\.io_method: expected a setting and value that pg15 \(PostgreSQL 15\.\d+\) accepts; got 'sync'"
    with pytest.raises(ParamsError, match=refused + ": unrecognized configuration parameter"):
        _load(tmp_path, "settings: {io_method: sync}\n")
    _load(tmp_path, "servers: {use: [pg18]}\nsettings: {io_method: sync}\n")
    default = params.load(paths.PARAMS / "default.yaml", check_servers=False)
    private = TEST_HOME / "settings-check-tmp"  # a temp folder of this test's own, reachable by the server user
    shutil.rmtree(private, ignore_errors=True)
    private.mkdir(parents=True)
    tempfile.tempdir = str(private)
    try:
        t0 = time.monotonic()
        params_checks.check_settings(default, "default.yaml", installs)
        n = sum(len(d) for d in default.setting_dicts().values())
        print(f"\n{n} settings checked on {len(installs)} installs in {time.monotonic() - t0:.3f} s")
    finally:
        tempfile.tempdir = None
    assert list(private.iterdir()) == []  # the throwaway config folder is gone
    private.rmdir()


def test_the_disk_estimate_follows_the_params():
    from pglab.core.run import params_checks

    quick = params_checks.estimate_bytes(params.load(paths.PARAMS / "quick.yaml", check_servers=False))
    default = params_checks.estimate_bytes(params.load(paths.PARAMS / "default.yaml", check_servers=False))
    assert 40e6 < quick["ssb.sf"] < 80e6  # SF 0.05: 41.9 MB measured, and its largest index
    assert 0.8e9 < default["ssb.sf"] < 0.9e9  # SF 1: 678.8 MB measured + 189 MB index
    assert default["pgbench.scales"] > quick["pgbench.scales"]
    # a JIT block at a larger scale (ssb.jit_sf 10) once per run, on ssb.jit_clusters (2) clusters, not on every
    # server; the default's at ssb.sf (1) adds nothing beyond every server's share
    default_p = params.load(paths.PARAMS / "default.yaml", check_servers=False)
    at_10 = default_p.model_copy(update={"ssb": default_p.ssb.model_copy(update={"jit_sf": 10})})
    once = params_checks.run_bytes(at_10)
    assert 2 * 7.5e9 < once["ssb.jit_sf"] < 2 * 8.5e9
    assert params_checks.run_bytes(default_p) == {}
    assert params_checks.run_bytes(params.load(paths.PARAMS / "quick.yaml", check_servers=False)) == {}


SETTINGS_DICTS = [  # every kind of settings dict in params, each checked by paramtypes.setting_name_problem
    "settings: {{{name}: 1}}\n",
    "ssb: {{stage_settings: {{{name}: 1}}}}\n",
    "auto_explain: {{server_settings: {{{name}: 1}}}}\n",
    "auto_explain: {{conditions: {{loaded_disabled: {{settings: {{{name}: 1}}}}}}}}\n",
    "partitioning: {{server_settings: {{{name}: 1}}}}\n",
    "jit_operators: {{conditions: {{off: {{jit: false}}, on: {{jit: true, {name}: 1}}}}}}\n",
]


@pytest.mark.parametrize("name", ["1abc", "a b", "a;b", ".x", "x.", "a..b", "a.b.c", "x.a$b", "$a", "a=b", "é"])
def test_one_setting_name_rule_refuses(tmp_path, name):
    from pglab.core.paramtypes import is_setting_name

    assert not is_setting_name(name)
    for text in SETTINGS_DICTS:
        with pytest.raises(ParamsError, match=r"expected a PostgreSQL setting name: letters, digits and _, not "):
            _load(tmp_path, text.format(name=yaml.safe_dump(name, default_style='"').strip()), check_servers=False)


@pytest.mark.parametrize(
    "name", ["work_mem", "auto_explain.log_min_duration", "pg_stat_statements.track", "Work_Mem", "_x1", "my_ext.x1"]
)
def test_one_setting_name_rule_accepts(tmp_path, name):
    from pglab.core.paramtypes import is_setting_name

    assert is_setting_name(name)
    for text in SETTINGS_DICTS:
        _load(tmp_path, text.format(name=name), check_servers=False)


# -- ssb.flavor: which generator makes the SSB data, and the scale factors each one makes -----------------------


@pytest.mark.parametrize("text", ["ssb: {sf: 1.5}\n", "ssb: {sf: 2.5, flavor: dbgen}\n", "ssb: {sf: 10.01}\n"])
def test_a_dbgen_scale_factor_from_1_on_must_be_whole(tmp_path, text):
    expected = (
        r"p\.yaml: ssb\.sf: expected a whole number from 1 on with flavor dbgen \(1, 2, 10 \.\.\.\), or a "
        r"fraction below 1, or flavor: spec; got \d+\.\d+$"
    )
    with pytest.raises(ParamsError, match=expected):
        _load(tmp_path, text, check_servers=False)


def test_each_flavor_takes_the_scale_factors_its_generator_makes(tmp_path):
    from pglab.datasets import ssb

    for text, sf, flavor in [
        ("ssb: {sf: 1.5, flavor: spec}\n", 1.5, "spec"),
        ("ssb: {sf: 0.05}\n", 0.05, "dbgen"),
        ("ssb: {sf: 2}\n", 2.0, "dbgen"),
        ("ssb: {sf: 0.5, flavor: spec}\n", 0.5, "spec"),
    ]:
        p = _load(tmp_path, text, check_servers=False).ssb
        assert (p.sf, p.flavor) == (sf, flavor)
        assert ssb.order_count(p.sf, flavor=p.flavor) > 0  # the generator takes what the params took
    with pytest.raises(ParamsError, match=r"ssb\.flavor: .*'dbgen' or 'spec'; got 'tpch'"):
        _load(tmp_path, "ssb: {flavor: tpch}\n", check_servers=False)


def test_the_flavors_of_the_params_are_the_generators():
    import typing

    from pglab.datasets import ssb
    from pglab.studies.ssb.params import SsbParams

    assert typing.get_args(SsbParams.model_fields["flavor"].annotation) == ssb.FLAVORS
    assert SsbParams().flavor == ssb.DEFAULT_FLAVOR
    assert params.load(paths.PARAMS / "default.yaml", check_servers=False).ssb.flavor == "dbgen"


def test_the_load_sends_the_flavors_blocks():
    """load.block_sources gives the generator's blocks of the flavor asked for (test_ssb_load: on a server)."""
    from pglab.datasets import ssb
    from pglab.datasets.ssb import load as ssb_load

    # the blocks the load sends are the flavor's (lineorder's from a generator process), and the flavors differ
    for flavor in ssb.FLAVORS:
        sources = ssb_load.block_sources(0.001, 3, flavor)
        try:
            for table in ssb.TABLES:
                assert list(sources[table]) == list(ssb.iter_blocks(table, 0.001, 3, flavor=flavor)), (flavor, table)
        finally:
            sources["lineorder"].close()
    assert list(ssb.iter_blocks("lineorder", 0.001, 3, flavor="spec")) != list(ssb.iter_blocks("lineorder", 0.001, 3))

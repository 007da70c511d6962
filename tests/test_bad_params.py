"""A corpus of bad params files (tests/fixtures/bad_params/): each one stops the report command (`python -m
pglab.report`'s entry, report.driver.main) with exit code 2 before any server starts, naming the file, the key and
what is expected. Each file says in a comment what it is refused for; CASES below holds the message each must give."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, TEST_HOME, postmasters

from pglab.core.store import RunStore, StoreError, begin_run

CORPUS = ROOT / "tests" / "fixtures" / "bad_params"
OWNED = r"expected a setting the kit does not set itself; it owns .*"
NAME = r"expected a name of letters, digits, .* without '\.\.'"
ACCEPTS = r"expected a setting and value that pg\d+ \(PostgreSQL [\d.]+\) accepts"
FITS = r"expected a run that fits on disk; these params would write about .* free"

# file -> the message it must give after "<file>: " (the key, then what was expected)
CASES = {
    "empty.yaml": r"empty params file; expected at least `profile: <name>`",
    "empty_mapping.yaml": r"empty params file; expected at least `profile: <name>`",
    "not_a_mapping.yaml": r"expected a mapping of keys at the top level; got list",
    "yaml_syntax.yaml": r"line 6, column 1: not valid YAML: while scanning a quoted scalar",
    "duplicate_key.yaml": r"line 6, column 3: not valid YAML: duplicate key 'work_mem' \(first given at line 4\)",
    "duplicate_section.yaml": r"line 7, column 1: not valid YAML: duplicate key 'ssb' \(first given at line 3\)",
    "duplicate_inline_key.yaml": r"line 3, column 26: not valid YAML: duplicate key 'sf' \(first given at line 3\)",
    "duplicate_install_name.yaml": r"servers\.installs\[1\]\.name: expected a name no other server has; 'mine' is "
    r"also servers\.installs\[0\]\.name",
    "duplicate_server_name.yaml": r"servers\.external\[0\]\.name: expected a name no other server has; 'lab' is "
    r"also servers\.installs\[0\]\.name",
    "external_named_like_found_install.yaml": r"servers\.external\[0\]\.name: expected a name no other server has; "
    r"'pg18' is the install found in /",
    "listen_addresses.yaml": rf"settings\.listen_addresses: {OWNED}",
    "port.yaml": rf"settings\.port: {OWNED}",
    "unix_socket_directories.yaml": rf"settings\.unix_socket_directories: {OWNED}",
    "logging_collector.yaml": rf"auto_explain\.server_settings\.logging_collector: {OWNED}",
    "log_directory.yaml": rf"ssb\.stage_settings\.log_directory: {OWNED}",
    "data_directory.yaml": rf"partitioning\.server_settings\.data_directory: {OWNED}",
    "hba_file.yaml": rf"settings\.hba_file: {OWNED}",
    "include_directive.yaml": rf"settings\.include: {OWNED}",
    "setting_in_session.yaml": rf"auto_explain\.conditions\.loaded_disabled\.settings\.port: {OWNED}",
    "install_name_dot.yaml": rf"servers\.installs\[0\]\.name: {NAME}.*; got '\.'",
    "install_name_dotdot.yaml": rf"servers\.installs\[0\]\.name: {NAME}.*; got '\.\.'",
    "external_name_dotdot.yaml": rf"servers\.external\[0\]\.name: {NAME}",
    "install_name_path.yaml": rf"servers\.installs\[0\]\.name: {NAME}.*; got 'a/b'",
    "run_id_dotdot.yaml": rf"run_id: {NAME}.*; got '\.\.'",
    "run_id_path.yaml": rf"run_id: {NAME}.*; got '\.\./\.\./x'",
    "profile_path.yaml": r"profile: expected a profile name of letters, digits, '_' and '-'",
    "copied_default_profile.yaml": r"profile: default: that profile writes the committed reference \(report/ and "
    r"data/derived/default/\), and only params/default\.yaml does; give this file its own name",
    "no_profile.yaml": r"profile: not set, so 'default': that profile writes the committed reference",
    "ssb_sf_1000.yaml": rf"ssb\.sf: {FITS}",
    "pgbench_scale_huge.yaml": rf"pgbench\.scales: {FITS}",
    "pgbench_baseline_not_a_version.yaml": r"pgbench\.baseline: expected one of versions \[11, 12\]; got 13",
    "ssb_jit_sf_fraction.yaml": r"ssb\.jit_sf: expected a whole number from 1 on with flavor dbgen",
    "relative_bin_dir.yaml": r"servers\.installs\[0\]\.bin_dir: expected a folder with PostgreSQL's postgres, initdb "
    r"and pg_ctl; got '" + re.escape(str(ROOT / "tests" / "fixtures" / "no-such-bin")) + "'",
    "bin_dir_missing.yaml": r"servers\.installs\[0\]\.bin_dir: expected a folder with PostgreSQL's postgres, initdb "
    r"and pg_ctl; got '/nonexistent/bin'",
    "shared_buffers_lots.yaml": rf"settings\.shared_buffers: {ACCEPTS}; got 'lots': invalid value for parameter",
    "jit_maybe.yaml": rf"settings\.jit: {ACCEPTS}; got 'maybe': parameter \"jit\" requires a Boolean value",
    "unknown_setting.yaml": rf"settings\.work_mem_per_query: {ACCEPTS}; got '64MB': unrecognized configuration "
    r"parameter",
    "session_server_wide.yaml": r"auto_explain\.items\.limit\.settings\.shared_buffers: expected a setting a "
    r"session can set; shared_buffers is a postmaster setting on pg\d+",
    "setting_name_syntax.yaml": r"settings\.work mem: expected a PostgreSQL setting name",
    "setting_name_digit.yaml": r"partitioning\.server_settings\.1abc: expected a PostgreSQL setting name: letters, "
    r"digits and _, not starting with a digit",
    "setting_value_list.yaml": r"settings\.work_mem: expected text, a number or true/false; got \['64MB'\]",
    "setting_value_newline.yaml": r"settings\.application_name: expected a value on one line",
    "wal_level_enum.yaml": rf"ssb\.stage_settings\.wal_level: {ACCEPTS}; got 'maximal'.*Available values: minimal",
    "jit_condition_cost.yaml": rf"jit_operators\.conditions\.on\.jit_above_cost: {ACCEPTS}; got 'maybe'",
    "auto_explain_item_setting.yaml": r"auto_explain\.items\.count\.settings\.max_parallel_workers_per_gather: "
    rf"{ACCEPTS}; got -5: -5 is outside the valid range",
    "auto_explain_split_cpus.yaml": r"auto_explain\.run: .*split_cpus: expected names among \['limit'\]; got "
    r"\['lookup'\]",
    "auto_explain_server_setting.yaml": rf"auto_explain\.server_settings\.max_worker_processes: {ACCEPTS}; got "
    r"300000: 300000 is outside the valid range",
    "partitioning_setting_range.yaml": rf"partitioning\.server_settings\.random_page_cost: {ACCEPTS}; got -1",
    "initdb_encoding.yaml": r"initdb\.encoding: expected a server encoding: SQL_ASCII, .*UTF8.*; got 'UTF9'",
    "initdb_locale.yaml": r"initdb\.locale: expected a locale this machine has \(.*C.*\); got 'xx_YY\.UTF-8'",
    "maintenance_work_mem.yaml": r"parallel_index\.maintenance_work_mem: expected a PostgreSQL memory size",
    "worker_sweep_negative.yaml": r"ssb\.worker_sweep: expected null or a non-empty list of distinct worker counts "
    r"from 0 to 64; got \[0, -2\]",
    "ssb_modes_empty.yaml": r"ssb\.modes: expected a non-empty list of distinct modes",
    "ssb_sf_not_whole.yaml": r"ssb\.sf: expected a whole number from 1 on with flavor dbgen \(1, 2, 10 \.\.\.\), or a "
    r"fraction below 1, or flavor: spec; got 1\.5$",
    "use_empty.yaml": r"servers\.use: expected 'all' or a non-empty list of server names",
    "use_not_all.yaml": r"servers\.use: expected 'all' or a non-empty list of server names.*; got 'pg18'",
    "use_unknown.yaml": r"servers\.use: expected 'all' or names among \[.*'pg18'.*\]; got unknown \['pg99'\]",
    "use_twice.yaml": r"servers\.use: expected each server once; got \['pg18', 'pg18'\]$",
    "unknown_top_key.yaml": r"setings: unknown key; expected one of: profile, run_id, servers, .*settings",
    "unknown_nested_key.yaml": r"ssb\.sff: unknown key; expected one of: sf, seed, ",
    "source_key.yaml": r"source: unknown key; expected one of: profile, ",
    "versions_too_old.yaml": r"servers\.versions: expected PostgreSQL majors 10, 11, 12, 13, 14, 15, 16, 17, 18 or "
    r"exact versions such as '16\.14'; 9 is neither",
    "versions_word.yaml": r"servers\.versions: expected PostgreSQL majors 10, .*, 18 or exact versions .*'latest' is "
    r"neither",
    "versions_twice.yaml": r"servers\.versions: expected each version once",
    "source_and_bin_dir.yaml": r"servers\.installs\[0\]: expected either bin_dir \(a folder with PostgreSQL's "
    r"binaries\) or source \(a tarball, a Debian source package or a git ref to build from\), not both$",
    "source_tarball_without_sha256.yaml": r"servers\.installs\[0\]\.source: expected sha256 \(the tarball's SHA-256, "
    r"64 hex digits\) with tarball",
    "source_two_kinds.yaml": r"servers\.installs\[0\]\.source: expected exactly one of tarball \(with sha256\), debian "
    r"or git \(with ref\); got debian and git$",
    "source_git_without_ref.yaml": r"servers\.installs\[0\]\.source: expected ref \(a branch, tag or commit\) with git",
    "source_debian_not_postgresql.yaml": r"servers\.installs\[0\]\.source\.debian: expected a Debian PostgreSQL "
    r"source package, e\.g\. postgresql-17.*; got 'nginx'$",
    "source_git_option.yaml": r"servers\.installs\[0\]\.source\.git: expected a git repository: a folder, or a URL",
    "build_configure_prefix.yaml": r"servers\.build\.configure: expected options the kit does not set itself; "
    r"'--prefix=/opt/pg' is set by the kit",
    "source_git_missing.yaml": r"servers\.installs\[0\]\.source: expected PostgreSQL to build from it; git repository "
    r"/nonexistent/postgresql\.git: no such folder$",
    "source_tarball_missing.yaml": r"servers\.installs\[0\]\.source: expected PostgreSQL to build from it; tarball "
    r"/nonexistent/postgresql-17\.5\.tar\.bz2: no such file$",
    "dsn_unquoted_space.yaml": r"servers\.external\[0\]\.dsn: expected a libpq connection string .* it does not "
    r"parse \(not shown: it may hold a password\)",
    "dsn_uri_password.yaml": r"servers\.external\[0\]\.dsn: expected a server answering within 5s; "
    r"'user=u dbname=db host=127\.0\.0\.1 port=1' did not",
}
# what must never show in the message of these files (their passwords, whole or in part)
SECRETS = {
    "yaml_syntax.yaml": ["hunter2", "secret"],
    "dsn_unquoted_space.yaml": ["sec", "ret"],
    "dsn_uri_password.yaml": ["p%20w0rdz", "p w0rdz", "w0rdz"],
}


def test_every_corpus_file_says_why_and_has_its_expected_message():
    files = sorted(f.name for f in CORPUS.glob("*.yaml"))
    assert files == sorted(CASES), "tests/fixtures/bad_params/ and CASES must list the same files"
    assert len(files) >= 35
    for f in files:
        assert (CORPUS / f).read_text().startswith("# refused: "), f"{f}: first line: '# refused: <why>'"


class _PostgresWatch:
    """Polls /proc while the corpus runs: any postgres process with a path under `root` among its arguments."""

    def __init__(self, root: Path):
        self.root, self.seen, self._stop = root, set(), threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            self.seen.update(postmasters(self.root))
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _run_report(params_file: Path, env: dict, out: Path) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "pglab.report", "--params", str(params_file), "--out", str(out)]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # a params file that was accepted: its servers stop with it
        stdout, stderr = proc.communicate()
    elapsed = time.monotonic() - t0
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), elapsed


# The corpus through the command's own entry (report.driver.main, argv as `python -m pglab.report` gets it), many
# files to one interpreter: a fresh one per file spent most of this test's minute importing the kit. With no
# stages an accepted file could run nothing: it fails here instead of measuring.
_BATCH = """
import contextlib, io, json, sys, time
from pglab.report import driver
out, files = sys.argv[1], sys.argv[2:]
for f in files:
    o, e = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            code = driver.main(["--params", f, "--out", out], stages=())
        except BaseException as x:  # noqa: BLE001 - reported as the file's failure
            code, _ = 1, print(f"{type(x).__name__}: {x}", file=sys.stderr)
    print(json.dumps([f, code, o.getvalue(), e.getvalue(), time.monotonic() - t0]), flush=True)
"""


def _run_batch(files: list[Path], env: dict, out: Path) -> dict[Path, tuple[subprocess.CompletedProcess, float]]:
    rel = [str(f.relative_to(ROOT)) for f in files]
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH, str(out), *rel], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    assert [r[0] for r in rows] == rel, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {ROOT / f: (subprocess.CompletedProcess(f, code, o, e), s) for f, code, o, e, s in rows}


def test_report_refuses_every_bad_params_file_before_any_server_starts():
    home = TEST_HOME / "bad-params"
    shutil.rmtree(home, ignore_errors=True)
    state, data, out = home / "state", home / "data", home / "report"
    state.mkdir(parents=True)
    env = os.environ | {"PGLAB_STATE_DIR": str(state), "PGLAB_DATA_DIR": str(data)}
    files = sorted(CORPUS.glob("*.yaml"))
    t0 = time.monotonic()
    with _PostgresWatch(home) as watch, ThreadPoolExecutor(max_workers=2) as pool:
        results = {
            k: v for part in pool.map(lambda h: _run_batch(files[h::2], env, out), (0, 1)) for k, v in part.items()
        }
    total = time.monotonic() - t0
    failures = []
    for f, (res, _) in results.items():
        first = res.stderr.strip().splitlines()[0] if res.stderr.strip() else ""
        expected = rf"^error: tests/fixtures/bad_params/{re.escape(f.name)}: {CASES[f.name]}"
        if res.returncode != 2 or not re.search(expected, first):
            failures.append(f"{f.name}: exit {res.returncode}, stderr {res.stderr.strip()[-600:]!r}")
        leaked = [s for s in SECRETS.get(f.name, []) if s in res.stderr + res.stdout]
        if leaked:
            failures.append(f"{f.name}: the message shows {leaked}")
    slowest = max(results.items(), key=lambda kv: kv[1][1])
    print(
        f"\n{len(files)} bad params files refused in {total:.1f} s (two interpreters); slowest "
        f"{slowest[0].name} {slowest[1][1]:.2f} s"
    )
    assert not failures, "\n".join(failures)
    assert not watch.seen, f"postgres processes started under {home}: {watch.seen}"
    assert not (state / "clusters").exists() or not any((state / "clusters").iterdir())
    assert not out.exists(), "the report folder was made"
    assert not (data / "raw").exists(), "a run was begun"
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("run_id", ["..", ".", "../../x", "a/b", "/tmp/x", "-rf", "x..y"])
def test_report_refuses_a_bad_run_id_on_the_command_line(tmp_path, run_id):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pglab.report",
            "--params",
            "params/quick.yaml",
            "--out",
            str(tmp_path / "r"),
            f"--run-id={run_id}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "argument --run-id: expected letters, digits" in out.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("run_id", ["..", ".", "../../x", "a/b", "", "x" * 65])
def test_the_store_refuses_a_bad_run_id_itself(tmp_path, run_id):
    with pytest.raises(StoreError, match="expected letters, digits"):
        RunStore(run_id, root=tmp_path / "raw")
    with pytest.raises(StoreError, match="expected letters, digits"):
        begin_run("quick", run_id, root=tmp_path / "raw")
    assert not (tmp_path / "raw").exists() or not any((tmp_path / "raw").iterdir())


def test_the_store_refuses_a_bad_run_id_read_back_from_its_marker(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / ".current-quick").write_text("../../elsewhere\n")
    with pytest.raises(StoreError, match="'../../elsewhere': expected"):
        begin_run("quick", None, root=raw)
    assert begin_run("quick", "quick-1", root=raw) == "quick-1"


def test_a_full_disk_names_other_checkouts_clusters_and_frees_a_deleted_ones_first(tmp_path):
    """As root every checkout's clusters share /var/lib/pglab; one that is finished keeps its clusters until it is
    cleaned, and a deleted one's would only be swept once a server is placed, after the disk check."""
    home = TEST_HOME / "full-disk"
    shutil.rmtree(home, ignore_errors=True)
    # the other checkout outside this one (its own clusters are not "other"); its stand-ins beside ours
    machine, other_checkout = home / "machine", tmp_path / "other" / "pglab" / ".pglab" / "clusters"
    other_checkout.mkdir(parents=True)
    kept, orphan = machine / "0123456789abcdef", machine / "fedcba9876543210"
    for d, origin, size in ((kept, other_checkout, 3_000_000), (orphan, tmp_path / "deleted" / "clusters", 2_000_000)):
        (d / "pg18" / "data").mkdir(parents=True)
        (d / "ORIGIN").write_text(f"{origin}\n")
        (d / "pg18" / "data" / "base").write_bytes(os.urandom(size))
    env = os.environ | {
        "PGLAB_STATE_DIR": str(home / "state"),
        "PGLAB_DATA_DIR": str(home / "data"),
        "PGLAB_MACHINE_STATE_DIR": str(machine),
    }
    res, _ = _run_report(CORPUS / "ssb_sf_1000.yaml", env, home / "report")
    assert res.returncode == 2, res.stderr[-600:]
    first = res.stderr.strip().splitlines()[0]
    assert re.search(rf"ssb\.sf: {FITS}; other checkouts' clusters hold 3\.\d+ MB of that disk: ", first), first
    assert f"{kept} for {other_checkout} (3." in first
    assert "make clean` in a checkout frees its clusters" in first
    assert str(orphan) not in first
    assert kept.is_dir() and not orphan.exists()  # the deleted checkout's were freed, the living one's kept

"""`python -m pglab derive` (issue 14): every derived table of a quick run again from data/raw/<run>/ alone,
byte for byte what the notebooks wrote, with no PostgreSQL started; the run's raw archive round trip
(archive -> raw folder removed -> `make derive` unpacks it -> the same tables); clear errors.

The run is the session's quick pass (the quick_pass fixture of tests/conftest.py, which test_report checks)."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT

from pglab import derive as derive_run
from pglab import studies
from pglab.core import derived, raw_archive, raw_frames
from pglab.core.servers.servers import NO_SERVERS_ENV, Server, ServersForbidden
from pglab.studies.base import Study

PROFILE = "quick"


@pytest.fixture(scope="module")
def quick(quick_pass):
    """(data folder, run id) of a complete quick run, its tables all of that run and its raw folder holding the
    records derive reads."""
    data, run = quick_pass.require().data, quick_pass.run_id
    manifest = json.loads((data / "derived" / PROFILE / "MANIFEST.json").read_text())
    assert {e.get("run_id") for e in manifest.values()} == {run}
    assert (data / "raw" / run / "environment" / "environment_servers.json").is_file()
    return data, run


def _postgres() -> dict[int, bytes]:
    """Every process whose program is a postgres binary (a postmaster: its children rename themselves)."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"postgres"):
                out[int(proc.name)] = b" ".join(args)
    return out


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _derive(args: list[str], data: Path, marker: str, cmd: list[str] | None = None) -> tuple:
    """Run derive (or `cmd`) while /proc is watched: (result, seconds, postmasters started by it)."""
    before = _postgres()
    seen: dict[int, bytes] = {}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.update({p: c for p, c in _postgres().items() if p not in before and marker.encode() in _environ(p)})
            time.sleep(0.02)

    t = threading.Thread(target=watch)
    t.start()
    env = os.environ | {
        "PGLAB_DATA_DIR": str(data),
        "PGLAB_STATE_DIR": str(data.parent / "derive-state"),
        "PGLAB_DERIVE_TEST": marker,
    }
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            cmd or [sys.executable, "-m", "pglab", "derive", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        took = time.monotonic() - t0
        stop.set()
        t.join()
    seen.update({p: c for p, c in _postgres().items() if p not in before and marker.encode() in _environ(p)})
    return res, took, [c.decode(errors="replace") for c in seen.values()]


def _tables_of(folder: Path, run: str) -> list[str]:
    m = json.loads((folder / "MANIFEST.json").read_text())
    return sorted(n for n, e in m.items() if e.get("run_id") == run)


def test_derive_reproduces_every_table_byte_for_byte_without_a_server(quick, tmp_path):
    data, run = quick
    want = data / "derived" / PROFILE
    out = tmp_path / "derived"
    res, took, started = _derive(["--run-id", run, "--out", str(out), "--check", str(want)], data, uuid.uuid4().hex)
    assert res.returncode == 0, res.stdout + res.stderr
    assert started == [], f"derive started PostgreSQL: {started}"
    written = _tables_of(want, run)
    got = derive_run.compare(out, want, run)
    assert got["different"] == [] and got["missing"] == [] and got["extra"] == [], got
    assert got["identical"] == written and len(written) > 90, got
    for name in written:  # the check above compares these bytes; said once more, plainly
        assert (out / name).read_bytes() == (want / name).read_bytes(), name
    print(f"derive: {len(got['identical'])} of {len(written)} tables byte-identical in {took:.1f} s")


def test_derive_takes_nothing_from_the_machine_it_runs_on(quick, tmp_path, monkeypatch):
    """Another core count (the ceilings, the worker counts) changes no table: the run's own is recorded."""
    data, run = quick
    monkeypatch.setattr(os, "cpu_count", lambda: 97)
    monkeypatch.setenv(NO_SERVERS_ENV, "a test")
    monkeypatch.setenv(derived.RUN_ID_ENV, run)  # write_all sets it: put back after the test
    store = derive_run.open_run(run, data / "raw")
    tables = derive_run.derive_all(store, derive_run.run_params(store))
    derive_run.write_all(tables, run, tmp_path / "other-machine")
    got = derive_run.compare(tmp_path / "other-machine", data / "derived" / PROFILE, run)
    assert not (got["different"] or got["missing"] or got["extra"]), got


def test_params_json_validates_back_in_order(quick):
    data, run = quick
    store = derive_run.open_run(run, data / "raw")
    recorded = json.loads((data / "raw" / run / "params.json").read_text())
    again = derive_run.run_params(store).model_dump(mode="json", exclude={"servers"})
    assert json.dumps({"file": recorded["file"]} | again) == json.dumps(recorded)


def test_every_table_is_registered_and_each_stage_writes_its_own(quick):
    data, run = quick
    written = {n.removesuffix(".csv") for n in _tables_of(data / "derived" / PROFILE, run)}
    registered = studies.every_table()
    assert len(registered) == len(set(registered))
    assert written <= set(registered), sorted(written - set(registered))
    store = derive_run.open_run(run, data / "raw")
    params = derive_run.run_params(store)
    assert params.profile == PROFILE
    for study in studies.STUDIES:
        tables = study.derive(store, params)
        assert set(tables) <= set(study.tables)
        assert all(t.startswith(study.name.split("_")[0]) for t in tables), study.name
        if isinstance(study, Study):  # each study's measurements in the one shared shape (stages have none)
            m = tables[f"{study.name}_measurements"]
            assert m.columns[:8] == ["run", "server", "study", "condition", "round", "metric", "value", "unit"]
            assert set(m["study"]) == {study.name} and set(m["run"]) == {run} and m.height > 0


@pytest.fixture(scope="module")
def archived(quick, tmp_path_factory):
    """(data folder, archive path, archive bytes): the quick run's raw folder copied and archived by
    `pglab derive --archive`, once for the tests below."""
    data, run = quick
    mine = tmp_path_factory.mktemp("archived") / "data"
    shutil.copytree(data / "raw" / run, mine / "raw" / run, ignore=shutil.ignore_patterns("derived-work"))
    arch = subprocess.run(
        [sys.executable, "-m", "pglab", "derive", "--archive", run],
        cwd=ROOT,
        env=os.environ | {"PGLAB_DATA_DIR": str(mine)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert arch.returncode == 0, arch.stdout + arch.stderr
    path = mine / "raw-archive" / f"{run}.tar.xz"
    assert path.is_file() and f"{path.stat().st_size:,} bytes" in arch.stdout
    return mine, path, path.read_bytes()


def test_archive_round_trip_through_make_derive(quick, archived):
    data, run = quick
    mine, path, first = archived
    print(f"archive of {run}: {len(first):,} bytes ({len(first) / 2**20:.2f} MiB)")
    original = {p.relative_to(mine / "raw" / run): p.read_bytes() for p in raw_archive.members(mine / "raw" / run)}
    shutil.rmtree(mine / "raw" / run)
    out = mine.parent / "from-archive"
    res, _, started = _derive(
        [], mine, uuid.uuid4().hex, cmd=["make", "--no-print-directory", "derive", f"RUN_ID={run}", f"OUT={out}"]
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "unpacking" in res.stdout and started == []
    back = {p.relative_to(mine / "raw" / run): p.read_bytes() for p in raw_archive.members(mine / "raw" / run)}
    assert back == original
    got = derive_run.compare(out, data / "derived" / PROFILE, run)
    assert got["identical"] and not (got["different"] or got["missing"] or got["extra"]), got


def test_archive_over_the_limit_is_refused_unless_forced_and_is_deterministic(quick, archived, tmp_path, monkeypatch):
    data, run = quick
    monkeypatch.setattr(raw_archive, "LIMIT_BYTES", 1000)
    target = tmp_path / "a.tar.xz"
    with pytest.raises(raw_archive.ArchiveError, match="over the limit"):
        raw_archive.create(run, raw_root=data / "raw", out=target)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    raw_archive.create(run, force=True, raw_root=data / "raw", out=target)
    assert target.stat().st_size > 1000
    # a second archive of the same run, from another folder: the same bytes as the first (`derive --archive`)
    assert target.read_bytes() == archived[2], "the archive is not deterministic"


def test_clear_errors(tmp_path):
    data = tmp_path / "data"
    res, _, _ = _derive(["--run-id", "no-such-run"], data, uuid.uuid4().hex)
    assert res.returncode == 2 and "no run no-such-run" in res.stderr
    assert str(Path("raw") / "no-such-run") in res.stderr and "raw-archive" in res.stderr
    half = data / "raw" / "half-run"
    half.mkdir(parents=True)
    (half / "params.json").write_text("{}")
    res, _, _ = _derive(["--run-id", "half-run"], data, uuid.uuid4().hex)
    assert res.returncode == 2 and "run half-run is incomplete" in res.stderr and "no COMPLETE" in res.stderr
    assert str(half) in res.stderr or "half-run" in res.stderr
    (half / "COMPLETE").write_text("")
    (half / "environment.json").write_text("{}")
    res, _, _ = _derive(["--run-id", "half-run"], data, uuid.uuid4().hex)
    assert res.returncode == 2 and "recorded by a kit older than `pglab derive`" in res.stderr
    res, _, _ = _derive(["--run-id", "../x"], data, uuid.uuid4().hex)
    assert res.returncode == 2 and "--run-id" in res.stderr
    res = subprocess.run(["make", "--no-print-directory", "derive"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode != 0 and "RUN_ID=<run id> is required" in res.stderr


def test_no_server_may_start_or_be_connected_to_while_forbidden(monkeypatch):
    monkeypatch.setenv(NO_SERVERS_ENV, "a test")
    with pytest.raises(ServersForbidden, match="refusing to start x"):
        Server(name="x").start()
    with pytest.raises(ServersForbidden, match="refusing to connect to x"):
        Server(name="x").connect()


def test_raw_frames_keep_types_and_values(tmp_path):
    from pglab.core.store import RunStore

    df = pl.DataFrame({"a": [1, None], "b": [0.1, 1 / 3], "c": [None, None], "d": ["x", None], "e": [True, False]})
    store = RunStore("frames", root=tmp_path)
    kept = raw_frames.keep(store, "t/frame.json", df)
    assert kept.equals(df) and kept.schema == df.schema
    # the first record of a run is kept
    assert raw_frames.keep(store, "t/frame.json", df.head(1)).equals(df)


def test_compare_ignores_manifest_keys_an_older_run_lacks(tmp_path):
    """A run written before the manifest kept column types re-derives as identical when its tables are; a
    changed value or a changed recorded type still differs."""
    got, want = tmp_path / "got", tmp_path / "want"
    for d in (got, want):
        d.mkdir()
        (d / "t.csv").write_text("x\n1\n")
    entry = {"sha256": "s", "rows": 1, "columns": ["x"], "run_id": "r1"}
    (want / derived.MANIFEST).write_text(json.dumps({"t.csv": entry}))
    (got / derived.MANIFEST).write_text(json.dumps({"t.csv": entry | {"types": {"x": "Int64"}}}))
    assert derive_run.compare(got, want, "r1")["identical"] == ["t.csv"]
    (want / derived.MANIFEST).write_text(json.dumps({"t.csv": entry | {"types": {"x": "String"}}}))
    assert derive_run.compare(got, want, "r1")["different"] == ["t.csv"]
    (want / derived.MANIFEST).write_text(json.dumps({"t.csv": entry}))
    (got / "t.csv").write_text("x\n2\n")
    assert derive_run.compare(got, want, "r1")["different"] == ["t.csv"]

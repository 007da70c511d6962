"""A run's derived tables replace the profile's folder only as a whole, once the run has succeeded: a
failed run leaves the previous tables untouched, never a mix of two runs."""

import json
import os
import subprocess
import sys

import polars as pl
import pytest

from pglab.core import derived


def _manifest(d):
    return json.loads((d / derived.MANIFEST).read_text())


def test_a_failed_run_leaves_the_previous_tables_and_a_good_one_replaces_them(tmp_path, monkeypatch):
    final = tmp_path / "derived"
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-1")
    derived.write_table(pl.DataFrame({"x": [1, 2]}), "a", "p", root=final)
    derived.write_table(pl.DataFrame({"x": [3]}), "b", "p", root=final)
    before = {f.name: f.read_bytes() for f in (final / "p").iterdir()}
    assert {e["run_id"] for e in _manifest(final / "p").values()} == {"run-1"}

    # run 2 rewrites a, then fails before b: nothing of it may show
    work = tmp_path / "raw" / "run-2" / "derived-work"
    derived.stage("p", work, final)
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-2")
    derived.write_table(pl.DataFrame({"x": [9, 9, 9]}), "a", "p", root=work)
    assert {f.name: f.read_bytes() for f in (final / "p").iterdir()} == before

    # resumed, it keeps its working copy, completes and is published as a whole
    derived.stage("p", work, final)
    assert derived.read_table("a", "p", root=work)["x"].to_list() == [9, 9, 9]
    derived.write_table(pl.DataFrame({"x": [8]}), "b", "p", root=work)
    derived.publish("p", work, final)
    m = _manifest(final / "p")
    assert {n: e["run_id"] for n, e in m.items()} == {"a.csv": "run-2", "b.csv": "run-2"}
    # and the kit revision that derived them (a commit, +dirty when the checkout had changes)
    from pglab.core.provenance import git_revision

    assert {e["derived_by"] for e in m.values()} == {git_revision()} and git_revision() != "unknown"
    assert derived.verify("p", final) == []
    assert not work.joinpath("p").exists() and not (final / ".p.old").exists()


def test_a_table_not_rewritten_keeps_the_run_that_wrote_it(tmp_path, monkeypatch):
    final = tmp_path / "derived"
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-1")
    derived.write_table(pl.DataFrame({"x": [1]}), "a", "p", root=final)
    derived.write_table(pl.DataFrame({"x": [2]}), "b", "p", root=final)
    work = tmp_path / "work"
    derived.stage("p", work, final)
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-2")  # a partial re-run (ONLY=50) rewrites a alone
    derived.write_table(pl.DataFrame({"x": [5]}), "a", "p", root=work)
    derived.publish("p", work, final)
    assert {n: e["run_id"] for n, e in _manifest(final / "p").items()} == {"a.csv": "run-2", "b.csv": "run-1"}


def test_a_publish_killed_between_its_renames_is_recovered(tmp_path):
    final = tmp_path / "derived"
    derived.write_table(pl.DataFrame({"x": [1]}), "a", "p", root=final)
    work = tmp_path / "work"
    derived.stage("p", work, final)
    # the kill: the old folder moved aside, the new one not yet in
    (final / "p").rename(final / ".p.old")
    derived.recover("p", final)
    assert derived.read_table("a", "p", root=final)["x"].to_list() == [1]
    assert not (final / ".p.old").exists()


def test_the_environment_points_reads_and_writes_at_the_working_copy(tmp_path):
    code = (
        "import polars as pl; from pglab.core import derived, paths; "
        "derived.write_table(pl.DataFrame({'x': [1]}), 't', 'p'); print(paths.derived_dir())"
    )
    env = {"PGLAB_DERIVED_DIR": str(tmp_path / "work"), "PGLAB_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "work")
    assert (tmp_path / "work" / "p" / "t.csv").exists() and not (tmp_path / "data" / "derived").exists()


def test_column_types_are_kept_in_the_manifest_and_restored_on_reading(tmp_path):
    """A CSV keeps no types: version names "15", a float column of whole numbers and an all-missing string
    column would read back as whatever inference guesses. The manifest records them; read_table restores them."""
    df = pl.DataFrame(
        {
            "server": ["15", "18"],
            "ms": [2.0, 3.0],
            "note": pl.Series([None, None], dtype=pl.String),
            "n": [1, 2],
            "ok": [True, False],
        }
    )
    derived.write_table(df, "t", "p", root=tmp_path)
    entry = _manifest(tmp_path / "p")["t.csv"]
    assert entry["types"] == {"server": "String", "ms": "Float64", "note": "String", "n": "Int64", "ok": "Boolean"}
    back = derived.read_table("t", "p", root=tmp_path)
    assert back.schema == df.schema and back.equals(df.sort(df.columns, nulls_last=True))
    guessed = pl.read_csv(tmp_path / "p" / "t.csv")
    assert guessed.schema["server"] == pl.Int64  # what reading without the manifest gives: the test can fail


def _set_format(d, table, fmt):
    m = _manifest(d)
    if fmt is None:
        del m[table]["format"]  # as a pglab before the format number wrote it
    else:
        m[table]["format"] = fmt
    (d / derived.MANIFEST).write_text(json.dumps(m))


def test_a_folder_derived_by_an_older_pglab_is_refused_until_derived_again(tmp_path, monkeypatch):
    """One table without the current format number makes the whole folder unreadable, with the command that makes
    it readable (the run the manifest names); a run's working copy leaves such tables out, so the folder it
    publishes is of the current format."""
    final = tmp_path / "derived"
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-1")
    derived.write_table(pl.DataFrame({"x": [1]}), "a", "p", root=final)
    derived.write_table(pl.DataFrame({"x": [2]}), "b", "p", root=final)
    assert {e["format"] for e in _manifest(final / "p").values()} == {derived.FORMAT}
    _set_format(final / "p", "a.csv", None)
    for name in ("a", "b"):
        with pytest.raises(derived.FormatError) as e:
            derived.read_table(name, "p", root=final)
        assert str(e.value) == (
            f"{final / 'p'} was derived by an older pglab (format 0); re-derive it: make derive RUN_ID=run-1"
        )
    m = _manifest(final / "p")
    del m["a.csv"]["run_id"]
    (final / "p" / derived.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(derived.FormatError, match="make derive RUN_ID=<the run that measured it>"):
        derived.read_table("b", "p", root=final)

    work = tmp_path / "work"
    derived.stage("p", work, final)
    assert sorted(_manifest(work / "p")) == ["b.csv"] and not (work / "p" / "a.csv").exists()
    monkeypatch.setenv(derived.RUN_ID_ENV, "run-2")
    derived.write_table(pl.DataFrame({"x": [3]}), "a", "p", root=work)
    derived.publish("p", work, final)
    assert derived.read_table("a", "p", root=final)["x"].to_list() == [3] and derived.verify("p", final) == []


def test_a_folder_derived_by_a_newer_pglab_is_refused(tmp_path):
    final = tmp_path / "derived"
    derived.write_table(pl.DataFrame({"x": [1]}), "a", "p", root=final)
    _set_format(final / "p", "a.csv", derived.FORMAT + 1)
    with pytest.raises(derived.FormatError, match=f"newer pglab \\(format {derived.FORMAT + 1}\\)"):
        derived.read_table("a", "p", root=final)
    with pytest.raises(derived.FormatError):  # nor are its tables dropped from a working copy
        derived.stage("p", tmp_path / "work", final)
    assert (final / "p" / "a.csv").exists()


def test_the_committed_reference_is_of_the_current_format():
    from conftest import ROOT

    assert {e.get("format") for e in _manifest(ROOT / "data" / "derived" / "default").values()} == {derived.FORMAT}


def test_floats_are_written_to_twelve_significant_digits_before_sorting(tmp_path):
    """Two values that differ only past the 12th digit (as numpy's log/exp on two CPUs may) are written alike,
    and sort alike."""
    from pglab.core import derived

    a = pl.DataFrame({"k": ["x", "y"], "v": [0.9127166289887823, 1.5]})
    b = pl.DataFrame({"k": ["x", "y"], "v": [0.9127166289887821, 1.5]})
    pa = derived.write_table(a, "t", "one", root=tmp_path)
    pb = derived.write_table(b, "t", "two", root=tmp_path)
    assert pa.read_bytes() == pb.read_bytes() == b"k,v\nx,0.912716628989\ny,1.5\n"


def test_a_write_that_fails_leaves_no_staged_file_and_no_table(tmp_path):
    """Tables of one write go in together: one that cannot be written (here its staging file's name is taken by a
    folder) leaves the folder as it was, without the staged files of the tables before it."""
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / f"b.tmp{os.getpid()}").mkdir()
    with pytest.raises(OSError):
        derived.write({"a": pl.DataFrame({"x": [1]}), "b": pl.DataFrame({"y": [2]})}, "p", root=tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == [f"b.tmp{os.getpid()}"]
    derived.write({"a": pl.DataFrame({"x": [1]})}, "p", root=tmp_path)
    assert derived.verify("p", root=tmp_path) == []


def test_derive_export_and_publish_without_a_run_list_the_runs_and_exit_2(tmp_path, monkeypatch, capsys):
    """`make derive`, `make export`, `make publish` without RUN_ID: every run there is (complete folders of
    data/raw/, archives), by profile and oldest first, exit 2; a run cut short (no COMPLETE) is not offered."""
    from pglab import derive
    from pglab.results.__main__ import main as results

    data = tmp_path / "data"
    monkeypatch.setenv("PGLAB_DATA_DIR", str(data))
    for run, complete in (("quick-20261201-100000", True), ("quick-20261130-090000", True), ("x-1", False)):
        (data / "raw" / run).mkdir(parents=True)
        if complete:
            (data / "raw" / run / "COMPLETE").write_text("done\n")
    (data / "raw-archive").mkdir()
    (data / "raw-archive" / "default-20261127-105829.tar.xz").write_bytes(b"")
    runs = derived.runs()
    assert runs.rows() == [
        ("default-20261127-105829", "default", "archive"),
        ("quick-20261130-090000", "quick", "raw"),
        ("quick-20261201-100000", "quick", "raw"),
    ]
    listing = "  default: default-20261127-105829\n  quick: quick-20261130-090000, quick-20261201-100000"
    for command in (lambda: derive.main([]), lambda: results(["export"]), lambda: results(["publish"])):
        assert command() == 2
        err = capsys.readouterr().err
        assert "RUN_ID=" in err and listing in err and "x-1" not in err

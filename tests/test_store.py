"""The raw store keeps every measurement, survives a crash at any point and resumes a run."""

import json
import signal
import subprocess
import sys
import textwrap
import time

import polars as pl
import pytest

from pglab.core import derived
from pglab.core.store import RunStore, StoreError, begin_run, finish_run


def test_record_then_reopen_sees_what_was_recorded(tmp_path):
    s = RunStore("r1", root=tmp_path)
    s.record("pg18", "ssb", "serial", "q1.1", 0, 1.5, "s", warmup=True)
    s.record("pg18", "ssb", "serial", "q1.1", 0, 1.2, "s", plan_fingerprint="abc")
    again = RunStore("r1", root=tmp_path)
    assert again.done("pg18", "ssb", "serial", "q1.1", 0, warmup=True)
    assert again.done("pg18", "ssb", "serial", "q1.1", 0)
    assert not again.done("pg18", "ssb", "serial", "q1.1", 1)
    df = again.records("ssb")
    assert df.height == 2 and set(df["warmup"]) == {True, False}
    assert df.filter(~pl.col("warmup"))["plan_fingerprint"][0] == "abc"
    with pytest.raises(StoreError, match="already recorded"):
        again.record("pg18", "ssb", "serial", "q1.1", 0, 9.9, "s")


def test_a_line_cut_short_by_a_crash_is_dropped_and_the_rest_kept(tmp_path):
    s = RunStore("r2", root=tmp_path)
    s.record("a", "e", "c", "i", 0, 1, "ms")
    with open(s.file, "a") as f:
        f.write('{"server": "a", "experiment": "e", "cond')  # the crash
    again = RunStore("r2", root=tmp_path)
    assert again.done("a", "e", "c", "i", 0) and not again.done("a", "e", "c", "i", 1)
    again.record("a", "e", "c", "i", 1, 2, "ms")
    assert [json.loads(x)["value"] for x in again.file.read_text().splitlines()] == [1, 2]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pglab.core.store import RunStore
    s = RunStore("interrupted", root=Path(sys.argv[1]))
    for rep in range(40):
        for cond in ("a", "b"):
            if s.done("srv", "exp", cond, "item", rep):
                continue
            s.record("srv", "exp", cond, "item", rep, rep * 10, "ms")
            print(cond, rep, flush=True)
            time.sleep(float(sys.argv[2]))
    """
)


def test_an_interrupted_run_resumes_without_rewriting_anything(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "0.02"], stdout=subprocess.PIPE, text=True)
    for _ in range(15):
        proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = (tmp_path / "interrupted" / "measurements.jsonl").read_bytes()
    n_before = len(before.splitlines())
    assert 15 <= n_before < 80
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "0"], check=True, capture_output=True)
    assert time.monotonic() - t0 < 30
    after = (tmp_path / "interrupted" / "measurements.jsonl").read_bytes()
    assert after.startswith(before)  # nothing recorded was rewritten
    recs = [json.loads(x) for x in after.splitlines()]
    keys = [(r["condition"], r["repetition"]) for r in recs]
    assert len(keys) == len(set(keys)) == 80


def test_run_ids_resume_an_unfinished_run_and_start_anew_after_finish(tmp_path):
    first = begin_run("quick", root=tmp_path)
    assert begin_run("quick", root=tmp_path) == first  # interrupted: resumed
    assert begin_run("other", root=tmp_path) != first
    finish_run("quick", first, root=tmp_path)
    assert (tmp_path / first / "COMPLETE").exists()
    time.sleep(1.1)
    assert begin_run("quick", root=tmp_path) != first
    assert begin_run("quick", "chosen-id", root=tmp_path) == "chosen-id"
    # naming a finished run (to re-derive its tables) does not make it the one to resume
    finish_run("quick", "chosen-id", root=tmp_path)
    assert begin_run("quick", first, root=tmp_path) == first
    assert begin_run("quick", root=tmp_path) not in (first, "chosen-id")


def test_artifacts_are_written_once_and_stay_inside_the_run(tmp_path):
    s = RunStore("r3", root=tmp_path)
    p = s.save_text("plans/q1.json", "first")
    s.save_text("plans/q1.json", "second")
    assert p.read_text() == "first"
    with pytest.raises(StoreError):
        s.save_text("../escape.txt", "x")


def test_derived_tables_are_deterministic_and_checksummed(tmp_path):
    df = pl.DataFrame({"server": ["pg18", "pg15", "pg18"], "item": ["b", "a", "a"], "value": [3.0, 1.0, 2.0]})
    p = derived.write_table(df, "t", "quick", root=tmp_path)
    first = p.read_bytes()
    derived.write_table(df.reverse(), "t", "quick", root=tmp_path)
    assert p.read_bytes() == first
    assert first.decode().splitlines()[0] == "server,item,value"
    assert first.decode().splitlines()[1].startswith("pg15,a")
    assert derived.verify("quick", root=tmp_path) == []
    p.write_text(p.read_text().replace("3.0", "4.0"))
    assert derived.verify("quick", root=tmp_path) == ["t.csv"]
    assert derived.manifest(tmp_path / "quick")["t.csv"]["rows"] == 3

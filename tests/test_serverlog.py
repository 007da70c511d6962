"""pglab.pgtools.serverlog reads what real servers write: auto_explain entries (text and JSON plans), errors with
their STATEMENT, in jsonlog, csvlog and the text log alike, across a rotation, never half an entry."""

import json
import time
import uuid

import pytest

from pglab.core.servers.cluster import Cluster
from pglab.pgtools import serverlog
from pglab.pgtools.serverlog import LogCursor

QUERY = "SELECT count(*) FROM generate_series(1, 1000) g"


@pytest.fixture(scope="module")
def logged(install):
    """A cluster logging to all three destinations, one session's auto_explain plans (text, then JSON),
    an error, and a rotation in between; returns the cluster and its cursor from before all that."""
    c = Cluster(install, name=f"serverlog-{install.name}")
    c.start({"shared_buffers": "128MB", "log_destination": "stderr,csvlog,jsonlog"})
    cursor = LogCursor(c.log_files)
    marker = f"pglab test marker {uuid.uuid4().hex}"
    with c.connect() as conn:
        conn.execute("LOAD 'auto_explain'")
        for k, v in {"log_min_duration": "0", "log_analyze": "on", "log_timing": "on"}.items():
            conn.execute(f"SET auto_explain.{k} = {v}")
        conn.execute(QUERY)
        _written(c, cursor)  # in the first file, before it is rotated away
        time.sleep(1.05)  # file names carry the second: a rotation within the same one reopens the file
        _rotate(c)
        conn.execute("SET auto_explain.log_format = json")
        conn.execute(QUERY)
        conn.execute("SET auto_explain.log_min_duration = -1")
        with pytest.raises(Exception, match="division by zero"):
            conn.execute("SELECT 1/0")
        conn.execute(f"DO $$BEGIN RAISE LOG '{marker}'; END$$")
    yield c, cursor, marker
    c.stop()


def _written(c, cursor):
    """Wait until the collector has written the session's plan so far."""
    cur = LogCursor(c.log_files, fmt="jsonlog")
    cur.start, cur.pos = dict(cursor.start), dict(cursor.start)
    for _ in cur.follow(lambda e: e.auto_explain is not None, timeout_s=20):  # returns once it is in
        pass


def _rotate(c):
    """Rotate and wait until the collector writes a new file. pg_rotate_logfile only signals the collector: until
    it has rotated, what the session logs next still goes to the old file (a busy CI machine once put every
    entry in one file)."""
    before = c.current_log_files()["jsonlog"]
    with c.connect() as other:  # (in this session auto_explain would log the call too)
        other.execute("SELECT pg_rotate_logfile()")
    deadline = time.monotonic() + 20
    while c.current_log_files().get("jsonlog") in (before, None):
        assert time.monotonic() < deadline, f"the collector did not rotate {before.name} in 20 s"
        time.sleep(0.01)


def _until_marker(c, cursor, marker, fmt):
    cur = LogCursor(c.log_files, fmt=fmt)
    cur.start, cur.pos = dict(cursor.start), dict(cursor.start)  # the same starting point for each format
    return list(cur.follow(lambda e: e.message == marker, timeout_s=20))


@pytest.mark.parametrize("fmt", ["jsonlog", "csvlog", "stderr"])
def test_auto_explain_entries_in_every_format(logged, fmt):
    c, cursor, marker = logged
    entries = _until_marker(c, cursor, marker, fmt)
    plans = [e.auto_explain for e in entries if e.auto_explain]
    assert [p.format for p in plans] == ["text", "json"]
    assert all(p.duration_ms > 0 for p in plans)
    text, js = plans
    assert text.plan.startswith("Query Text: SELECT count(*)") and "actual time=" in text.plan
    assert json.loads(js.plan)["Plan"]["Node Type"] == "Aggregate"
    for p in plans:  # both parse with the EXPLAIN parser, rows and times included
        nodes = p.parse().nodes
        assert nodes["node_type"].to_list() == ["Aggregate", "Function Scan"]
        assert nodes["actual_rows"].to_list() == [1, 1000]
        assert nodes["actual_total_ms"].is_not_null().all()
    err = [e for e in entries if e.severity == "ERROR"]
    assert len(err) == 1 and err[0].message == "division by zero" and err[0].statement == "SELECT 1/0"
    if fmt != "stderr":  # the text log's default prefix has no database or pid of the session's name
        assert {e.dbname for e in entries if e.auto_explain} == {"postgres"}


def test_formats_agree(logged):
    c, cursor, marker = logged
    by_fmt = {f: _until_marker(c, cursor, marker, f) for f in ("jsonlog", "csvlog", "stderr")}
    messages = {f: [e.message for e in es if e.auto_explain or e.severity == "ERROR"] for f, es in by_fmt.items()}
    assert messages["jsonlog"] == messages["csvlog"] == messages["stderr"]
    assert len({e.file for e in by_fmt["jsonlog"]}) == 2  # read across the rotation


def test_partial_record_waits_for_its_end(logged, tmp_path):
    c, cursor, marker = logged
    lines = [ln for p in c.log_files() if p.suffix == ".json" for ln in p.read_bytes().splitlines(keepends=True)]
    f = tmp_path / "postgresql-x.json"
    f.write_bytes(lines[0] + lines[1][:25])  # the collector has written half of the second line
    cur = LogCursor(lambda: [f])
    cur.start, cur.pos = {f: 0}, {f: 0}
    assert [e.message for e in cur.read()] == [json.loads(lines[0])["message"]]
    with open(f, "ab") as out:
        out.write(lines[1][25:])
    assert [e.message for e in cur.read()] == [json.loads(lines[1])["message"]]
    assert serverlog.detect_format(f) == "jsonlog" and cur.bytes_written() == len(lines[0]) + len(lines[1])


def test_the_cursor_reads_the_destination_the_server_writes_now(tmp_path):
    """A server switched to log_destination = stderr keeps its earlier jsonlog files in the folder: read by
    presence (jsonlog first) the cursor would follow a file that no longer grows and never see the marker (the
    auto_explain stage under the study's stderr logging waited wait_s per run); told what the server writes now
    (its current_logfiles: `Cluster.log_destinations`) it reads the text log. No server."""
    old = tmp_path / "postgresql-20260101-000000.json"
    old.write_text(json.dumps({"error_severity": "LOG", "message": "from before"}) + "\n")
    now = tmp_path / "postgresql-20260101-000001.log"
    now.write_text("2026-01-01 00:00:01.000 UTC [7] LOG:  database system is ready to accept connections\n")

    def files():
        return sorted(tmp_path.glob("postgresql-*"))

    marker = "pglab test marker stderr"
    by_presence = LogCursor(files)
    live = LogCursor(files, live=lambda: {"stderr"})
    with open(now, "a") as f:
        f.write("2026-01-01 00:00:02.000 UTC [8] LOG:  duration: 0.050 ms  plan:\n\tQuery Text: SELECT 1\n")
        f.write(f"2026-01-01 00:00:02.100 UTC [9] LOG:  {marker}\n")
    assert by_presence.format_of(by_presence.start) == "jsonlog"
    with pytest.raises(serverlog.LogTimeout):
        list(by_presence.follow(lambda e: e.message == marker, timeout_s=0.2))
    assert live.format_of(live.start) == "stderr"
    got = list(live.follow(lambda e: e.message == marker, timeout_s=5))
    assert [e.auto_explain.plan for e in got] == ["Query Text: SELECT 1"]
    # no destination recorded (a server that is not running): by presence, as before
    assert LogCursor(files, live=set).format_of(live.start) == "jsonlog"

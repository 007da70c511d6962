"""What the server did during a measurement: deltas of its cumulative statistics views between two snapshots.

    before = snapshot(conn)
    run_the_measurement()
    deltas(before, snapshot(conn))   # tidy rows: view, counter, delta; `checkpoint_in_run` says if one ran

Each version names its views differently: pg_stat_wal exists from 14, pg_stat_io from 16, and 17 moved the
checkpoint counters from pg_stat_bgwriter to pg_stat_checkpointer (with new names). A view or column a version
lacks is left out, never guessed. pg_stat_statements is read where the extension is installed in the database."""

from __future__ import annotations

import psycopg

# (view, SQL returning one row of numeric counters, the first major that has it)
_VIEWS = (
    (
        "database",
        "SELECT xact_commit, xact_rollback, blks_read, blks_hit, tup_returned, tup_fetched, tup_inserted, "
        "tup_updated, tup_deleted, temp_files, temp_bytes, deadlocks FROM pg_stat_database "
        "WHERE datname = current_database()",
        10,
    ),
    ("wal", "SELECT wal_records, wal_fpi, wal_bytes::bigint AS wal_bytes, wal_buffers_full FROM pg_stat_wal", 14),
    (
        "checkpointer",
        "SELECT num_timed AS checkpoints_timed, num_requested AS checkpoints_req, "
        "buffers_written AS buffers_checkpoint FROM pg_stat_checkpointer",
        17,
    ),
    ("checkpointer", "SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter", 10),
    ("bgwriter", "SELECT buffers_clean, maxwritten_clean, buffers_alloc FROM pg_stat_bgwriter", 10),
    (
        "io",
        "SELECT coalesce(sum(reads), 0)::bigint AS reads, coalesce(sum(writes), 0)::bigint AS writes, "
        "coalesce(sum(extends), 0)::bigint AS extends, coalesce(sum(hits), 0)::bigint AS hits, "
        "coalesce(sum(evictions), 0)::bigint AS evictions, coalesce(sum(fsyncs), 0)::bigint AS fsyncs "
        "FROM pg_stat_io",
        16,
    ),
    (
        "statements",
        "SELECT coalesce(sum(calls), 0)::bigint AS calls, "
        "coalesce(sum(total_exec_time), 0)::float8 AS total_exec_time_ms, "
        "coalesce(sum(shared_blks_read), 0)::bigint AS shared_blks_read FROM pg_stat_statements",
        13,
    ),
)


def _major(conn: psycopg.Connection) -> int:
    return conn.info.server_version // 10000


def _has_statements(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()[0] > 0


def snapshot(conn: psycopg.Connection) -> dict[str, dict[str, float]]:
    """Every counter this server's version has, by view; the checkpointer's from the view its version keeps them
    in. Statistics are read fresh (not from the transaction's snapshot of them)."""
    major, out = _major(conn), {}
    with_statements = _has_statements(conn)
    if major >= 15:  # a cached snapshot would repeat the first reading within a transaction
        conn.execute("SELECT pg_stat_clear_snapshot()")
    for view, sql, since in _VIEWS:
        if major < since or view in out or (view == "statements" and not with_statements):
            continue
        cur = conn.execute(sql)
        row = cur.fetchone()
        out[view] = {d.name: float(v) for d, v in zip(cur.description, row, strict=True) if v is not None}
    return out


def deltas(before: dict, after: dict) -> list[dict]:
    """Tidy rows (view, counter, delta) of what changed between two snapshots of one server."""
    return [
        {"view": view, "counter": k, "delta": after[view][k] - v}
        for view, counters in before.items()
        if view in after
        for k, v in counters.items()
        if k in after[view]
    ]


def checkpoint_in(before: dict, after: dict) -> bool:
    """Whether a checkpoint (timed or requested) completed between the two snapshots: a timed run it falls into
    measured the checkpoint's I/O too, and is flagged on its row."""
    b, a = before.get("checkpointer", {}), after.get("checkpointer", {})
    return any(a.get(k, 0) > b.get(k, 0) for k in ("checkpoints_timed", "checkpoints_req"))


def checkpoint_time(conn: psycopg.Connection) -> float | None:
    """When the server's latest checkpoint began (Unix seconds, whole: pg_control keeps a time_t), or None where
    pg_control_checkpoint() may not be read (a role without the privilege). Read before and after a run, it dates
    the run's last checkpoint: the counters say how many there were, this says when the last one started."""
    try:
        with conn.transaction():  # a refusal must not leave the caller's connection in a failed transaction
            row = conn.execute("SELECT extract(epoch FROM checkpoint_time)::float8 FROM pg_control_checkpoint()")
            return row.fetchone()[0]
    except psycopg.Error:
        return None

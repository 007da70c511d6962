"""What the studies do alike on a server before measuring: its preloaded libraries read, tables pg_prewarm'ed (the
statement timeout is set with the connection code, servers.db)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg


def libraries(value) -> list[str]:
    """The names in a shared_preload_libraries value (None or '' for none)."""
    return [x.strip() for x in str(value or "").split(",") if x.strip()]


def prewarm(
    connect: Callable[[], psycopg.Connection], query: str, args=None, wanted: bool = True
) -> tuple[int | None, str | None]:
    """pg_prewarm created where missing, then `query`, which returns the blocks it read: (blocks, None), or
    (None, the first line of the error); (0, None) when not `wanted` (the study's prewarm param is off)."""
    if not wanted:
        return 0, None
    try:
        with connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            return int(conn.execute(query, args).fetchone()[0] or 0), None
    except psycopg.Error as e:
        return None, str(e).strip().splitlines()[0]

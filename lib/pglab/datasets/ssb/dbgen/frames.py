"""dbgen's tables as polars frames, chunk by chunk (see counts for the chunking)."""

import numpy as np
import polars as pl

from . import dates, dimensions, lineorder
from .counts import CHUNK_ORDERS, CHUNK_ROWS, counts, expected_rows


def row_count(table: str, sf: float, exact: bool = True) -> int:
    if table == "lineorder" and exact:
        return lineorder_rows(sf)
    return expected_rows(table, sf)


def lineorder_rows(sf: float) -> int:
    """Exact lineorder rows, from the line-count draws alone."""
    c, step, total = counts(sf), 1 << 20, 0
    for first in range(0, c.orders, step):
        total += int(lineorder.line_counts(first, min(step, c.orders - first), c.date_rows).sum(dtype=np.int64))
    return total


def chunk_frame(table: str, sf: float, chunk: int, *, enums: bool, bigint_keys: bool) -> pl.DataFrame:
    c = counts(sf)
    if table == "date":
        return dates.date_frame()
    if table == "lineorder":
        first = chunk * CHUNK_ORDERS
        return lineorder.lineorder(first, min(CHUNK_ORDERS, c.orders - first), c, enums=enums, bigint_keys=bigint_keys)
    first = chunk * CHUNK_ROWS[table]
    n = min(CHUNK_ROWS[table], getattr(c, table) - first)
    if table == "part":
        return dimensions.part(first, n)
    return dimensions.company(table, first, n, c.supplier)

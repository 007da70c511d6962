"""dbgen's lineorder rows (build.c's SSB mk_order), in chunks of whole orders.

Order streams (date, customer, priority, line count) advance one draw per order, but start after the date
table has moved them on by one draw per date row (dbgen's date and order tables share a table number).
Line streams advance 7 draws per order, line l of an order using draw 7 * order + l.
"""

import numpy as np
import polars as pl

from ..lineorder import rows, sparse_order_key
from . import dists
from .stream import draws, mulmod, powers, start_of, uniform

MAX_LINES = 7


def line_counts(first: int, n: int, date_rows: int) -> np.ndarray:
    return uniform(draws("O_LCNT", date_rows + first, n), 1, MAX_LINES)


def lineorder(first: int, n: int, counts, *, enums: bool = False, bigint_keys: bool = False) -> pl.DataFrame:
    """Orders first .. first + n - 1 (0-based) and their lines; `counts` is a dbgen.Counts."""
    shift = counts.date_rows + first
    lines = line_counts(first, n, counts.date_rows)
    order_day = uniform(draws("O_ODATE", shift, n), 0, dists.ORDER_DAYS - 1)
    custkey = uniform(draws("O_CKEY", shift, n), 1, counts.customer)
    # multiples of 3 never order: dbgen steps up by one, or down where that would pass the last customer
    bad = custkey % 3 == 0
    custkey[bad] += np.where(custkey[bad] + 1 <= counts.customer, 1, -1).astype(custkey.dtype)
    priority = uniform(draws("O_PRIO", shift, n), 0, len(dists.ORDER_PRIORITIES) - 1, dtype=np.uint32)
    orderkey = sparse_order_key(np.arange(first + 1, first + n + 1, dtype=np.int64))

    order_start = np.cumsum(lines) - lines
    n_rows = int(lines.sum())
    linenumber = np.arange(n_rows, dtype=np.int32) - np.repeat(order_start, lines).astype(np.int32)
    # 16807^(7 * order + line) relative to the chunk's first order: one table for all line streams
    position = powers(MAX_LINES * n)[np.repeat(np.arange(0, MAX_LINES * n, MAX_LINES), lines) + linenumber]

    def line_draws(stream: str, low: int, high: int, dtype=np.int32) -> np.ndarray:
        return uniform(mulmod(position, start_of(stream, MAX_LINES * first)), low, high, dtype)

    line = {
        "partkey": line_draws("L_PKEY", 1, counts.line_parts),
        "suppkey": line_draws("L_SKEY", 1, counts.supplier),
        "quantity": line_draws("L_QTY", 1, 50),
        "discount": line_draws("L_DCNT", 0, 10),
        "tax": line_draws("L_TAX", 0, 8),
        "shipmode": line_draws("L_SMODE", 0, len(dists.SHIP_MODES) - 1, np.uint32),
        "commit_lag": line_draws("L_CDTE", *dists.COMMIT_LAG),
    }
    return rows(
        lines, orderkey if bigint_keys else orderkey.astype(np.int32), custkey, order_day, priority, line, enums
    )

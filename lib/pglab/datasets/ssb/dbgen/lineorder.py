"""dbgen's lineorder rows (build.c's SSB mk_order), in chunks of whole orders.

Order streams (date, customer, priority, line count) advance one draw per order, but start after the date
table has moved them on by one draw per date row (dbgen's date and order tables share a table number).
Line streams advance 7 draws per order, line l of an order using draw 7 * order + l.
"""

import numpy as np
import polars as pl

from . import dists
from .stream import draws, mulmod, powers, start_of, uniform

MAX_LINES = 7
ORDER_PRIORITY_ENUM = pl.Enum(dists.ORDER_PRIORITIES)
SHIP_MODE_ENUM = pl.Enum(dists.SHIP_MODES)


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
    number = np.arange(first + 1, first + n + 1, dtype=np.int64)
    orderkey = ((number >> 3) << 5) | (number & 7)  # dbgen's sparse keys: 8 used of every 32

    order_start = np.cumsum(lines) - lines
    n_rows = int(lines.sum())
    linenumber = np.arange(n_rows, dtype=np.int32) - np.repeat(order_start, lines).astype(np.int32)
    # 16807^(7 * order + line) relative to the chunk's first order: one table for all line streams
    position = powers(MAX_LINES * n)[np.repeat(np.arange(0, MAX_LINES * n, MAX_LINES), lines) + linenumber]
    linenumber += 1

    def line_draws(stream: str, low: int, high: int, dtype=np.int32) -> np.ndarray:
        return uniform(mulmod(position, start_of(stream, MAX_LINES * first)), low, high, dtype)

    partkey = line_draws("L_PKEY", 1, counts.line_parts)
    suppkey = line_draws("L_SKEY", 1, counts.supplier)
    quantity = line_draws("L_QTY", 1, 50)
    discount = line_draws("L_DCNT", 0, 10)
    tax = line_draws("L_TAX", 0, 8)
    commit_lag = line_draws("L_CDTE", *dists.COMMIT_LAG)
    shipmode = line_draws("L_SMODE", 0, len(dists.SHIP_MODES) - 1, np.uint32)

    price = 90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)  # RPRICE_BRIDGE, in cents
    extended = quantity * price
    revenue = extended * (100 - discount) // 100
    line_total = revenue * (100 + tax) // 100
    order_total = np.add.reduceat(line_total, order_start, dtype=np.int32) if n else line_total[:0]
    row_day = np.repeat(order_day, lines)
    datekey = dists.datekeys()
    return pl.DataFrame(
        {
            "lo_orderkey": np.repeat(orderkey if bigint_keys else orderkey.astype(np.int32), lines),
            "lo_linenumber": linenumber,
            "lo_custkey": np.repeat(custkey, lines),
            "lo_partkey": partkey,
            "lo_suppkey": suppkey,
            "lo_orderdate": datekey[row_day],
            "lo_orderpriority": _strings(np.repeat(priority, lines), ORDER_PRIORITY_ENUM, enums),
            "lo_shippriority": pl.repeat("0", n_rows, dtype=pl.String, eager=True),
            "lo_quantity": quantity,
            "lo_extendedprice": extended,
            "lo_ordertotalprice": np.repeat(order_total, lines),
            "lo_discount": discount,
            "lo_revenue": revenue,
            "lo_supplycost": 6 * price // 10,
            "lo_tax": tax,
            "lo_commitdate": datekey[row_day + commit_lag],
            "lo_shipmode": _strings(shipmode, SHIP_MODE_ENUM, enums),
        }
    )


def _strings(codes: np.ndarray, enum: pl.Enum, as_enum: bool) -> pl.Series:
    series = pl.Series(codes, dtype=pl.UInt32).cat.to(enum)
    return series if as_enum else series.cast(pl.String)

"""The lineorder fact table, generated order by order in fixed-size chunks of orders.

A chunk always holds whole orders (lo_ordertotalprice sums over an order's lines) and is generated from its
own random stream, so chunk k is the same whichever process makes it and in whatever order.
"""

import math

import numpy as np
import polars as pl

from . import dates, scale
from .rand import ChunkRandom
from .schema import BIGINT_ORDERKEY_SF
from .words import ORDER_PRIORITIES, SHIP_MODES

# Part of the generator's rules: changing it changes the rows (bump GENERATOR_VERSION).
CHUNK_ORDERS = 1 << 14

ORDER_PRIORITY_ENUM = pl.Enum(ORDER_PRIORITIES)
SHIP_MODE_ENUM = pl.Enum(SHIP_MODES)


def chunk_count(sf: float) -> int:
    return math.ceil(scale.order_count(sf) / CHUNK_ORDERS)


def _chunk_orders(sf: float, chunk: int) -> tuple[int, int]:
    """(index of the chunk's first order, number of orders in it); order indexes start at 0."""
    first = chunk * CHUNK_ORDERS
    return first, min(CHUNK_ORDERS, scale.order_count(sf) - first)


def _line_counts(rng: ChunkRandom, n_orders: int) -> np.ndarray:
    # Always the chunk's first draw, so row_count can replay it without generating the rest.
    return rng.ints(*scale.LINES_PER_ORDER, n_orders, dtype=np.int64)


def exact_row_count(sf: float, seed: int) -> int:
    """Number of lineorder rows the (sf, seed) data set has, found by drawing only the line counts."""
    total = 0
    for chunk in range(chunk_count(sf)):
        _, n_orders = _chunk_orders(sf, chunk)
        total += int(_line_counts(ChunkRandom(seed, "lineorder", chunk), n_orders).sum())
    return total


def sparse_order_key(order_number: np.ndarray) -> np.ndarray:
    """TPC-H sparse keys: order numbers 1, 2, ... map to 1-7, 32-39, 64-71, ... (8 used of every 32)."""
    return ((order_number >> 3) << 5) | (order_number & 7)


def retail_price(partkey: np.ndarray) -> np.ndarray:
    """TPC-H part retail price in cents."""
    return 90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)


def lineorder_chunk(sf: float, seed: int, chunk: int, *, enums: bool = False) -> pl.DataFrame:
    """Rows of one chunk of orders, columns in schema order.

    String columns are polars Enums when `enums` is set (cheaper to build), else String.
    """
    first, n_orders = _chunk_orders(sf, chunk)
    rng = ChunkRandom(seed, "lineorder", chunk)
    lines = _line_counts(rng, n_orders)

    # Order-level draws, one per order.
    ordering = rng.ints(0, scale.ordering_customer_count(sf) - 1, n_orders)
    custkey = ordering // 2 * 3 + ordering % 2 + 1  # k-th custkey not divisible by 3: 1, 2, 4, 5, 7, ...
    order_day = rng.ints(0, dates.ORDER_DAYS - 1, n_orders)
    priority = rng.ints(0, len(ORDER_PRIORITIES) - 1, n_orders, dtype=np.uint32)
    key_dtype = np.int64 if sf >= BIGINT_ORDERKEY_SF else np.int32
    orderkey = sparse_order_key(np.arange(first + 1, first + n_orders + 1, dtype=np.int64)).astype(key_dtype)

    # Line-level draws, in this order.
    n_rows = int(lines.sum())
    line = {
        "partkey": rng.ints(1, scale.part_count(sf), n_rows),
        "suppkey": rng.ints(1, scale.supplier_count(sf), n_rows),
        "quantity": rng.ints(1, 50, n_rows),
        "discount": rng.ints(0, 10, n_rows),
        "tax": rng.ints(0, 8, n_rows),
        "shipmode": rng.ints(0, len(SHIP_MODES) - 1, n_rows, dtype=np.uint32),
        "commit_lag": rng.ints(*dates.COMMIT_LAG_DAYS, n_rows),
    }
    return rows(lines, orderkey, custkey, order_day, priority, line, enums)


def rows(lines, orderkey, custkey, order_day, priority, line: dict, enums: bool) -> pl.DataFrame:
    """Whole orders' rows, columns in schema order (dbgen's lineorder makes its own with it too): an order's key,
    customer, day (since 1992-01-01) and priority (an ORDER_PRIORITIES index) are repeated over its `lines`;
    `line` holds the arrays of one value per line. String columns are polars Enums when `enums` is set."""
    n_rows = int(lines.sum())
    order_start = np.cumsum(lines) - lines
    linenumber = (np.arange(n_rows, dtype=np.int32) - np.repeat(order_start, lines).astype(np.int32)) + 1
    row_order_day = np.repeat(order_day, lines)

    # Prices in cents with integer division, as dbgen does (int32 is wide enough: max ~1.2e9 before / 100).
    price = retail_price(line["partkey"])
    extended = line["quantity"] * price
    revenue = extended * (100 - line["discount"]) // 100
    line_total = revenue * (100 + line["tax"]) // 100
    order_total = np.add.reduceat(line_total, order_start, dtype=np.int32) if len(lines) else line_total[:0]
    datekey = dates.datekeys()
    return pl.DataFrame(
        {
            "lo_orderkey": np.repeat(orderkey, lines),
            "lo_linenumber": linenumber,
            "lo_custkey": np.repeat(custkey, lines),
            "lo_partkey": line["partkey"],
            "lo_suppkey": line["suppkey"],
            "lo_orderdate": datekey[row_order_day],
            "lo_orderpriority": _strings(np.repeat(priority, lines), ORDER_PRIORITY_ENUM, enums),
            "lo_shippriority": pl.repeat("0", n_rows, dtype=pl.String, eager=True),
            "lo_quantity": line["quantity"],
            "lo_extendedprice": extended,
            "lo_ordertotalprice": np.repeat(order_total, lines),
            "lo_discount": line["discount"],
            "lo_revenue": revenue,
            "lo_supplycost": 6 * price // 10,
            "lo_tax": line["tax"],
            "lo_commitdate": datekey[row_order_day + line["commit_lag"]],
            "lo_shipmode": _strings(line["shipmode"], SHIP_MODE_ENUM, enums),
        }
    )


def _strings(codes: np.ndarray, enum: pl.Enum, as_enum: bool) -> pl.Series:
    series = pl.Series(codes, dtype=pl.UInt32).cat.to(enum)
    return series if as_enum else series.cast(pl.String)

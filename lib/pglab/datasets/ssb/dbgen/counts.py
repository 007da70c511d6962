"""dbgen's table sizes and the chunking of its tables: plain arithmetic, no numpy (the CLI needs these
before it loads numpy and polars)."""

import math
from dataclasses import dataclass
from functools import cache

CALENDAR_DAYS = 2557
CHUNK_ROWS = {"part": 1 << 12, "supplier": 1 << 16, "customer": 1 << 16}
CHUNK_ORDERS = 1 << 15  # any size gives the same rows: it only sets the block size


@dataclass(frozen=True)
class Counts:
    part: int
    supplier: int
    customer: int
    orders: int
    date_rows: int  # the date rows dbgen makes, which move the order streams on
    line_parts: int  # lineorder's part keys are 1 .. line_parts


@cache
def counts(sf: float) -> Counts:
    """dbgen's table sizes at SF (sf > 0, checked by the caller; from 1 on it must be whole)."""
    if sf >= 1:
        if sf != int(sf):
            raise ValueError(
                f"the dbgen flavor needs a whole scale factor from 1 on (dbgen itself truncates "
                f"{sf:g} to {int(sf)}); got {sf:g}: use a whole SF, or flavor 'spec'"
            )
        scale = int(sf)
        # the same double arithmetic as dbgen: log2 for the part table, the natural log for lineorder's keys
        parts = 200_000 * int(math.floor(1 + math.log(float(scale)) / math.log(2)))
        line_parts = int(200_000 * (math.floor(math.log(float(scale))) + 1))
        return Counts(parts, 2_000 * scale, 30_000 * scale, 1_500_000 * scale, CALENDAR_DAYS, line_parts)

    def base(rows: int) -> int:
        return max(1, int(rows * sf))  # dbgen: (long)(base * SF), at least 1

    return Counts(base(200_000), base(2_000), base(30_000), base(1_500_000), base(CALENDAR_DAYS), base(200_000))


def expected_rows(table: str, sf: float) -> int:
    """Rows of `table`; for lineorder the expectation, 4 lines per order (frames.row_count is exact)."""
    c = counts(sf)
    if table == "date":
        return CALENDAR_DAYS  # the whole calendar at any SF (see the package's docstring)
    if table == "lineorder":
        return 4 * c.orders
    return getattr(c, table)


def chunk_count(table: str, sf: float) -> int:
    if table == "date":
        return 1
    if table == "lineorder":
        return math.ceil(counts(sf).orders / CHUNK_ORDERS)
    return math.ceil(getattr(counts(sf), table) / CHUNK_ROWS[table])

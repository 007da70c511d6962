"""Table cardinalities as functions of the scale factor (ssb.md, "Cardinalities")."""

import math
from fractions import Fraction

ORDERS_PER_SF = 1_500_000
CUSTOMERS_PER_SF = 30_000
SUPPLIERS_PER_SF = 2_000
PARTS_PER_SF = 200_000
DATE_ROWS = 2_557  # every day 1992-01-01 .. 1998-12-31, independent of SF
LINES_PER_ORDER = (1, 7)  # uniform, mean 4


def check_sf(sf: float) -> float:
    """Return sf as a float, or raise ValueError unless it is a finite number > 0."""
    if isinstance(sf, bool):
        raise ValueError(f"scale factor must be a number > 0, got {sf!r}")
    try:
        value = float(sf)
    except (TypeError, ValueError):
        raise ValueError(f"scale factor must be a number > 0, got {sf!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"scale factor must be a finite number > 0, got {sf!r}")
    return value


def _scaled(base: int, sf: float) -> int:
    # The decimal the user typed (0.01), not its binary neighbour: floor(30000 * 0.01) must be 300, not 299.
    # At tiny SF a table keeps at least one row so that every foreign key has something to point at.
    return max(1, math.floor(base * Fraction(repr(check_sf(sf)))))


def order_count(sf: float) -> int:
    return _scaled(ORDERS_PER_SF, sf)


def customer_count(sf: float) -> int:
    return _scaled(CUSTOMERS_PER_SF, sf)


def supplier_count(sf: float) -> int:
    return _scaled(SUPPLIERS_PER_SF, sf)


def part_count(sf: float) -> int:
    """200,000 x floor(1 + log2 SF) from SF 1 on, 200,000 x SF below (as the public generator does)."""
    sf = check_sf(sf)
    if sf < 1:
        return _scaled(PARTS_PER_SF, sf)
    # frexp gives floor(log2 sf) exactly, where math.log2 could round up just below a power of two.
    floor_log2 = math.frexp(sf)[1] - 1
    return PARTS_PER_SF * (1 + floor_log2)


def ordering_customer_count(sf: float) -> int:
    """Customers that may order: custkeys 1..N not divisible by 3."""
    n = customer_count(sf)
    return n - n // 3

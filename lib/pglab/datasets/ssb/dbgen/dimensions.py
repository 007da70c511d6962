"""dbgen's part, supplier and customer rows (build.c's SSB mk_part, mk_supp, mk_cust), chunk by chunk.

Row r (0-based) of a table moves each of its streams on by the stream's fixed per-row number of draws,
so its draws sit at position (draws per row) * r + k. Two streams are shared across tables in dbgen's
generation order (part, supplier, customer): suppliers and customers draw phone numbers from one stream
and city digits from another, customers continuing where the suppliers stopped.
"""

import numpy as np
import polars as pl

from ..dimensions import company_rows, gather
from . import dists
from .stream import draws, mulmod, powers, start_of, uniform

ADDRESS_DRAWS = 9  # per row: 1 for the length, one per 5 characters (at most 5), rest skipped
ADDRESS_LENGTH = (6, 24)  # V_STR of a 15-character average: 0.4 x 15 .. 1.6 x 15
NAME_DRAWS = 92  # one shuffle of the 92 colours per part


def part(first: int, n: int) -> pl.DataFrame:
    color, name_1, name_2 = _shuffled_colors(first, n)
    mfgr = uniform(draws("P_MFG", first, n), 1, 5)
    category = uniform(draws("P_CAT", first, n), 1, 5)
    brand = uniform(draws("P_BRND", first, n), 1, 40)
    part_type = uniform(draws("P_TYPE", first, n), 0, len(dists.PART_TYPES) - 1)
    size = uniform(draws("P_SIZE", first, n), 1, 50)
    container = uniform(draws("P_CNTR", first, n), 0, len(dists.CONTAINERS) - 1)
    mfgr_s = "MFGR#" + pl.Series(mfgr).cast(pl.String)
    category_s = mfgr_s + pl.Series(category).cast(pl.String)
    return pl.DataFrame(
        {
            "p_partkey": np.arange(first + 1, first + n + 1, dtype=np.int32),
            "p_name": gather(dists.COLORS, name_1) + " " + gather(dists.COLORS, name_2),
            "p_mfgr": mfgr_s,
            "p_category": category_s,
            "p_brand1": category_s + pl.Series(brand).cast(pl.String),
            "p_color": gather(dists.COLORS, color),
            "p_type": gather(dists.PART_TYPES, part_type),
            "p_size": size,
            "p_container": gather(dists.CONTAINERS, container),
        }
    )


def _shuffled_colors(first: int, n: int) -> list[np.ndarray]:
    """Positions 0-2 of each row's colour permutation: dbgen swaps entry i with a random entry j for
    i = 0..91 and takes the first three. Tracing a position back through the swaps, last to first,
    gives the colour that ends there without building the permutations."""
    base = start_of("P_NAME", NAME_DRAWS * first)
    j = uniform(mulmod(powers(NAME_DRAWS * n), base), 0, NAME_DRAWS - 1, np.int8).reshape(n, NAME_DRAWS).T.copy()
    pos = np.repeat(np.arange(3, dtype=np.int8)[:, None], n, axis=1)  # (tracked position, row)
    for i in range(NAME_DRAWS - 1, -1, -1):
        at_i, at_j = pos == i, pos == j[i]
        np.copyto(pos, j[i], where=at_i)
        np.copyto(pos, np.int8(i), where=at_j)
    return [pos[k] for k in range(3)]


def company(table: str, first: int, n: int, suppliers: int) -> pl.DataFrame:
    """Supplier or customer rows first .. first + n - 1; `suppliers` is the supplier count (see above)."""
    is_supp = table == "supplier"
    shared_first = first if is_supp else suppliers + first
    nation = uniform(draws("S_NTRG" if is_supp else "C_NTRG", first, n), 0, len(dists.NATION_NAMES) - 1)
    digit = uniform(draws("P_CITY", shared_first, n), 0, 9)
    segment = None if is_supp else uniform(draws("C_MSEG", first, n), 0, len(dists.MARKET_SEGMENTS) - 1)
    key = pl.Series(np.arange(first + 1, first + n + 1, dtype=np.int32))
    address = _address("S_ADDR" if is_supp else "C_ADDR", first, n)
    return company_rows(table, key, address, nation, nation * 10 + digit, _phone(nation, shared_first, n), segment)


def _address(stream: str, first: int, n: int) -> pl.Series:
    """a_rnd: a length, then 5 characters per draw, 6 bits each from the low end."""
    low, high = ADDRESS_LENGTH
    offsets = (ADDRESS_DRAWS * np.arange(n, dtype=np.int64))[:, None] + np.arange(6)
    drawn = mulmod(powers(ADDRESS_DRAWS * n)[offsets], start_of(stream, ADDRESS_DRAWS * first))
    length = uniform(drawn[:, 0], low, high)
    bits = uniform(drawn[:, 1:], 0, 2**31 - 1, dtype=np.int64)  # UnifInt(0, MAX_LONG)
    shifts = 6 * np.arange(5, dtype=np.int64)
    symbols = (bits[:, :, None] >> shifts) & 63  # (row, draw, character of the draw)
    chars = dists.ALPHA_NUM[symbols.reshape(n, 25)[:, :high]]
    chars[np.arange(high) >= length[:, None]] = 0  # NUL padding: numpy's fixed-width bytes drop it
    return pl.Series(np.ascontiguousarray(chars).view(f"S{high}").ravel()).cast(pl.String)


def _phone(nation: np.ndarray, first: int, n: int) -> pl.Series:
    drawn = draws("C_PHNE", 3 * first, 3 * n).reshape(n, 3)
    parts = [
        nation + 10,
        uniform(drawn[:, 0], 100, 999),
        uniform(drawn[:, 1], 100, 999),
        uniform(drawn[:, 2], 1000, 9999),
    ]
    return pl.select(pl.concat_str([pl.lit(pl.Series(x)).cast(pl.String) for x in parts], separator="-")).to_series()

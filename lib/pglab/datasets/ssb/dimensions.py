"""The part, supplier and customer dimensions, generated in fixed-size chunks of rows."""

import math

import numpy as np
import polars as pl

from . import scale, words
from .rand import ChunkRandom

# Part of the generator's rules: changing it changes the rows (bump GENERATOR_VERSION).
CHUNK_ROWS = 1 << 16
ADDRESS_LENGTH = (10, 25)  # ssb.md leaves addresses open; random a-strings that fit varchar(25)

_ALPHABET = np.frombuffer(words.ADDRESS_ALPHABET.encode("ascii"), dtype=np.uint8)

ROW_COUNTS = {"part": scale.part_count, "supplier": scale.supplier_count, "customer": scale.customer_count}


def chunk_count(table: str, sf: float) -> int:
    return math.ceil(ROW_COUNTS[table](sf) / CHUNK_ROWS)


def dimension_chunk(table: str, sf: float, seed: int, chunk: int) -> pl.DataFrame:
    first = chunk * CHUNK_ROWS
    n = min(CHUNK_ROWS, ROW_COUNTS[table](sf) - first)
    rng = ChunkRandom(seed, table, chunk)
    key = pl.Series(np.arange(first + 1, first + n + 1, dtype=np.int32))
    if table == "part":
        return _part(rng, key)
    return _company(table, rng, key)


def _part(rng: ChunkRandom, key: pl.Series) -> pl.DataFrame:
    n = len(key)
    # Three distinct colour words, as dbgen draws them: the first is p_color, the other two make p_name.
    color, name_1, name_2 = _distinct_indexes(rng, len(words.COLORS), 3, n)
    category = rng.ints(0, len(words.CATEGORIES) - 1, n)  # uniform (m, c) = uniform m, then uniform c
    brand = category * words.BRANDS_PER_CATEGORY + rng.ints(0, words.BRANDS_PER_CATEGORY - 1, n)
    part_type = rng.ints(0, len(words.PART_TYPES) - 1, n)
    size = rng.ints(1, 50, n)
    container = rng.ints(0, len(words.CONTAINERS) - 1, n)
    return pl.DataFrame(
        {
            "p_partkey": key,
            "p_name": gather(words.COLORS, name_1) + " " + gather(words.COLORS, name_2),
            "p_mfgr": gather(words.MFGRS, category // words.CATEGORIES_PER_MFGR),
            "p_category": gather(words.CATEGORIES, category),
            "p_brand1": gather(words.BRANDS, brand),
            "p_color": gather(words.COLORS, color),
            "p_type": gather(words.PART_TYPES, part_type),
            "p_size": size,
            "p_container": gather(words.CONTAINERS, container),
        }
    )


def _company(table: str, rng: ChunkRandom, key: pl.Series) -> pl.DataFrame:
    n = len(key)
    address = _addresses(rng, n)
    nation = rng.ints(0, len(words.NATION_NAMES) - 1, n)
    city = nation * words.CITY_DIGITS + rng.ints(0, words.CITY_DIGITS - 1, n)
    phone = _phones(rng, nation)
    segment = rng.ints(0, len(words.MARKET_SEGMENTS) - 1, n) if table == "customer" else None
    return company_rows(table, key, address, nation, city, phone, segment)


def company_rows(table: str, key: pl.Series, address, nation, city, phone, segment) -> pl.DataFrame:
    """Supplier or customer rows from their draws (dbgen's too): the two share every column but customer's market
    segment (`segment`, None for a supplier); nation, city and segment are indexes into their words."""
    prefix = table[0]
    columns = {
        f"{prefix}_{'suppkey' if table == 'supplier' else 'custkey'}": key,
        f"{prefix}_name": (table.capitalize() + "#") + key.cast(pl.String).str.zfill(9),
        f"{prefix}_address": address,
        f"{prefix}_city": gather(words.CITIES, city),
        f"{prefix}_nation": gather(words.NATION_NAMES, nation),
        f"{prefix}_region": gather(words.REGIONS, np.asarray(words.NATION_REGION, dtype=np.int32)[nation]),
        f"{prefix}_phone": phone,
    }
    if segment is not None:
        columns["c_mktsegment"] = gather(words.MARKET_SEGMENTS, segment)
    return pl.DataFrame(columns)


def _distinct_indexes(rng: ChunkRandom, domain: int, k: int, n: int) -> list[np.ndarray]:
    """k indexes per row, distinct within the row, uniform over ordered k-tuples of range(domain)."""
    picked: list[np.ndarray] = []
    for i in range(k):
        index = rng.ints(0, domain - 1 - i, n)
        # Step over the values already picked, in ascending order: maps range(domain - i) onto the unused.
        for taken in np.sort(np.stack(picked), axis=0) if picked else ():
            index += index >= taken
        picked.append(index)
    return picked


def _addresses(rng: ChunkRandom, n: int) -> pl.Series:
    low, high = ADDRESS_LENGTH
    length = rng.ints(low, high, n)
    chars = _ALPHABET[rng.ints(0, len(_ALPHABET) - 1, n * high).reshape(n, high)]
    chars[np.arange(high) >= length[:, None]] = 0  # NUL padding: numpy's fixed-width bytes drop it
    return pl.Series(chars.view(f"S{high}").ravel()).cast(pl.String)


def _phones(rng: ChunkRandom, nation: np.ndarray) -> pl.Series:
    """TPC-H phone `CC-LLL-LLL-LLLL`, CC = nation index + 10."""
    n = len(nation)
    parts = [
        pl.Series(nation + 10),
        pl.Series(rng.ints(100, 999, n)),
        pl.Series(rng.ints(100, 999, n)),
        pl.Series(rng.ints(1000, 9999, n)),
    ]
    return pl.select(pl.concat_str([p.cast(pl.String) for p in parts], separator="-")).to_series()


def gather(vocabulary: tuple[str, ...], index: np.ndarray) -> pl.Series:
    return pl.Series(vocabulary, dtype=pl.String).gather(index)

"""Deterministic, chunked SSB data: polars frames, PostgreSQL COPY text blocks and dbgen `.tbl` blocks.

Two flavors. "dbgen" (the default) is byte-identical to ssb-dbgen's output (see the dbgen subpackage); its
streams are fixed, so `seed` is accepted and recorded but does not change a row. "spec" follows the SSB
rules with streams of its own: every chunk is generated from a random stream seeded by (seed, table,
chunk index). Either way a chunk is the same however, wherever and in whatever order chunks are made,
and memory stays bounded by one chunk whatever the scale factor.
"""

import io
from collections.abc import Iterator

import polars as pl

from . import dates, dimensions, lineorder, scale
from .dbgen import counts as dbgen_counts
from .dbgen import frames as dbgen
from .flavors import DEFAULT_FLAVOR, FLAVORS, FORMATS, GENERATOR_VERSION, check_flavor, check_format  # noqa: F401 (FLAVORS, GENERATOR_VERSION: re-exported)
from .rand import check_seed
from .schema import BIGINT_ORDERKEY_SF, COLUMNS, TABLES


def row_count(table: str, sf: float, seed: int | None = None, flavor: str = DEFAULT_FLAVOR) -> int:
    """Rows of `table` at scale factor sf.

    Exact for the dimensions. lineorder's count depends on the random line counts: with `seed` it is exact
    (the line counts are replayed, which is cheap); without, it is the expectation 4 x order_count(sf).
    """
    sf = scale.check_sf(sf)
    _check_table(table)
    if check_flavor(flavor) == "dbgen":
        if seed is not None:
            check_seed(seed)
        return dbgen.row_count(table, sf, exact=seed is not None)
    if table == "date":
        return scale.DATE_ROWS
    if table == "lineorder":
        if seed is None:
            return 4 * scale.order_count(sf)
        return lineorder.exact_row_count(sf, check_seed(seed))
    return dimensions.ROW_COUNTS[table](sf)


def order_count(sf: float, flavor: str = DEFAULT_FLAVOR) -> int:
    """Orders in lineorder (1,500,000 x SF); each has 1-7 lines."""
    if check_flavor(flavor) == "dbgen":
        return dbgen_counts.counts(scale.check_sf(sf)).orders
    return scale.order_count(sf)


def chunk_count(table: str, sf: float, flavor: str = DEFAULT_FLAVOR) -> int:
    """How many chunks iter_chunks yields for `table`; chunk i can be made alone by table_chunk."""
    sf = scale.check_sf(sf)
    _check_table(table)
    if check_flavor(flavor) == "dbgen":
        return dbgen_counts.chunk_count(table, sf)
    if table == "date":
        return 1
    if table == "lineorder":
        return lineorder.chunk_count(sf)
    return dimensions.chunk_count(table, sf)


def table_chunk(table: str, sf: float, seed: int, chunk: int, flavor: str = DEFAULT_FLAVOR) -> pl.DataFrame:
    """Chunk number `chunk` of `table`, with String columns (see iter_chunks)."""
    return _chunk(table, sf, seed, chunk, flavor, enums=False)


def iter_chunks(table: str, sf: float, seed: int, flavor: str = DEFAULT_FLAVOR) -> Iterator[pl.DataFrame]:
    """The table's rows as polars frames: columns in schema order, Int32 (Int64 for bigint) and String."""
    n_chunks = _checked_chunk_count(table, sf, seed, flavor)  # here, not at the first next()
    return (_chunk(table, sf, seed, chunk, flavor, enums=False) for chunk in range(n_chunks))


def iter_blocks(
    table: str, sf: float, seed: int, fmt: str = "copy", flavor: str = DEFAULT_FLAVOR
) -> Iterator[tuple[int, bytes]]:
    """(rows, bytes) per chunk, in `fmt` "copy" (COPY text) or "tbl" (dbgen); rows is for progress bars."""
    check_format(fmt)
    n_chunks = _checked_chunk_count(table, sf, seed, flavor)
    return (chunk_block(table, sf, seed, chunk, fmt, flavor) for chunk in range(n_chunks))


def chunk_block(
    table: str, sf: float, seed: int, chunk: int, fmt: str = "copy", flavor: str = DEFAULT_FLAVOR
) -> tuple[int, bytes]:
    """(rows, bytes) of chunk number `chunk`, formatted as `fmt`; any process can make any chunk."""
    # Enum string columns: the same text as String ones, cheaper to build.
    frame = _chunk(table, sf, seed, chunk, flavor, enums=True)
    return frame.height, format_block(frame, fmt)


def iter_copy_blocks(table: str, sf: float, seed: int, flavor: str = DEFAULT_FLAVOR) -> Iterator[bytes]:
    """PostgreSQL COPY text format: tab-separated columns, one `\\n`-terminated line per row.

    SSB values contain no tab, newline or backslash, so no escaping is needed (the tests check this).
    """
    return (block for _, block in iter_blocks(table, sf, seed, "copy", flavor))


def iter_tbl_blocks(table: str, sf: float, seed: int, flavor: str = DEFAULT_FLAVOR) -> Iterator[bytes]:
    """dbgen `.tbl` lines: `|`-separated columns, each line ending in `|` as dbgen writes them."""
    return (block for _, block in iter_blocks(table, sf, seed, "tbl", flavor))


def format_block(frame: pl.DataFrame, fmt: str) -> bytes:
    """Render a chunk as COPY text ("copy") or dbgen `.tbl` ("tbl") bytes."""
    separator, terminator = ("\t", "\n") if fmt == "copy" else ("|", "|\n")
    buffer = io.BytesIO()
    frame.write_csv(buffer, include_header=False, separator=separator, line_terminator=terminator, quote_style="never")
    return buffer.getvalue()


def dataset_id(sf: float, seed: int, flavor: str = DEFAULT_FLAVOR) -> dict:
    """What identifies a generated data set: the same dict means byte-identical tables.

    The dbgen flavor records the seed it was asked for although its rows do not depend on it, so that a
    load asked for another seed is not taken for the one already there."""
    return {
        "benchmark": "ssb",
        "sf": scale.check_sf(sf),
        "seed": check_seed(seed),
        "generator_version": GENERATOR_VERSION,
        "flavor": check_flavor(flavor),
    }


def _check_table(table: str) -> str:
    if table not in TABLES:
        raise ValueError(f"unknown SSB table {table!r}; expected one of {', '.join(TABLES)}")
    return table


def _checked_chunk_count(table: str, sf: float, seed: int, flavor: str) -> int:
    check_seed(seed)
    return chunk_count(table, sf, flavor)


def _chunk(table: str, sf: float, seed: int, chunk: int, flavor: str, *, enums: bool) -> pl.DataFrame:
    sf, seed = scale.check_sf(sf), check_seed(seed)
    n_chunks = chunk_count(table, sf, flavor)
    if not 0 <= chunk < n_chunks:
        raise IndexError(f"{table} has {n_chunks} chunks at SF {sf}, no chunk {chunk}")
    if flavor == "dbgen":
        frame = dbgen.chunk_frame(table, sf, chunk, enums=enums, bigint_keys=sf >= BIGINT_ORDERKEY_SF)
    elif table == "date":
        frame = dates.date_frame()
    elif table == "lineorder":
        frame = lineorder.lineorder_chunk(sf, seed, chunk, enums=enums)
    else:
        frame = dimensions.dimension_chunk(table, sf, seed, chunk)
    assert frame.columns == [name for name, _ in COLUMNS[table]], f"{table} columns out of schema order"
    return frame

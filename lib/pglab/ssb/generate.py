"""Deterministic, chunked SSB data: polars frames, PostgreSQL COPY text blocks and dbgen `.tbl` blocks.

Every table is cut into chunks of a fixed number of rows (orders for lineorder), each generated from its own
random stream seeded by (seed, table, chunk index); the output is therefore the same however, wherever and in
whatever order chunks are made, and memory stays bounded by one chunk whatever the scale factor.
"""

import io
from collections.abc import Iterator

import polars as pl

from . import dates, dimensions, lineorder, scale
from .rand import check_seed
from .schema import COLUMNS, TABLES

# Identifies the generation rules: bump whenever any generated row changes.
GENERATOR_VERSION = "1"

FORMATS = ("copy", "tbl")


def row_count(table: str, sf: float, seed: int | None = None) -> int:
    """Rows of `table` at scale factor sf.

    Exact for the dimensions. lineorder's count depends on the random line counts: with `seed` it is exact
    (the line counts are replayed, which is cheap); without, it is the expectation 4 x order_count(sf).
    """
    sf = scale.check_sf(sf)
    if table == "date":
        return scale.DATE_ROWS
    if table == "lineorder":
        if seed is None:
            return 4 * scale.order_count(sf)
        return lineorder.exact_row_count(sf, check_seed(seed))
    if table not in dimensions.ROW_COUNTS:
        raise ValueError(f"unknown SSB table {table!r}; expected one of {', '.join(TABLES)}")
    return dimensions.ROW_COUNTS[table](sf)


def order_count(sf: float) -> int:
    """Orders in lineorder (1,500,000 x SF); each has 1-7 lines."""
    return scale.order_count(sf)


def chunk_count(table: str, sf: float) -> int:
    """How many chunks iter_chunks yields for `table`; chunk i can be made alone by table_chunk."""
    sf = scale.check_sf(sf)
    if table == "date":
        return 1
    if table == "lineorder":
        return lineorder.chunk_count(sf)
    if table not in dimensions.ROW_COUNTS:
        raise ValueError(f"unknown SSB table {table!r}; expected one of {', '.join(TABLES)}")
    return dimensions.chunk_count(table, sf)


def table_chunk(table: str, sf: float, seed: int, chunk: int) -> pl.DataFrame:
    """Chunk number `chunk` of `table`, with String columns (see iter_chunks)."""
    return _chunk(table, sf, seed, chunk, enums=False)


def iter_chunks(table: str, sf: float, seed: int) -> Iterator[pl.DataFrame]:
    """The table's rows as polars frames: columns in schema order, Int32 (Int64 for bigint) and String."""
    n_chunks = _checked_chunk_count(table, sf, seed)  # here, not at the first next()
    return (_chunk(table, sf, seed, chunk, enums=False) for chunk in range(n_chunks))


def iter_blocks(table: str, sf: float, seed: int, fmt: str = "copy") -> Iterator[tuple[int, bytes]]:
    """(rows, bytes) per chunk, in `fmt` "copy" (COPY text) or "tbl" (dbgen); rows is for progress bars."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown block format {fmt!r}; expected one of {FORMATS}")
    n_chunks = _checked_chunk_count(table, sf, seed)
    return (chunk_block(table, sf, seed, chunk, fmt) for chunk in range(n_chunks))


def chunk_block(table: str, sf: float, seed: int, chunk: int, fmt: str = "copy") -> tuple[int, bytes]:
    """(rows, bytes) of chunk number `chunk`, formatted as `fmt`; any process can make any chunk."""
    # Enum string columns: the same text as String ones, cheaper to build.
    frame = _chunk(table, sf, seed, chunk, enums=True)
    return frame.height, format_block(frame, fmt)


def iter_copy_blocks(table: str, sf: float, seed: int) -> Iterator[bytes]:
    """PostgreSQL COPY text format: tab-separated columns, one `\\n`-terminated line per row.

    SSB values contain no tab, newline or backslash, so no escaping is needed (the tests check this).
    """
    return (block for _, block in iter_blocks(table, sf, seed, "copy"))


def iter_tbl_blocks(table: str, sf: float, seed: int) -> Iterator[bytes]:
    """dbgen `.tbl` lines: `|`-separated columns, each line ending in `|` as dbgen writes them."""
    return (block for _, block in iter_blocks(table, sf, seed, "tbl"))


def format_block(frame: pl.DataFrame, fmt: str) -> bytes:
    """Render a chunk as COPY text ("copy") or dbgen `.tbl` ("tbl") bytes."""
    separator, terminator = ("\t", "\n") if fmt == "copy" else ("|", "|\n")
    buffer = io.BytesIO()
    frame.write_csv(buffer, include_header=False, separator=separator, line_terminator=terminator,
                    quote_style="never")
    return buffer.getvalue()


def dataset_id(sf: float, seed: int) -> dict:
    """What identifies a generated data set: the same dict means byte-identical tables."""
    return {"benchmark": "ssb", "sf": scale.check_sf(sf), "seed": check_seed(seed),
            "generator_version": GENERATOR_VERSION}


def _checked_chunk_count(table: str, sf: float, seed: int) -> int:
    check_seed(seed)
    return chunk_count(table, sf)


def _chunk(table: str, sf: float, seed: int, chunk: int, *, enums: bool) -> pl.DataFrame:
    sf, seed = scale.check_sf(sf), check_seed(seed)
    if not 0 <= chunk < chunk_count(table, sf):
        raise IndexError(f"{table} has {chunk_count(table, sf)} chunks at SF {sf}, no chunk {chunk}")
    if table == "date":
        frame = dates.date_frame()
    elif table == "lineorder":
        frame = lineorder.lineorder_chunk(sf, seed, chunk, enums=enums)
    else:
        frame = dimensions.dimension_chunk(table, sf, seed, chunk)
    assert frame.columns == [name for name, _ in COLUMNS[table]], f"{table} columns out of schema order"
    return frame

"""Star Schema Benchmark data: a deterministic, chunked generator, the table DDL and the 13 queries.

    from pglab.datasets import ssb
    for block in ssb.iter_copy_blocks("lineorder", sf=1, seed=1):   # COPY ... FROM STDIN text blocks
        ...

The names below load on first use (PEP 562), so `python -m pglab.datasets.ssb` can start its generator processes
before this process pays for importing polars.
"""

from importlib import import_module
from typing import TYPE_CHECKING

_SOURCES = {
    ".flavors": ("DEFAULT_FLAVOR", "FLAVORS", "FORMATS", "GENERATOR_VERSION"),
    ".generate": (
        "chunk_block",
        "chunk_count",
        "dataset_id",
        "format_block",
        "iter_blocks",
        "iter_chunks",
        "iter_copy_blocks",
        "iter_tbl_blocks",
        "order_count",
        "row_count",
        "table_chunk",
    ),
    ".parallel": ("iter_blocks_parallel", "iter_copy_blocks_parallel", "iter_tbl_blocks_parallel"),
    ".queries": (
        "DEFAULT_QUERY_SET",
        "PUBLISHED_FILTER_FACTORS",
        "QUERY_IDS",
        "QUERY_SETS",
        "expected_filter_factor",
        "query_predicates",
        "query_sql",
    ),
    ".schema": ("COLUMNS", "TABLES", "columns", "create_table_sql", "polars_schema", "schema_sql"),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}
__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from .flavors import DEFAULT_FLAVOR, FLAVORS, FORMATS, GENERATOR_VERSION  # noqa: F401
    from .generate import (  # noqa: F401
        chunk_block,
        chunk_count,
        dataset_id,
        format_block,
        iter_blocks,
        iter_chunks,
        iter_copy_blocks,
        iter_tbl_blocks,
        order_count,
        row_count,
        table_chunk,
    )
    from .parallel import iter_blocks_parallel, iter_copy_blocks_parallel, iter_tbl_blocks_parallel  # noqa: F401
    from .queries import (  # noqa: F401
        DEFAULT_QUERY_SET,
        PUBLISHED_FILTER_FACTORS,
        QUERY_IDS,
        QUERY_SETS,
        expected_filter_factor,
        query_predicates,
        query_sql,
    )
    from .schema import COLUMNS, TABLES, columns, create_table_sql, polars_schema, schema_sql  # noqa: F401


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

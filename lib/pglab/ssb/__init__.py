"""Star Schema Benchmark data: a deterministic, chunked generator, the table DDL and the 13 queries.

    from pglab import ssb
    for block in ssb.iter_copy_blocks("lineorder", sf=1, seed=1):   # COPY ... FROM STDIN text blocks
        ...
"""

from .generate import (
    FORMATS,
    GENERATOR_VERSION,
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
from .parallel import iter_blocks_parallel, iter_copy_blocks_parallel, iter_tbl_blocks_parallel
from .queries import (
    DEFAULT_QUERY_SET,
    PUBLISHED_FILTER_FACTORS,
    QUERY_IDS,
    QUERY_SETS,
    expected_filter_factor,
    query_predicates,
    query_sql,
)
from .schema import COLUMNS, TABLES, columns, create_table_sql, polars_schema, schema_sql

__all__ = [
    "COLUMNS", "DEFAULT_QUERY_SET", "FORMATS", "GENERATOR_VERSION", "PUBLISHED_FILTER_FACTORS",
    "QUERY_IDS", "QUERY_SETS", "TABLES", "chunk_block", "chunk_count", "columns", "create_table_sql", "dataset_id",
    "expected_filter_factor", "format_block", "iter_blocks", "iter_blocks_parallel", "iter_chunks",
    "iter_copy_blocks", "iter_copy_blocks_parallel", "iter_tbl_blocks", "iter_tbl_blocks_parallel",
    "order_count", "polars_schema", "query_predicates", "query_sql", "row_count", "schema_sql", "table_chunk",
]

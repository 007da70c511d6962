"""SSB table layout: the single source of truth for column order, PostgreSQL types and polars dtypes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

TABLES = ("part", "supplier", "customer", "date", "lineorder")

# (name, PostgreSQL type) in schema order; lo_orderkey is widened by columns() at large SF.
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "part": [
        ("p_partkey", "int"),
        ("p_name", "varchar(22)"),
        ("p_mfgr", "varchar(6)"),
        ("p_category", "varchar(7)"),
        ("p_brand1", "varchar(9)"),
        ("p_color", "varchar(11)"),
        ("p_type", "varchar(25)"),
        ("p_size", "int"),
        ("p_container", "varchar(10)"),
    ],
    "supplier": [
        ("s_suppkey", "int"),
        ("s_name", "varchar(25)"),
        ("s_address", "varchar(25)"),
        ("s_city", "varchar(10)"),
        ("s_nation", "varchar(15)"),
        ("s_region", "varchar(12)"),
        ("s_phone", "varchar(15)"),
    ],
    "customer": [
        ("c_custkey", "int"),
        ("c_name", "varchar(25)"),
        ("c_address", "varchar(25)"),
        ("c_city", "varchar(10)"),
        ("c_nation", "varchar(15)"),
        ("c_region", "varchar(12)"),
        ("c_phone", "varchar(15)"),
        ("c_mktsegment", "varchar(10)"),
    ],
    "date": [
        ("d_datekey", "int"),
        ("d_date", "varchar(19)"),
        ("d_dayofweek", "varchar(10)"),
        ("d_month", "varchar(10)"),
        ("d_year", "int"),
        ("d_yearmonthnum", "int"),
        ("d_yearmonth", "varchar(8)"),
        ("d_daynuminweek", "int"),
        ("d_daynuminmonth", "int"),
        ("d_daynuminyear", "int"),
        ("d_monthnuminyear", "int"),
        ("d_weeknuminyear", "int"),
        ("d_sellingseason", "varchar(13)"),
        ("d_lastdayinweekfl", "varchar(1)"),
        ("d_lastdayinmonthfl", "varchar(1)"),
        ("d_holidayfl", "varchar(1)"),
        ("d_weekdayfl", "varchar(1)"),
    ],
    "lineorder": [
        ("lo_orderkey", "int"),
        ("lo_linenumber", "int"),
        ("lo_custkey", "int"),
        ("lo_partkey", "int"),
        ("lo_suppkey", "int"),
        ("lo_orderdate", "int"),
        ("lo_orderpriority", "varchar(15)"),
        ("lo_shippriority", "varchar(1)"),
        ("lo_quantity", "int"),
        ("lo_extendedprice", "int"),
        ("lo_ordertotalprice", "int"),
        ("lo_discount", "int"),
        ("lo_revenue", "int"),
        ("lo_supplycost", "int"),
        ("lo_tax", "int"),
        ("lo_commitdate", "int"),
        ("lo_shipmode", "varchar(10)"),
    ],
}

# ssb.md: lo_orderkey must be bigint from SF 300 on (sparse keys pass 2^31 soon after).
BIGINT_ORDERKEY_SF = 300


def columns(table: str, sf: float) -> list[tuple[str, str]]:
    """COLUMNS[table] with the types that apply at scale factor sf."""
    cols = COLUMNS[_check_table(table)]
    if table == "lineorder" and sf >= BIGINT_ORDERKEY_SF:
        return [(name, "bigint" if name == "lo_orderkey" else pg_type) for name, pg_type in cols]
    return list(cols)


def polars_schema(table: str, sf: float) -> dict[str, pl.DataType]:
    """The dtypes iter_chunks yields: int -> Int32, bigint -> Int64, varchar -> String."""
    return {name: _polars_dtype(pg_type) for name, pg_type in columns(table, sf)}


def create_table_sql(table: str, sf: float) -> str:
    """CREATE TABLE for one table, no keys or indexes (as in the reference study); `date` is quoted."""
    body = ",\n".join(f"    {name} {pg_type}" for name, pg_type in columns(table, sf))
    return f'CREATE TABLE "{table}" (\n{body}\n);\n'


def schema_sql(sf: float) -> str:
    """DDL of all five tables, in TABLES order."""
    return "\n".join(create_table_sql(table, sf) for table in TABLES)


def _polars_dtype(pg_type: str) -> pl.DataType:
    import polars as pl  # here: the CLI reads TABLES before it loads polars

    if pg_type == "int":
        return pl.Int32()
    if pg_type == "bigint":
        return pl.Int64()
    if pg_type.startswith("varchar"):
        return pl.String()
    raise ValueError(f"no polars dtype for {pg_type!r}")


def _check_table(table: str) -> str:
    if table not in COLUMNS:
        raise ValueError(f"unknown SSB table {table!r}; expected one of {', '.join(TABLES)}")
    return table

"""Filter factors measured on loaded SSB data: the fraction of lineorder rows that pass each query's
predicates, beside the published figure and the value the generation rules imply.

Two expected values: `expected` from the rules alone, and `expected_given_dims` from the rules for the
per-row draws (dates, quantities, discounts) times the share of the *loaded* parts, suppliers and
ordering customers that pass. At a small SF the dimension tables are small samples (20 suppliers at
SF 0.01), so `expected` can sit far from the data for honest reasons; `expected_given_dims` leaves only
the row-level sampling error, which the tolerance is sized for."""

from __future__ import annotations

import math
import re

import polars as pl

from ...core.servers.servers import Server
from . import PUBLISHED_FILTER_FACTORS, expected_filter_factor, query_predicates, query_sql
from .load import database_name
from .queries import equally_likely_outcomes

MAX_LINES_PER_ORDER = 7


def count_sql(query_set: str, qid: str) -> str:
    """The query's FROM and WHERE with count(*) for its select list, without GROUP BY / ORDER BY."""
    text = " ".join(query_sql(query_set, qid).split())
    m = re.search(r"\bfrom\b(.*?)\bwhere\b(.*?)(\bgroup by\b|\border by\b|;|$)", text, re.I)
    if not m:
        raise ValueError(f"{query_set}/{qid}: cannot find FROM ... WHERE in the query text")
    return f"SELECT count(*) FROM {m.group(1).strip()} WHERE {m.group(2).strip()}"


def tolerance(p: float, lineorder_rows: int, z: float = 5.0) -> float:
    """How far a measured fraction may stray from the expected one by sampling alone.

    Rows are not independent draws: the lines of one order share its date and customer, so the variance
    is inflated by up to the number of lines per order (design effect <= 7). z = 5 keeps false alarms
    negligible over 13 queries; the 1/N term covers expected counts below one row."""
    n = max(lineorder_rows, 1)
    return z * math.sqrt(MAX_LINES_PER_ORDER * p * (1 - p) / n) + 1 / n


DIMENSIONS = {
    "part": "SELECT p_brand1, p_category, p_mfgr FROM part",
    "supplier": "SELECT s_city, s_nation, s_region FROM supplier",
    # only customers whose key is not a multiple of 3 ever order
    "customer": "SELECT c_city, c_nation, c_region FROM customer WHERE c_custkey % 3 <> 0",
}


def _loaded_dimensions(conn) -> dict[str, pl.DataFrame]:
    out = {}
    for table, sql in DIMENSIONS.items():
        cur = conn.execute(sql)
        out[table] = pl.DataFrame(cur.fetchall(), schema=[d.name for d in cur.description], orient="row")
    return out


def expected_given_dimensions(query_set: str, qid: str, dims: dict[str, pl.DataFrame]) -> float:
    factor = expected_filter_factor(query_set, qid)
    for table, predicate in query_predicates(query_set, qid).items():
        if table in dims:
            rules = equally_likely_outcomes(table)
            share_rules = rules.filter(predicate).height / rules.height
            share_loaded = dims[table].filter(predicate).height / max(dims[table].height, 1)
            factor *= share_loaded / share_rules
    return factor


def measure(server: Server, sf: float, query_set: str, qids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(measure_rows(server, sf, query_set, qids))


def measure_rows(server: Server, sf: float, query_set: str, qids: list[str]) -> list[dict]:
    """Per query: lineorder rows, the rows passing its predicates (counted on the server) and the expected
    and published fractions beside them (kept in the raw store by ssb.derive.record_selectivity)."""
    rows = []
    with server.connect(database_name(sf)) as conn:
        total = conn.execute("SELECT count(*) FROM lineorder").fetchone()[0]
        dims = _loaded_dimensions(conn)
        for q in qids:
            passed = conn.execute(count_sql(query_set, q)).fetchone()[0]
            given = expected_given_dimensions(query_set, q, dims)
            tol = tolerance(given, total)
            rows.append(
                {
                    "server": server.name,
                    "query": q,
                    "lineorder_rows": total,
                    "passing_rows": passed,
                    "measured": passed / total,
                    "expected": expected_filter_factor(query_set, q),
                    "expected_given_dims": given,
                    "published": PUBLISHED_FILTER_FACTORS[q],
                    "tolerance": tol,
                    "within_tolerance": abs(passed / total - given) <= tol,
                }
            )
    return rows

"""The 13 SSB queries' results on ssb-dbgen's SF 1 data, to check a server's answers against.

The CSV files under sf1/ hold what PostgreSQL 18 returned for the `pg_ssb_run` query texts (with their
ORDER BY) on dbgen's SF 1 tables, written by `\\copy (query) TO ... (FORMAT csv, HEADER)`. Data made by
this kit's dbgen flavor at SF 1 is byte-identical to those tables, so it must give exactly these rows.

    from pglab.datasets.ssb import answers
    if answers.applies(dataset, "pg_ssb_run", "q2.1"):   # dataset: LoadResult.dataset / current_dataset()
        problem = answers.compare("q2.1", rows)            # rows as psycopg returns them; None when right
        right = checksum == answers.expected_checksum("q2.1")   # or via answers.result_checksum
"""

from __future__ import annotations

import csv
import decimal
import hashlib
import io
import json
from collections import Counter
from functools import cache
from importlib import resources

from ..flavors import GENERATOR_VERSION
from ..queries import QUERY_IDS, query_sql

ANSWERED_SF = 1
ANSWERED_QUERY_SET = "pg_ssb_run"


def is_dbgen_data(dataset: dict | None) -> bool:
    """Whether a dataset record (LoadResult.dataset, load.current_dataset) is ssb-dbgen's data: made by
    this generator version's dbgen flavor. Records of older kits have no flavor: they are not."""
    return (
        bool(dataset)
        and dataset.get("flavor") == "dbgen"
        and str(dataset.get("generator_version")) == GENERATOR_VERSION
    )


def generator_of(dataset: dict | None) -> str:
    """Which generator made a dataset, in words, for tables and report text."""
    if not dataset:
        return "unknown (no dataset record)"
    version = str(dataset.get("generator_version"))
    flavor = dataset.get("flavor")
    if flavor == "dbgen":
        return f"ssb-dbgen's data, byte-identical (pglab generator {version}, flavor dbgen)"
    if flavor == "spec":
        return f"pglab's own streams from the SSB rules (generator {version}, flavor spec, seed {dataset.get('seed')})"
    return f"pglab generator {version}, before the dbgen flavor (own streams, seed {dataset.get('seed')})"


def applies(dataset: dict | None, query_set: str, qid: str) -> bool:
    """Whether the expected answer of (query_set, qid) holds for that dataset: dbgen's data at SF 1 and a
    query text the answers were made with (ssb_paper's q1.3 and q2.3 differ from pg_ssb_run's)."""
    return (
        is_dbgen_data(dataset)
        and float(dataset.get("sf", 0)) == ANSWERED_SF
        and query_sql(query_set, qid) == query_sql(ANSWERED_QUERY_SET, qid)
    )


def columns(qid: str) -> tuple[str, ...]:
    return _load(qid)[0]


def expected(qid: str) -> list[tuple[str, ...]]:
    """The expected rows in the server's ORDER BY order, each value as its text (NULL as None)."""
    return list(_load(qid)[1])


def result_checksum(rows: list[tuple]) -> str:
    """Order-independent checksum of a result: ties in ORDER BY may legally come back in any order."""
    canon = sorted(json.dumps([str(v) for v in r]) for r in rows)
    return hashlib.sha256("\n".join(canon).encode()).hexdigest()[:16]


def expected_checksum(qid: str) -> str:
    """result_checksum of the expected rows: what the `checksum` of a right execution is."""
    return result_checksum(expected(qid))


def canonical(value) -> str | None:
    """A value as psycopg returns it, written as PostgreSQL writes it to CSV: int/Decimal sums as digits."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
        return str(value.quantize(decimal.Decimal(1)))
    return str(value)


def compare(qid: str, rows: list[tuple]) -> str | None:
    """None when `rows` (as psycopg returns them) are the expected answer, else what differs.

    Rows are compared as a multiset: ties under ORDER BY may legally come back in any order."""
    want = expected(qid)
    got = [tuple(canonical(v) for v in row) for row in rows]
    if got == want or Counter(got) == Counter(want):
        return None
    missing, extra = Counter(want) - Counter(got), Counter(got) - Counter(want)
    parts = [f"{qid}: {len(got)} rows, expected {len(want)}"]
    if missing:
        parts.append(f"{sum(missing.values())} expected rows missing, e.g. {_sample(missing)}")
    if extra:
        parts.append(f"{sum(extra.values())} unexpected rows, e.g. {_sample(extra)}")
    return "; ".join(parts)


def _sample(rows: Counter, n: int = 3) -> str:
    return ", ".join(repr(r) for r in sorted(rows, key=str)[:n])


@cache
def _load(qid: str) -> tuple[tuple[str, ...], tuple[tuple[str | None, ...], ...]]:
    if qid not in QUERY_IDS:
        raise ValueError(f"unknown query {qid!r}; expected one of {', '.join(QUERY_IDS)}")
    text = resources.files(__package__).joinpath(f"sf{ANSWERED_SF}", f"{qid}.csv").read_text("utf-8")
    reader = csv.reader(io.StringIO(text))
    header = tuple(next(reader))
    # PostgreSQL's CSV: an unquoted empty field is NULL, a quoted one the empty string; csv loses that
    # difference, and SSB's answers hold neither
    return header, tuple(tuple(None if v == "" else v for v in row) for row in reader)

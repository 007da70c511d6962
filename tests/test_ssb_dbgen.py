"""The dbgen flavor against the C ssb-dbgen's own output (tests/fixtures/dbgen, see its README).

Whole files are compared by sha256 at SF 1 and SF 2 (the SF 2 one takes a while, ~10 s of CPU), beside
the first and last lines of every table and a stretch from the middle of lineorder, which show what
differs when a checksum does not match.
"""

import hashlib
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from pglab.datasets import ssb
from pglab.datasets.ssb import answers
from pglab.datasets.ssb.dbgen import counts as dbgen_counts
from pglab.datasets.ssb.dbgen import lineorder as dbgen_lineorder
from pglab.datasets.ssb.dbgen import stream

FIXTURES = Path(__file__).parent / "fixtures" / "dbgen"


def reference_sums(sf_dir: str) -> dict[str, tuple[str, int]]:
    """{table: (sha256, rows)} of dbgen's files."""
    sums = dict(line.split()[::-1] for line in (FIXTURES / sf_dir / "SHA256SUMS").read_text().splitlines())
    rows = dict(line.split() for line in (FIXTURES / sf_dir / "ROWS").read_text().splitlines())
    return {name.removesuffix(".tbl"): (sums[name], int(rows[name])) for name in sums}


def chunk_rows(table: str, sf: float) -> list[int]:
    """Rows in each chunk, without generating the chunks (lineorder: from the line-count draws)."""
    c = dbgen_counts.counts(sf)
    n_chunks = ssb.chunk_count(table, sf)
    if table == "date":
        return [ssb.row_count("date", sf)]
    if table != "lineorder":
        size = dbgen_counts.CHUNK_ROWS[table]
        total = getattr(c, table)
        return [min(size, total - i * size) for i in range(n_chunks)]
    size = dbgen_counts.CHUNK_ORDERS
    return [
        int(dbgen_lineorder.line_counts(i * size, min(size, c.orders - i * size), c.date_rows).sum())
        for i in range(n_chunks)
    ]


def lines(table: str, sf: float, first: int, count: int) -> bytes:
    """Lines first .. first + count - 1 (1-based, as dbgen's line numbers) of the table's .tbl file."""
    out, start = [], 1
    for chunk, rows in enumerate(chunk_rows(table, sf)):
        end = start + rows  # this chunk holds lines start .. end - 1
        if end > first and start < first + count:
            block = ssb.chunk_block(table, sf, 1, chunk, "tbl")[1].split(b"\n")[:-1]
            out += block[max(0, first - start) : first + count - start]
        start = end
    return b"".join(line + b"\n" for line in out)


def whole_table_digest(table: str, sf: float) -> tuple[str, int]:
    digest, rows = hashlib.sha256(), 0
    with ssb.iter_blocks_parallel(table, sf, 1, "tbl", workers=2) as blocks:
        for n, block in blocks:
            digest.update(block)
            rows += n
    return digest.hexdigest(), rows


# --- the random streams -------------------------------------------------------------------------------


def test_streams_follow_the_park_miller_recurrence():
    value, sequence = stream.START["L_QTY"], []
    for _ in range(5000):
        value = value * 16807 % (2**31 - 1)
        sequence.append(value)
    assert stream.draws("L_QTY", 0, 5000).tolist() == sequence
    assert stream.draws("L_QTY", 1234, 100).tolist() == sequence[1234:1334]  # skipped ahead, not replayed
    offsets = np.array([0, 7, 8, 2999])
    assert stream.draws_at("L_QTY", 2000, offsets).tolist() == [sequence[2000 + o] for o in offsets]
    # UnifInt: low + (long)((value / 2147483647.0) * (high - low + 1)), in doubles
    for low, high in ((1, 7), (0, 91), (1, 30_000), (0, 2**31 - 1)):
        expected = [low + int((v / 2147483647.0) * float(high - low + 1)) for v in sequence]
        assert stream.uniform(np.array(sequence, dtype=np.uint64), low, high, np.int64).tolist() == expected


# --- against dbgen's files ------------------------------------------------------------------------------


@pytest.mark.parametrize("table", ssb.TABLES)
def test_sf1_first_and_last_lines(table):
    rows = reference_sums("sf1")[table][1]
    assert ssb.row_count(table, 1, seed=1) == rows
    assert lines(table, 1, 1, 1000) == (FIXTURES / "sf1" / f"{table}.head1000.tbl").read_bytes()
    assert lines(table, 1, rows - 999, 1000) == (FIXTURES / "sf1" / f"{table}.tail1000.tbl").read_bytes()


def test_sf1_lineorder_middle_lines():
    expected = (FIXTURES / "sf1" / "lineorder.lines3000001-3001000.tbl").read_bytes()
    assert lines("lineorder", 1, 3_000_001, 1000) == expected


@pytest.mark.parametrize("table", [t for t in ssb.TABLES if t != "date"])
def test_sf2_first_and_last_lines(table):
    rows = reference_sums("sf2")[table][1]
    assert ssb.row_count(table, 2, seed=1) == rows
    assert lines(table, 2, 1, 200) == (FIXTURES / "sf2" / f"{table}.head200.tbl").read_bytes()
    assert lines(table, 2, rows - 199, 200) == (FIXTURES / "sf2" / f"{table}.tail200.tbl").read_bytes()


def test_sf1_whole_files_match_dbgen():
    assert {t: whole_table_digest(t, 1) for t in ssb.TABLES} == reference_sums("sf1")


def test_sf2_whole_files_match_dbgen():
    """SF 2: 12 M lineorder rows; part has 400,000 rows but lineorder refers to the first 200,000 only."""
    assert {t: whole_table_digest(t, 2) for t in ssb.TABLES} == reference_sums("sf2")


def test_fractional_sf_matches_dbgen_but_keeps_the_whole_calendar(tmp_path):
    reference = reference_sums("sf0.01")
    result = subprocess.run(
        [sys.executable, "-m", "pglab.datasets.ssb", "--sf", "0.01", "--out", str(tmp_path), "--processes", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for table in ("part", "supplier", "customer", "lineorder"):
        data = (tmp_path / f"{table}.tbl").read_bytes()
        assert (hashlib.sha256(data).hexdigest(), data.count(b"\n")) == reference[table], table
    date = (tmp_path / "date.tbl").read_bytes().splitlines(keepends=True)
    assert len(date) == 2557
    dbgen_digest, dbgen_rows = reference["date"]  # dbgen's 25 rows: its date table shrinks with the SF
    assert hashlib.sha256(b"".join(date[:dbgen_rows])).hexdigest() == dbgen_digest


# --- what the flavor promises -----------------------------------------------------------------------------


def test_output_depends_on_neither_seed_nor_processes_nor_chunk_order():
    serial = list(ssb.iter_copy_blocks("lineorder", 0.05, 1))
    assert len(serial) > 2
    assert list(ssb.iter_copy_blocks("lineorder", 0.05, 99)) == serial  # fixed streams: the seed is moot
    with ssb.iter_copy_blocks_parallel("lineorder", 0.05, 1, workers=3, prefetch=1) as blocks:
        assert list(blocks) == serial
    backwards = [ssb.chunk_block("lineorder", 0.05, 1, i, "copy")[1] for i in reversed(range(len(serial)))]
    assert backwards[::-1] == serial
    assert ssb.dataset_id(0.05, 99) == {
        "benchmark": "ssb",
        "sf": 0.05,
        "seed": 99,
        "flavor": "dbgen",
        "generator_version": ssb.GENERATOR_VERSION,
    }


def test_dbgen_quirks_are_kept():
    # part: 200,000 x floor(1 + log2 SF) rows; lineorder's part keys: 1 .. 200,000 x floor(1 + ln SF)
    assert [dbgen_counts.counts(sf).part for sf in (1, 2, 3, 10)] == [200_000, 400_000, 400_000, 800_000]
    assert [dbgen_counts.counts(sf).line_parts for sf in (1, 2, 3, 10)] == [200_000, 200_000, 400_000, 600_000]
    frame = ssb.table_chunk("lineorder", 3, 1, ssb.chunk_count("lineorder", 3) - 1)
    assert 200_000 < frame["lo_partkey"].max() <= 400_000
    assert (frame["lo_custkey"] % 3 != 0).all()
    with pytest.raises(ValueError, match="whole"):
        ssb.chunk_count("part", 2.5)


# --- expected query answers ----------------------------------------------------------------------------


def test_packaged_answers_are_the_reference_ones():
    for qid in ssb.QUERY_IDS:
        fixture = (FIXTURES / "sf1" / "answers" / f"{qid}.csv").read_text().splitlines()
        assert ",".join(answers.columns(qid)) == fixture[0]
        assert [",".join(row) for row in answers.expected(qid)] == fixture[1:], qid
    assert answers.expected("q1.1") == [("445921715901",)]


def test_compare_takes_rows_as_psycopg_returns_them():
    # sum(bigint) comes back as Decimal, sum(int) and int columns as int, text as str
    rows = [(Decimal(total), int(year), brand) for total, year, brand in answers.expected("q2.1")]
    assert answers.compare("q2.1", rows) is None
    assert answers.compare("q2.1", rows[::-1]) is None  # ties may come back in any order
    problem = answers.compare("q2.1", rows[1:] + [(Decimal(1), 1992, "MFGR#121")])
    assert "1 expected rows missing" in problem and "1 unexpected rows" in problem
    assert answers.compare("q1.1", [(Decimal("445921715901.00"),)]) is None
    from pglab.datasets.ssb.answers import result_checksum

    assert result_checksum(rows) == answers.expected_checksum("q2.1")


def test_answers_apply_to_dbgen_data_at_sf_1_only():
    dbgen_sf1 = ssb.dataset_id(1, 1)
    assert answers.applies(dbgen_sf1, "pg_ssb_run", "q1.3")
    assert answers.applies(dbgen_sf1, "ssb_paper", "q1.1")
    assert not answers.applies(dbgen_sf1, "ssb_paper", "q1.3")  # another quantity range
    assert not answers.applies(ssb.dataset_id(2, 1), "pg_ssb_run", "q1.1")
    assert not answers.applies(ssb.dataset_id(1, 1, "spec"), "pg_ssb_run", "q1.1")
    old = {"benchmark": "ssb", "sf": 1.0, "seed": 1, "generator_version": "1"}  # before the dbgen flavor
    assert not answers.is_dbgen_data(old) and not answers.is_dbgen_data(None)
    assert "byte-identical" in answers.generator_of(dbgen_sf1)
    assert "seed 7" in answers.generator_of(ssb.dataset_id(1, 7, "spec"))
    assert "before the dbgen flavor" in answers.generator_of(old)

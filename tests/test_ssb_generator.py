"""The SSB generator's spec flavor against the rules of the SSB specification (no database involved), and
what both flavors share: formats, chunking, the parallel producer, the command line.

Expected values are derived here from the rules themselves (TPC-H formulas, calendar arithmetic), never
copied from the generator's output. The dbgen flavor's own tests are in test_ssb_dbgen.py.
"""

import datetime as dt
import hashlib
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import polars as pl
import pytest

from pglab.datasets import ssb

SF = 0.05  # small, but big enough that every city, order day and most brands appear
SEED = 7
SPEC = "spec"  # the flavor whose rules these tests derive
FIRST_DAY, LAST_ORDER_DAY = dt.date(1992, 1, 1), dt.date(1998, 8, 2)
REGIONS = {"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"}


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return {table: pl.concat(list(ssb.iter_chunks(table, SF, SEED, flavor=SPEC))) for table in ssb.TABLES}


@pytest.fixture(scope="module")
def lineorder(tables) -> pl.DataFrame:
    return tables["lineorder"]


def table_digest(table: str, sf: float, seed: int, flavor: str = SPEC) -> str:
    digest = hashlib.sha256()
    for block in ssb.iter_copy_blocks(table, sf, seed, flavor):
        digest.update(block)
    return digest.hexdigest()


def retail_price(partkey: pl.Expr) -> pl.Expr:
    return 90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)


def day_number(datekey: pl.Expr) -> pl.Expr:
    return datekey.cast(pl.String).str.to_date("%Y%m%d")


# --- cardinalities -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sf", [0.01, 0.05])
def test_generated_row_counts_follow_the_scale_rules(sf):
    expected = {"part": 200_000 * sf, "supplier": 2_000 * sf, "customer": 30_000 * sf, "date": 2_557}
    for table, rows in expected.items():
        generated = sum(frame.height for frame in ssb.iter_chunks(table, sf, SEED, flavor=SPEC))
        assert generated == round(rows) == ssb.row_count(table, sf, flavor=SPEC), table
    orders = ssb.order_count(sf, flavor=SPEC)
    assert orders == round(1_500_000 * sf)
    lines = sum(frame.height for frame in ssb.iter_chunks("lineorder", sf, SEED, flavor=SPEC))
    assert ssb.row_count("lineorder", sf, seed=SEED, flavor=SPEC) == lines
    assert orders <= lines <= 7 * orders
    assert abs(lines / orders - 4) < 0.05  # 1-7 uniform: mean 4
    assert ssb.row_count("lineorder", sf, flavor=SPEC) == 4 * orders  # without a seed: the expectation


def test_row_count_formulas_at_large_scale_factors():
    for flavor in ssb.FLAVORS:
        assert [ssb.row_count("part", sf, flavor=flavor) for sf in (1, 2, 3, 4, 10, 100)] == [
            200_000,
            400_000,
            400_000,
            600_000,
            800_000,
            1_400_000,
        ]  # 200,000 x floor(1 + log2 SF)
        assert ssb.row_count("part", 0.5, flavor=flavor) == 100_000
        assert ssb.row_count("customer", 10, flavor=flavor) == 300_000
        assert ssb.row_count("supplier", 10, flavor=flavor) == 20_000
        assert ssb.row_count("date", 10, flavor=flavor) == ssb.row_count("date", 0.01, flavor=flavor) == 2_557
        assert ssb.order_count(10, flavor=flavor) == 15_000_000
    assert ssb.row_count("part", 1.5, flavor=SPEC) == 200_000
    assert ssb.order_count(0.3, flavor=SPEC) == 450_000  # the decimal 0.3, not the float just below it
    with pytest.raises(ValueError, match="whole"):
        ssb.row_count("part", 1.5)  # dbgen would truncate to SF 1: refused rather than mislabelled


def test_invalid_arguments_are_rejected():
    for bad_sf in (0, -1, float("nan"), float("inf"), "x", None, True):
        with pytest.raises(ValueError):
            ssb.row_count("part", bad_sf)
    with pytest.raises(ValueError):
        ssb.iter_chunks("part", 0.01, -1)
    with pytest.raises(ValueError):
        ssb.row_count("orders", 1)
    with pytest.raises(ValueError):
        ssb.iter_copy_blocks("orders", 1, SEED)
    with pytest.raises(ValueError):
        ssb.iter_blocks("part", 1, SEED, "csv")
    with pytest.raises(ValueError, match="flavor"):
        ssb.iter_blocks("part", 1, SEED, "tbl", flavor="tpch")


def test_lineorder_orderkey_is_bigint_from_sf_300():
    assert dict(ssb.columns("lineorder", 299))["lo_orderkey"] == "int"
    assert dict(ssb.columns("lineorder", 300))["lo_orderkey"] == "bigint"
    assert ssb.polars_schema("lineorder", 300)["lo_orderkey"] == pl.Int64
    assert "lo_orderkey bigint" in ssb.schema_sql(1000) and "lo_orderkey int" in ssb.schema_sql(1)
    ddl = ssb.schema_sql(1)
    assert ddl.count("CREATE TABLE") == 5 and 'CREATE TABLE "date"' in ddl
    assert "primary key" not in ddl.lower() and "references" not in ddl.lower()


# --- schema and value domains ----------------------------------------------------------------------------


def test_frames_have_schema_columns_and_dtypes(tables):
    for table, frame in tables.items():
        assert frame.columns == [name for name, _ in ssb.COLUMNS[table]]
        assert dict(frame.schema) == ssb.polars_schema(table, SF)


def test_strings_fit_their_varchar_lengths(tables):
    for table, frame in tables.items():
        for name, pg_type in ssb.COLUMNS[table]:
            if match := re.fullmatch(r"varchar\((\d+)\)", pg_type):
                assert frame[name].str.len_chars().max() <= int(match[1]), (table, name)


def test_geography(tables):
    customer, supplier = tables["customer"], tables["supplier"]
    for frame, p in ((customer, "c"), (supplier, "s")):
        assert set(frame[f"{p}_region"]) <= REGIONS
        pairs = frame.select(f"{p}_nation", f"{p}_region").unique()
        assert pairs[f"{p}_nation"].is_unique().all()  # each nation lies in one region
        bad_city = frame.filter(
            pl.col(f"{p}_city").str.slice(0, 9) != pl.col(f"{p}_nation").str.slice(0, 9).str.pad_end(9)
        )
        assert bad_city.is_empty()
        assert frame[f"{p}_city"].str.contains(r"^.{9}[0-9]$").all()
    assert customer["c_region"].n_unique() == 5 and customer["c_nation"].n_unique() == 25
    per_region = customer.group_by("c_region").agg(pl.col("c_nation").n_unique())["c_nation"]
    assert per_region.to_list() == [5] * 5
    nation_region = dict(customer.select("c_nation", "c_region").unique().iter_rows())
    assert nation_region["UNITED STATES"] == "AMERICA" and nation_region["UNITED KINGDOM"] == "EUROPE"
    assert nation_region["CHINA"] == "ASIA" and nation_region["EGYPT"] == "MIDDLE EAST"
    assert nation_region["MOROCCO"] == "AFRICA"
    # 1,500 customers over 250 equally likely cities miss ~0.6 of them on average; 6,000 miss ~1e-8.
    assert customer["c_city"].n_unique() >= 245
    cities = set(pl.concat(list(ssb.iter_chunks("customer", 0.2, SEED)))["c_city"])
    assert len(cities) == 250 and {"UNITED KI1", "UNITED ST0", "MOROCCO  6"} <= cities


def test_names_phones_and_segments(tables):
    for table, key in (("customer", "c_custkey"), ("supplier", "s_suppkey")):
        frame, p = tables[table], table[0]
        assert (frame[key] == pl.int_range(1, frame.height + 1, eager=True)).all()
        expected_names = pl.format(table.capitalize() + "#{}", pl.col(key).cast(pl.String).str.zfill(9))
        assert frame.select((pl.col(f"{p}_name") == expected_names).all()).item()
        assert frame[f"{p}_phone"].str.contains(r"^\d{2}-\d{3}-\d{3}-\d{4}$").all()
        country_codes = frame.group_by(f"{p}_nation").agg(pl.col(f"{p}_phone").str.slice(0, 2).unique())
        assert country_codes[f"{p}_phone"].list.len().max() == 1  # one country code per nation
    codes = dict(tables["customer"].select("c_nation", pl.col("c_phone").str.slice(0, 2)).unique().iter_rows())
    assert codes["ALGERIA"] == "10" and codes["UNITED STATES"] == "34"  # TPC-H nation index + 10
    assert sorted(set(codes.values())) == [str(cc) for cc in range(10, 35)]
    assert set(tables["customer"]["c_mktsegment"]) == {"AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"}


def test_part_hierarchy_and_words(tables):
    part = tables["part"]
    assert part["p_mfgr"].str.contains(r"^MFGR#[1-5]$").all()
    assert part.select(pl.col("p_category").str.starts_with(pl.col("p_mfgr")).all()).item()
    assert part["p_category"].str.contains(r"^MFGR#[1-5][1-5]$").all()
    assert part.select(pl.col("p_brand1").str.starts_with(pl.col("p_category")).all()).item()
    brand_number = part["p_brand1"].str.slice(7).cast(pl.Int32)
    assert brand_number.min() == 1 and brand_number.max() == 40
    assert part["p_category"].n_unique() == 25
    assert 990 <= part["p_brand1"].n_unique() <= 1000  # 10,000 parts over 1,000 equally likely brands
    assert "MFGR#2221" in set(part["p_brand1"])
    name_words = part["p_name"].str.split(" ")
    assert (name_words.list.len() == 2).all()
    assert (name_words.list.get(0) != name_words.list.get(1)).all()
    assert not part.select(pl.col("p_name").str.split(" ").list.contains(pl.col("p_color")).any()).item()
    colors = set(part["p_color"]) | set(name_words.explode())
    assert len(colors) == 92 and all(re.fullmatch(r"[a-z]+", c) for c in colors)
    syllables = part["p_type"].str.split(" ")
    assert (syllables.list.len() == 3).all()
    assert [syllables.list.get(i).n_unique() for i in range(3)] == [6, 5, 5]
    assert part["p_type"].n_unique() == 150
    assert {"STANDARD ANODIZED TIN", "PROMO BRUSHED COPPER"} <= set(part["p_type"])
    containers = part["p_container"].str.split(" ")
    assert [containers.list.get(i).n_unique() for i in range(2)] == [5, 8]
    assert "JUMBO PKG" in set(part["p_container"])
    assert part["p_size"].min() == 1 and part["p_size"].max() == 50


def test_lineorder_value_domains(lineorder):
    for column, low, high in (("lo_quantity", 1, 50), ("lo_discount", 0, 10), ("lo_tax", 0, 8)):
        assert (lineorder[column].min(), lineorder[column].max()) == (low, high), column
        assert lineorder[column].n_unique() == high - low + 1
    assert set(lineorder["lo_shipmode"]) == {"REG AIR", "AIR", "RAIL", "TRUCK", "MAIL", "FOB", "SHIP"}
    assert set(lineorder["lo_orderpriority"]) == {"1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"}
    assert set(lineorder["lo_shippriority"]) == {"0"}


def test_order_and_commit_dates(lineorder):
    days = lineorder.select(order=day_number(pl.col("lo_orderdate")), commit=day_number(pl.col("lo_commitdate")))
    assert days["order"].min() == FIRST_DAY and days["order"].max() == LAST_ORDER_DAY
    assert days["order"].n_unique() == (LAST_ORDER_DAY - FIRST_DAY).days + 1  # ~31 orders a day: all appear
    lag = (days["commit"] - days["order"]).dt.total_days()
    assert (lag.min(), lag.max()) == (30, 90)


def test_date_table(tables):
    date = tables["date"]
    calendar = [FIRST_DAY + dt.timedelta(days=i) for i in range((dt.date(1998, 12, 31) - FIRST_DAY).days + 1)]
    assert date.height == len(calendar) == 2557
    months = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
    seasons = {
        12: "Christmas",
        6: "Summer",
        7: "Summer",
        8: "Summer",
        1: "Winter",
        2: "Winter",
        3: "Spring",
        4: "Spring",
        5: "Spring",
        9: "Fall",
        10: "Fall",
        11: "Fall",
    }
    for row, day in zip(date.iter_rows(named=True), calendar, strict=True):
        yday = day.timetuple().tm_yday
        last_of_month = (day + dt.timedelta(days=1)).month != day.month
        sunday_first = day.isoweekday() % 7 + 1
        assert row == row | {
            "d_datekey": int(day.strftime("%Y%m%d")),
            "d_date": f"{months[day.month - 1]} {day.day}, {day.year}",
            "d_dayofweek": day.strftime("%A"),
            "d_month": months[day.month - 1],
            "d_year": day.year,
            "d_yearmonthnum": day.year * 100 + day.month,
            "d_yearmonth": f"{months[day.month - 1][:3]}{day.year}",
            "d_daynuminweek": sunday_first,
            "d_daynuminmonth": day.day,
            "d_daynuminyear": yday,
            "d_monthnuminyear": day.month,
            "d_weeknuminyear": yday // 7 + 1,
            "d_sellingseason": seasons[day.month],
            "d_lastdayinweekfl": "1" if day.isoweekday() == 6 else "0",
            "d_lastdayinmonthfl": "1" if last_of_month else "0",
            "d_weekdayfl": "1" if day.isoweekday() <= 5 else "0",
        }, day
    assert date["d_weeknuminyear"].max() == 53
    assert set(date["d_holidayfl"]) == {"0", "1"}
    assert date.filter(pl.col("d_dayofweek") == "Sunday")["d_daynuminweek"].unique().to_list() == [1]


# --- relations and derived values ------------------------------------------------------------------------


def test_referential_integrity(tables, lineorder):
    references = [
        ("lo_custkey", "customer", "c_custkey"),
        ("lo_partkey", "part", "p_partkey"),
        ("lo_suppkey", "supplier", "s_suppkey"),
        ("lo_orderdate", "date", "d_datekey"),
        ("lo_commitdate", "date", "d_datekey"),
    ]
    for fk, table, key in references:
        assert tables[table][key].is_unique().all()
        dangling = lineorder.join(tables[table], left_on=fk, right_on=key, how="anti")
        assert dangling.is_empty(), fk


def test_only_customers_not_divisible_by_3_order(tables, lineorder):
    assert (lineorder["lo_custkey"] % 3 != 0).all()
    eligible = tables["customer"].filter(pl.col("c_custkey") % 3 != 0).height
    assert lineorder["lo_custkey"].n_unique() == eligible  # 75,000 orders reach all 1,000 of them


def test_sparse_order_keys_and_lines(lineorder):
    orders = (
        lineorder.group_by("lo_orderkey")
        .agg(
            lines=pl.len(),
            numbers=pl.col("lo_linenumber").sort(),
            custkeys=pl.col("lo_custkey").n_unique(),
            dates=pl.col("lo_orderdate").n_unique(),
            priorities=pl.col("lo_orderpriority").n_unique(),
            totals=pl.col("lo_ordertotalprice").n_unique(),
        )
        .sort("lo_orderkey")
    )
    n = ssb.order_count(SF)
    assert orders.height == n
    expected_keys = [(i // 8) * 32 + i % 8 for i in range(1, n + 1)]  # 1-7, 32-39, 64-71, ...
    assert orders["lo_orderkey"].to_list() == expected_keys
    assert (orders["lo_orderkey"] % 32 < 8).all()
    assert orders["lines"].min() == 1 and orders["lines"].max() == 7
    shares = orders["lines"].value_counts(normalize=True)["proportion"]
    assert ((shares - 1 / 7).abs() < 0.01).all()  # uniform 1-7
    assert orders.select((pl.col("numbers") == pl.int_ranges(1, pl.col("lines") + 1)).all()).item()
    assert orders.select(pl.col("custkeys", "dates", "priorities", "totals").max()).row(0) == (1, 1, 1, 1)


def test_derived_price_columns(lineorder):
    check_derived_prices(lineorder)
    # Part keys from 200,000 on exercise the "mod 20001" term of the retail price (SF 2 has 400,000 parts).
    wide = ssb.table_chunk("lineorder", 2, SEED, 0, flavor=SPEC)
    assert wide["lo_partkey"].max() > 200_000
    check_derived_prices(wide)


def check_derived_prices(lineorder: pl.DataFrame) -> None:
    price = retail_price(pl.col("lo_partkey"))
    extended = pl.col("lo_quantity") * price
    revenue = extended * (100 - pl.col("lo_discount")) // 100
    checks = lineorder.select(
        extended=(pl.col("lo_extendedprice") == extended).all(),
        revenue=(pl.col("lo_revenue") == revenue).all(),
        supplycost=(pl.col("lo_supplycost") == 6 * price // 10).all(),
    )
    assert checks.row(0) == (True, True, True)
    totals = lineorder.group_by("lo_orderkey").agg(
        stored=pl.col("lo_ordertotalprice").first(),
        summed=(revenue * (100 + pl.col("lo_tax")) // 100).sum(),
    )
    assert (totals["stored"] == totals["summed"]).all()
    assert lineorder["lo_extendedprice"].min() >= 90_000 and lineorder["lo_ordertotalprice"].max() < 2**31


# --- determinism ---------------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_bytes():
    for table in ("part", "customer", "lineorder"):
        first = table_digest(table, 0.01, SEED)
        assert table_digest(table, 0.01, SEED) == first
        assert table_digest(table, 0.01, SEED + 1) != first
    assert table_digest("date", 0.01, 1) == table_digest("date", 0.01, 2)  # the calendar has no randomness
    assert ssb.dataset_id(0.01, SEED, SPEC) == {
        "benchmark": "ssb",
        "sf": 0.01,
        "seed": SEED,
        "generator_version": ssb.GENERATOR_VERSION,
        "flavor": SPEC,
    }
    assert ssb.dataset_id(0.01, SEED)["flavor"] == "dbgen"  # the default


def test_chunks_do_not_depend_on_how_they_are_consumed():
    sf = 0.05
    assert ssb.chunk_count("lineorder", sf) > 1  # otherwise this test proves nothing
    in_order = list(ssb.iter_chunks("lineorder", sf, SEED))
    backwards = [ssb.table_chunk("lineorder", sf, SEED, i) for i in reversed(range(len(in_order)))]
    for expected, got in zip(in_order, reversed(backwards), strict=True):
        assert expected.equals(got)
    assert pl.concat(in_order).equals(pl.concat(list(ssb.iter_chunks("lineorder", sf, SEED))))


def test_parallel_producer_gives_the_serial_bytes_in_order():
    serial = list(ssb.iter_copy_blocks("lineorder", 0.05, SEED))
    with ssb.iter_copy_blocks_parallel("lineorder", 0.05, SEED, workers=2, prefetch=1) as blocks:
        assert list(blocks) == serial
    tbl = list(ssb.iter_tbl_blocks_parallel("customer", 0.05, SEED))
    assert tbl == list(ssb.iter_tbl_blocks("customer", 0.05, SEED))


def _gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # exited; only waiting for its (new) parent to reap it
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_parallel_producer_stops_its_children_when_the_consumer_stops_early():
    blocks = ssb.iter_copy_blocks_parallel("lineorder", 1, SEED, workers=2, prefetch=1)
    pids = [child.pid for child, _ in blocks._children]
    assert len(pids) == 2 and len(next(blocks)) > 0
    blocks.close()
    assert all(_gone(pid, 1) for pid in pids)

    with pytest.raises(RuntimeError, match="COPY failed"):
        with ssb.iter_copy_blocks_parallel("lineorder", 1, SEED) as blocks:
            pids = [child.pid for child, _ in blocks._children]
            for _ in blocks:
                raise RuntimeError("COPY failed")
    assert _gone(pids[0], 1)


def test_parallel_children_exit_when_their_consumer_is_killed():
    script = textwrap.dedent("""
        import time
        from pglab.datasets import ssb
        blocks = ssb.iter_copy_blocks_parallel("lineorder", 1, 1, workers=2, prefetch=1)
        print(*[child.pid for child, _ in blocks._children], flush=True)
        time.sleep(60)
    """)
    consumer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in consumer.stdout.readline().split()]
    assert len(pids) == 2
    time.sleep(1.0)  # let the children fill their pipes
    consumer.send_signal(signal.SIGKILL)
    consumer.wait()
    try:
        assert all(_gone(pid) for pid in pids)
    finally:
        for pid in pids:
            if not _gone(pid, 0):
                os.kill(pid, signal.SIGKILL)


def test_parallel_producer_reports_a_failing_child():
    with pytest.raises(ValueError):
        ssb.iter_copy_blocks_parallel("orders", 1, SEED)
    with pytest.raises(ValueError):
        ssb.iter_copy_blocks_parallel("lineorder", 1, SEED, workers=0)
    with ssb.iter_copy_blocks_parallel("lineorder", 1, SEED, prefetch=1) as blocks:
        os.kill(blocks._children[0][0].pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="failed"):
            for _ in blocks:
                pass


# --- output formats ------------------------------------------------------------------------------------


def test_values_need_no_escaping(tables):
    for table, frame in tables.items():
        for name in frame.select(pl.col(pl.String)).columns:
            assert not frame[name].str.contains(r"[\t\n\r\\|]").any(), (table, name)


@pytest.mark.parametrize("flavor", ssb.FLAVORS)
@pytest.mark.parametrize("table", ssb.TABLES)
def test_copy_and_tbl_blocks_parse_back_to_the_frames(table, flavor):
    frame = pl.concat(list(ssb.iter_chunks(table, 0.01, SEED, flavor)))
    assert dict(frame.schema) == ssb.polars_schema(table, 0.01)
    schema = ssb.polars_schema(table, 0.01)
    copy_text = b"".join(ssb.iter_copy_blocks(table, 0.01, SEED, flavor))
    assert copy_text.endswith(b"\n") and copy_text.count(b"\n") == frame.height
    assert {line.count(b"\t") for line in copy_text.splitlines()} == {len(schema) - 1}
    parsed = pl.read_csv(io.BytesIO(copy_text), separator="\t", has_header=False, schema=schema, quote_char=None)
    assert parsed.equals(frame)

    tbl_text = b"".join(ssb.iter_tbl_blocks(table, 0.01, SEED, flavor))
    lines = tbl_text.split(b"\n")
    assert lines[-1] == b"" and all(line.endswith(b"|") for line in lines[:-1])
    assert tbl_text.replace(b"|\n", b"\n").replace(b"|", b"\t") == copy_text


# --- queries ---------------------------------------------------------------------------------------------


def test_query_files():
    assert ssb.QUERY_SETS == ("pg_ssb_run", "ssb_paper") and len(ssb.QUERY_IDS) == 13
    differing = [q for q in ssb.QUERY_IDS if ssb.query_sql("pg_ssb_run", q) != ssb.query_sql("ssb_paper", q)]
    assert differing == ["q1.3", "q2.3"]
    assert "lo_quantity between 26 and 35" in ssb.query_sql("pg_ssb_run", "q1.3")
    assert "lo_quantity between 36 and 40" in ssb.query_sql("ssb_paper", "q1.3")
    assert "'MFGR#2221'" in ssb.query_sql("pg_ssb_run", "q2.3")
    assert "'MFGR#2239'" in ssb.query_sql("ssb_paper", "q2.3")
    for query_set in ssb.QUERY_SETS:
        for qid in ssb.QUERY_IDS:
            sql = ssb.query_sql(query_set, qid)
            assert sql.startswith("select") and "lineorder" in sql and not sql.endswith(";")
    with pytest.raises(ValueError):
        ssb.query_sql("tpch", "q1.1")


def test_expected_filter_factors_follow_from_the_rules():
    order_days = (LAST_ORDER_DAY - FIRST_DAY).days + 1  # 2,406
    years_92_97 = (dt.date(1998, 1, 1) - FIRST_DAY).days
    days_97_98 = 365 + (LAST_ORDER_DAY - dt.date(1998, 1, 1)).days + 1
    derived = {
        "q1.1": 365 / order_days * 3 / 11 * 24 / 50,
        "q1.2": 31 / order_days * 3 / 11 * 10 / 50,
        "q2.1": 1 / 25 * 1 / 5,
        "q2.2": 8 / 1000 * 1 / 5,
        "q2.3": 1 / 1000 * 1 / 5,
        "q3.1": 1 / 25 * years_92_97 / order_days,
        "q3.2": 1 / 625 * years_92_97 / order_days,
        "q3.3": (2 / 250) ** 2 * years_92_97 / order_days,
        "q3.4": (2 / 250) ** 2 * 31 / order_days,
        "q4.1": 1 / 25 * 2 / 5,
        "q4.2": 1 / 25 * 2 / 5 * days_97_98 / order_days,
        "q4.3": 1 / 5 * 1 / 25 * 1 / 25 * days_97_98 / order_days,
    }
    week_6_of_1994 = 7 / order_days * 3 / 11  # days 35-41 of 1994, discount 5-7
    for query_set, q13_quantity in (("pg_ssb_run", 10 / 50), ("ssb_paper", 5 / 50)):
        for qid in ssb.QUERY_IDS:
            expected = derived.get(qid, week_6_of_1994 * q13_quantity)
            assert ssb.expected_filter_factor(query_set, qid) == pytest.approx(expected, rel=1e-12), qid
    for qid, published in ssb.PUBLISHED_FILTER_FACTORS.items():
        ratio = ssb.expected_filter_factor("ssb_paper", qid) / published
        assert 0.8 < ratio < 1.25, qid  # near, not on: orders stop at 1998-08-02
    assert 1.8 < ssb.expected_filter_factor("pg_ssb_run", "q1.3") / ssb.PUBLISHED_FILTER_FACTORS["q1.3"] < 2.4


def test_generated_rows_pass_the_queries_as_often_as_expected(tables, lineorder):
    """Observed pass rates against the generation rules, given the dimension rows actually generated."""
    star = (
        lineorder.join(tables["date"], left_on="lo_orderdate", right_on="d_datekey")
        .join(tables["part"], left_on="lo_partkey", right_on="p_partkey")
        .join(tables["supplier"], left_on="lo_suppkey", right_on="s_suppkey")
        .join(tables["customer"], left_on="lo_custkey", right_on="c_custkey")
    )
    assert star.height == lineorder.height
    # What each predicate is tested on: every order day and (quantity, discount) pair is equally likely;
    # for the dimensions, the rows actually generated (only customers not divisible by 3 order).
    outcomes = {
        "date": tables["date"].filter(day_number(pl.col("d_datekey")) <= LAST_ORDER_DAY),
        "lineorder": pl.DataFrame({"lo_quantity": range(1, 51)}).join(
            pl.DataFrame({"lo_discount": range(11)}), how="cross"
        ),
        "part": tables["part"],
        "supplier": tables["supplier"],
        "customer": tables["customer"].filter(pl.col("c_custkey") % 3 != 0),
    }
    for qid in ssb.QUERY_IDS:
        predicates = ssb.query_predicates("pg_ssb_run", qid)
        p = 1.0
        for table, predicate in predicates.items():
            p *= outcomes[table].filter(predicate).height / outcomes[table].height
        passed = star.filter(*predicates.values()).height
        sigma = (star.height * p * (1 - p)) ** 0.5
        assert abs(passed - star.height * p) <= 5 * sigma + 3, (qid, passed, star.height * p)


# --- command line --------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pglab.datasets.ssb", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_help():
    result = run_cli("--help")
    assert result.returncode == 0 and "--sf" in result.stdout and "--out" in result.stdout


@pytest.mark.parametrize("sf", ["0", "-1", "abc", "nan", "1.5"])
def test_cli_rejects_bad_scale_factors(sf, tmp_path):
    result = run_cli("--sf", sf, "--out", str(tmp_path))
    assert result.returncode == 2
    assert "--sf" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())


def test_cli_rejects_unusable_output_directories(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    for out in (a_file, a_file / "below"):
        result = run_cli("--sf", "0.01", "--out", str(out))
        assert result.returncode == 2 and "--out" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("flavor", "processes"), [("spec", "1"), ("spec", "3"), ("dbgen", "2")])
def test_cli_writes_the_tables(tmp_path, flavor, processes):
    out = tmp_path / "new" / "sf0.01"
    result = run_cli(
        "--sf", "0.01", "--seed", str(SEED), "--out", str(out), "--flavor", flavor, "--processes", processes
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.tbl" for t in ssb.TABLES)
    for table in ssb.TABLES:
        # A separate process, same bytes: the run is reproducible, not just the in-process iterator.
        expected = b"".join(ssb.iter_tbl_blocks(table, 0.01, SEED, flavor))
        assert (out / f"{table}.tbl").read_bytes() == expected, table
    assert "lineorder" in result.stderr  # the progress bars go to stderr

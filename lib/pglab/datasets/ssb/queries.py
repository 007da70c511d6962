"""The 13 SSB queries in two textual variants, and the share of lineorder rows each one selects."""

from functools import cache
from importlib import resources

import polars as pl

from . import dates, words

QUERY_SETS = ("pg_ssb_run", "ssb_paper")
DEFAULT_QUERY_SET = "pg_ssb_run"  # the tool the reference study used
QUERY_IDS = ("q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3")

# The SSB paper's filter factors (ssb.md). They assume years 1992-1998 uniform, and q1.3's is for the paper's
# `lo_quantity between 36 and 40`.
PUBLISHED_FILTER_FACTORS = {
    "q1.1": 0.019,
    "q1.2": 0.00065,
    "q1.3": 0.000075,
    "q2.1": 1 / 125,
    "q2.2": 1 / 625,
    "q2.3": 1 / 5000,
    "q3.1": 0.034,
    "q3.2": 0.0014,
    "q3.3": 0.000055,
    "q3.4": 0.00000076,
    "q4.1": 0.016,
    "q4.2": 0.0046,
    "q4.3": 0.000091,
}


def query_sql(query_set: str, qid: str) -> str:
    """The query text without its trailing semicolon, ready to be sent or wrapped (EXPLAIN ...)."""
    _check(query_set, qid)
    text = resources.files(__package__).joinpath("queries", query_set, f"{qid}.sql").read_text("utf-8")
    return text.strip().rstrip(";").rstrip()


def _check(query_set: str, qid: str) -> None:
    if query_set not in QUERY_SETS:
        raise ValueError(f"unknown query set {query_set!r}; expected one of {QUERY_SETS}")
    if qid not in QUERY_IDS:
        raise ValueError(f"unknown query {qid!r}; expected one of {', '.join(QUERY_IDS)}")


# Each query's predicates, split by the table whose columns they test; the SQL files are the texts sent to
# the server, these mirror their WHERE clauses (the tests check them against generated data).
col = pl.col
_C_AMERICA, _S_AMERICA = col("c_region") == "AMERICA", col("s_region") == "AMERICA"
_UK_CITIES = ("UNITED KI1", "UNITED KI5")
_MFGR_1_2 = col("p_mfgr").is_in(["MFGR#1", "MFGR#2"])
_YEARS_92_97 = col("d_year").is_between(1992, 1997)
_YEARS_97_98 = col("d_year").is_in([1997, 1998])


def _q13_quantity(query_set: str) -> pl.Expr:
    low, high = (26, 35) if query_set == "pg_ssb_run" else (36, 40)
    return col("lo_quantity").is_between(low, high)


def query_predicates(query_set: str, qid: str) -> dict[str, pl.Expr]:
    """{table: predicate on that table's columns}; a row passes the query when all of them hold."""
    _check(query_set, qid)
    q23_brand = "MFGR#2221" if query_set == "pg_ssb_run" else "MFGR#2239"
    predicates = {
        "q1.1": {
            "date": col("d_year") == 1993,
            "lineorder": col("lo_discount").is_between(1, 3) & (col("lo_quantity") < 25),
        },
        "q1.2": {
            "date": col("d_yearmonthnum") == 199401,
            "lineorder": col("lo_discount").is_between(4, 6) & col("lo_quantity").is_between(26, 35),
        },
        "q1.3": {
            "date": (col("d_weeknuminyear") == 6) & (col("d_year") == 1994),
            "lineorder": col("lo_discount").is_between(5, 7) & _q13_quantity(query_set),
        },
        "q2.1": {"part": col("p_category") == "MFGR#12", "supplier": _S_AMERICA},
        "q2.2": {
            "part": col("p_brand1").is_between(pl.lit("MFGR#2221"), pl.lit("MFGR#2228")),
            "supplier": col("s_region") == "ASIA",
        },
        "q2.3": {"part": col("p_brand1") == q23_brand, "supplier": col("s_region") == "EUROPE"},
        "q3.1": {"customer": col("c_region") == "ASIA", "supplier": col("s_region") == "ASIA", "date": _YEARS_92_97},
        "q3.2": {
            "customer": col("c_nation") == "UNITED STATES",
            "supplier": col("s_nation") == "UNITED STATES",
            "date": _YEARS_92_97,
        },
        "q3.3": {
            "customer": col("c_city").is_in(_UK_CITIES),
            "supplier": col("s_city").is_in(_UK_CITIES),
            "date": _YEARS_92_97,
        },
        "q3.4": {
            "customer": col("c_city").is_in(_UK_CITIES),
            "supplier": col("s_city").is_in(_UK_CITIES),
            "date": col("d_yearmonth") == "Dec1997",
        },
        "q4.1": {"customer": _C_AMERICA, "supplier": _S_AMERICA, "part": _MFGR_1_2},
        "q4.2": {"customer": _C_AMERICA, "supplier": _S_AMERICA, "part": _MFGR_1_2, "date": _YEARS_97_98},
        "q4.3": {
            "customer": _C_AMERICA,
            "supplier": col("s_nation") == "UNITED STATES",
            "part": col("p_category") == "MFGR#14",
            "date": _YEARS_97_98,
        },
    }
    return predicates[qid]


def expected_filter_factor(query_set: str, qid: str) -> float:
    """Probability that a lineorder row passes the query, implied exactly by the generation rules.

    The columns a query tests are drawn independently (order date; quantity and discount; the part's brand;
    supplier's and customer's city), so the probability is the product, per table, of the share of that
    table's equally likely outcomes that pass. Order dates are uniform over 1992-01-01 .. 1998-08-02, which
    puts more than 6/7 of the rows in 1992-1997. Only custkeys not divisible by 3 order, but a customer's
    city does not depend on its key, so the ordering customers' cities are still uniform.
    """
    factor = 1.0
    for table, predicate in query_predicates(query_set, qid).items():
        outcomes = equally_likely_outcomes(table)
        factor *= outcomes.filter(predicate).height / outcomes.height
    return factor


@cache
def equally_likely_outcomes(table: str) -> pl.DataFrame:
    """The columns queries test, one row per equally likely outcome of the rules that draw them."""
    if table == "date":
        return dates.date_frame().head(dates.ORDER_DAYS)  # order dates: uniform days up to 1998-08-02
    if table == "lineorder":
        quantity = pl.int_range(1, 51, eager=True).alias("lo_quantity").to_frame()
        discount = pl.int_range(0, 11, eager=True).alias("lo_discount").to_frame()
        return quantity.join(discount, how="cross")
    if table == "part":
        return pl.DataFrame({"p_brand1": words.BRANDS}).with_columns(
            p_category=col("p_brand1").str.slice(0, 7), p_mfgr=col("p_brand1").str.slice(0, 6)
        )
    if table in ("supplier", "customer"):
        p = table[0]
        nation_of_city = [i // words.CITY_DIGITS for i in range(len(words.CITIES))]
        return pl.DataFrame(
            {
                f"{p}_city": words.CITIES,
                f"{p}_nation": [words.NATION_NAMES[n] for n in nation_of_city],
                f"{p}_region": [words.REGIONS[words.NATION_REGION[n]] for n in nation_of_city],
            }
        )
    raise ValueError(f"no query predicate is defined on table {table!r}")

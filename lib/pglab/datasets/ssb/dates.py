"""The SSB calendar: the date dimension and the day ranges order and commit dates are drawn from."""

import datetime as dt
from functools import cache

import numpy as np
import polars as pl

FIRST_DAY = dt.date(1992, 1, 1)
LAST_DAY = dt.date(1998, 12, 31)
CALENDAR_DAYS = (LAST_DAY - FIRST_DAY).days + 1  # 2,557
# TPC-H: orders are placed up to the end date minus 151 days (121 ship + 30 receipt), i.e. 1998-08-02.
LAST_ORDER_DAY = LAST_DAY - dt.timedelta(days=151)
ORDER_DAYS = (LAST_ORDER_DAY - FIRST_DAY).days + 1  # 2,406
COMMIT_LAG_DAYS = (30, 90)

MONTHS = (
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
)
WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")  # daynuminweek 1-7
# Selling season by month (ssb.md).
SEASONS = (
    "Winter",
    "Winter",
    "Spring",
    "Spring",
    "Spring",
    "Summer",
    "Summer",
    "Summer",
    "Fall",
    "Fall",
    "Fall",
    "Christmas",
)
# ssb.md does not define holidays; these (month, day) pairs are the public generator's fixed list.
HOLIDAYS = ((12, 24), (1, 1), (2, 20), (4, 20), (5, 20), (7, 20), (8, 20), (9, 20), (10, 20), (11, 20))


@cache
def date_frame() -> pl.DataFrame:
    """The `date` table, one row per calendar day, columns in schema order."""
    day = pl.date_range(FIRST_DAY, LAST_DAY, "1d", eager=True).alias("day").to_frame()
    day_col = pl.col("day")
    # Int32 before any arithmetic: polars gives month/day as Int8, and month * 100 would wrap.
    year, month, mday, weekday, yday = (
        part.cast(pl.Int32)
        for part in (
            day_col.dt.year(),
            day_col.dt.month(),
            day_col.dt.day(),
            day_col.dt.weekday(),
            day_col.dt.ordinal_day(),
        )
    )
    weekday = weekday % 7 + 1  # polars: Monday=1..Sunday=7; SSB: Sunday=1..Saturday=7
    month_name = _lookup(month - 1, MONTHS)
    holiday = pl.lit(False)
    for h_month, h_day in HOLIDAYS:
        holiday = holiday | ((month == h_month) & (mday == h_day))
    frame = day.select(
        d_datekey=year * 10000 + month * 100 + mday,
        d_date=pl.format("{} {}, {}", month_name, mday, year),
        d_dayofweek=_lookup(weekday - 1, WEEKDAYS),
        d_month=month_name,
        d_year=year,
        d_yearmonthnum=year * 100 + month,
        d_yearmonth=pl.concat_str(month_name.str.slice(0, 3), year.cast(pl.String)),
        d_daynuminweek=weekday,
        d_daynuminmonth=mday,
        d_daynuminyear=yday,
        d_monthnuminyear=month,
        d_weeknuminyear=yday // 7 + 1,
        d_sellingseason=_lookup(month - 1, SEASONS),
        d_lastdayinweekfl=_flag(weekday == 7),
        d_lastdayinmonthfl=_flag(day_col.dt.month_end() == day_col),
        d_holidayfl=_flag(holiday),
        d_weekdayfl=_flag(weekday.is_between(2, 6)),
    )
    return frame.with_columns(pl.col(pl.Int64, pl.Int32).cast(pl.Int32))


@cache
def datekeys() -> np.ndarray:
    """yyyymmdd of each calendar day, indexed by days since 1992-01-01 (int32)."""
    keys = date_frame()["d_datekey"].to_numpy().astype(np.int32)
    keys.setflags(write=False)
    return keys


def _lookup(index: pl.Expr, words: tuple[str, ...]) -> pl.Expr:
    return pl.lit(pl.Series(words, dtype=pl.String)).gather(index)


def _flag(condition: pl.Expr) -> pl.Expr:
    return pl.when(condition).then(pl.lit("1")).otherwise(pl.lit("0"))

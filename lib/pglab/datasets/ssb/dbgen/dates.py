"""dbgen's SSB date table (build.c's mk_date): its own selling seasons and holiday list."""

import datetime as dt
from functools import cache

import polars as pl

from ..dates import MONTHS, WEEKDAYS
from .dists import CALENDAR_DAYS, FIRST_DAY

# (season, first month, last month, first day, last day), first match wins, as dbgen checks them
SEASONS = (
    ("Christmas", 11, 12, 1, 31),
    ("Summer", 5, 8, 1, 31),
    ("Winter", 1, 3, 1, 31),
    ("Spring", 4, 4, 1, 30),
    ("Fall", 9, 10, 1, 31),
)
HOLIDAYS = {(12, 24), (1, 1), (2, 20), (4, 20), (5, 20), (7, 20), (8, 20), (9, 20), (10, 20), (11, 20)}


def _season(month: int, day: int) -> str:
    return next((name for name, m0, m1, d0, d1 in SEASONS if m0 <= month <= m1 and d0 <= day <= d1), "")


@cache
def date_frame() -> pl.DataFrame:
    rows = []
    for i in range(CALENDAR_DAYS):
        d = FIRST_DAY + dt.timedelta(days=i)
        month = MONTHS[d.month - 1]
        # dbgen's (tm_wday + 1) % 7 + 1 is one day ahead of the calendar: it calls 1992-01-01 a Thursday
        weekday = (d.isoweekday() % 7 + 1) % 7 + 1
        yday = d.timetuple().tm_yday
        rows.append(
            (
                d.year * 10000 + d.month * 100 + d.day,
                f"{month} {d.day}, {d.year}",
                WEEKDAYS[weekday - 1],
                month,
                d.year,
                d.year * 100 + d.month,
                f"{month[:3]}{d.year}",
                weekday,
                d.day,
                yday,
                d.month,
                yday // 7 + 1,
                _season(d.month, d.day),
                "1" if weekday == 7 else "0",
                "1" if (d + dt.timedelta(days=1)).month != d.month else "0",
                "1" if (d.month, d.day) in HOLIDAYS else "0",
                "1" if 1 < weekday < 7 else "0",
            )
        )
    names = [
        "d_datekey",
        "d_date",
        "d_dayofweek",
        "d_month",
        "d_year",
        "d_yearmonthnum",
        "d_yearmonth",
        "d_daynuminweek",
        "d_daynuminmonth",
        "d_daynuminyear",
        "d_monthnuminyear",
        "d_weeknuminyear",
        "d_sellingseason",
        "d_lastdayinweekfl",
        "d_lastdayinmonthfl",
        "d_holidayfl",
        "d_weekdayfl",
    ]
    frame = pl.DataFrame(rows, schema=names, orient="row")
    return frame.with_columns(pl.col(pl.Int64).cast(pl.Int32))

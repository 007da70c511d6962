"""What S3 (docs/studies.md) gives for its version curve, 7.3 … 9.1. Its results are charts only; the text gives
one number (9.1 more than 3× 7.3 on the mean TPC-B-like tps) and readings, which the version chart sets beside
our curve as labelled points (relative to the oldest version, as ours are)."""

from __future__ import annotations

import polars as pl

VERSIONS = ("7.3", "7.4", "8.0", "8.1", "8.2", "8.3", "8.4", "9.0", "9.1")

# (version, relative to 7.3 or None where the text gives no figure, the reading)
READINGS = (
    ("7.3", 1.0, "7.3: the reference; highest select-only tps at scales 1 and 10"),
    ("7.4", None, "7.3, 7.4: tps falls run after run without vacuum"),
    ("8.3", None, "8.3 (HOT): the no-vacuum curve no longer falls"),
    ("9.1", 3.0, "9.1: more than 3× 7.3 on the mean (TPC-B-like)"),
)


def readings() -> pl.DataFrame:
    """The study's points: version, relative (null: a reading without a figure), label."""
    return pl.DataFrame(
        READINGS, schema={"version": pl.String, "relative": pl.Float64, "label": pl.String}, orient="row"
    )


def version_order(ours: list[str]) -> list[str]:
    """The x axis: the study's versions, then ours (majors 10, 11, ...) in numeric order."""
    return [*VERSIONS, *sorted(set(ours), key=lambda v: tuple(int(x) for x in v.split(".")))]

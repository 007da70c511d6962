"""Artefact rounds (methodology rule 18): a round far outside its cell's other rounds is caught by a rule fixed
before the runs, kept in raw, re-measured once, and left out of every estimate, floor and prior.

The rule: in a cell (one server, condition and item) of at least `MIN_ROUNDS` timed rounds, a round whose value
(the median of its executions) is under `LOW` or over `HIGH` times the median of the cell's other rounds is an
artefact. Why these bounds: the machine's own slow mode (a neighbour's load, a round ~2× slow, at times most
rounds of a cell) must stay inside them, or the unslowed rounds would read as artefacts against a slowed majority
(0.5× exactly: tests/test_verdicts.py's slowed rounds); what falls outside is not the query's cost but something
else: a round that took 0.037 ms where its four others took 0.104-0.109 (0.35×, an auto_explain cell of the
reference run) measured a cache or a skipped code path, and it alone moved a first-screen sentence.
A trend by design (pgbench's no-vacuum series, client counts pooled in one cell) is not a cell of exchangeable
rounds: callers turn the rule off there (`artefacts=False`).

    flagged = artefacts.flag(round_values, cell=["server", "condition", "item"])   # + others, factor, artefact
    kept = artefacts.drop(round_values, cell=[...])                                  # what estimates use
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

LOW = 0.4  # a round under 0.4× its cell's other rounds' median
HIGH = 2.5  # or over 2.5× it
MIN_ROUNDS = 4  # the other rounds' median needs three of them to be a reference

RULE = (
    f"a round under {LOW:g}× or over {HIGH:g}× the median of its cell's other rounds (cells of ≥ {MIN_ROUNDS} rounds)"
)


def _others_median(v: np.ndarray) -> np.ndarray:
    """For each value, the median of the other values of its array (leave one out)."""
    return np.array([np.median(np.delete(v, i)) for i in range(v.size)]) if v.size > 1 else np.full(v.size, np.nan)


def flag(rv: pl.DataFrame, cell: Sequence[str], round_col: str = "round", value: str = "value") -> pl.DataFrame:
    """`rv` (one value per cell and round, e.g. `paired.round_values`) with `others` (the median of the cell's other
    rounds), `factor` (value / others) and `artefact` (the rule above) added; row order kept."""
    cell = list(cell)
    if rv.is_empty():
        return rv.with_columns(others=pl.lit(None, pl.Float64), factor=pl.lit(None, pl.Float64), artefact=pl.lit(False))
    keyed = rv.with_row_index("_i")
    others = np.full(keyed.height, np.nan)
    for g in keyed.select("_i", *cell, value).partition_by(cell, maintain_order=True) if cell else [keyed]:
        v = g[value].cast(pl.Float64).to_numpy()
        if v.size >= MIN_ROUNDS:
            others[g["_i"].to_numpy()] = _others_median(v)
    factor = pl.col(value).cast(pl.Float64) / pl.col("others")
    return (
        keyed.with_columns(others=pl.Series(others, dtype=pl.Float64).fill_nan(None))
        .with_columns(factor=factor)
        .with_columns(artefact=((pl.col("factor") < LOW) | (pl.col("factor") > HIGH)).fill_null(False))
        .drop("_i")
    )


def drop(rv: pl.DataFrame, cell: Sequence[str], round_col: str = "round", value: str = "value") -> pl.DataFrame:
    """`rv` without its artefact rounds (same columns)."""
    return flag(rv, cell, round_col, value).filter(~pl.col("artefact")).drop("others", "factor", "artefact")


def flagged(rv: pl.DataFrame, cell: Sequence[str], round_col: str = "round", value: str = "value") -> pl.DataFrame:
    """Only the artefact rounds: cell columns, round, round_value (the round's value), others, factor; sorted."""
    cell = list(cell)
    f = flag(rv, cell, round_col, value).filter(pl.col("artefact"))
    return f.select(*cell, round_col, pl.col(value).cast(pl.Float64).alias("round_value"), "others", "factor").sort(
        [*cell, round_col]
    )

"""Tables a stage observed on a live server (how a server was set up, what a preparation found, a timer),
kept in the run's raw store as they were, so that `python -m pglab derive` rebuilds every derived table from
data/raw/<run-id>/ alone, without a server.

One JSON file per table: its columns in order, each with its polars type and its values (a float's JSON
text is its repr, so it reads back bit for bit). Only flat, simple types: a derived table is flat anyway.

`keep` records a table the first time a run observes it and returns what the store holds: a resumed run
keeps the first record (as every raw artefact does), and the notebook derives from the same bytes that a
later `derive` reads."""

from __future__ import annotations

import polars as pl

from .store import RunStore, StoreError

TYPES = {
    str(t): t
    for t in (
        pl.String,
        pl.Boolean,
        pl.Null,
        pl.Float64,
        pl.Float32,
        pl.Int64,
        pl.Int32,
        pl.Int16,
        pl.Int8,
        pl.UInt64,
        pl.UInt32,
        pl.UInt16,
        pl.UInt8,
    )
}


def dump(df: pl.DataFrame) -> dict:
    """The frame as JSON-ready data: {"columns": [{"name", "dtype", "values"}, ...]}."""
    cols = []
    for name, dtype in df.schema.items():
        if str(dtype) not in TYPES:
            raise StoreError(
                f"column {name!r}: type {dtype} cannot be kept as a raw table (expected one of {', '.join(TYPES)})"
            )
        cols.append({"name": name, "dtype": str(dtype), "values": df[name].to_list()})
    return {"columns": cols}


def load(doc: dict) -> pl.DataFrame:
    """The frame `dump` made: same columns, order, types and values."""
    return pl.DataFrame([pl.Series(c["name"], c["values"], dtype=TYPES[c["dtype"]]) for c in doc["columns"]])


def keep(store: RunStore, relpath: str, df: pl.DataFrame) -> pl.DataFrame:
    """Record `df` unless the run already holds this table; return the recorded one."""
    if not store.has_artifact(relpath):
        store.save_json(relpath, dump(df), keep_order=True)
    return read(store, relpath)


def read(store: RunStore, relpath: str) -> pl.DataFrame | None:
    doc = store.load_json(relpath)
    return None if doc is None else load(doc)

"""What a stage left out and why, and the check that it measured something at all.

A server a stage cannot use (an external server the kit may not create databases on, a role that may not
load a module) is a *recorded skip*: an artefact of the run (`skipped/<experiment>/<server>.json`), a line
in the notebook's output and a row of the derived table `<study>_skipped`, so the report can say so.

A stage whose measurements on a server all failed did not run, whatever it printed: `require_measured`
raises, naming the server and the first error, so the notebook (and `make report`) fails."""

from __future__ import annotations

import json

import polars as pl

from .. import derived
from ..servers.db import scrub
from ..store import RunStore

SCHEMA = {"server": pl.String, "experiment": pl.String, "reason": pl.String}


class NothingMeasured(RuntimeError):
    pass


def skip(store: RunStore, experiment: str, server: str, reason: str) -> dict:
    """Record that `server` takes no part in `experiment`, and why (kept once per run)."""
    rec = {"server": server, "experiment": experiment, "reason": scrub(reason)}
    store.save_json(f"skipped/{experiment}/{server}.json", rec)
    return rec


def skipped(store: RunStore, experiments: list[str]) -> pl.DataFrame:
    """Every skip the run recorded for these experiments: server, experiment, reason."""
    rows = []
    for exp in experiments:
        folder = store.artifact_path(f"skipped/{exp}")
        for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            rows.append(json.loads(f.read_text()))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row") if rows else pl.DataFrame(schema=SCHEMA)


def report_skipped(store: RunStore, experiments: list[str], name: str, profile: str) -> pl.DataFrame:
    """Print the skips and write them as the derived table `name` (empty when none: a rerun clears it)."""
    df = skipped(store, experiments)
    for r in df.iter_rows(named=True):
        print(f"SKIPPED {r['server']} for {r['experiment']}: {r['reason']}")
    if df.is_empty():
        print(f"no server skipped for {', '.join(experiments)}")
    derived.write_table(df.sort("experiment", "server"), name, profile)
    return df


def require_measured(store: RunStore, experiments: list[str], servers: list[str] | None = None) -> None:
    """Raise NothingMeasured when every recorded measurement of a server in one of `experiments` failed."""
    bad = []
    for exp in experiments:
        recs = store.records(exp)
        if recs.is_empty() or "value" not in recs.columns:
            continue
        for server in sorted(set(recs["server"])):
            if servers is not None and server not in servers:
                continue
            mine = recs.filter(pl.col("server") == server)
            if mine["value"].null_count() == mine.height:
                errors = mine["error"].drop_nulls() if "error" in mine.columns else pl.Series([], dtype=pl.String)
                first = errors[0] if len(errors) else "no error was recorded"
                bad.append(f"{server}: all {mine.height} {exp} measurements failed; the first error: {scrub(first)}")
    if bad:
        raise NothingMeasured("nothing was measured on a server, the stage did not run:\n  " + "\n  ".join(bad))


def stop_notebook(message: str) -> None:
    """Run none of this notebook's remaining cells: each only prints `message`. For a notebook left with no
    server to measure on (all skipped, as recorded): papermill has no way to end a notebook early without an
    error, so the cells' code is replaced as IPython reads it. Stop the session's servers before calling."""
    from IPython import get_ipython

    print(message)
    get_ipython().input_transformers_post.append(lambda lines: [f"print({message!r})\n"])

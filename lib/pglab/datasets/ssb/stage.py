"""What the SSB notebooks do before measuring (their parameters already on the session, `Session.override`): give
the servers the stage's settings, and make each hold the dataset (loading it where needed)."""

from __future__ import annotations

import polars as pl

from ...core.progress import bar as tqdm
from ...core.run import outcomes
from ...core.servers.servers import DestructiveStepRefused, Server
from ...core.store import RunStore
from . import dataset_id, order_count, row_count
from .answers import generator_of
from .dataset import SsbDataset
from .load import LoadResult, database_name, load


def dataset_key(dataset: dict) -> str:
    """The dataset id (generate.dataset_id) as one stable string for a table cell."""
    return ",".join(f"{k}={dataset[k]}" for k in sorted(dataset))


def prepare(servers: list[Server], p: SsbDataset) -> list[dict]:
    """Start the servers with the SSB stage's settings; returns what each configure did."""
    out = []
    for srv in servers:
        srv.start()
        out.append({"server": srv.name} | srv.configure(dict(p.stage_settings)))
    return out


EXP_LOAD = "ssb_load"


def load_all(
    servers: list[Server], p: SsbDataset, store: RunStore | None = None, scales: dict[str, float] | None = None
) -> list[LoadResult]:
    """Make every server hold SSB (sf, seed, flavor), with one progress bar per server. With `store`, each
    server's load is recorded as soon as it is done (not after all of them), and a server that may not hold the
    dataset (an external one without allow_destructive that lacks it) is a recorded skip. `scales`: a scale factor
    per server name where it is not p.sf (the SSB study's JIT servers, ssb.jit_sf)."""
    results = []
    for srv in servers:
        sf = (scales or {}).get(srv.name, p.sf)
        expected = sum(row_count(t, sf, flavor=p.flavor) for t in ("date", "supplier", "customer", "part")) + 4 * (
            order_count(sf, flavor=p.flavor)
        )
        with tqdm(total=expected, desc=f"SSB SF {sf:g} -> {srv.name}", unit="row", unit_scale=True) as bar:
            try:
                res = load(
                    srv,
                    sf,
                    p.seed,
                    prewarm=p.prewarm,
                    method=p.load_method,
                    flavor=p.flavor,
                    progress=lambda table, n: bar.update(n),
                    run_id=store.run_id if store else None,
                )
            except DestructiveStepRefused as e:
                res = LoadResult(
                    srv.name, database_name(sf), dataset_id(sf, p.seed, p.flavor), skipped=True, refused=str(e)
                )
            bar.update(max(0, expected - bar.n))
        if store is not None:
            if res.refused:
                outcomes.skip(
                    store, EXP_LOAD, srv.name, f"the SSB dataset is not there and may not be loaded: {res.refused}"
                )
            else:
                record_load(store, res)
        results.append(res)
    return results


def holding(servers: list[Server], results: list[LoadResult]) -> list[Server]:
    """The servers that hold the dataset (the others were refused the load: see the recorded skips)."""
    refused = {r.server for r in results if r.refused}
    return [s for s in servers if s.name not in refused]


def load_table(results: list[LoadResult]) -> pl.DataFrame:
    """One row per server and table: rows (as the load's COPY reported them), seconds, bytes, and whether the
    load was skipped (the dataset was already there)."""
    return pl.DataFrame([row for r in results for row in load_rows(r)], infer_schema_length=None)


def load_rows(r: LoadResult) -> list[dict]:
    """One server's rows of the ssb_load table (kept in the raw store by ssb.derive.record_load)."""
    rows = []
    for t in r.tables:
        rows.append(
            {
                "server": r.server,
                "database": r.database,
                "sf": r.dataset["sf"],
                "seed": r.dataset["seed"],
                "generator_version": str(r.dataset["generator_version"]),
                "flavor": r.dataset.get("flavor"),
                "generator": generator_of(r.dataset),
                "dataset_id": dataset_key(r.dataset),
                "skipped": r.skipped,
                "method": r.method,
                "table": t["table"],
                "rows": t["rows"],
                "seconds": t.get("seconds"),
                "table_bytes": t["table_bytes"],
                "load_total_s": r.total_s if not r.skipped else None,
                "vacuum_analyze_s": r.analyze_s or None,
                "prewarm_s": r.prewarm_s,
                "database_bytes": r.database_bytes,
            }
        )
    return rows


def record_load(store: RunStore, r: LoadResult) -> None:
    """Each table's load time as a measurement of the run, and the whole load's. A load another run made
    measured nothing in this one; one this run made is recorded even when found already done (a rerun after
    an interruption between the load and its record)."""
    if r.refused or r.run_id is None or r.run_id != store.run_id:
        return
    cond = f"sf={r.dataset['sf']:g},seed={r.dataset['seed']},{r.method}"
    for t in r.tables:
        if not store.done(r.server, EXP_LOAD, cond, t["table"], 0):
            store.record(
                r.server,
                EXP_LOAD,
                cond,
                t["table"],
                0,
                t["seconds"],
                "s",
                rows=t["rows"],
                table_bytes=t["table_bytes"],
                generator_version=r.dataset["generator_version"],
            )
    if not store.done(r.server, EXP_LOAD, cond, "all", 0):
        store.record(
            r.server,
            EXP_LOAD,
            cond,
            "all",
            0,
            r.total_s,
            "s",
            database_bytes=r.database_bytes,
            vacuum_analyze_s=r.analyze_s,
            prewarm_s=r.prewarm_s,
        )


def usable(store: RunStore, servers: list[Server], results: list[LoadResult], experiment: str) -> list[Server]:
    """The servers holding the dataset; each other one is a recorded skip of `experiment`, with the reason."""
    for r in results:
        if r.refused:
            outcomes.skip(store, experiment, r.server, f"no SSB dataset there, and it may not be loaded: {r.refused}")
    return holding(servers, results)

"""What the SSB notebooks do before measuring: apply notebook overrides to the `ssb:` params, pick the
servers, give them the stage's settings, and make each hold the dataset (loading it where needed)."""

from __future__ import annotations

import polars as pl

from ..progress import bar as tqdm
from ..servers import Server
from ..session import Session
from . import order_count, row_count
from .load import LoadResult, load
from .params import SsbParams


def ssb_params(s: Session, **overrides) -> SsbParams:
    """The params' `ssb:` section with the notebook's non-None parameters on top, validated again."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return SsbParams(**(s.params.ssb.model_dump() | given))


def servers(s: Session, names: list[str] | None) -> list[Server]:
    if not names:
        return s.servers
    known = {x.name: x for x in s.servers}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"servers {unknown} are not among this run's servers {sorted(known)}")
    return [known[n] for n in names]


def prepare(servers: list[Server], p: SsbParams) -> list[dict]:
    """Start the servers with the SSB stage's settings; returns what each configure did."""
    out = []
    for srv in servers:
        srv.start()
        out.append({"server": srv.name} | srv.configure(dict(p.stage_settings)))
    return out


def load_all(servers: list[Server], p: SsbParams) -> list[LoadResult]:
    """Make every server hold SSB (sf, seed), with one progress bar over all rows."""
    expected = sum(row_count(t, p.sf) for t in ("date", "supplier", "customer", "part")) + 4 * order_count(p.sf)
    results = []
    for srv in servers:
        with tqdm(total=expected, desc=f"SSB SF {p.sf:g} -> {srv.name}", unit="row", unit_scale=True) as bar:
            res = load(srv, p.sf, p.seed, prewarm=p.prewarm, method=p.load_method,
                       progress=lambda table, n: bar.update(n))  # fmt: skip
            bar.update(max(0, expected - bar.n))
        results.append(res)
    return results


def load_table(results: list[LoadResult]) -> pl.DataFrame:
    """One row per server and table: rows, seconds, bytes, and whether the load was skipped."""
    rows = []
    for r in results:
        for t in r.tables:
            rows.append({
                "server": r.server, "database": r.database, "sf": r.dataset["sf"], "seed": r.dataset["seed"],
                "generator_version": str(r.dataset["generator_version"]), "skipped": r.skipped, "method": r.method,
                "table": t["table"], "rows": t["rows"], "seconds": t.get("seconds"), "table_bytes": t["table_bytes"],
                "load_total_s": r.total_s if not r.skipped else None, "vacuum_analyze_s": r.analyze_s or None,
                "prewarm_s": r.prewarm_s, "database_bytes": r.database_bytes,
            })  # fmt: skip
    return pl.DataFrame(rows, infer_schema_length=None)


def record_loads(store, results: list[LoadResult]) -> None:
    """Each table's load time as a measurement of the run (a skipped load measured nothing)."""
    for r in results:
        if r.skipped:
            continue
        cond = f"sf={r.dataset['sf']:g},seed={r.dataset['seed']},{r.method}"
        for t in r.tables:
            if not store.done(r.server, "ssb_load", cond, t["table"], 0):
                store.record(r.server, "ssb_load", cond, t["table"], 0, t["seconds"], "s", rows=t["rows"],
                             table_bytes=t["table_bytes"], generator_version=r.dataset["generator_version"])
        if not store.done(r.server, "ssb_load", cond, "all", 0):
            store.record(r.server, "ssb_load", cond, "all", 0, r.total_s, "s", database_bytes=r.database_bytes,
                         vacuum_analyze_s=r.analyze_s, prewarm_s=r.prewarm_s)

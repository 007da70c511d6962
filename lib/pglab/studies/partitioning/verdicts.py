"""S5 (hash partitioning and Parallel Append) under the one verdict rule (`pglab.core.verdicts`, issue 16).

* The study's 5.7× came from reading three NVMe drives at once with a cold cache; we run warm on one disk, so
  that claim (and the I/O one) is *not testable here*, with what would make it testable.
* Our own CPU-parallel speed-up is scored against the study's direction only ("Parallel Append made the query
  faster"): every worker count against serial within each round (`pglab.core.paired`), the most workers allowed as
  the study allowed many, flagged above the physical ceiling min(workers planned + 1, cores).
* The plan-shape, worker-count, spread and result claims are checked on the parsed plans and tables as before
  (`partitioning_findings`); their old word "not supported" becomes "contradicted" (the check fails outright).
* A/A control: serial measured twice per round ("serial" and "serial_aa") -> `partitioning_noise`.

Derived tables, from the raw store's executions alone: `partitioning_paired`, `partitioning_drift`,
`partitioning_noise`."""

from __future__ import annotations

import polars as pl

from ...core import findings as fnd
from ...core import noise, paired
from ...core import verdicts as vd
from . import findings as pf
from .params import STUDY_SPEEDUP, condition_workers

STUDY = "S5"
BASELINE = "serial"
AA = "serial_aa"
NOISE_SCHEMA = {"study": pl.String, "server": pl.String, "metric": pl.String, "n_pairs": pl.Int64,
                "false_difference_rate": pl.Float64, "floor": pl.Float64, "method": pl.String}  # fmt: skip
COLD_DRIVES = ("warm cache on one disk; the study read three drives cold",
               "needs a cold cache and partitions on separate drives")  # fmt: skip
CPU_CLAIM = vd.Claim("Parallel Append made the query faster than the serial Append (the study's direction; its "
                     "size came from three drives read cold, so here: CPU parallelism, warm cache)", vd.LOWER)


def _timed(execs: pl.DataFrame) -> pl.DataFrame:
    return execs.filter(~pl.col("warmup") & pl.col("error").is_null())


def tables(execs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    t = _timed(execs)
    pair = paired.paired_compare(t, ["server"], "condition", BASELINE, "round", "seconds")
    pair = pair.with_columns(workers=pl.col("condition").map_elements(condition_workers, return_dtype=pl.Int64))
    aa = noise.aa_comparisons(t, ["server"], "condition", BASELINE, AA, "round", "seconds")
    rows = []
    for (server,), g in aa.group_by("server", maintain_order=True):
        nf = noise.noise_floor(g)
        rows.append({"study": STUDY, "server": server, "metric": "seconds",
                     **{k: nf[k] for k in NOISE_SCHEMA if k in nf}})  # fmt: skip
    nz = pl.from_dicts(rows, schema=NOISE_SCHEMA) if rows else pl.DataFrame(schema=NOISE_SCHEMA)
    return {
        "partitioning_paired": pair.sort("server", "workers", "condition"),
        "partitioning_drift": paired.drift(t, ["server"], "condition", BASELINE, "round", "seconds"),
        "partitioning_noise": nz.sort("server"),
    }


def cpu_speedup(pair: pl.DataFrame, plans: pl.DataFrame, noise_tab: pl.DataFrame, server: str,
                cores: int | None) -> dict:
    """Our speed-up at the most workers allowed, paired within rounds, with the ceiling flag."""
    s = pair.filter((pl.col("server") == server) & (pl.col("condition") != AA)).sort("workers")
    if s.is_empty():
        return vd.finding_row(STUDY, "cpu_speedup", CPU_CLAIM, server, vd.not_run("no timed parallel runs"))
    r = s.row(-1, named=True)
    p = plans.filter(server=server, condition=r["condition"]).to_dicts()
    planned = p[0]["workers_planned"] if p and p[0].get("workers_planned") is not None else r["workers"]
    speed = 1 / r["ratio"] if r["ratio"] else None
    ev = vd.Evidence.from_row(r, [noise.ceiling_check(speed, planned + 1, cores)])
    nz = noise_tab.filter(pl.col("server") == server)
    floor = nz["floor"][0] if nz.height else None
    v = vd.verdict(CPU_CLAIM, ev, floor)
    extra = (f"; {r['workers']} workers allowed, {planned} planned: speed-up {speed:.2f}× over serial, "
             f"time paired within rounds; ceiling min({planned} + 1, {cores or '?'} cores)") if speed else ""
    if floor is not None and "noise floor" not in v.reason:
        extra += f"; noise floor ±{floor:.1%}".replace("%", " %")
    return vd.finding_row(STUDY, "cpu_speedup", CPU_CLAIM, server, vd.Verdict(v.label, v.reason + extra, v.needs), ev)


def _renamed(row: dict) -> dict:
    """A check of `partitioning_findings` in the new vocabulary: a failed check contradicts the claim."""
    return row | {"verdict": vd.CONTRADICTED if row["verdict"] == fnd.NOT_SUPPORTED else row["verdict"]}


def build(t: dict[str, pl.DataFrame], cores: int | None = None) -> pl.DataFrame:
    setup = t["partitioning_setup"]
    servers = sorted(setup.filter(pl.col("skipped").is_null())["server"])
    bs = {r["server"]: r["block_size"] or 8192 for r in setup.iter_rows(named=True)}
    study_claim = vd.Claim(pf.CLAIMS["speedup"], vd.LOWER, 1 / STUDY_SPEEDUP)
    rows = []
    for s in servers:
        rows += [_renamed(r) for r in (
            pf.serial_plan(t["partitioning_plans"], s),
            pf.parallel_plan(t["partitioning_plans"], s),
            pf.workers_planned(t["partitioning_planner"], s, bs[s]),
            pf.even_spread(t["partitioning_partitions"], s))]  # fmt: skip
        rows.append(vd.finding_row(STUDY, "speedup", study_claim, s, vd.not_testable(*COLD_DRIVES)))
        rows.append(cpu_speedup(t["partitioning_paired"], t["partitioning_plans"], t["partitioning_noise"], s,
                                cores))  # fmt: skip
    for r in setup.filter(pl.col("skipped").is_not_null()).iter_rows(named=True):
        rows.append(vd.finding_row(STUDY, "speedup", study_claim, r["server"],
                                   vd.not_run(f"server not used: {r['skipped']}")))  # fmt: skip
    io_claim = vd.Claim(pf.CLAIMS["io_parallelism"], vd.HIGHER)
    rows += [_renamed(pf.results_agree(t["partitioning_results"])),
             vd.finding_row(STUDY, "io_parallelism", io_claim, "all", vd.not_testable(*COLD_DRIVES))]
    return fnd.table(rows)


def method_text(noise_tab: pl.DataFrame, drift: pl.DataFrame) -> str:
    parts = []
    for r in noise_tab.iter_rows(named=True):
        d = drift.filter(pl.col("server") == r["server"])
        dd = f", drift 2nd / 1st half of rounds {d['drift'][0]:.2f}×" if d.height and d["drift"][0] else ""
        fl = "no interval" if r["floor"] is None else f"±{r['floor']:.1%}".replace("%", " %")
        parts.append(f"{r['server']}: noise floor {fl} ({r['n_pairs']} A/A pair){dd}")
    return (" Verdicts compare every worker count with serial within each round (geometric mean of the round "
            "ratios; min–max below 10 rounds, labelled so); an A/A control (serial measured twice per round, "
            "'serial' and 'serial_aa') gives the noise floor: " + "; ".join(parts) + ".")

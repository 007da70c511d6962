"""Study S5's claims tested on our derived tables: one finding per claim and server (or "all").

Verdicts: the speed-up claim is judged as the SSB and parallel-index sections judge theirs
(`stats.ceiling_verdict`): against the ceiling min(workers planned + 1, machine cores), a speed-up whose 95 %
interval lies at or above 2/3 of it matches ("supported"), one wholly below it does not ("not supported"),
one that straddles it is "undetermined" (so is one without an interval); plan claims are checked on the parsed
plans; the I/O claim (three NVMe drives read at once) is "not run": we measure with a warm cache on one disk.
Every function reads only the derived tables, so the report gives byte-identical output."""

from __future__ import annotations

import math

import polars as pl

from ...core import findings as fnd
from ...core import stats
from .params import (
    STUDY_ALLOWED_WORKERS,
    STUDY_AVG_PARALLEL,
    STUDY_AVG_SERIAL,
    STUDY_COUNT,
    STUDY_PARALLEL_MB_S,
    STUDY_PARALLEL_S,
    STUDY_PARTITION_MB,
    STUDY_PARTITIONS,
    STUDY_SERIAL_MB_S,
    STUDY_SERIAL_S,
    STUDY_SPEEDUP,
    STUDY_TABLESPACES,
    STUDY_WORKERS_PLANNED,
)

STUDY = "S5"
SPREAD_Z = 4.0  # rows per partition within 4 binomial standard deviations of an even split: "even"
AVG_TOLERANCE = 1e-9  # relative: avg(x) of float4 summed in another order differs in the last digits only

CLAIMS = {
    "serial_plan": f"With max_parallel_workers_per_gather = 0 the plan is an Aggregate over an Append of one Seq Scan "
                   f"per partition ({STUDY_PARTITIONS}), with no Gather: the partitions are read one after another.",
    "parallel_plan": "With workers allowed, Parallel Append appears under the Gather: Finalize Aggregate > Gather > "
                     f"Partial Aggregate > Parallel Append > {STUDY_PARTITIONS} × Parallel Seq Scan, so the "
                     "workers scan different partitions at the same time.",
    "workers_planned": f"max_parallel_workers_per_gather = {STUDY_ALLOWED_WORKERS} gave {STUDY_WORKERS_PLANNED} "
                       f"workers planned for {STUDY_PARTITIONS} partitions of ≈ 8 GB.",
    "speedup": f"Parallel Append made the query {STUDY_SPEEDUP:.1f}× faster: {STUDY_SERIAL_S} s serial vs "
               f"{STUDY_PARALLEL_S} s in parallel ({STUDY_WORKERS_PLANNED} workers planned; 600 M rows, OS cache "
               f"dropped, minimal shared_buffers, {STUDY_TABLESPACES} NVMe drives).",
    "results_agree": f"Serial and parallel return the same count ({STUDY_COUNT:,}); avg(x) differs only in the last "
                     f"digits ({STUDY_AVG_SERIAL} vs {STUDY_AVG_PARALLEL}).",
    "even_spread": f"Hash partitioning spreads the rows evenly: {STUDY_PARTITIONS} partitions of "
                   f"{min(STUDY_PARTITION_MB):,}–{max(STUDY_PARTITION_MB):,} MB.",
    "io_parallelism": f"The gain comes from reading the {STUDY_TABLESPACES} NVMe drives at once: iostat showed one "
                      f"drive at {STUDY_SERIAL_MB_S:.0f} MB/s serially, all three at "
                      f"{min(STUDY_PARALLEL_MB_S):.0f}–{max(STUDY_PARALLEL_MB_S):.0f} MB/s in parallel.",
}  # fmt: skip


def _row(finding: str, server: str, verdict: str, evidence: str) -> dict:
    return {"study": STUDY, "finding": finding, "claim": CLAIMS[finding], "server": server, "verdict": verdict,
            "evidence": evidence[:1].upper() + evidence[1:]}  # fmt: skip


def _workers(k: int) -> str:
    return f"{k} worker" + ("" if k == 1 else "s")


def _ints(values) -> str:
    return ", ".join(str(v) if v is not None else "—" for v in values)


def serial_plan(plans: pl.DataFrame, server: str) -> dict:
    r = plans.filter(server=server, condition="serial").to_dicts()
    if not r or r[0].get("error"):
        return _row("serial_plan", server, fnd.NOT_RUN, "no serial plan was recorded" +
                    (f" ({r[0]['error']})" if r else ""))  # fmt: skip
    r = r[0]
    ok = bool(r["append_of_seq_scans"])
    return _row("serial_plan", server, fnd.SUPPORTED if ok else fnd.NOT_SUPPORTED,
                f"serial plan: {r['shape']} ({'no' if not r['gathers'] else r['gathers']} Gather, "
                f"{r['seq_scans']} Seq Scans).")  # fmt: skip


def parallel_plan(plans: pl.DataFrame, server: str) -> dict:
    par = plans.filter(pl.col("server") == server, pl.col("allowed_workers") > 0).sort("allowed_workers")
    if par.is_empty():
        return _row("parallel_plan", server, fnd.NOT_RUN, "no parallel plan was recorded.")
    ks = par["allowed_workers"].to_list()
    bad = par.filter(~pl.col("parallel_append_under_gather").fill_null(False))
    planned, launched = _ints(par["workers_planned"]), _ints(par["workers_launched"])
    if bad.is_empty():
        shapes = sorted(set(par["shape"]))
        return _row("parallel_plan", server, fnd.SUPPORTED,
                    f"at {ks[0]}–{ks[-1]} allowed workers every plan is {' / '.join(shapes)}; workers planned "
                    f"{planned}, launched {launched} (untimed EXPLAIN ANALYZE).")  # fmt: skip
    which = "; ".join(f"{r['allowed_workers']} allowed: {r['shape'] or r['error']}" for r in bad.iter_rows(named=True))
    return _row("parallel_plan", server, fnd.NOT_SUPPORTED, f"no Parallel Append under the Gather at {which}.")


def workers_planned(planner: pl.DataFrame, server: str, block_size: int = 8192) -> dict:
    r = planner.filter(server=server).to_dicts()
    if not r:
        return _row("workers_planned", server, fnd.NOT_RUN, "no plan with the study's allowed workers was recorded.")
    r = r[0]
    ok = r["workers_planned"] == r["predicted_workers"] and r["study_predicted_workers"] == r["study_workers_planned"]
    mb = r["max_partition_pages"] * block_size / 2**20
    floor = r["partitions"].bit_length()
    return _row("workers_planned", server, fnd.SUPPORTED if ok else fnd.NOT_SUPPORTED,
                f"with {r['allowed_workers']} allowed, {server} plans {r['workers_planned']} workers for "
                f"{r['partitions']} partitions of at most {r['max_partition_pages']:,} pages ({mb:,.1f} MB). "
                f"PostgreSQL's rule (per partition 1 worker, +1 each time its size triples beyond "
                f"{r['threshold_pages']:,} pages; at least ⌊log2 {r['partitions']}⌋ + 1 = {floor} for the "
                f"Parallel Append) predicts {r['predicted_workers']} here and {r['study_predicted_workers']} for "
                f"the study's partitions of {r['study_max_partition_pages']:,} pages, which planned "
                f"{r['study_workers_planned']}.")  # fmt: skip


def load_text(execs: pl.DataFrame) -> str | None:
    """The machine's load average over the timed runs, as a phrase (None when not recorded)."""
    if "loadavg_1m" not in execs.columns or execs.is_empty():
        return None
    load = execs.filter(~pl.col("warmup"))["loadavg_1m"].drop_nulls()
    return f"load average {load.median():.1f} (max {load.max():.1f})" if load.len() else None


_CEILING_VERDICTS = {stats.NEAR: fnd.SUPPORTED, stats.BELOW: fnd.NOT_SUPPORTED, stats.UNCLEAR: fnd.UNDETERMINED}
_CEILING_STATES = {stats.NEAR: "reaches it", stats.BELOW: "falls short", stats.UNCLEAR: "cannot tell"}


def speedup(spd: pl.DataFrame, plans: pl.DataFrame, server: str, cores: int | None, load: str | None = None) -> dict:
    s = spd.filter(server=server).sort("workers")
    if s.is_empty():
        return _row("speedup", server, fnd.NOT_RUN, "no timed parallel runs.")
    r = s.row(-1, named=True)  # the most workers allowed, as the study allowed many
    p = plans.filter(server=server, condition=r["condition"]).to_dicts()
    wp = f"{p[0]['workers_planned']} planned, {p[0]['workers_launched']} launched" if p else "plan not recorded"
    # the ceiling counts the workers the planner chose (the study's 7 of 100 allowed); the allowed ones if unknown
    planned = p[0]["workers_planned"] if p and p[0].get("workers_planned") is not None else None
    n = planned if planned is not None else r["workers"]
    cv = stats.ceiling_verdict(r["speedup_ci_low"], r["speedup_ci_high"], n, cores)
    who = f"{_workers(n)} {'planned' if planned is not None else 'allowed (plan not recorded)'} + the leader"
    capped = f", capped at the machine's {cores} core{'s' if cores != 1 else ''}" if cv["capped"] else ""
    study_c = STUDY_WORKERS_PLANNED + 1
    ceiling = (f"ceiling {cv['ceiling']:g}× ({who}{capped}); a match needs ≥ {cv['threshold']:.2f}×: "
               f"{_CEILING_STATES[cv['verdict']]} (the study's {STUDY_SPEEDUP:.1f}× is "
               f"{100 * STUDY_SPEEDUP / study_c:.0f} % of its ceiling of {study_c}×)")  # fmt: skip
    verdict = _CEILING_VERDICTS[cv["verdict"]]
    if cv["ceiling"] < 2:  # one process at a time: nothing parallel to compare with the claim
        verdict = fnd.NOT_RUN
        ceiling = f"ceiling {cv['ceiling']:g}× ({who}{capped}): no parallel gain is possible here"
    speed = stats.ratio_with_interval(r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"])
    if r["speedup"] is None or not stats.interval(r["speedup_ci_low"], r["speedup_ci_high"]):
        speed += f" ({r['verdict']})"
    best = s.sort("speedup", descending=True, nulls_last=True).row(0, named=True)
    medians = " → ".join("—" if m is None else f"{m:.3f} s" for m in (r["median_baseline"], r["median"]))
    text = (f"with {_workers(r['workers'])} allowed ({wp}): speed-up {speed} over serial, "
            f"{r['verdict']} (median {medians}, n = {r['n_baseline']} and {r['n']}); {ceiling}")
    if best["workers"] != r["workers"] and best["speedup"] is not None:
        text += f"; the best median was {best['speedup']:.2f}× at {_workers(best['workers'])}"
    text += "; warm cache"
    if cores and not cv["capped"]:  # a capped ceiling has said so already
        text += f", {cores} CPU cores (the study's 8 processes had at least 8)"
    if load:
        text += f", machine {load} during the timed runs"
    return _row("speedup", server, verdict, text + ".")


def results_agree(res: pl.DataFrame) -> dict:
    if res.is_empty():
        return _row("results_agree", "all", fnd.NOT_RUN, "no executions.")
    counts = sorted(set(res["count_min"]) | set(res["count_max"]))
    lo, hi = res["avg_min"].min(), res["avg_max"].max()
    spread = (hi - lo) / abs((hi + lo) / 2) if hi is not None and lo is not None and hi + lo else math.nan
    ok = len(counts) == 1 and spread <= AVG_TOLERANCE
    servers = ", ".join(sorted(set(res["server"])))
    text = (f"count {_ints(f'{c:,}' for c in counts)} in all {res['executions'].sum()} executions on {servers} at "
            f"every worker count; avg(x) {lo!r} to {hi!r} (relative spread {spread:.1e}).")
    return _row("results_agree", "all", fnd.SUPPORTED if ok else fnd.NOT_SUPPORTED, text)


def even_spread(parts: pl.DataFrame, server: str) -> dict:
    p = parts.filter(server=server)
    if p.is_empty() or p["rows"].sum() == 0:
        return _row("even_spread", server, fnd.NOT_RUN, "no partitions recorded.")
    n, k = p["rows"].sum(), p.height
    mean = n / k
    sd = math.sqrt(n * (1 / k) * (1 - 1 / k))  # binomial: rows of one partition under an even split
    dev = max(abs(x - mean) for x in p["rows"])
    z = dev / sd if sd else 0.0
    ok = z <= SPREAD_Z
    return _row("even_spread", server, fnd.SUPPORTED if ok else fnd.NOT_SUPPORTED,
                f"rows per partition {p['rows'].min():,}–{p['rows'].max():,} of {n:,} in {k} partitions (largest "
                f"deviation {100 * dev / mean:.2f} % of the mean, {z:.1f} binomial standard deviations; sizes "
                f"{p['bytes'].min() / 2**20:.1f}–{p['bytes'].max() / 2**20:.1f} MB).")  # fmt: skip


def io_parallelism(setup: pl.DataFrame) -> dict:
    parts = []
    for r in setup.filter(pl.col("skipped").is_null()).sort("server").iter_rows(named=True):
        fits = "holds" if r["fits_in_shared_buffers"] else "does not hold"
        parts.append(f"{r['server']}: shared_buffers {r['shared_buffers_bytes'] / 2**20:,.0f} MB {fits} the "
                     f"{r['table_bytes'] / 2**20:,.0f} MB table, {r['prewarmed_blocks']:,} blocks prewarmed")
    ts = bool(setup["tablespaces"].any()) if "tablespaces" in setup.columns else False
    where = ("each partition in its own tablespace directory, all on the same disk" if ts
             else "all partitions in the default tablespace on one disk")  # fmt: skip
    return _row("io_parallelism", "all", fnd.NOT_RUN,
                f"we measure with a warm cache ({'; '.join(parts)}) and {where}: CPU parallelism of Parallel "
                "Append, not concurrent reads from several devices.")  # fmt: skip


def build(t: dict[str, pl.DataFrame], cores: int | None = None) -> pl.DataFrame:
    setup = t["partitioning_setup"]
    servers = sorted(setup.filter(pl.col("skipped").is_null())["server"])
    bs = {r["server"]: r["block_size"] or 8192 for r in setup.iter_rows(named=True)}
    load = load_text(t["partitioning_executions"])
    rows = []
    for s in servers:
        rows += [
            serial_plan(t["partitioning_plans"], s),
            parallel_plan(t["partitioning_plans"], s),
            workers_planned(t["partitioning_planner"], s, bs[s]),
            speedup(t["partitioning_speedup"], t["partitioning_plans"], s, cores, load),
            even_spread(t["partitioning_partitions"], s),
        ]
    for r in setup.filter(pl.col("skipped").is_not_null()).iter_rows(named=True):
        rows.append(_row("speedup", r["server"], fnd.NOT_RUN, f"server not used: {r['skipped']}"))
    rows += [results_agree(t["partitioning_results"]), io_parallelism(setup)]
    return fnd.table(rows)

"""The experiments' raw store -> tidy tables (data/derived/<profile>/experiments_*.csv), with no server.

- experiments_setup: one row per experiment: its question, data, workload, factors, baseline, hypothesis, rounds.
- experiments_cells: every (experiment, server, condition, item) and whether it was testable here (else why).
- experiments_runs: every measurement (warm-ups flagged), with its error; pgbench runs with their latency
  percentiles.
- experiments_summary: median and its interval per (experiment, server, condition, item, metric).
- experiments_paired: each condition against the baseline within rounds (and with a server factor, each server
  against the baseline server under each condition): B / A with its interval (`core.paired.paired_compare`).
- experiments_noise: the A/A control's noise floor per (experiment, server, metric).
- experiments_verdicts: one row per comparison of the experiment's main metric: with `expect`, the one rule's
  verdict on the hypothesis (`core.verdicts.verdict`, the declared tolerance); without, B / A beyond the A/A
  floor or not.
- experiments_plans: per SQL cell its plan's root node, shape fingerprint and execution time (the JSON is raw), and
  what it did with memory and disk (`plan_evidence`): sorts' method and space, hash and HashAgg batches, temp
  blocks read and written, shared buffers hit and read; from the run's sample (one untimed EXPLAIN per cell).
- experiments_queries: per query and comparison of an SQL experiment, A's and B's medians in ms with their
  intervals, B / A, the query's own verdict beside the suite's (`against_suite`: it went the other way), whether
  the plan changed (root and the nodes that differ) and each side's spill and buffers. Sorted so that a query going
  against the suite comes first.
- experiments_errors: every failed measurement and every failed setup, with its cell, server, file, statement
  number and first line, and the server's error."""

from __future__ import annotations

from collections import Counter

import polars as pl

from ...core import replicas
from ...core.stats import between_runs, noise, paired, stats
from ...core.stats import verdicts as v
from ...core.store import RunStore
from ...pgtools.explain import ParsedPlan, parse_plan
from . import pgbench_params, pgbench_tables
from .params import AA_SUFFIX, SERVER, Experiment
from .run import PGBENCH_ITEM, plan_path, setup_path, store_name

SUITE = "suite"  # the SQL workload's items summed per round: the whole report's time
METRICS = {"sql": (("time_s", "lower"),), "pgbench": (("tps", "higher"), ("p95_ms", "lower"))}

RUN_TYPES = {
    "experiment": pl.String,
    "server": pl.String,
    "condition": pl.String,
    "item": pl.String,
    "repetition": pl.Int64,
    "warmup": pl.Boolean,
    "round": pl.Int64,
    "value": pl.Float64,
    "unit": pl.String,
    "error": pl.String,
    "sqlstate": pl.String,
    "rows": pl.Int64,
    "n": pl.Int64,
    "p50_ms": pl.Float64,
    "p95_ms": pl.Float64,
    "p99_ms": pl.Float64,
    "max_ms": pl.Float64,
    "file": pl.String,
    "statement": pl.Int64,
    "first_line": pl.String,
}


def main_metric(e: Experiment) -> str:
    return METRICS[e.workload.kind][0][0]


def runs(store: RunStore, e: Experiment) -> pl.DataFrame:
    df = store.records(store_name(e))
    if df.is_empty():
        return pl.DataFrame(schema=RUN_TYPES)
    df = df.with_columns(experiment=pl.lit(e.name))
    return df.select(
        pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in RUN_TYPES.items()
    )


def long_values(e: Experiment, r: pl.DataFrame) -> pl.DataFrame:
    """Timed values as (experiment, server, condition, item, round, metric, value); SQL adds the suite per round
    (rounds where every item of the cell succeeded)."""
    t = r.filter(~pl.col("warmup") & pl.col("value").is_not_null())
    keys = ["experiment", "server", "condition", "item", "round"]
    if e.workload.kind == "sql":
        out = t.select(*keys, metric=pl.lit("time_s"), value="value")
        n_items = r["item"].n_unique()
        suite = (
            out.group_by("experiment", "server", "condition", "round", "metric")
            .agg(pl.col("value").sum(), pl.len().alias("_n"))
            .filter(pl.col("_n") == n_items)
            .drop("_n")
            .with_columns(item=pl.lit(SUITE))
        )
        return pl.concat([out, suite.select(out.columns)]) if n_items > 1 else out
    return pl.concat(
        [
            t.select(*keys, metric=pl.lit("tps"), value="value"),
            t.filter(pl.col("p95_ms").is_not_null()).select(*keys, metric=pl.lit("p95_ms"), value="p95_ms"),
        ]
    )


def _by_cluster(values: pl.DataFrame, base_server: str) -> list[tuple[pl.DataFrame, str]]:
    """(values of cluster k's servers, cluster k of the baseline server) for every cluster k that has it
    (params servers.clusters: pg18_c2 against pg15_c2); one cluster: [(values, base_server)]."""
    names = values["server"].unique(maintain_order=True).to_list()
    bases = replicas.base_names(names)
    out = []
    for k in range(1, replicas.MAX_CLUSTERS + 1):
        mine = [n for n in names if (replicas.split_name(n)[1] if bases[n] != n else 1) == k]
        if replicas.replica_name(base_server, k) in mine:
            out.append((values.filter(pl.col("server").is_in(mine)), replicas.replica_name(base_server, k)))
    return out or [(values, base_server)]


def comparisons(e: Experiment, values: pl.DataFrame, setup: dict, pool: bool = True) -> pl.DataFrame:
    """Every condition against the baseline (per server, item, metric), and with a server factor every server
    against the baseline server (per condition, item, metric); the A/A copy only against its baseline.

    With replica clusters (params servers.clusters) and `pool`: one row per base server and comparison, its
    interval across the clusters (`between_runs.pool_clusters`; the between-cluster variance from a server's
    setting comparisons, the A/A copy's left out, and from its server comparisons), a server against the
    baseline server compared cluster k with cluster k. `pool=False`: every cluster's own rows (the A/A floor's)."""
    base, aa = setup["baseline"], setup["aa"]
    parts = []
    cmp = paired.paired_compare(values, ["experiment", "server", "item", "metric"], "condition", base)
    if pool:
        keys = ["experiment", "item", "metric", "condition", "baseline"]
        cmp = between_runs.pool_clusters(cmp, keys, variance_rows=pl.col("condition") != aa)
    parts.append(
        cmp.rename({"condition": "b", "baseline": "a"}).with_columns(
            kind=pl.when(pl.col("b") == aa).then(pl.lit("A/A")).otherwise(pl.lit("setting"))
        )
    )
    if setup.get("base_server"):
        measured = values.filter(pl.col("condition") != aa)
        frames = [
            paired.paired_compare(sub, ["experiment", "condition", "item", "metric"], "server", base_k)
            for sub, base_k in _by_cluster(measured, setup["base_server"])
        ]
        by_server = frames[0] if len(frames) == 1 else pl.concat(frames)
        if pool and len(frames) > 1:
            by_server = between_runs.pool_clusters(by_server, ["experiment", "condition", "item", "metric"])
        parts.append(
            by_server.rename({"server": "b", "baseline": "a", "condition": "server"}).with_columns(
                kind=pl.lit("server")
            )
        )  # the condition sits in `server`'s place: renamed below
    cols = [
        "experiment",
        "kind",
        "server",
        "item",
        "metric",
        "a",
        "b",
        "n_rounds",
        "ratio",
        "low",
        "high",
        "coverage",
        "method",
    ]
    # pooled over replica clusters: what the interval rests on (absent with one cluster per server)
    extra = [c for c in between_runs.POOLED_COLUMNS if any(c in p.columns for p in parts)]
    out = [
        p.select(*cols, *(pl.col(c) if c in p.columns else pl.lit(None, dtype=pl.Float64).alias(c) for c in extra))
        for p in parts
        if p.height
    ]
    if not out:
        return pl.DataFrame(
            schema={
                c: pl.Float64
                if c in ("ratio", "low", "high", "coverage")
                else pl.Int64
                if c == "n_rounds"
                else pl.String
                for c in cols
            }
        )
    df = pl.concat(out, how="vertical_relaxed")
    # for a server comparison, `server` holds the condition: say so in a column of its own
    return df.with_columns(
        condition=pl.when(pl.col("kind") == "server").then(pl.col("server")).otherwise(None),
        server=pl.when(pl.col("kind") == "server").then(pl.lit(None)).otherwise(pl.col("server")),
    ).select("experiment", "kind", "server", "condition", *cols[3:], *extra)


def noise_table(cmp: pl.DataFrame) -> pl.DataFrame:
    """The A/A floor per experiment, server and metric, from `comparisons(..., pool=False)`: a server's floor over
    its A/A pairs pooled over its clusters (params servers.clusters, `noise.pool_aa`)."""
    rows = []
    aa = noise.pool_aa(cmp.filter(kind="A/A"))
    for (exp, server, metric), g in aa.sort("experiment", "server", "metric").group_by(
        "experiment", "server", "metric", maintain_order=True
    ):
        rows.append({"experiment": exp, "server": server, "metric": metric} | noise.noise_floor(g))
    schema = {
        "experiment": pl.String,
        "server": pl.String,
        "metric": pl.String,
        "n_pairs": pl.Int64,
        "false_difference_rate": pl.Float64,
        "floor": pl.Float64,
        "floor_log": pl.Float64,
        "method": pl.String,
    }
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def _floor(noise_df: pl.DataFrame, exp: str, r: dict, metric: str) -> float | None:
    """The A/A floor comparison `r` is judged against: its server's, or the larger of a server comparison's two."""
    servers = [r["server"]] if r["kind"] != "server" else [r["a"], r["b"]]
    f = noise_df.filter(pl.col("experiment") == exp, pl.col("metric") == metric, pl.col("server").is_in(servers))
    vals = [x for x in f["floor"].to_list() if x is not None]
    return max(vals) if vals else None


def plain(row: dict, floor: float | None, sense: str) -> tuple[str, str]:
    """Without a hypothesis: B / A with its interval, beyond the A/A floor or not."""
    ev = v.Evidence.from_row(row)
    if row["ratio"] is None or row["low"] is None:
        return v.UNDETERMINED, f"{ev.text()}: no interval"
    if (row["coverage"] or 0) < v.MIN_COVERAGE:
        return v.UNDETERMINED, f"{ev.text()}: the interval covers {row['coverage']:.0%}, too few rounds to decide"
    better = "faster" if sense == "lower" else "higher"
    worse = "slower" if sense == "lower" else "lower"
    fl = f"the A/A floor ±{floor:.1%}" if floor is not None else "no A/A floor"
    if row["low"] > 1 or row["high"] < 1:
        up = row["low"] > 1
        word = (worse if up else better) if sense == "lower" else (better if up else worse)
        if noise.below_floor(row["ratio"], floor):
            return "no difference", f"{ev.text()}: excludes 1 but within {fl}"
        return word, f"B / A {ev.text()}: {word}, beyond {fl}"
    return "no difference", f"{ev.text()}: includes 1 ({fl})"


# what names a comparison row of `comparisons`, and its figure: copied as they are into the verdicts and queries
COMPARISON = ("kind", "server", "condition", "item", "a", "b", "ratio", "low", "high")


def verdict_rows(e: Experiment, cmp: pl.DataFrame, noise_df: pl.DataFrame) -> list[dict]:
    metric = main_metric(e)
    sense = dict(METRICS[e.workload.kind])[metric]
    item = SUITE if e.workload.kind == "sql" and cmp.filter(item=SUITE).height else None
    # the hypothesis is about the setting factors; about the servers when they are the only factor
    hypothesis_kind = "setting" if e.condition_factors else "server"  # settings or pgbench options
    rows = []
    for r in cmp.filter(pl.col("metric") == metric, pl.col("kind") != "A/A").iter_rows(named=True):
        if item is not None and r["item"] != item:
            continue
        floor = _floor(noise_df, e.name, r, metric)
        if e.expect is not None and r["kind"] == hypothesis_kind:
            claim = v.Claim(e.question, v.LOWER if e.expect.ratio < 1 else v.HIGHER, e.expect.ratio)
            verdict = v.verdict(claim, v.Evidence.from_row(r), floor)  # the one rule: the declared tolerance
            label, reason = verdict.label, verdict.text()
        else:
            label, reason = plain(r, floor, sense)
        rows.append(
            {
                "experiment": e.name,
                "metric": metric,
                **{k: r[k] for k in (*COMPARISON, "method")},
                "floor": floor,
                "expected": e.expect.ratio if e.expect and r["kind"] == hypothesis_kind else None,
                "verdict": label,
                "reason": reason.replace("the study's", "your expected")  # the hypothesis is the user's own
                + (f" (on {r['n_clusters']} clusters)" if (r.get("n_clusters") or 1) > 1 else ""),
            }
        )
    return rows


def cells_table(e: Experiment, setup: dict, r: pl.DataFrame) -> list[dict]:
    """Every cell with its status: measured (at least once), error (its setup failed, or every measurement did) or
    not testable here (the server lacks a setting or value the condition needs)."""
    from .run import setup_error, testable

    rows = []
    for server in setup["servers"]:
        broken = setup_error(setup, server)
        for c in setup["conditions"]:
            why = testable(setup, server, c["settings"])
            for item in setup["items"]:
                got = r.filter(server=server, condition=c["condition"], item=item, warmup=False)
                measured, failed = got["value"].is_not_null().sum(), got["value"].is_null().sum()
                status = "not testable here" if why else "error" if broken or (failed and not measured) else "measured"
                error = broken or (got.filter(pl.col("error").is_not_null())["error"][0] if failed else None)
                rows.append(
                    {
                        "experiment": e.name,
                        "server": server,
                        "condition": c["condition"],
                        "item": item,
                        "testable": why is None,
                        "status": status,
                        "reason": why or (error if status == "error" else None),
                        "measured": measured,
                        "failed": failed,
                    }
                )
    return rows


def setup_errors(e: Experiment, setup: dict) -> list[dict]:
    """A row per server whose setup failed (experiments_errors' columns; no condition or item: all of them)."""
    rows = []
    for server in setup["servers"]:
        prep = setup["prepared"][server]
        if not prep.get("skipped"):
            continue
        where = prep.get("error") or {}
        rows.append(
            {
                "experiment": e.name,
                "stage": "setup",
                "server": server,
                "file": where.get("file"),
                "statement": where.get("statement"),
                "first_line": where.get("first_line"),
                "error": where.get("error") or prep["skipped"],
            }
        )
    return rows


def plan_evidence(p: ParsedPlan) -> dict:
    """What the plan did with memory and disk, from its ANALYZE figures: the sorts' methods and space, the largest
    Hash and HashAggregate batch counts, temp blocks read and written, shared buffers hit and read (the root's
    counts include every node below it), and a line that says it."""
    mem, root = p.memory, p.root
    sorts = mem.filter(pl.col("sort_method").is_not_null())
    methods = sorted(set(sorts["sort_method"].to_list()))
    disk_sort = sorts.filter(pl.col("sort_space_type") == "Disk")
    batches = mem["hash_batches"].drop_nulls()
    agg = mem["hashagg_batches"].drop_nulls()
    row = {
        "sort_method": ", ".join(methods) or None,
        "sort_disk_kb": int(disk_sort["sort_space_kb"].sum()) if disk_sort.height else None,
        "sort_memory_kb": int(sorts.filter(pl.col("sort_space_type") == "Memory")["sort_space_kb"].max() or 0)
        if sorts.height
        else None,
        "hash_batches": int(batches.max()) if batches.len() else None,
        "hashagg_batches": int(agg.max()) if agg.len() else None,
        "hashagg_disk_kb": int(mem["disk_usage_kb"].drop_nulls().sum())
        if mem["disk_usage_kb"].drop_nulls().len()
        else None,
        "temp_read_blocks": root["temp_read_blocks"],
        "temp_written_blocks": root["temp_written_blocks"],
        "shared_hit_blocks": root["shared_hit_blocks"],
        "shared_read_blocks": root["shared_read_blocks"],
    }
    return row | {"spill": spill_text(row)}


def _mb(kb: int) -> str:
    return f"{kb / 1024:.1f} MB" if kb >= 1024 else f"{kb} kB"


def spill_text(r: dict) -> str:
    """'sort external merge, Disk 23.4 MB; hash 8 batches; temp 2900 read / 2900 written blocks' or 'in memory'."""
    parts = []
    if r["sort_disk_kb"]:
        parts.append(f"sort {r['sort_method']}, Disk {_mb(r['sort_disk_kb'])}")
    if (r["hash_batches"] or 0) > 1:
        parts.append(f"hash {r['hash_batches']} batches")
    if (r["hashagg_batches"] or 0) > 1:
        parts.append(f"HashAgg {r['hashagg_batches']} batches, Disk {_mb(r['hashagg_disk_kb'] or 0)}")
    if r["temp_read_blocks"] or r["temp_written_blocks"]:
        parts.append(f"temp {r['temp_read_blocks'] or 0} read / {r['temp_written_blocks'] or 0} written blocks")
    if parts:
        return "; ".join(parts)
    return "in memory" + (f" (sort {r['sort_method']})" if r["sort_method"] else "")


def node_label(n: dict) -> str:
    """A node as EXPLAIN's text names it: HashAggregate / GroupAggregate, 'Seq Scan on t'."""
    kind = n["node_type"]
    if kind == "Aggregate":
        kind = {"Hashed": "HashAggregate", "Sorted": "GroupAggregate", "Mixed": "MixedAggregate"}.get(
            n["strategy"], kind
        )
    rel = (n["relation"] or "").rsplit(".", 1)[-1] or n["index_name"]
    return f"{kind} on {rel}" if rel else kind


def _labels(p: ParsedPlan) -> list[str]:
    """Every node's label; a Hash names what it hashes ('Hash of orders'), so a join whose sides swap reads so."""
    nodes = p.nodes.to_dicts()
    out = []
    for n in nodes:
        label = node_label(n)
        if n["node_type"] == "Hash":
            below = [c for c in nodes if c["parent_id"] == n["node_id"]]
            what = node_label(below[0]).split(" on ", 1)[-1] if below else None
            label = f"Hash of {what}" if what else label
        out.append(label)
    return out


def plan_change(a: ParsedPlan | None, b: ParsedPlan | None) -> tuple[bool | None, str | None]:
    """(changed, what changed): the roots and the nodes one plan has and the other lacks; None without both plans."""
    if a is None or b is None:
        return None, None
    if a.fingerprint == b.fingerprint:
        return False, f"same plan ({node_label(a.root)} at the root)"
    na, nb = Counter(_labels(a)), Counter(_labels(b))
    gone, new = sorted((na - nb).elements()), sorted((nb - na).elements())
    root = node_label(a.root) + (f" → {node_label(b.root)}" if node_label(a.root) != node_label(b.root) else "")
    if not gone and not new:
        return True, f"same nodes, another shape (root {root})"
    return True, f"root {root}; " + (", ".join(gone) or "nothing") + " → " + (", ".join(new) or "nothing")


def plan_rows(store: RunStore, e: Experiment, setup: dict, parsed: dict | None = None) -> list[dict]:
    """experiments_plans' rows; `parsed` collects each plan by (server, condition, item) for the queries table."""
    rows = []
    if e.workload.kind != "sql":
        return rows
    for server in setup["servers"]:
        for c in setup["conditions"]:
            for item in setup["items"]:
                doc = store.load_json(plan_path(e, server, c["index"], item))
                if doc is None:
                    continue
                base = {"experiment": e.name, "server": server, "condition": c["condition"], "item": item}
                if isinstance(doc["plan"], dict) and "error" in doc["plan"]:
                    rows.append(base | {"error": doc["plan"]["error"]})
                    continue
                p = parse_plan(doc["plan"])
                if parsed is not None:
                    parsed[(server, c["condition"], item)] = p
                rows.append(
                    base
                    | {
                        "root": p.root["node_type"],
                        "fingerprint": p.fingerprint,
                        "execution_ms": p.execution_ms,
                        "error": None,
                        "round": doc.get("round"),
                    }
                    | plan_evidence(p)
                )
    return rows


def query_rows(
    e: Experiment, cmp: pl.DataFrame, summary: pl.DataFrame, verdicts: list[dict], floors: pl.DataFrame, plans: dict
) -> list[dict]:
    """experiments_queries: each query's comparisons with both medians (ms), its verdict beside the suite's, and
    the why (plan change, spill, buffers) from the plans sampled; a query going against the suite first."""
    if e.workload.kind != "sql":
        return []
    sense = dict(METRICS["sql"])["time_s"]
    med = {
        (r["server"], r["condition"], r["item"]): r
        for r in summary.filter(experiment=e.name, metric="time_s").iter_rows(named=True)
    }
    suite = {(r["kind"], r["server"], r["condition"], r["a"], r["b"]): r for r in verdicts}
    rows = []
    for r in cmp.filter(pl.col("metric") == "time_s", pl.col("kind") != "A/A", pl.col("item") != SUITE).iter_rows(
        named=True
    ):
        if r["kind"] == "server":
            sides = ((r["a"], r["condition"]), (r["b"], r["condition"]))
        else:
            sides = ((r["server"], r["a"]), (r["server"], r["b"]))
        verdict, reason = plain(r, _floor(floors, e.name, r, "time_s"), sense)
        whole = suite.get((r["kind"], r["server"], r["condition"], r["a"], r["b"]), {})
        pa, pb = (plans.get((srv, cond, r["item"])) for srv, cond in sides)
        changed, what = plan_change(pa, pb)
        ev = [plan_evidence(p) if p is not None else {} for p in (pa, pb)]
        row = {"experiment": e.name, **{k: r[k] for k in COMPARISON}}
        for side, key in zip("ab", sides, strict=True):
            m = med.get((*key, r["item"])) or {}
            row |= {
                f"{side}_ms": _ms(m.get("median")),
                f"{side}_low_ms": _ms(m.get("ci_low")),
                f"{side}_high_ms": _ms(m.get("ci_high")),
            }
        row |= {
            "verdict": verdict,
            "reason": reason,
            "suite_ratio": whole.get("ratio"),
            "suite_verdict": whole.get("verdict"),
            "against_suite": _against(verdict, whole.get("ratio"), whole.get("low"), whole.get("high")),
            "plan_changed": changed,
            "plan": what,
        }
        for side, x in zip("ab", ev, strict=True):
            row |= {f"{side}_{k}": x.get(k) for k in EVIDENCE}
        rows.append(row)
    rows.sort(key=lambda x: (not x["against_suite"], -abs(_log(x["ratio"]))))
    return rows


EVIDENCE = ("spill", "temp_read_blocks", "temp_written_blocks", "shared_hit_blocks", "shared_read_blocks")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _log(x: float | None) -> float:
    import math

    return math.log(x) if x else 0.0


def _against(verdict: str, suite_ratio, low, high) -> bool:
    """The query went the other way from the suite: slower while the suite's interval lies below 1, or faster
    while it lies above."""
    if suite_ratio is None or low is None or high is None:
        return False
    return (verdict == "slower" and high < 1) or (verdict == "faster" and low > 1)


def setup_row(e: Experiment, setup: dict) -> dict:
    def short(m) -> str:
        return ", ".join(f"{k}: {x}" for k, x in (m or {}).items() if x is not None)

    w = e.workload
    work = (
        pgbench_params.describe(e)  # scripts with weights, clients, rate, protocol
        if w.kind == "pgbench"
        else f"{len(setup['items'])} SQL quer{'y' if len(setup['items']) == 1 else 'ies'}: " + ", ".join(setup["items"])
    )
    d = e.data
    data = (
        f"SSB SF {d.ssb.sf:g}"
        if d.ssb
        else f"pgbench -i scale {d.pgbench.scale}"
        if d.pgbench
        else f"setup script {d.sql.rsplit('/', 1)[-1]}"
        if d.sql
        else "none"
    )
    data = pgbench_params.describe_data(e) or data  # a scale factor: a database per scale
    return {
        "experiment": e.name,
        "question": e.question,
        "data": data,
        "workload": work,
        "servers": ", ".join(setup["servers"]),
        "factors": short({k: x if isinstance(x, str) else ", ".join(map(str, x)) for k, x in e.factors.items()}),
        "baseline": setup["baseline"] + (f" on {setup['base_server']}" if setup.get("base_server") else ""),
        "expect": e.expect.ratio if e.expect else None,
        "rounds": e.rounds,
        "warmups": e.warmups,
        "metric": main_metric(e),
        "database": setup["database"],
    }


def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


S, F, N, B = pl.String, pl.Float64, pl.Int64, pl.Boolean
SCHEMAS = {
    "experiments_setup": {
        "experiment": S,
        "question": S,
        "data": S,
        "workload": S,
        "servers": S,
        "factors": S,
        "baseline": S,
        "expect": F,
        "rounds": N,
        "warmups": N,
        "metric": S,
        "database": S,
    },
    "experiments_cells": {
        "experiment": S,
        "server": S,
        "condition": S,
        "item": S,
        "testable": B,
        "status": S,
        "reason": S,
        "measured": N,
        "failed": N,
    },
    "experiments_verdicts": {
        "experiment": S,
        "kind": S,
        "server": S,
        "condition": S,
        "item": S,
        "metric": S,
        "a": S,
        "b": S,
        "ratio": F,
        "low": F,
        "high": F,
        "method": S,
        "floor": F,
        "expected": F,
        "verdict": S,
        "reason": S,
    },
    "experiments_plans": {
        "experiment": S,
        "server": S,
        "condition": S,
        "item": S,
        "root": S,
        "fingerprint": S,
        "execution_ms": F,
        "error": S,
        "round": N,
        "sort_method": S,
        "sort_disk_kb": N,
        "sort_memory_kb": N,
        "hash_batches": N,
        "hashagg_batches": N,
        "hashagg_disk_kb": N,
        "temp_read_blocks": N,
        "temp_written_blocks": N,
        "shared_hit_blocks": N,
        "shared_read_blocks": N,
        "spill": S,
    },
    "experiments_queries": {
        "experiment": S,
        "kind": S,
        "server": S,
        "condition": S,
        "item": S,
        "a": S,
        "b": S,
        **{f"{side}_{x}": F for side in "ab" for x in ("ms", "low_ms", "high_ms")},
        "ratio": F,
        "low": F,
        "high": F,
        "verdict": S,
        "reason": S,
        "suite_ratio": F,
        "suite_verdict": S,
        "against_suite": B,
        "plan_changed": B,
        "plan": S,
        **{f"{side}_{k}": S if k == "spill" else N for side in "ab" for k in EVIDENCE},
    },
    "experiments_errors": {
        "experiment": S,
        "stage": S,
        "server": S,
        "condition": S,
        "item": S,
        "repetition": N,
        "warmup": B,
        "file": S,
        "statement": N,
        "first_line": S,
        "error": S,
        "sqlstate": S,
    },
}


def derive(store: RunStore, params) -> dict[str, pl.DataFrame]:
    """Every experiments_* table from the raw store alone; none when the params have no experiments (or none ran)."""
    done = [e for e in (getattr(params, "experiments", None) or []) if store.load_json(setup_path(e)) is not None]
    if not done:
        return {}
    setups, cells, verdicts, plans, all_runs, all_cmp, values, own = [], [], [], [], [], [], [], []
    parsed: dict[str, dict] = {}  # experiment -> (server, condition, item) -> its sampled plan
    errors: list[dict] = []
    for e in done:
        setup = store.load_json(setup_path(e))
        r = runs(store, e)
        vals = long_values(e, r)
        cmp = comparisons(e, vals, setup)
        own.append(comparisons(e, vals, setup, pool=False) if between_runs.has_replicas(setup["servers"]) else cmp)
        setups.append(setup_row(e, setup))
        cells += cells_table(e, setup, r)
        plans += plan_rows(store, e, setup, parsed.setdefault(e.name, {}))
        errors += setup_errors(e, setup)
        all_runs.append(r)
        all_cmp.append(cmp)
        values.append(vals)
    cmp = pl.concat(all_cmp, how="diagonal_relaxed")
    nz = noise_table(pl.concat(own, how="diagonal_relaxed"))
    queries = []
    r = pl.concat(all_runs)
    vals = pl.concat(values)
    summary = stats.summarize(vals, by=["experiment", "server", "condition", "item", "metric"], value="value")
    for e, c in zip(done, all_cmp, strict=True):
        mine = verdict_rows(e, c, nz)
        verdicts += mine
        queries += query_rows(e, c, summary, mine, nz, parsed[e.name])
    failed = r.filter(pl.col("error").is_not_null()).with_columns(stage=pl.lit("workload"))
    errors_df = pl.concat(
        [_frame(errors, SCHEMAS["experiments_errors"]), failed.select(*SCHEMAS["experiments_errors"])],
        how="vertical_relaxed",
    )
    return {
        "experiments_setup": _frame(setups, SCHEMAS["experiments_setup"]),
        "experiments_cells": _frame(cells, SCHEMAS["experiments_cells"]),
        "experiments_runs": r,
        "experiments_summary": summary,
        "experiments_paired": cmp,
        "experiments_noise": nz,
        "experiments_verdicts": _frame(verdicts, SCHEMAS["experiments_verdicts"]),
        "experiments_plans": _frame(plans, SCHEMAS["experiments_plans"]),
        "experiments_queries": _frame(queries, SCHEMAS["experiments_queries"]),
        "experiments_errors": errors_df,
    } | pgbench_tables.tables(store, done)  # pgbench's latency, timeline, server counters (empty without pgbench)


TABLES = (
    "experiments_setup",
    "experiments_cells",
    "experiments_runs",
    "experiments_summary",
    "experiments_paired",
    "experiments_noise",
    "experiments_verdicts",
    "experiments_plans",
    "experiments_queries",
    "experiments_errors",
    *pgbench_tables.TABLES,
)
__all__ = ["AA_SUFFIX", "PGBENCH_ITEM", "SERVER", "TABLES", "derive"]

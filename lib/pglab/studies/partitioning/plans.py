"""The plans of study S5, read with `pglab.pgtools.explain`: their shape, the checks the study's claims need, and
the planner's rule for the workers of a Parallel Append.

The study showed two shapes: serially `Aggregate > Append > 6 × Seq Scan`; in parallel
`Finalize Aggregate > Gather > Partial Aggregate > Parallel Append > 6 × Parallel Seq Scan` with 7 workers
planned although 100 were allowed. Both are checked on the parsed node table, not on the printed text.

The worker count (PostgreSQL 11-18, `compute_parallel_worker` and `add_paths_to_append_rel`): each
partition's scan gets 1 worker, plus one each time its size triples beyond min_parallel_table_scan_size
(8 MB); a partition gets its partial path even below that size, unlike a plain table. A Parallel Append
takes the largest of its children's counts, at least ⌊log2(partitions)⌋ + 1, and at most
max_parallel_workers_per_gather. Six partitions of ≈ 8 GB (1,031,296 pages): 7, as the study planned.
"""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from ...pgtools.explain.model import GATHER_TYPES


def _label(n: dict) -> str:
    label = n["node_type"]
    if label == "Aggregate" and n["partial_mode"] in ("Partial", "Finalize"):
        label = f"{n['partial_mode']} Aggregate"
    return ("Parallel " + label) if n["parallel_aware"] else label


def _children(nodes: pl.DataFrame) -> tuple[list[dict], dict[int, list[dict]]]:
    rows = nodes.sort("node_id").to_dicts()
    kids: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        if r["parent_id"] is not None:
            kids[r["parent_id"]].append(r)
    return rows, kids


def describe(nodes: pl.DataFrame) -> str:
    """The plan's shape in one line: `A > B > 6 × C`; identical siblings counted, different ones listed."""
    rows, kids = _children(nodes)

    def walk(n: dict) -> str:
        below = kids[n["node_id"]]
        if not below:
            return _label(n)
        parts = [walk(k) for k in below]
        if len(parts) == 1:
            return f"{_label(n)} > {parts[0]}"
        if len(set(parts)) == 1:
            return f"{_label(n)} > {len(parts)} × {parts[0]}"
        return f"{_label(n)} > (" + "; ".join(parts) + ")"

    return walk(rows[0]) if rows else ""


def check(nodes: pl.DataFrame, partitions: int) -> dict:
    """The facts the study's claims rest on, from the node table of one plan:

    - parallel_append_under_gather: a parallel-aware Append whose parent is a Partial Aggregate whose
      parent is a Gather (the study's parallel plan);
    - append_of_seq_scans: no Gather anywhere, and an Append (not parallel-aware) whose children are all
      plain Seq Scans, one per partition (the study's serial plan);
    - seq_scans / parallel_seq_scans: scans in the plan (every partition scanned once);
    - workers_planned / workers_launched: summed over the plan's Gathers (null without one)."""
    rows, kids = _children(nodes)
    by_id = {r["node_id"]: r for r in rows}
    gathers = [r for r in rows if r["node_type"] in GATHER_TYPES]

    def parent(r):
        return by_id.get(r["parent_id"]) if r["parent_id"] is not None else None

    under_gather = False
    for r in rows:
        if r["node_type"] == "Append" and r["parallel_aware"]:
            agg = parent(r)
            top = parent(agg) if agg else None
            if (
                agg
                and agg["node_type"] == "Aggregate"
                and agg["partial_mode"] == "Partial"
                and top
                and (top["node_type"] in GATHER_TYPES)
            ):
                under_gather = True
    serial = False
    if not gathers:
        for r in rows:
            below = kids[r["node_id"]]
            if (
                r["node_type"] == "Append"
                and not r["parallel_aware"]
                and len(below) == partitions
                and all(k["node_type"] == "Seq Scan" and not k["parallel_aware"] for k in below)
            ):
                serial = True
    scans = [r for r in rows if r["node_type"] == "Seq Scan"]
    planned = [g["workers_planned"] for g in gathers if g["workers_planned"] is not None]
    launched = [g["workers_launched"] for g in gathers if g["workers_launched"] is not None]
    return {
        "shape": describe(nodes),
        "gathers": len(gathers),
        "parallel_append_under_gather": under_gather,
        "append_of_seq_scans": serial,
        "seq_scans": len(scans),
        "parallel_seq_scans": sum(bool(r["parallel_aware"]) for r in scans),
        "workers_planned": sum(planned) if planned else None,
        "workers_launched": sum(launched) if launched else None,
    }


def scan_workers(pages: int, threshold_pages: int, allowed: int) -> int:
    """Workers PostgreSQL gives the parallel scan of one partition of `pages` blocks (at least 1)."""
    workers, threshold = 1, max(threshold_pages, 1)
    while pages >= threshold * 3:
        workers += 1
        threshold *= 3
        if threshold > (2**31 - 1) // 3:
            break
    return min(workers, allowed)


def append_workers(partition_pages: list[int], threshold_pages: int, allowed: int) -> int:
    """Workers PostgreSQL plans for a Parallel Append over partitions of these sizes."""
    if not partition_pages or allowed < 1:
        return 0
    children = max(scan_workers(p, threshold_pages, allowed) for p in partition_pages)
    # pg_leftmost_one_pos32(n) + 1 == n.bit_length(): ⌊log2 n⌋ + 1
    return min(max(children, len(partition_pages).bit_length()), allowed)


def study_pages(partition_mb: tuple[int, ...] | list[int], block_size: int = 8192) -> list[int]:
    return [mb * 1024 * 1024 // block_size for mb in partition_mb]

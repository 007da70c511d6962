"""Write SSB tables as `.tbl` files with K processes: this one and K - 1 `pglab.datasets.ssb.worker` children.

The chunks of all the tables, table after table, are dealt in a fixed repeating pattern, this process
taking 3 for every 5 a child takes: it also moves the children's blocks from their pipes to the files,
with splice(2) (no copy through Python), and pays for the page cache of every file. One set of children
serves every table, so their start-up (importing polars) is paid once, and they start before this process
imports polars itself. The files are the serial iterators' bytes whatever K.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import scale
from .dbgen import counts as dbgen_counts
from .flavors import DEFAULT_FLAVOR, check_flavor
from .parallel import HEADER, start_worker, stop_workers, worker_failed

_SPLICE = hasattr(os, "splice")


def write_tables(
    out: Path,
    tables: list[str],
    sf: float,
    seed: int,
    flavor: str = DEFAULT_FLAVOR,
    processes: int = 1,
    prefetch: int = 4,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Write `out/<table>.tbl` for each table; returns the rows written per table."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    sf = scale.check_sf(sf)
    if check_flavor(flavor) == "dbgen":  # counted without numpy: the children start first
        tasks = [(t, c) for t in tables for c in range(dbgen_counts.chunk_count(t, sf))]
    else:
        from . import generate

        tasks = [(t, c) for t in tables for c in range(generate.chunk_count(t, sf, flavor))]
    owners = _owners(processes)
    children = _start(tables, sf, seed, flavor, owners, prefetch, len(tasks))
    try:
        from . import generate
        from .dbgen.stream import keep_freed_memory

        generate.check_seed(seed)
        keep_freed_memory()
    except BaseException:
        stop_workers(children.values())
        raise
    rows_per_table = dict.fromkeys(tables, 0)
    try:
        for table in tables:
            target = out / f"{table}.tbl"
            partial = target.with_name(target.name + ".partial")  # never a truncated file under the real name
            try:
                with open(partial, "wb", buffering=0) as sink:
                    for i, (t, chunk) in enumerate(tasks):
                        if t != table:
                            continue
                        owner = owners[i % len(owners)]
                        if owner == 0:
                            rows, block = generate.chunk_block(t, sf, seed, chunk, "tbl", flavor)
                            _write_all(sink.fileno(), block)
                        else:
                            rows = _relay(children[owner], sink)
                        rows_per_table[t] += rows
                        if progress:
                            progress(t, rows)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            os.replace(partial, target)
    finally:
        stop_workers(children.values())
    return rows_per_table


def _owners(processes: int, own: int = 3, child: int = 5) -> list[int]:
    """Which process makes chunk number i: owners[i % len(owners)]; smooth weighted round-robin."""
    weights = [own] + [child] * (processes - 1)
    credit, owners = [0] * processes, []
    for _ in range(sum(weights)):
        credit = [c + w for c, w in zip(credit, weights, strict=True)]
        pick = credit.index(max(credit))
        credit[pick] -= sum(weights)
        owners.append(pick)
    return owners


def _start(tables, sf, seed, flavor, owners, prefetch, n_tasks) -> dict:
    children = {}
    try:
        for k in range(1, max(owners) + 1):
            residues = [i for i, owner in enumerate(owners) if owner == k and i < n_tasks]
            if not residues:
                continue
            tasks = ",".join(map(str, residues))
            args = [",".join(tables), repr(sf), str(seed), "tbl", tasks, str(len(owners)), str(prefetch), flavor]
            children[k] = start_worker(args, polars_threads=1, bufsize=0)
    except BaseException:
        stop_workers(children.values())
        raise
    return children


def _relay(child_and_errors, sink) -> int:
    child, errors = child_and_errors
    source = child.stdout.fileno()
    header = _read_exact(source, HEADER.size)
    if header is not None:
        rows, size = HEADER.unpack(header)
        if _move(source, sink.fileno(), size):
            return rows
    raise worker_failed(child, errors)


def _read_exact(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        got = os.read(fd, size - len(data))
        if not got:
            return None
        data += got
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _move(source: int, sink: int, size: int) -> bool:
    """Copy `size` bytes from a pipe to a file; False if the pipe ends first."""
    while size:
        if _SPLICE:
            moved = os.splice(source, sink, size)
        else:
            chunk = os.read(source, min(size, 1 << 20))
            _write_all(sink, chunk)
            moved = len(chunk)
        if not moved:
            return False
        size -= moved
    return True

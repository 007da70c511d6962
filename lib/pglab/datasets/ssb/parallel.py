"""Generate in child processes while the caller consumes (e.g. streams COPY) in its own.

Chunks are dealt round-robin to the children and read back in chunk order, so the blocks are the same, in
the same order, as the serial iterators give. Children are plain `python -m pglab.datasets.ssb.worker` processes
writing to a pipe rather than multiprocessing workers: that needs no `if __name__ == "__main__"` guard in
the caller's script or notebook, and a child whose reader disappears (consumer closed, crashed or killed)
gets a broken pipe and exits by itself.
"""

import fcntl
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from . import scale
from .flavors import DEFAULT_FLAVOR, check_format

# Frame of each block on a child's stdout: rows, byte length (little-endian uint64), then the bytes.
HEADER = struct.Struct("<QQ")
_STOP_SECONDS = 5.0
_PIPE_BYTES = 1 << 20
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding `pglab`


class ParallelBlocks:
    """Iterator of the blocks of one table, made by child processes that start at construction.

    Starting at once lets generation run ahead (up to `prefetch` blocks per child) while the caller is still
    busy elsewhere, e.g. loading the dimensions. Use it in a `with` block or call close() when stopping
    early; exhausting it, close() and garbage collection all reap the children.
    """

    _children: list | tuple = ()  # so close() works even when __init__ failed before starting anything

    def __init__(
        self,
        table: str,
        sf: float,
        seed: int,
        fmt: str = "copy",
        *,
        workers: int = 1,
        prefetch: int = 4,
        polars_threads: int = 1,
        with_rows: bool = True,
        flavor: str = DEFAULT_FLAVOR,
    ):
        from . import generate  # here: files.py uses this module's helpers before it loads polars

        sf, seed = scale.check_sf(sf), generate.check_seed(seed)
        check_format(fmt)
        if workers < 1 or prefetch < 1 or polars_threads < 1:
            raise ValueError("workers, prefetch and polars_threads must be >= 1")
        self._children: list[tuple[subprocess.Popen, object]] = []
        self._n_chunks = generate.chunk_count(table, sf, flavor)  # also rejects an unknown table or flavor
        self._next_chunk = 0
        self._with_rows = with_rows
        workers = min(workers, self._n_chunks)
        try:
            for w in range(workers):
                args = [table, repr(sf), str(seed), fmt, str(w), str(workers), str(prefetch), flavor]
                self._children.append(start_worker(args, polars_threads))
        except BaseException:
            self.close()
            raise

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, bytes] | bytes:
        if self._next_chunk >= self._n_chunks or not self._children:
            self.close()
            raise StopIteration
        child, errors = self._children[self._next_chunk % len(self._children)]
        try:
            rows, block = _receive(child, errors)
        except BaseException:
            self.close()
            raise
        self._next_chunk += 1
        return (rows, block) if self._with_rows else block

    def close(self) -> None:
        children, self._children = self._children, []
        stop_workers(children)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter shutdown; the children then see a broken pipe and exit anyway
            pass


def iter_blocks_parallel(
    table: str,
    sf: float,
    seed: int,
    fmt: str = "copy",
    *,
    workers: int = 1,
    prefetch: int = 4,
    polars_threads: int = 1,
    flavor: str = DEFAULT_FLAVOR,
) -> ParallelBlocks:
    """(rows, bytes) per chunk, as generate.iter_blocks gives them, made by `workers` child processes.

    polars_threads caps each child's polars thread pool: on a 2-core machine where PostgreSQL's COPY
    backend has the other core, one generator thread is what fits.
    """
    return ParallelBlocks(
        table, sf, seed, fmt, workers=workers, prefetch=prefetch, polars_threads=polars_threads, flavor=flavor
    )


def iter_copy_blocks_parallel(
    table: str, sf: float, seed: int, workers: int = 1, prefetch: int = 4, flavor: str = DEFAULT_FLAVOR
) -> ParallelBlocks:
    """The bytes of generate.iter_copy_blocks, in the same order, generated in child processes."""
    return ParallelBlocks(table, sf, seed, "copy", workers=workers, prefetch=prefetch, with_rows=False, flavor=flavor)


def iter_tbl_blocks_parallel(
    table: str, sf: float, seed: int, workers: int = 1, prefetch: int = 4, flavor: str = DEFAULT_FLAVOR
) -> ParallelBlocks:
    """The bytes of generate.iter_tbl_blocks, in the same order, generated in child processes."""
    return ParallelBlocks(table, sf, seed, "tbl", workers=workers, prefetch=prefetch, with_rows=False, flavor=flavor)


def start_worker(args: list[str], polars_threads: int, bufsize: int = -1) -> tuple[subprocess.Popen, IO[bytes]]:
    """(child, its stderr) of `python -m pglab.datasets.ssb.worker *args`, which writes its blocks to a pipe."""
    env = dict(os.environ, POLARS_MAX_THREADS=str(polars_threads))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pglab.datasets.ssb.worker", *args]
    errors = tempfile.TemporaryFile()  # not a pipe: an unread stderr pipe could block the child
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env, bufsize=bufsize)
    except BaseException:
        errors.close()
        raise
    widen_pipe(child.stdout)
    return child, errors


def stop_workers(children) -> None:
    """Stop each (child, stderr) of start_worker."""
    for child, errors in children:
        stop_child(child)
        errors.close()


def worker_failed(child: subprocess.Popen, errors: IO[bytes]) -> RuntimeError:
    """The error to raise when a child's blocks end early: its exit code and what it wrote to stderr."""
    child.wait(_STOP_SECONDS)
    errors.seek(0)
    message = errors.read().decode(errors="replace").strip()
    return RuntimeError(f"SSB generator process {child.pid} failed (exit code {child.returncode}):\n{message}")


def widen_pipe(pipe) -> None:
    """Linux: a 1 MiB pipe instead of 64 KiB cuts the wake-ups per block from ~200 to ~12."""
    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (AttributeError, OSError):  # other systems, or a lower /proc/sys/fs/pipe-max-size
        pass


def _receive(child: subprocess.Popen, errors) -> tuple[int, bytes]:
    header = child.stdout.read(HEADER.size)
    if len(header) == HEADER.size:
        rows, size = HEADER.unpack(header)
        block = child.stdout.read(size)
        if len(block) == size:
            return rows, block
    raise worker_failed(child, errors)  # a short read: the child ended before its last chunk


def stop_child(child: subprocess.Popen) -> None:
    child.stdout.close()  # a child still writing gets a broken pipe
    if child.poll() is None:
        child.terminate()
    try:
        child.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()

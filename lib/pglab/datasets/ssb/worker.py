"""Generator child process for pglab.datasets.ssb.parallel: writes framed blocks of one table to stdout.

Run as `python -m pglab.datasets.ssb.worker TABLES SF SEED FORMAT FIRST STEP PREFETCH [FLAVOR]`. TABLES is one table
or several, comma-separated; their chunks, table after table, are numbered 0, 1, ... and it makes numbers
FIRST, FIRST + STEP, ... (FIRST may be several numbers, comma-separated: every chunk whose number mod STEP
is among them), writing each as a header (rows, byte length: two little-endian uint64) followed by the
block. A writer thread lets generation run up to PREFETCH blocks ahead of the pipe.
When the reader goes away the write fails (broken pipe) and the process exits: no orphans.
"""

import os
import queue
import sys
import threading

from .parallel import HEADER

_DONE = None


def main(argv: list[str]) -> int:
    table, sf, seed, fmt, first, step, prefetch, *rest = argv
    from . import generate  # after argument parsing: this import (polars) is the slow part of start-up
    from .dbgen.stream import keep_freed_memory

    keep_freed_memory()

    sf, step = float(sf), int(step)
    mine = {int(r) for r in first.split(",")}
    flavor = rest[0] if rest else generate.DEFAULT_FLAVOR
    pending: queue.Queue = queue.Queue(maxsize=int(prefetch))
    reader_gone = threading.Event()
    writer = threading.Thread(target=_write_blocks, args=(pending, sys.stdout.buffer, reader_gone), daemon=True)
    writer.start()
    tasks = [(t, chunk) for t in table.split(",") for chunk in range(generate.chunk_count(t, sf, flavor))]
    for table_name, chunk in (task for i, task in enumerate(tasks) if i % step in mine):
        rows_and_block = generate.chunk_block(table_name, sf, int(seed), chunk, fmt, flavor)
        while not reader_gone.is_set():
            try:
                pending.put(rows_and_block, timeout=0.2)
                break
            except queue.Full:
                continue
        if reader_gone.is_set():
            return _quit_quietly()
    pending.put(_DONE)
    writer.join()
    return _quit_quietly() if reader_gone.is_set() else 0


def _quit_quietly() -> int:
    # The reader is gone: point stdout at /dev/null so the interpreter's final flush cannot fail loudly.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1


def _write_blocks(pending: queue.Queue, sink, reader_gone: threading.Event) -> None:
    try:
        while (item := pending.get()) is not _DONE:
            rows, block = item
            sink.write(HEADER.pack(rows, len(block)))
            sink.write(block)
        sink.flush()
    except (BrokenPipeError, OSError, ValueError):
        reader_gone.set()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Generator child process for pglab.ssb.parallel: writes framed blocks of one table to stdout.

Run as `python -m pglab.ssb.worker TABLE SF SEED FORMAT FIRST_CHUNK STEP PREFETCH`; it makes chunks
FIRST_CHUNK, FIRST_CHUNK + STEP, ... and writes each as a header (rows, byte length: two little-endian
uint64) followed by the block. A writer thread lets generation run up to PREFETCH blocks ahead of the pipe.
When the reader goes away the write fails (broken pipe) and the process exits: no orphans.
"""

import os
import queue
import sys
import threading

from .parallel import HEADER

_DONE = None


def main(argv: list[str]) -> int:
    table, sf, seed, fmt, first, step, prefetch = argv
    from . import generate  # after argument parsing: this import (polars) is the slow part of start-up

    sf, first, step = float(sf), int(first), int(step)
    pending: queue.Queue = queue.Queue(maxsize=int(prefetch))
    reader_gone = threading.Event()
    writer = threading.Thread(target=_write_blocks, args=(pending, sys.stdout.buffer, reader_gone), daemon=True)
    writer.start()
    for chunk in range(first, generate.chunk_count(table, sf), step):
        rows_and_block = generate.chunk_block(table, sf, int(seed), chunk, fmt)
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

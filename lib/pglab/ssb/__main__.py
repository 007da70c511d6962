"""Write dbgen-compatible SSB `.tbl` files: python -m pglab.ssb --sf 1 --seed 1 --out data/ssb/sf1"""

import argparse
import math
import os
import sys
from pathlib import Path

from tqdm import tqdm

from . import generate, parallel
from .schema import TABLES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pglab.ssb",
        description="Generate Star Schema Benchmark tables as dbgen-style .tbl files (| separated, "
                    "trailing |). The same --sf and --seed always give byte-identical files.")
    parser.add_argument("--sf", required=True, type=_scale_factor, help="scale factor > 0, e.g. 1 or 0.01")
    parser.add_argument("--seed", type=_seed, default=1, help="random seed, integer >= 0 (default 1)")
    parser.add_argument("--out", required=True, type=Path, help="output directory (created if missing)")
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES), metavar="TABLE",
                        help=f"tables to write (default all: {' '.join(TABLES)})")
    parser.add_argument("--workers", type=int, default=0,
                        help="generator processes besides this one (default 0: generate in this process)")
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error("argument --workers: must be >= 0")
    _prepare_output_dir(parser, args.out)
    print(f"SSB generator {generate.GENERATOR_VERSION}: SF {args.sf}, seed {args.seed} -> {args.out}",
          file=sys.stderr)
    for table in args.tables:
        _write_table(table, args.sf, args.seed, args.out, args.workers)
    return 0


def _write_table(table: str, sf: float, seed: int, out: Path, workers: int) -> None:
    if workers:
        blocks = parallel.iter_blocks_parallel(table, sf, seed, "tbl", workers=workers)
    else:
        blocks = generate.iter_blocks(table, sf, seed, "tbl")
    target = out / f"{table}.tbl"
    partial = target.with_name(target.name + ".partial")  # never leave a truncated file under the real name
    total = generate.row_count(table, sf, seed)
    with (
        open(partial, "wb") as sink,
        tqdm(total=total, desc=table, unit=" rows", unit_scale=True, file=sys.stderr) as progress,
    ):
        for rows, block in blocks:
            sink.write(block)
            progress.update(rows)
    os.replace(partial, target)


def _scale_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"scale factor must be > 0, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be >= 0, got {text!r}")
    return value


def _prepare_output_dir(parser: argparse.ArgumentParser, out: Path) -> None:
    if out.exists() and not out.is_dir():
        parser.error(f"argument --out: {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"argument --out: cannot create {out}: {error.strerror or error}")
    if not os.access(out, os.W_OK | os.X_OK):
        parser.error(f"argument --out: {out} is not writable")


if __name__ == "__main__":
    sys.exit(main())

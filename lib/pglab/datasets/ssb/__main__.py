"""Write SSB `.tbl` files: python -m pglab.datasets.ssb --sf 1 --out data/ssb/sf1 [--processes K] [--flavor dbgen|spec]

The default flavor, dbgen, writes the files ssb-dbgen's `dbgen -s SF` writes, byte for byte (whole SF);
--seed only applies to the spec flavor."""

import argparse
import math
import os
import sys
from pathlib import Path

from . import files
from .dbgen import counts as dbgen_counts
from .flavors import DEFAULT_FLAVOR, FLAVORS, GENERATOR_VERSION
from .schema import TABLES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pglab.datasets.ssb",
        description="Generate Star Schema Benchmark tables as dbgen-style .tbl files (| separated, "
        "trailing |). Flavor dbgen (default) writes ssb-dbgen's files byte for byte; flavor spec "
        "follows the SSB rules with its own random streams, chosen by --seed. The same arguments "
        "always give byte-identical files, whatever --processes.",
    )
    parser.add_argument(
        "--sf",
        required=True,
        type=_scale_factor,
        help="scale factor > 0, e.g. 1 or 0.01 (flavor dbgen: whole from 1 on)",
    )
    parser.add_argument(
        "--flavor",
        choices=FLAVORS,
        default=DEFAULT_FLAVOR,
        help="dbgen (default): identical to ssb-dbgen; spec: the SSB rules, seeded",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=1,
        help="random seed of flavor spec, integer >= 0 (default 1; flavor dbgen has fixed streams)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory (created if missing)")
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=TABLES,
        default=list(TABLES),
        metavar="TABLE",
        help=f"tables to write (default all: {' '.join(TABLES)})",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=_cpus(),
        help="generating processes, this one included (default: the number of CPUs)",
    )
    parser.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)  # older: children only
    args = parser.parse_args(argv)
    processes = args.processes if args.workers is None else args.workers + 1
    if processes < 1:
        parser.error("argument --processes: must be >= 1")
    try:
        totals = _expected_rows(args.tables, args.sf, args.flavor)
    except ValueError as error:
        parser.error(f"argument --sf: {error}")
    _prepare_output_dir(parser, args.out)
    seed_note = f"seed {args.seed}" if args.flavor == "spec" else "dbgen's fixed streams"
    print(
        f"SSB generator {GENERATOR_VERSION}, flavor {args.flavor}: SF {args.sf:g}, {seed_note}, "
        f"{processes} processes -> {args.out}",
        file=sys.stderr,
    )
    bars: dict = {}

    def progress(table: str, rows: int) -> None:
        if table not in bars:
            from tqdm import tqdm  # late: tqdm's import is slow, and the generator children start first

            for bar in bars.values():
                bar.close()
            bars[table] = tqdm(total=totals[table], desc=table, unit=" rows", unit_scale=True, file=sys.stderr)
        bars[table].update(rows)

    try:
        files.write_tables(args.out, args.tables, args.sf, args.seed, args.flavor, processes, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()
    return 0


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _expected_rows(tables: list[str], sf: float, flavor: str) -> dict[str, int]:
    """Rows per table for the progress bars (lineorder: the expectation); raises ValueError for a bad SF."""
    if flavor == "dbgen":
        return {t: dbgen_counts.expected_rows(t, sf) for t in tables}
    from . import generate

    return {t: generate.row_count(t, sf, flavor=flavor) for t in tables}


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

"""`python -m pglab derive`: every derived table of a run, again, from its raw data alone.

    python -m pglab derive --run-id ID [--out DIR] [--check DIR]
    python -m pglab derive --archive ID [--force]

`--run-id`: reads data/raw/ID/ (unpacked first from data/raw-archive/ID.tar.xz when only the archive is
there), takes the run's params from its params.json, runs every stage's derive function in report order
(pglab.studies) and writes the tables with the notebooks' writer into data/derived/<profile>/, or DIR. No
server is started or connected to (servers.NO_SERVERS_ENV). The folder is replaced only once every table is
written (derived.stage / publish). `--check DIR`: then compare with the tables of run ID in DIR (what the
notebooks wrote): exit 1 on any difference.

`--archive`: writes data/raw-archive/ID.tar.xz from data/raw/ID/ (pglab.core.raw_archive) and prints its size.

The tables are byte for byte the notebooks'; in MANIFEST.json sha256, rows, columns and run_id are the
same, and `derived_by` (the kit revision that derived the table, `+dirty` with uncommitted changes) may differ:
`compare` ignores that field only."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from .core import derived, paths, raw_archive
from .core.derived import NO_SERVERS_ENV
from .core.paramtypes import run_id_arg
from .core.store import RunStore
from .studies import STUDIES, Study

MANIFEST_VARIES = ("derived_by",)  # MANIFEST fields a re-derivation may change


class DeriveError(Exception):
    pass


def open_run(run_id: str, raw_root: Path | None = None) -> RunStore:
    """The run's store, unpacked from its archive when only that is there; DeriveError when the run does not
    exist, did not finish (no params.json or no COMPLETE marker in its folder) or predates derive's records."""
    root = raw_root or paths.raw_dir()
    d = root / run_id
    if not d.is_dir():
        archive = raw_archive.archive_path(run_id)
        if not archive.is_file():
            raise DeriveError(
                f"no run {run_id}: {paths.shown(d)} does not exist, nor {paths.shown(archive)}; the runs there are:\n"
                + derived.runs_listing()
            )
        print(f"unpacking {paths.shown(archive)} -> {paths.shown(raw_archive.unpack(run_id, root, archive))}")
    missing = [f for f in ("params.json", "COMPLETE") if not (d / f).is_file()]
    if missing:
        raise DeriveError(
            f"run {run_id} is incomplete: {paths.shown(d)} has no {' and no '.join(missing)} (an "
            f"interrupted run: `make report RUN_ID={run_id}` completes it)"
        )
    if (d / "environment.json").is_file() and not (d / "environment").is_dir():
        raise DeriveError(
            f"run {run_id} was recorded by a kit older than `pglab derive`: {paths.shown(d)} lacks what "
            "its stages saw on the servers (environment/, ...); its tables cannot come from it alone"
        )
    return RunStore(run_id, root)


def run_params(store: RunStore):
    """The params the run was made with, as session.begin recorded them (without `servers`: not needed)."""
    from .params import Params

    data = store.load_json("params.json")
    source = data.pop("file", "") or ""
    if data.get("pgbench", {}).get("threads") == 0:  # recorded before params.json said "auto"
        data["pgbench"]["threads"] = "auto"
    return Params.model_validate(data | {"source": source})


def derive_all(store: RunStore, params, studies: tuple[Study, ...] = STUDIES) -> dict:
    """Every stage's tables, in report order: {table name: DataFrame}."""
    out: dict = {}
    for study in studies:
        tables = study.derive(store, params)
        twice = sorted(set(tables) & set(out))
        if twice:
            raise DeriveError(f"{study.name}: tables {twice} are derived by an earlier stage too")
        out |= tables
    return out


def write_all(tables: dict, run_id: str, out: Path) -> Path:
    """Write the tables into the folder `out` as the notebooks do (derived.write_table, the manifest naming
    `run_id`), and each measured study's findings judged from them (`Study.record_findings`); the folder is
    swapped in once all are written."""
    os.environ[derived.RUN_ID_ENV] = run_id
    work = out.parent / f".derive-{out.name}.tmp{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        derived.stage(out.name, work, out.parent)
        derived.write(tables, out.name, root=work)
        # then each study this run measured is judged once from its tables as written, as its notebook does
        for study in STUDIES:
            if isinstance(study, Study) and study.was_run(tables):
                study.record_findings(out.name, root=work)
        return derived.publish(out.name, work, out.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(got: Path, want: Path, run_id: str) -> dict[str, list[str]]:
    """The tables run `run_id` wrote into `want` (its manifest's entries naming the run) against `got`:
    identical (bytes, and manifest entries but for MANIFEST_VARIES and keys `want`'s manifest lacks), different,
    missing from `got`, and extra (in `got` for this run, not in `want`)."""

    def entries(d: Path) -> dict:
        return {
            n: {k: v for k, v in e.items() if k not in MANIFEST_VARIES}
            for n, e in derived.manifest(d).items()
            if e.get("run_id") == run_id
        }

    g, w = entries(got), entries(want)
    out: dict[str, list[str]] = {"identical": [], "different": [], "missing": [], "extra": sorted(set(g) - set(w))}
    for name in sorted(w):
        if name not in g:
            out["missing"].append(name)
            continue
        # keys an older manifest lacks (column types, kept since 2026-11) are not a difference
        same_entry = {k: g[name].get(k) for k in w[name]} == w[name]
        if same_entry and (got / name).read_bytes() == (want / name).read_bytes():
            out["identical"].append(name)
        else:
            out["different"].append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab derive", description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group()  # neither: the runs there are, exit 2
    what.add_argument("--run-id", type=run_id_arg, help="derive every table of this run from data/raw/<run-id>/")
    what.add_argument(
        "--archive",
        type=run_id_arg,
        metavar="RUN_ID",
        help="write data/raw-archive/<RUN_ID>.tar.xz from data/raw/<RUN_ID>/",
    )
    ap.add_argument("--out", help="the folder to write the tables into (default: data/derived/<profile>/)")
    ap.add_argument("--check", help="compare with the run's tables in this folder (what the notebooks wrote)")
    ap.add_argument("--force", action="store_true", help="--archive: write it even over the size limit")
    ap.add_argument(
        "--unpack-into",
        metavar="DIR",
        help="a run only archived is unpacked here (default: data/raw/, where it stays for the next derive)",
    )
    args = ap.parse_args(argv)
    if not (args.run_id or args.archive):
        print(
            "make derive: RUN_ID=<run id> is required, one of these (data/raw/, data/raw-archive/):\n"
            + derived.runs_listing(),
            file=sys.stderr,
        )
        return 2
    try:
        if args.archive:
            path = raw_archive.create(args.archive, force=args.force)
            print(f"{paths.shown(path)}: {path.stat().st_size:,} bytes ({path.stat().st_size / 2**20:.2f} MiB)")
            return 0
        os.environ[NO_SERVERS_ENV] = "derive reads the raw store only"  # and so do processes it starts
        t0 = time.monotonic()
        here = (paths.raw_dir() / args.run_id).is_dir() or not args.unpack_into
        store = open_run(args.run_id, None if here else paths.resolve(args.unpack_into))
        params = run_params(store)
        tables = derive_all(store, params)
        out = paths.resolve(args.out) if args.out else derived.profile_dir(params.profile)
        write_all(tables, store.run_id, out)
        took = time.monotonic() - t0
        print(
            f"run {store.run_id}: {len(tables)} tables of {len(STUDIES)} stages -> {paths.shown(out)} in {took:.1f} s"
        )
    except (DeriveError, raw_archive.ArchiveError, derived.FormatError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        res = compare(out, paths.resolve(args.check), store.run_id)
        print(f"against {args.check}: " + ", ".join(f"{len(v)} {k}" for k, v in res.items()))
        for k in ("different", "missing", "extra"):
            for name in res[k]:
                print(f"  {k}: {name}")
        return 0 if res["identical"] and not any(res[k] for k in ("different", "missing", "extra")) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

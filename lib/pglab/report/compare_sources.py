"""The two sides of `make compare`: each a derived dataset named by a profile, a run id or a folder.

- a profile: `data/derived/<profile>/`, every table in it;
- a run id, any run there is: the run's working copy `data/raw/<run-id>/derived-work/<profile>/` (a run cut
  short, or one still going), else the profile folder whose tables that run wrote, all of them (its latest run),
  else derived on the fly from `data/raw/<run-id>/` or `data/raw-archive/<run-id>.tar.xz` into
  `build/derived-runs/<run-id>/` (`python -m pglab derive`, no server; kept for the next comparison, derived
  again when the kit's revision changed), else the tables a profile folder says the run wrote (a part re-run);
- a folder path (absolute, or relative to the current folder or to the project root) holding the CSVs.

`resolve` refuses (CompareError, exit 2) a dataset of another format than this pglab reads (`derived.FORMAT`);
`check_comparable` two datasets that share no study, measure a shared table differently (other key or value
columns, or units/metrics with no value in common) or ran other workloads (a study's params differ: SSB's scale,
pgbench's scales, …) unless forced; `params_differences` lists every key."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from ..core import derived, paths
from ..core.provenance import git_revision
from ..studies import STUDIES as STAGES

ENVIRONMENT = "environment"
# the study a table belongs to is its name's prefix: the stages' names (ssb_load's tables count as ssb's), longest
# first
STUDIES = sorted([s.name for s in STAGES if s.name != "ssb_load"], key=len, reverse=True)
VALUE_COLUMNS = ("median", "ci_low", "ci_high", "min", "max")
UNIT_COLUMNS = ("unit", "metric")


class CompareError(Exception):
    """A refusal: the message says why, naming both sides (`python -m pglab.report.compare` exits with 2)."""


def study_of(table: str) -> str:
    return next((s for s in STUDIES if table.startswith(f"{s}_")), table.split("_")[0])


def measure_keys(columns: list[str]) -> list[str] | None:
    """A table of medians with an interval (the `*_summary` shape): its key columns are those before the
    statistics (`n` or `median`); None for any other table, also for the tables of ratios against a baseline,
    whose interval is the ratio's, not the median's."""
    if (
        "median" not in columns
        or "ratio" in columns
        or not ({"ci_low", "ci_high"} <= set(columns) or {"min", "max"} <= set(columns))
    ):
        return None
    first = min(columns.index(c) for c in ("n", "median") if c in columns)
    return columns[:first]


@dataclass(frozen=True)
class Dataset:
    spec: str  # as the user gave it
    kind: str  # "profile", "run" or "folder"
    path: Path  # the folder of CSVs
    only: tuple[str, ...] | None = None  # a run's own tables (None: every table in the folder)

    @property
    def label(self) -> str:
        """Safe as part of a folder name (build/compare/<A>-vs-<B>/)."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.spec).strip("._") or "dataset"

    @cached_property
    def tables(self) -> tuple[str, ...]:
        names = sorted(p.stem for p in self.path.glob("*.csv") if p.stat().st_size)  # not a table with no column
        return tuple(n for n in names if self.only is None or n in self.only)

    @property
    def studies(self) -> list[str]:
        """The studies with a table of rows here (a run derives every study's tables, empty ones for those it
        did not measure: an experiment run has no SSB)."""
        return sorted({study_of(t) for t in self.tables if self.has_rows(t)} - {ENVIRONMENT})

    def has_rows(self, table: str) -> bool:
        with (self.path / f"{table}.csv").open() as f:
            return bool(f.readline()) and bool(f.readline())

    def columns(self, table: str) -> list[str]:
        header = (self.path / f"{table}.csv").open().readline().rstrip("\n")
        return header.split(",") if header else []

    def read(self, table: str) -> pl.DataFrame | None:
        if table not in self.tables:
            return None
        return pl.read_csv(self.path / f"{table}.csv", infer_schema_length=None)

    def shown(self) -> str:
        return f"{self.spec} ({self.kind}: {paths.shown(self.path)})"


def _manifest_runs(folder: Path) -> dict[str, str | None]:
    try:
        return {
            n.removesuffix(".csv"): e.get("run_id")
            for n, e in json.loads((folder / derived.MANIFEST).read_text()).items()
        }
    except (OSError, ValueError):
        return {}


def _run_tables(folder: Path, run_id: str) -> tuple[str, ...] | None:
    """The tables the manifest says `run_id` wrote; None when the manifest names no run at all (older data)."""
    runs = _manifest_runs(folder)
    mine = tuple(sorted(t for t, r in runs.items() if r == run_id))
    return mine if mine or any(runs.values()) else None


def _derived() -> tuple[list[str], set[str]]:
    """Profiles in data/derived/ and the run ids with derived tables (a working copy or a manifest entry)."""
    profiles = sorted(p.parent.name for p in paths.derived_dir().glob(f"*/{derived.MANIFEST}"))
    runs = {p.parents[2].name for p in paths.raw_dir().glob("*/derived-work/*/*.csv")}
    for profile in profiles:
        runs |= {r for r in _manifest_runs(paths.derived_dir() / profile).values() if r}
    return profiles, runs


def available() -> tuple[list[str], list[str]]:
    """Profiles in data/derived/ and every run id there is: with derived tables, or to derive (a complete folder
    of data/raw/, an archive)."""
    profiles, runs = _derived()
    return profiles, sorted(runs | set(derived.runs()["run_id"]))


def _not_found(spec: str) -> CompareError:
    profiles, derived_runs = _derived()
    what = (
        f"{spec!r} is neither a profile, a run id nor a folder of derived tables."
        if spec
        else "nothing given: make compare A=<…> B=<…>, each a profile, a run id or a folder of derived tables."
    )
    return CompareError(
        f"{what}\n"
        f"  profiles ({paths.shown(paths.derived_dir())}): {', '.join(profiles) or 'none'}\n"
        f"  run ids with derived tables: {', '.join(sorted(derived_runs)) or 'none'}\n"
        f"  run ids to derive (data/raw/, data/raw-archive/):\n{derived.runs_listing()}"
    )


def _has_csv(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*.csv"))


def resolve(spec: str) -> Dataset:
    """The dataset `spec` names; CompareError when there is none, or its tables are of another format than this
    pglab reads (derived.FormatError's message: how to re-derive them)."""
    ds = _find(spec)
    try:
        derived.check_format(ds.path)
    except derived.FormatError as e:
        raise CompareError(str(e)) from None
    return ds


def _find(spec: str) -> Dataset:
    if "/" in spec or spec.startswith((".", "~")):
        given = Path(spec).expanduser()
        for folder in [given] if given.is_absolute() else [Path.cwd() / given, paths.resolve(given)]:
            if _has_csv(folder):
                return Dataset(spec, "folder", folder.resolve())
        raise _not_found(spec)
    profile = paths.derived_dir() / spec
    if _has_csv(profile):
        return Dataset(spec, "profile", profile)
    work = sorted(p for p in (paths.raw_dir() / spec / "derived-work").glob("*") if _has_csv(p))
    if work:  # one profile per run; the working copy is there until the run publishes it
        return Dataset(spec, "run", work[0], _run_tables(work[0], spec))
    partial = None
    for folder in sorted(paths.derived_dir().glob(f"*/{derived.MANIFEST}")):
        runs = _manifest_runs(folder.parent)
        if runs and set(runs.values()) == {spec}:  # the profile's latest run, every table of it
            return Dataset(spec, "run", folder.parent, _run_tables(folder.parent, spec))
        partial = partial or ((folder.parent, mine) if (mine := _run_tables(folder.parent, spec)) else None)
    if spec in set(derived.runs()["run_id"]):
        return Dataset(spec, "run", derive_run(spec))
    if partial:  # a part re-run's tables, its raw data not here
        return Dataset(spec, "run", *partial)
    raise _not_found(spec)


DERIVED_RUNS_ENV = "PGLAB_DERIVED_RUNS_DIR"  # where runs derived for a comparison go (the tests: their own folder)


def derived_runs_dir() -> Path:
    return paths.resolve(os.environ.get(DERIVED_RUNS_ENV) or "build/derived-runs")


def derive_run(run_id: str) -> Path:
    """build/derived-runs/<run id>/: the run's tables derived from its raw data or archive by `python -m pglab
    derive` (a process of its own: the report does not derive), an archive unpacked into a temporary folder,
    not data/raw/. Derived once per kit revision: the next comparison of the run reads them as they are."""
    out = derived_runs_dir() / run_id
    entries = derived.manifest(out)
    if entries and {e.get("derived_by") for e in entries.values()} == {git_revision()}:
        return out
    print(f"deriving run {run_id} from its raw data (no server) -> {paths.shown(out)}", file=sys.stderr, flush=True)
    unpack = Path(tempfile.mkdtemp(prefix="pglab-compare-raw-"))
    try:
        cmd = [sys.executable, "-m", "pglab", "derive", "--run-id", run_id, "--out", str(out)]
        done = subprocess.run([*cmd, "--unpack-into", str(unpack)], capture_output=True, text=True)
    finally:
        shutil.rmtree(unpack, ignore_errors=True)
    if done.returncode:
        last = "\n  ".join(done.stderr.strip().splitlines()[-3:])  # the error, not derive's whole traceback
        raise CompareError(
            f"run {run_id} could not be derived from its raw data (make derive RUN_ID={run_id} says more):\n  {last}"
        )
    return out


def _unit_values(ds: Dataset, table: str, column: str) -> set:
    return set(ds.read(table)[column].drop_nulls().cast(pl.String))


def _metric_mismatch(a: Dataset, b: Dataset, table: str) -> str | None:
    ca, cb = a.columns(table), b.columns(table)
    ka, kb = measure_keys(ca), measure_keys(cb)
    if (ka is None) != (kb is None) or ka != kb:
        return f"{table}: measured by {ka or 'no median'} in A, {kb or 'no median'} in B"
    va, vb = [c for c in ca if c in VALUE_COLUMNS], [c for c in cb if c in VALUE_COLUMNS]
    if ka is not None and va != vb:
        return f"{table}: values {va} in A, {vb} in B"
    for col in UNIT_COLUMNS:
        if (col in ca) != (col in cb):
            return f"{table}: a {col!r} column on one side only"
        if col in ca:
            va, vb = _unit_values(a, table, col), _unit_values(b, table, col)
            if va and vb and not va & vb:
                return f"{table}: {col} {sorted(va)} in A, {sorted(vb)} in B"
    return None


def run_params(ds: Dataset) -> dict[str, object] | None:
    """The flattened params of the run behind a dataset (its raw folder's params.json, else its archive's), None
    when the dataset names no single run or the run's raw data is not here."""
    from ..core.raw_archive import recorded_params
    from ..core.run.session import flatten

    runs = {r for t, r in _manifest_runs(ds.path).items() if r and (ds.only is None or t in ds.only)}
    if len(runs) != 1:
        return None
    run = runs.pop()
    doc = recorded_params(run)
    if doc is None:
        return None
    return {k: v for k, v in flatten({k: v for k, v in doc.items() if k not in ("file", "run_id")}).items()}


WORKLOAD = ("ssb.", "pgbench.", "auto_explain.", "jit_operators.", "parallel_index.", "partitioning.")


def params_differences(a: Dataset, b: Dataset) -> pl.DataFrame:
    """Every params key whose value differs between the runs behind A and B: `kind` workload (a study's section:
    what is measured) or settings (servers, settings, initdb: what the comparison may well be about)."""
    pa, pb = run_params(a), run_params(b)
    schema = dict.fromkeys(("kind", "key", "a", "b"), pl.String)
    if pa is None or pb is None:
        return pl.DataFrame(schema=schema)
    unset = "(not set)"
    rows = [
        (
            "workload" if k.startswith(WORKLOAD) else "settings",
            k,
            json.dumps(pa.get(k, unset)),
            json.dumps(pb.get(k, unset)),
        )
        for k in sorted(pa.keys() | pb.keys())
        if pa.get(k) != pb.get(k)
    ]
    return pl.DataFrame(rows, schema=schema, orient="row").sort("kind", "key", descending=[True, False])


def check_comparable(a: Dataset, b: Dataset, force: bool = False) -> list[str]:
    """The studies both datasets hold; CompareError when there is none, a shared table measures differently, or
    (unless `force`) the runs measured other workloads of a shared study."""
    common = sorted(set(a.studies) & set(b.studies))
    if not common:
        raise CompareError(
            f"A {a.shown()} and B {b.shown()} share no study: A has {a.studies or 'none'}, B has {b.studies or 'none'}"
        )
    shared = sorted(set(a.tables) & set(b.tables))
    problems = [m for t in shared if (m := _metric_mismatch(a, b, t))]
    if problems:
        raise CompareError(f"A {a.shown()} and B {b.shown()} use different metrics:\n  " + "\n  ".join(problems))
    work = params_differences(a, b).filter(pl.col("kind") == "workload")
    work = work.filter(pl.col("key").str.split(".").list.first().is_in(common))
    if work.height and not force:
        shown = "\n  ".join(f"{r['key']}: {r['a']} in A, {r['b']} in B" for r in work.head(12).iter_rows(named=True))
        more = f"\n  … and {work.height - 12} more" if work.height > 12 else ""
        raise CompareError(
            f"A {a.shown()} and B {b.shown()} measured other workloads ({work.height} params differ):\n  {shown}{more}"
            f"\n  their medians are not comparable; FORCE=1 (--force) compares them anyway, marked as such"
        )
    return common

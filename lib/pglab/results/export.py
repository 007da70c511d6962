"""A run's derived tables as Parquet, with one manifest.json saying what ran where: data/export/<run-id>/.

    python -m pglab.results export --run-id ID|PROFILE [--out DIR]

Which tables (`locate`): a profile name stands for the run that wrote data/derived/<profile>/; a run id is read
from the profile folder whose MANIFEST.json says the run wrote every table in it, else derived anew from
data/raw/<id>/ or data/raw-archive/<id>.tar.xz with pglab.derive's functions (no server; an archive is unpacked
into a temporary folder, data/raw/ stays as it was). A folder holding tables of several runs (a re-run of some
notebooks) is used only when the run's raw data is not here.

Every table gets a leading `run_id` column, so tables of many runs union by name. Types are those MANIFEST.json
recorded; a column it records as all-missing (Null) stays Null, which unions with any type. manifest.json holds the
run id, profile, capture time, machine (CPU model, cores, memory, OS), kit revisions, every server with its version
and build line, the run's params (no DSN or password) and the tables with their row counts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .. import derive
from ..core import derived, paths, raw_archive
from ..core.derived import NO_SERVERS_ENV
from ..core.paramtypes import SAFE_NAME_RULE, is_safe_name
from ..core.provenance import git_revision
from ..report.environment import servers_table

MANIFEST = "manifest.json"
RESERVED = (
    "runs",
    "servers",
    "params",
    "run_tables",
    "findings",
)  # the index's own tables and views (pglab.results.index)
MACHINE = ("cpu_model", "cpu_cores", "memory_gib", "os", "kernel", "arch")
SECRET_KEYS = ("dsn", "password")  # params.json keeps no servers section; a key of these names is dropped anyway


class ExportError(Exception):
    """A run that cannot be exported; the message says why and what there is (exit 2)."""


@dataclass(frozen=True)
class Source:
    run_id: str
    profile: str
    folder: Path  # a folder of derived tables, named after the profile
    tables: tuple[str, ...]  # the tables of this run in it
    where: str  # shown in the manifest: data/derived/default, data/raw-archive/<id>.tar.xz, ...
    params: dict | None


def export_root() -> Path:
    return paths.data_dir() / "export"


def _manifest_runs(folder: Path) -> dict[str, str | None]:
    """table name -> the run MANIFEST.json says wrote it."""
    return {n.removesuffix(".csv"): e.get("run_id") for n, e in derived.manifest(folder).items() if isinstance(e, dict)}


def profiles() -> list[Path]:
    return sorted(m.parent for m in paths.derived_dir().glob(f"*/{derived.MANIFEST}"))


def _has_raw(run_id: str) -> bool:
    return (paths.raw_dir() / run_id).is_dir() or raw_archive.archive_path(run_id).is_file()


def run_of(spec: str) -> str:
    """The run id `spec` names: itself, or the one run whose tables fill the profile folder of that name."""
    if not is_safe_name(spec):
        raise ExportError(f"{spec!r} is not a run id or profile name: expected {SAFE_NAME_RULE}")
    folder = paths.derived_dir() / spec
    if not (folder / derived.MANIFEST).is_file():
        return spec
    runs = sorted({r for r in _manifest_runs(folder).values() if r})
    if len(runs) != 1:
        raise ExportError(
            f"profile {spec} ({paths.shown(folder)}) holds tables of {len(runs)} runs "
            f"({', '.join(runs) or 'none recorded'}): name one with RUN_ID=<run id>"
        )
    return runs[0]


def _not_found(run_id: str) -> ExportError:
    runs = sorted({r for f in profiles() for r in _manifest_runs(f).values() if r})
    return ExportError(
        f"no run {run_id}: no profile folder of {paths.shown(paths.derived_dir())} names it, and neither "
        f"{paths.shown(paths.raw_dir() / run_id)} nor {paths.shown(raw_archive.archive_path(run_id))} exists\n"
        f"  profiles: {', '.join(f.name for f in profiles()) or 'none'}\n"
        f"  runs with derived tables: {', '.join(runs) or 'none'}\n"
        f"  runs to derive (data/raw/, data/raw-archive/):\n{derived.runs_listing()}"
    )


@contextlib.contextmanager
def _environ(**values: str | None) -> Iterator[None]:
    """Environment variables set (None: removed) for the block, then put back as they were."""

    def put(settings: dict[str, str | None]) -> None:
        for k, v in settings.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    before = {k: os.environ.get(k) for k in values}
    try:
        put(values)
        yield
    finally:
        put(before)


def _without_secrets(doc):
    if isinstance(doc, dict):
        return {k: _without_secrets(v) for k, v in doc.items() if k.lower() not in SECRET_KEYS}
    if isinstance(doc, list):
        return [_without_secrets(v) for v in doc]
    return doc


@contextlib.contextmanager
def locate(spec: str) -> Iterator[Source]:
    """The run's derived tables (see the module's docstring); a run derived from raw data lives in a temporary
    folder for the duration of the block."""
    run_id = run_of(spec)
    homes = [f for f in profiles() if run_id in _manifest_runs(f).values()]
    whole = [f for f in homes if set(_manifest_runs(f).values()) == {run_id}]
    if whole or (homes and not _has_raw(run_id)):
        home = (whole or homes)[0]
        tables = tuple(sorted(t for t, r in _manifest_runs(home).items() if r == run_id))
        yield Source(run_id, home.name, home, tables, paths.shown(home), raw_archive.recorded_params(run_id))
        return
    if not _has_raw(run_id):
        raise _not_found(run_id)
    with tempfile.TemporaryDirectory(prefix="pglab-export-") as tmp:
        yield _derived_from_raw(run_id, Path(tmp))


def _derived_from_raw(run_id: str, tmp: Path) -> Source:
    own = paths.raw_dir() / run_id
    raw_root = paths.raw_dir() if own.is_dir() else tmp / "raw"  # an archive is unpacked here, not into data/raw/
    try:
        with _environ(**{NO_SERVERS_ENV: "export derives from the raw store only", derived.RUN_ID_ENV: None}):
            store = derive.open_run(run_id, raw_root)
            params = derive.run_params(store)
            folder = derive.write_all(derive.derive_all(store, params), run_id, tmp / "derived" / params.profile)
    except (derive.DeriveError, raw_archive.ArchiveError) as e:
        raise ExportError(str(e)) from None
    where = own if own.is_dir() else raw_archive.archive_path(run_id)
    tables = tuple(sorted(t for t, r in _manifest_runs(folder).items() if r == run_id))
    return Source(
        run_id, params.profile, folder, tables, paths.shown(where), raw_archive.recorded_params(run_id, raw_root)
    )


def table(src: Source, name: str) -> pl.DataFrame:
    """One derived table as exported: typed as MANIFEST.json recorded, `run_id` first. An empty table is exported
    too, with its columns (a run id column only, for one an older pglab wrote without any): a query over it
    answers "no rows", not "no such table"."""
    df = derived.read_table(name, src.profile, src.folder.parent)
    if not df.width:
        return pl.DataFrame(schema={"run_id": pl.String})
    recorded = derived.manifest(src.folder).get(f"{name}.csv", {}).get("types", {})
    # a column this run left all-missing has no type of its own (CSV says text): Null unions with any run's type
    nulls = [
        c
        for c in df.columns
        if recorded.get(c) == "Null" or (c not in recorded and df.height and df[c].null_count() == df.height)
    ]
    df = df.with_columns(pl.lit(None).alias(c) for c in nulls)
    if "run_id" in df.columns:  # a table that names its run itself (pgbench_runs): it must be this one
        others = df["run_id"].drop_nulls().cast(pl.String).unique().to_list()
        if set(others) - {src.run_id}:
            raise ExportError(f"{name}: its run_id column names {sorted(others)}, not only {src.run_id}")
        df = df.drop("run_id")
    return df.select(pl.lit(src.run_id).alias("run_id"), pl.all())


def servers(src: Source) -> list[dict]:
    """Every server of the run: version and build line as the report shows them (a run captured before the build
    identity has only its compiler, from version(): build_recorded false), with major, source and version()."""
    if "environment_servers" not in src.tables:
        return []
    s = derived.read_table("environment_servers", src.profile, src.folder.parent)
    shown = servers_table(src.profile, src.folder.parent).select("server", "version", "build")
    extra = [c for c in ("major", "source", "jit_available", "version_string") if c in s.columns]
    rows = shown.join(s.select("server", *extra), on="server", how="left").sort("server")
    return [r | {"build_recorded": "build" in s.columns} for r in rows.iter_rows(named=True)]


def _machine(src: Source) -> dict[str, str | None]:
    if "environment_machine" not in src.tables:
        return {}
    m = derived.read_table("environment_machine", src.profile, src.folder.parent)
    return dict(m.select(pl.col("key").cast(pl.String), pl.col("value").cast(pl.String)).iter_rows())


def _number(text: str | None, kind: type):
    try:
        return kind(text) if text not in (None, "") else None
    except ValueError:
        return None


def manifest(src: Source, tables: dict[str, dict]) -> dict:
    m = _machine(src)
    derived_by = derived.manifest(src.folder)
    params = _without_secrets({k: v for k, v in (src.params or {}).items() if k != "run_id"}) if src.params else None
    return {
        "run_id": src.run_id,
        "profile": src.profile,
        "captured_utc": m.get("captured_utc"),  # null for runs captured before the kit recorded it
        "machine": {k: m.get(k) for k in MACHINE}
        | {"cpu_cores": _number(m.get("cpu_cores"), int), "memory_gib": _number(m.get("memory_gib"), float)},
        "kit": {
            "measured_by": m.get("pglab_revision"),
            "exported_by": git_revision(),
            "derived_by": sorted(
                {
                    e.get("derived_by")
                    for n, e in derived_by.items()
                    if n.removesuffix(".csv") in src.tables and e.get("derived_by")
                }
            ),
        },
        "source": src.where,
        "servers": servers(src),
        "params": params,
        "tables": tables,
    }


def write(src: Source, root: Path) -> Path:
    """The export of `src` as root/<run-id>/, replacing an earlier one only once it is whole."""
    clash = sorted(set(src.tables) & set(RESERVED))
    if clash:
        raise ExportError(f"tables {clash} have the names of the index's own tables")
    root.mkdir(parents=True, exist_ok=True)
    target, work = root / src.run_id, root / f".{src.run_id}.tmp{os.getpid()}"
    old = root / f".{src.run_id}.old{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        written = {}
        for name in src.tables:
            df = table(src, name)
            df.write_parquet(work / f"{name}.parquet")
            written[name] = {"file": f"{name}.parquet", "rows": df.height, "columns": df.width}
        (work / MANIFEST).write_text(json.dumps(manifest(src, written), indent=1) + "\n")
        if target.exists():
            os.replace(target, old)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return target


def export(spec: str, root: Path | None = None) -> Path:
    """Export the run `spec` names (a run id or a profile) into root/<run-id>/ (default data/export/)."""
    with locate(spec) as src:
        return write(src, root or export_root())

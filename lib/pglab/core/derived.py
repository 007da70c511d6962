"""Derived datasets: tidy tables in `data/derived/<profile>/`, committed to git.

Written deterministically (the caller's column order, rows sorted on every column, CSV) so that the same
measurements always give the same bytes, and listed with their content checksums and the run that wrote
them in `MANIFEST.json`, with each column's type as written (a CSV keeps none: a column of version names like
"15" or of all-missing values would read back as a number or a string by guess; `read_table` restores them)
and the format they were derived in (`FORMAT`): a folder with a table of another format is refused
(`FormatError`), as asv refuses results of another api_version, rather than read by rules it was not made for.

A run through `make report` never leaves a profile's folder half old, half new: its notebooks write into
a working copy (`stage`), which replaces the profile's folder only once every measuring notebook has
succeeded (`publish`); a failed run leaves the previous tables as they were."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl

from . import paths
from .provenance import git_revision

MANIFEST = "MANIFEST.json"
RUN_ID_ENV = "PGLAB_RUN_ID"  # set by session.begin: the run whose tables are being written
# set (to the reason) where tables are derived from the raw store alone: no server may be started or reached
NO_SERVERS_ENV = "PGLAB_NO_SERVERS"
# The derived tables' format, kept in every manifest entry ("format"). Raise it when the tables change so that
# this pglab would misread an older folder. 0 (an entry without the key): derived before the number existed,
# possibly before the paired analysis; 1: the paired analysis, every study with its A/A noise table; 2: every
# study's verdicts judged once and stored (`<study>_findings`, `Study.record_findings`).
FORMAT = 2
REFERENCE_PROFILE = "default"  # committed with every table's columns (config.REFERENCE_PROFILE)


class FormatError(Exception):
    """A derived folder holding tables of another format than this pglab's: the message says how to re-derive."""


def profile_dir(profile: str, root: Path | None = None) -> Path:
    return (root or paths.derived_dir()) / profile


def write_table(df: pl.DataFrame, name: str, profile: str, root: Path | None = None) -> Path:
    """Write `df` as `<name>.csv`, rows sorted, and record it in the manifest."""
    write({name: df}, profile, root=root)
    return profile_dir(profile, root) / f"{name}.csv"


def write(
    tables: dict[str, pl.DataFrame], profile: str, root: Path | None = None, skip: tuple[str, ...] = ()
) -> list[str]:
    """Write every table (rows sorted, as `<name>.csv`) but those named in `skip`, and record them in the manifest
    once (a manifest per table re-read every table of the folder each time); the names written."""
    written = [name for name in tables if name not in skip]
    if not written:
        return []
    d = profile_dir(profile, root)
    d.mkdir(parents=True, exist_ok=True)
    # a table that cannot be: before any file
    frames = {name: _rows_sorted(_with_columns(tables[name], name, d), name) for name in written}
    staged, origins = {}, {}
    try:
        for name, df in frames.items():
            tmp = d / f"{name}.tmp{os.getpid()}"
            staged[f"{name}.csv"] = tmp
            df.write_csv(tmp, line_terminator="\n")
            origins[f"{name}.csv"] = {
                "run_id": os.environ.get(RUN_ID_ENV),
                "derived_by": git_revision(),
                "types": {c: str(t) for c, t in df.schema.items()},
                "format": FORMAT,
            }
        # the manifest first, from the new files, then the renames: a kill between the two leaves tables the
        # manifest knows (the renames first left them without their origin, read back as derived by an older pglab)
        _update_manifest(d, origins, staged=staged)
    except BaseException:  # a failed write or Ctrl-C: no staged file is left behind for a publish to carry along
        for tmp in staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise
    for file, tmp in staged.items():
        os.replace(tmp, d / file)
    return written


# Floats are written to 12 significant digits: far beyond any measurement's precision, and the same on every CPU,
# where numpy's vectorised log/exp may differ in the 16th digit (a derive of the committed reference on another
# CPU differed there in 2 of 108 tables). Rounded before the rows are sorted, so the order is the same too.
SIGNIFICANT = 12


def _rows_sorted(df: pl.DataFrame, name: str) -> pl.DataFrame:
    if not df.width:
        return df
    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if nested:
        raise ValueError(f"{name}: columns {nested} are nested; derived tables are flat")
    floats = [c for c, t in df.schema.items() if t.is_float()]
    if floats:
        finite = [
            pl.when(pl.col(c).is_finite() & (pl.col(c) != 0))
            .then(pl.col(c).round_sig_figs(SIGNIFICANT))
            .otherwise(pl.col(c))
            .alias(c)
            for c in floats
        ]
        df = df.with_columns(finite)
    return df.sort(df.columns, nulls_last=True, maintain_order=True)


def _with_columns(df: pl.DataFrame, name: str, folder: Path) -> pl.DataFrame:
    """`df`, or for a table a stage left without any column (nothing measured: one server, a skipped mode) an
    empty frame with the columns and types recorded for it before, in this folder or else in the committed
    reference: an empty table still says what it holds (a header-only CSV), which a reader, `make export` and
    `make publish` can type, where a 1-byte file was a `NoDataError`. A table never written with columns stays
    as it is."""
    if df.width:
        return df
    # the committed reference is the clone's own, also where PGLAB_DATA_DIR points elsewhere (the tests)
    for where in (folder, paths.derived_dir() / REFERENCE_PROFILE, paths.ROOT / "data" / "derived" / REFERENCE_PROFILE):
        entry = manifest(where).get(f"{name}.csv", {})
        types = entry.get("types") or {}
        if types:  # in the table's own column order (the manifest's keys are sorted)
            order = [c for c in entry.get("columns", []) if c in types] or sorted(types)
            return pl.DataFrame(
                schema={c: _TYPES.get(types[c], pl.Null if types[c] == "Null" else pl.String) for c in order}
            )
    return df


# the flat types derived tables hold, by the name `write_table` records; others are left to CSV inference
_TYPES = {
    str(t): t
    for t in (pl.Int64, pl.Int32, pl.UInt32, pl.UInt64, pl.Float64, pl.Float32, pl.String, pl.Boolean, pl.Date)
}


def manifest(folder: Path) -> dict[str, dict]:
    """The folder's manifest: {file name: entry}; empty when it has none (or one that cannot be read)."""
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def check_format(folder: Path, entries: dict[str, dict] | None = None) -> None:
    """FormatError unless every table the manifest lists was derived in this pglab's FORMAT; the message names
    the runs to derive again (`make derive` writes a folder of the current format)."""
    entries = manifest(folder) if entries is None else entries
    formats = {n: e.get("format", 0) for n, e in entries.items()}
    newer = sorted({f for f in formats.values() if f > FORMAT})
    if newer:
        raise FormatError(
            f"{paths.shown(folder)} was derived by a newer pglab (format {newer[-1]}); this one reads "
            f"format {FORMAT}: update pglab to read it"
        )
    older = {n: f for n, f in formats.items() if f < FORMAT}
    if not older:
        return
    runs = sorted({r for n in older if (r := entries[n].get("run_id"))})
    how = ", then ".join(f"make derive RUN_ID={r}" for r in runs) or "make derive RUN_ID=<the run that measured it>"
    raise FormatError(
        f"{paths.shown(folder)} was derived by an older pglab (format {min(older.values())}); re-derive it: {how}"
    )


def column_types(name: str, profile: str, root: Path | None = None) -> dict[str, pl.DataType]:
    """The types the manifest records for table `name` (empty for a table written before types were kept);
    FormatError when the folder holds tables of another format."""
    d = profile_dir(profile, root)
    entries = manifest(d)
    check_format(d, entries)
    entry = entries.get(f"{name}.csv", {})
    return {c: _TYPES[t] for c, t in entry.get("types", {}).items() if t in _TYPES}


def read_table(name: str, profile: str, root: Path | None = None) -> pl.DataFrame:
    """Table `name` with the types the manifest recorded; FormatError when the folder holds tables of another
    format than this pglab's. An empty table is an empty frame with its typed columns (no column at all for one
    written by an older pglab without any)."""
    path = profile_dir(profile, root) / f"{name}.csv"
    types = column_types(name, profile, root)
    line = path.open().readline().rstrip("\n")
    if not line:  # a table written without columns (before empty tables kept theirs)
        return pl.DataFrame()
    header = line.split(",")
    overrides = {c: t for c, t in types.items() if c in header}
    return pl.read_csv(path, infer_schema_length=None, schema_overrides=overrides or None)


class Tables(Mapping[str, pl.DataFrame]):
    """A profile's derived tables by name, each read once when first asked for (`read_table`: the manifest's
    types): what the report and a study's method, charts and judge read, instead of a profile and a folder."""

    def __init__(self, profile: str, root: Path | None = None):
        self.profile, self.root = profile, root
        self.folder = profile_dir(profile, root)
        self._read: dict[str, pl.DataFrame] = {}

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in self._read:
            if name not in self:
                raise KeyError(f"no derived table {name!r} in {self.folder}")
            self._read[name] = read_table(name, self.profile, self.root)
        return self._read[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (self.folder / f"{name}.csv").is_file()

    def optional(self, name: str) -> pl.DataFrame:
        """Table `name`, or an empty frame where the run wrote none: a table a section can do without."""
        return self[name] if name in self else pl.DataFrame()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(p.stem for p in self.folder.glob("*.csv")))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _update_manifest(d: Path, written: dict[str, dict], staged: dict[str, Path] | None = None) -> None:
    """Checksums of every table; for the tables just written, the run they came from and the kit revision that
    derived them (the others keep what the manifest said). `staged`: {table file name: the file about to replace
    it}, recorded in its place."""
    before = manifest(d)
    entries = {}
    files = {p.name: p for p in d.glob("*.csv")} | (staged or {})
    for name, p in sorted(files.items()):
        header = p.open().readline().rstrip("\n")
        rows = sum(1 for _ in p.open()) - 1
        entries[name] = {"sha256": _sha256(p), "rows": rows, "columns": header.split(",") if header else []}
        origin = written.get(name) or before.get(name, {})
        entries[name] |= {k: origin[k] for k in ("run_id", "derived_by", "types", "format") if origin.get(k)}
    tmp = d / f"{MANIFEST}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, d / MANIFEST)


def stage(profile: str, work_root: Path, root: Path | None = None) -> Path:
    """A working copy of the profile's tables under `work_root` (made once per run; a resumed run keeps
    it): point `PGLAB_DERIVED_DIR` at `work_root` and the notebooks read and write there. Tables of an older
    format are left out of it: this pglab cannot read them, and beside the tables it writes they would leave a
    folder of two formats (the publish drops them); a folder of a newer format is refused (FormatError)."""
    work = work_root / profile
    if not work.is_dir():
        final = profile_dir(profile, root)
        tmp = work_root / f".{profile}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        if final.is_dir():
            entries = manifest(final)
            if any(e.get("format", 0) > FORMAT for e in entries.values()):
                check_format(final, entries)  # refused: a newer pglab's tables are not this one's to drop
            shutil.copytree(final, tmp)
            _drop_older(tmp)
        else:
            tmp.mkdir(parents=True)
        os.replace(tmp, work)
    return work


def _drop_older(folder: Path) -> None:
    older = [n for n, e in manifest(folder).items() if e.get("format", 0) < FORMAT]
    if not older:
        return
    for name in older:
        (folder / name).unlink(missing_ok=True)
    _update_manifest(folder, {})


def publish(profile: str, work_root: Path, root: Path | None = None) -> Path:
    """Swap the working copy in for the profile's folder. Two renames: a crash between them leaves the old
    folder as `.<profile>.old`, which the next publish (or `recover`) puts back first."""
    final = profile_dir(profile, root)
    recover(profile, root)
    old = final.parent / f".{profile}.old"
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        os.replace(final, old)
    os.replace(work_root / profile, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def recover(profile: str, root: Path | None = None) -> None:
    """Undo a publish cut short between its two renames."""
    final = profile_dir(profile, root)
    old = final.parent / f".{profile}.old"
    if old.exists() and not final.exists():
        os.replace(old, final)
    elif old.exists():
        shutil.rmtree(old)


def verify(profile: str, root: Path | None = None) -> list[str]:
    """Files whose content no longer matches the manifest (empty when all is well)."""
    d = profile_dir(profile, root)
    manifest = json.loads((d / MANIFEST).read_text())
    bad = [n for n, e in manifest.items() if not (d / n).exists() or _sha256(d / n) != e["sha256"]]
    bad += [p.name for p in d.glob("*.csv") if p.name not in manifest]
    return sorted(bad)


# a run id as begin_run makes it: <profile>-YYYYMMDD-HHMMSS (a run id given by hand may have any other form)
_STAMPED = re.compile(r"(?P<profile>.+)-(?P<stamp>\d{8}-\d{6})")


def runs(raw_root: Path | None = None) -> pl.DataFrame:
    """Every run whose tables can be derived again: the complete folders of data/raw/ and the archives of
    data/raw-archive/, one row per run (run_id, profile, where: raw, archive or both), oldest first (by the
    time in its id, else its name). A folder without COMPLETE (a run cut short or still going) is left out."""
    from .raw_archive import archive_dir

    root = raw_root or paths.raw_dir()
    found: dict[str, dict] = {}
    for done in root.glob("*/COMPLETE"):
        run, profile = done.parent.name, None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            profile = json.loads((done.parent / "params.json").read_text()).get("profile")
        found[run] = {"run_id": run, "profile": profile, "where": "raw"}
    for arch in archive_dir().glob("*.tar.xz"):
        run = arch.name.removesuffix(".tar.xz")
        if run in found:
            found[run]["where"] = "raw + archive"
        else:
            found[run] = {"run_id": run, "profile": None, "where": "archive"}
    for r in found.values():
        m = _STAMPED.fullmatch(r["run_id"])
        r["profile"] = r["profile"] or (m["profile"] if m else None)
        r["_order"] = m["stamp"] if m else r["run_id"]
    schema = {"run_id": pl.String, "profile": pl.String, "where": pl.String, "_order": pl.String}
    df = pl.from_dicts(list(found.values()), schema=schema) if found else pl.DataFrame(schema=schema)
    return df.sort("_order", "run_id").drop("_order")


def runs_listing(raw_root: Path | None = None, latest: int = 12) -> str:
    """The runs there are, for a message: per profile its runs, the `latest` newest, oldest first."""
    df = runs(raw_root)
    if not df.height:
        return (
            f"  no run in {paths.shown(raw_root or paths.raw_dir())} nor in data/raw-archive/ "
            "(make report or make experiment records one)"
        )
    lines = []
    for (profile,), g in df.group_by("profile", maintain_order=False):
        ids = g["run_id"].to_list()
        more = f"… {len(ids) - latest} older, then " if len(ids) > latest else ""
        lines.append(f"  {profile or '(no profile)'}: {more}{', '.join(ids[-latest:])}")
    return "\n".join(sorted(lines))

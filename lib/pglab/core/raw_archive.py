"""A run's raw data as one committed file: data/raw-archive/<run-id>.tar.xz, from data/raw/<run-id>/.

The archive is deterministic: members sorted by name, every mtime fixed, no owner, modes 0644 / 0755, xz
with a fixed preset; the same raw folder always gives the same bytes. The staging copy of the derived tables a
run leaves in its folder (derived-work/) and half-written temporary files are not raw data and stay out.

`unpack` puts an archive back as data/raw/<run-id>/ (tarfile's 'data' filter: no absolute paths, no links out,
no devices), refusing a member outside the run's folder."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import tarfile
from pathlib import Path

from . import paths
from .store import check_run_id

LIMIT_BYTES = 20 * 2**20  # a bigger archive is refused unless forced: the repository is no data store
MTIME = 0
PRESET = 6  # xz's default: 9 needs ~700 MB to compress, for a few per cent
EXCLUDED_DIRS = {"derived-work"}
TEMPORARY = re.compile(r"\.tmp\d+$")


class ArchiveError(Exception):
    pass


def archive_dir() -> Path:
    return paths.data_dir() / "raw-archive"


def archive_path(run_id: str) -> Path:
    return archive_dir() / f"{check_run_id(run_id)}.tar.xz"


def members(run_dir: Path) -> list[Path]:
    """The run folder's files, sorted, without the staging folder and temporary files."""
    out = []
    for p in run_dir.rglob("*"):
        rel = p.relative_to(run_dir)
        if rel.parts[0] in EXCLUDED_DIRS or TEMPORARY.search(p.name) or p.is_dir():
            continue
        out.append(p)
    return sorted(out, key=lambda p: p.relative_to(run_dir).as_posix())


def _info(name: str, size: int = 0, is_dir: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.uid, info.gid, info.uname, info.gname = size, MTIME, 0, 0, "", ""
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir else 0o644
    return info


def create(run_id: str, force: bool = False, raw_root: Path | None = None, out: Path | None = None) -> Path:
    """Write the archive of data/raw/<run_id>/; refused (ArchiveError) over LIMIT_BYTES unless `force`."""
    run_dir = (raw_root or paths.raw_dir()) / check_run_id(run_id)
    if not run_dir.is_dir():
        raise ArchiveError(f"no raw data for run {run_id}: {paths.shown(run_dir)} does not exist")
    target = out or archive_path(run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    try:
        with (
            lzma.open(tmp, "wb", preset=PRESET) as xz,
            tarfile.open(fileobj=xz, mode="w", format=tarfile.GNU_FORMAT) as tar,
        ):
            tar.addfile(_info(run_id, is_dir=True))
            dirs = set()
            for p in members(run_dir):
                rel = p.relative_to(run_dir)
                for i in range(1, len(rel.parts)):
                    d = "/".join(rel.parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        tar.addfile(_info(f"{run_id}/{d}", is_dir=True))
                with p.open("rb") as f:
                    tar.addfile(_info(f"{run_id}/{rel.as_posix()}", p.stat().st_size), f)
        size = tmp.stat().st_size
        if size > LIMIT_BYTES and not force:
            raise ArchiveError(
                f"{paths.shown(target)} would be {size / 2**20:.1f} MiB, over the limit of "
                f"{LIMIT_BYTES / 2**20:.0f} MiB: not written (--force writes it anyway)"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def unpack(run_id: str, raw_root: Path | None = None, archive: Path | None = None) -> Path:
    """data/raw-archive/<run_id>.tar.xz back as data/raw/<run_id>/ (which must not exist yet)."""
    src = archive or archive_path(run_id)
    root = raw_root or paths.raw_dir()
    dest = root / check_run_id(run_id)
    if not src.is_file():
        raise ArchiveError(f"no archive of run {run_id}: {paths.shown(src)} does not exist")
    if dest.exists():
        raise ArchiveError(f"{paths.shown(dest)} exists already: not unpacking {paths.shown(src)} over it")
    work = root / f".unpack-{run_id}.tmp{os.getpid()}"  # a cut-short unpack leaves no half run behind
    work.mkdir(parents=True)
    try:
        with tarfile.open(src, "r:xz") as tar:
            bad = [m.name for m in tar.getmembers() if m.name != run_id and not m.name.startswith(run_id + "/")]
            if bad:
                raise ArchiveError(f"{paths.shown(src)}: members outside {run_id}/: {bad[:3]}")
            tar.extractall(work, filter="data")
        os.replace(work / run_id, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def recorded_params(run_id: str, raw_root: Path | None = None) -> dict | None:
    """A run's params.json: its raw folder's, else its archive's (read without unpacking); None when neither has it."""
    if (f := (raw_root or paths.raw_dir()) / check_run_id(run_id) / "params.json").is_file():
        return json.loads(f.read_text())
    if (arch := archive_path(run_id)).is_file():
        with tarfile.open(arch) as tar:
            try:
                member = tar.extractfile(f"{run_id}/params.json")
            except KeyError:
                return None
            return json.loads(member.read()) if member else None
    return None

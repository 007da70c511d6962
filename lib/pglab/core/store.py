"""The raw results store: every measurement appended to `data/raw/<run-id>/` the moment it is taken.

One JSON line per (server, experiment, condition, item, repetition, warm-up or not), flushed and fsynced,
so a crash loses at most the measurement in flight. A run started again with the same run id skips what
is already recorded (`done()`) and completes the rest; nothing recorded is rewritten.

Raw artefacts that go with measurements (plans, pgbench output, server logs) are files beside them,
written once under names the caller chooses (`save_text`)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from . import paths
from .paramtypes import SAFE_NAME_RULE, is_safe_name

KEY = ("server", "experiment", "condition", "item", "repetition", "warmup")
COLUMNS = (*KEY, "value", "unit", "ts")


class StoreError(Exception):
    pass


def _key(server, experiment, condition, item, repetition, warmup) -> tuple:
    return (str(server), str(experiment), str(condition), str(item), int(repetition), bool(warmup))


def check_run_id(run_id) -> str:
    """A run id names a folder under data/raw/: never '.', '..' or a path (the last line of defence; params and
    the command line check it first)."""
    if not is_safe_name(run_id):
        raise StoreError(f"run id {run_id!r}: expected {SAFE_NAME_RULE}")
    return run_id


class RunStore:
    def __init__(self, run_id: str, root: Path | None = None):
        self.run_id = check_run_id(run_id)
        self.dir = (root or paths.raw_dir()) / run_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "measurements.jsonl"
        self._done: set[tuple] = set()
        self._load()

    def __repr__(self) -> str:
        return f"<RunStore {self.run_id}: {len(self._done)} measurements>"

    def _load(self) -> None:
        if not self.file.exists():
            return
        data = self.file.read_bytes()
        if data and not data.endswith(b"\n"):
            # a line cut short by a crash was never recorded: drop the fragment so appends stay valid
            cut = data.rfind(b"\n") + 1
            with open(self.file, "r+b") as f:
                f.truncate(cut)
            data = data[:cut]
        for n, line in enumerate(data.splitlines(), 1):
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise StoreError(f"{self.file}:{n}: not a JSON record ({e})") from None
            self._done.add(_key(*(rec[k] for k in KEY)))

    def done(self, server, experiment, condition, item, repetition, warmup=False) -> bool:
        return _key(server, experiment, condition, item, repetition, warmup) in self._done

    def record(
        self,
        server,
        experiment,
        condition,
        item,
        repetition,
        value,
        unit: str,
        warmup: bool = False,
        **extra,
    ) -> dict:
        """Append one measurement. `value` may be None for a failed one: say why in `error=`."""
        key = _key(server, experiment, condition, item, repetition, warmup)
        if key in self._done:
            raise StoreError(f"already recorded in run {self.run_id}: {dict(zip(KEY, key, strict=True))}")
        rec = dict(zip(KEY, key, strict=True)) | {
            "value": value,
            "unit": unit,
            "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
        }
        rec |= extra
        line = json.dumps(rec, default=str, sort_keys=False) + "\n"
        with open(self.file, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._done.add(key)
        return rec

    def records(self, experiment: str | None = None) -> pl.DataFrame:
        """Every measurement recorded in this run (optionally of one experiment), as a tidy table."""
        if not self.file.exists() or self.file.stat().st_size == 0:
            return pl.DataFrame(schema={c: pl.String for c in COLUMNS})
        rows = [json.loads(line) for line in self.file.read_text().splitlines()]
        if experiment is not None:
            rows = [r for r in rows if r["experiment"] == experiment]
        df = pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame()
        return df

    # -- artefacts -------------------------------------------------------------------------------------------

    def artifact_path(self, relpath: str) -> Path:
        p = (self.dir / relpath).resolve()
        if not p.is_relative_to(self.dir.resolve()):
            raise StoreError(f"artefact path {relpath!r} leaves the run directory")
        return p

    def has_artifact(self, relpath: str) -> bool:
        return self.artifact_path(relpath).exists()

    def save_text(self, relpath: str, text: str) -> Path:
        """Write an artefact once (atomically); an existing one is kept, not overwritten."""
        p = self.artifact_path(relpath)
        if p.exists():
            return p
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, p)
        return p

    def save_json(self, relpath: str, obj, keep_order: bool = False) -> Path:
        """keep_order: the dicts' keys as given (a table's column order rebuilt from it), else sorted."""
        return self.save_text(relpath, json.dumps(obj, indent=1, default=str, sort_keys=not keep_order))

    def load_json(self, relpath: str, default=None):
        """An artefact written by save_json, or `default` when the run has none."""
        return json.loads(self.artifact_path(relpath).read_text()) if self.has_artifact(relpath) else default


# -- run ids --------------------------------------------------------------------------------------------------


def _marker(profile: str, root: Path | None) -> Path:
    return (root or paths.raw_dir()) / f".current-{profile}"


def begin_run(profile: str, run_id: str | None = None, root: Path | None = None) -> str:
    """The run id to record into: the one given, else the interrupted run of this profile, else a new one."""
    marker = _marker(profile, root)
    if run_id is None and marker.exists():
        run_id = marker.read_text().strip() or None
    if run_id is None:
        run_id = f"{profile}-{time.strftime('%Y%m%d-%H%M%S')}"
    check_run_id(run_id)  # also one read back from the marker file
    if ((root or paths.raw_dir()) / run_id / "COMPLETE").exists():
        return run_id  # re-deriving a finished run: it must not become the one the next run resumes
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(run_id + "\n")
    return run_id


def finish_run(profile: str, run_id: str, root: Path | None = None) -> None:
    """Mark the run complete: the next `begin_run` of this profile starts a new one."""
    check_run_id(run_id)
    marker = _marker(profile, root)
    if marker.exists() and marker.read_text().strip() == run_id:
        marker.unlink()
    done = (root or paths.raw_dir()) / run_id / "COMPLETE"
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(datetime.now(UTC).isoformat() + "\n")

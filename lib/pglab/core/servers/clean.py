"""`make clean`: stop and remove the kit's clusters and raw data; committed derived data is kept.

    python -m pglab.core.servers.clean                  # sweep orphans, then remove the kit's state and data/raw/*
    python -m pglab.core.servers.clean --force          # ... including raw runs that have no archive (their only copy)
    python -m pglab.core.servers.clean --check-orphans  # only report (exit 1) postgres servers of the kit still running

A raw run with measurements and no archive in data/raw-archive/ is the only copy of what it measured: it is kept
(and named, with the command that archives it) unless --force (`make clean FORCE=1`).

The kit's state is `.pglab/` (or PGLAB_STATE_DIR), the folders standing in for it when the service user
could not reach it (reach.py), the copies of this clone's server binaries in the install cache, and socket
folders a killed run left in the temp folder. Downloaded PostgreSQL and the builds from source stay in the cache
(`<cache>/postgres/<version>/` and `build-<key>/`: only `copy-*` folders are removed)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from .. import paths
from ..paramtypes import is_safe_name
from . import reach, socketdir
from .cluster_procs import pid_alive, postmaster_pid, proc_start_ticks, sweep_orphans


def cluster_roots(whole_clone: bool = True) -> list[Path]:
    """The folders that hold clusters of this state folder (PGLAB_STATE_DIR) and the stand-ins for it; with
    whole_clone, also every stand-in for a folder anywhere in this clone (the tests' among them)."""
    roots = [paths.clusters_dir(), paths.state_dir() / "bench"]
    roots += [r for r in (reach.stand_in(p) for p in list(roots)) if r]
    roots += reach.stand_ins_for(paths.state_dir())
    if whole_clone:
        roots += reach.stand_ins_for(paths.ROOT)
    return list(dict.fromkeys(roots))


def running_servers(whole_clone: bool = True) -> list[str]:
    """Clusters of the kit whose postmaster is alive, with the owner that runs them."""
    out = []
    for root in cluster_roots(whole_clone):
        for cdir in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
            pid = postmaster_pid(cdir / "data")
            if pid and pid_alive(pid):
                owner = {}
                if (cdir / "owner.json").exists():
                    owner = json.loads((cdir / "owner.json").read_text())
                live = owner and proc_start_ticks(owner["pid"]) == owner.get("ticks")
                state = f"in use by pid {owner['pid']})" if live else "orphan)"
                out.append(f"{cdir} (postmaster {pid}, {state}")
    return out


def binary_copies() -> list[Path]:
    """This clone's copies of server binaries in the install cache (reach.py): the only cache folders removed."""
    out = []
    for d in sorted(paths.postgres_cache_dir().glob("copy-*")):
        try:
            origin = Path(json.loads((d / reach.COPY_RECORD).read_text())["from"])
        except (OSError, ValueError, KeyError):
            continue
        if origin.is_relative_to(paths.ROOT):
            out.append(d)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.core.servers.clean", description=__doc__.splitlines()[0])
    ap.add_argument("--check-orphans", action="store_true")
    ap.add_argument("--force", action="store_true", help="also delete raw runs that have no archive")
    args = ap.parse_args(argv)
    if args.check_orphans:  # this state folder's servers only: a test checks its own while others run
        left = running_servers(whole_clone=False)
        for line in left:
            print(f"still running: {line}", file=sys.stderr)
        return 1 if left else 0
    for root in cluster_roots():
        for name in sweep_orphans(root):
            print(f"stopped orphan server {name}")
    busy = running_servers()
    if busy:
        print("error: servers of the kit are in use; stop them first:\n  " + "\n  ".join(busy), file=sys.stderr)
        return 1
    from .osuser import server_user

    removed = []
    stand_ins = reach.stand_ins_for(paths.ROOT) + reach.stand_ins_for(paths.state_dir())
    for d in list(dict.fromkeys(stand_ins)) + binary_copies():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    for d in socketdir.stale({os.getuid(), server_user().uid}):
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    shutil.rmtree(paths.state_dir(), ignore_errors=True)
    kept = remove_raw_runs(force=args.force)
    print(f"removed {paths.state_dir()} and {paths.raw_dir()}/* (data/derived kept)")
    for d in removed:
        print(f"removed {d}")
    print(kept_message(kept), end="")
    return 0


def remove_raw_runs(force: bool = False) -> list[Path]:
    """Empty data/raw/ but for the runs that have no archive (unless `force`) and their resume markers; returns
    the runs kept."""
    kept = [] if force else unarchived_runs()
    keep = {p.name for p in kept} | {f".current-{_profile_of(p)}" for p in kept}
    for p in paths.raw_dir().glob("*"):
        if p.name != ".gitkeep" and p.name not in keep:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    return kept


def kept_message(kept: list[Path]) -> str:
    if not kept:
        return ""
    lines = [f"kept {len(kept)} raw run(s) with no archive, the only copy of their measurements:"]
    lines += [
        f"  {paths.shown(p)}: make archive RUN_ID={p.name} keeps it in data/raw-archive/ (then make clean "
        f"removes the folder); make clean FORCE=1 deletes it"
        for p in kept
    ]
    return "\n".join(lines) + "\n"


def unarchived_runs() -> list[Path]:
    """Raw runs that hold measurements and have no archive in data/raw-archive/."""
    from ..raw_archive import archive_path

    out = []
    for p in sorted(paths.raw_dir().glob("*")):
        jsonl = p / "measurements.jsonl"
        if (
            is_safe_name(p.name)
            and p.is_dir()
            and jsonl.is_file()
            and jsonl.stat().st_size
            and not archive_path(p.name).is_file()
        ):
            out.append(p)
    return out


def _profile_of(run_dir: Path) -> str:
    """The profile whose interrupted run this is (its resume marker names it), else ''."""
    for marker in run_dir.parent.glob(".current-*"):
        if marker.read_text().strip() == run_dir.name:
            return marker.name.removeprefix(".current-")
    return ""


if __name__ == "__main__":
    sys.exit(main())

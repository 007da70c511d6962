"""`make clean`: stop and remove the kit's clusters and raw data; committed derived data is kept.

    python -m pglab.core.clean                  # sweep orphans, then remove the kit's state and data/raw/*
    python -m pglab.core.clean --check-orphans  # only report (exit 1) postgres servers of the kit still running

The kit's state is `.pglab/` (or PGLAB_STATE_DIR), the folders standing in for it when the service user
could not reach it (reach.py), the copies of this clone's server binaries in the install cache, and socket
folders a killed run left in the temp folder. Downloaded PostgreSQL builds stay in the cache."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from . import paths, reach, socketdir
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


def _binary_copies() -> list[Path]:
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
    ap = argparse.ArgumentParser(prog="python -m pglab.core.clean", description=__doc__.splitlines()[0])
    ap.add_argument("--check-orphans", action="store_true")
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
    for d in list(dict.fromkeys(stand_ins)) + _binary_copies():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    for d in socketdir.stale({os.getuid(), server_user().uid}):
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    shutil.rmtree(paths.state_dir(), ignore_errors=True)
    for p in paths.raw_dir().glob("*"):
        if p.name != ".gitkeep":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    print(f"removed {paths.state_dir()} and {paths.raw_dir()}/* (data/derived kept)")
    for d in removed:
        print(f"removed {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make clean`: stop and remove the kit's clusters and raw data; committed derived data is kept.

    python -m pglab.clean                  # sweep orphans, then remove .pglab/ and data/raw/*
    python -m pglab.clean --check-orphans  # only report (exit 1) postgres servers of the kit still running
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from . import paths
from .cluster import _pid_alive, _postmaster_pid, _proc_start_ticks, sweep_orphans


def running_servers() -> list[str]:
    """Clusters of the kit whose postmaster is alive, with the owner that runs them."""
    out = []
    root = paths.clusters_dir()
    for cdir in sorted(root.glob("*")) if root.is_dir() else []:
        pid = _postmaster_pid(cdir / "data")
        if pid and _pid_alive(pid):
            owner = {}
            if (cdir / "owner.json").exists():
                owner = json.loads((cdir / "owner.json").read_text())
            live = owner and _proc_start_ticks(owner["pid"]) == owner.get("ticks")
            out.append(f"{cdir} (postmaster {pid}, " + (f"in use by pid {owner['pid']})" if live else "orphan)"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.clean", description=__doc__.splitlines()[0])
    ap.add_argument("--check-orphans", action="store_true")
    args = ap.parse_args(argv)
    if args.check_orphans:
        left = running_servers()
        for line in left:
            print(f"still running: {line}", file=sys.stderr)
        return 1 if left else 0
    stopped = sweep_orphans()
    for name in stopped:
        print(f"stopped orphan server {name}")
    busy = running_servers()
    if busy:
        print("error: servers of the kit are in use; stop them first:\n  " + "\n  ".join(busy), file=sys.stderr)
        return 1
    shutil.rmtree(paths.state_dir(), ignore_errors=True)
    for p in paths.raw_dir().glob("*"):
        if p.name != ".gitkeep":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    print(f"removed {paths.state_dir()} and {paths.raw_dir()}/* (data/derived kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

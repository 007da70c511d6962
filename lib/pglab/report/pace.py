"""How fast this machine ran each notebook last time, against its estimate: the prior that scales the time left
shown before a notebook of the run has finished.

The estimates (`pglab.report.estimate`) are fitted to the reference machine; another machine runs some notebooks
2× slower and others barely slower, so a run's first line could be off by an hour. After each notebook of a fresh
(not resumed) run, the driver records its estimate and how long it took, per profile, in the state folder
(`<state>/pace.json`, machine-local, removed by `make clean`); the next run of that profile starts from those
paces. A resumed run is not recorded: its notebooks skip the measurements already kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..core import paths

FILE = "pace.json"
MIN_ESTIMATE_S = 5.0  # below this a notebook's ratio is mostly kernel start-up: it takes the profile's overall pace


def _file() -> Path:
    return paths.state_dir() / FILE


def _read() -> dict:
    try:
        data = json.loads(_file().read_text())
    except (OSError, ValueError):  # none yet, or a torn file: no prior
        return {}
    return data if isinstance(data, dict) else {}


def record(profile: str, notebook: str, estimate_s: float, took_s: float, run_id: str | None) -> None:
    """Keep how long `notebook` of `profile` took against its estimate (replacing the previous run's)."""
    data = _read()
    data.setdefault(profile, {})[notebook] = {
        "estimate_s": round(estimate_s, 1),
        "took_s": round(took_s, 1),
        "run_id": run_id,
    }
    target = _file()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{FILE}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)  # a crash mid-write leaves the previous file


def _valid(r) -> bool:
    return (
        isinstance(r, dict)
        and all(isinstance(r.get(k), (int, float)) for k in ("estimate_s", "took_s"))
        and r["estimate_s"] >= 0
        and r["took_s"] > 0
    )


def paces(profile: str, notebooks: list[str]) -> dict[str, float]:
    """Per notebook, how many times its estimate it took here last time: its own ratio where its estimate was
    long enough to tell, else the profile's overall one; 1.0 with no record of the profile."""
    kept = _read().get(profile)
    own = {nb: r for nb, r in kept.items() if _valid(r)} if isinstance(kept, dict) else {}
    est = sum(r["estimate_s"] for r in own.values())
    overall = sum(r["took_s"] for r in own.values()) / est if est > 30 else 1.0
    return {
        nb: own[nb]["took_s"] / own[nb]["estimate_s"]
        if nb in own and own[nb]["estimate_s"] >= MIN_ESTIMATE_S
        else overall
        for nb in notebooks
    }


def described(profile: str, paced: dict[str, float], estimates: dict[str, float]) -> str | None:
    """One line for the run's start: by how much this machine's last run of `profile` scales the estimates."""
    model = sum(estimates.values())
    if model <= 0 or all(v == 1.0 for v in paced.values()):
        return None
    scaled = sum(e * paced.get(n, 1.0) for n, e in estimates.items())
    return (
        f"time left scaled ×{scaled / model:.2f} (in all) by how this checkout's last {profile} run went against "
        "the reference machine's times"
    )

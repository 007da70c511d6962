"""How fast this machine ran each notebook last time, against its estimate: the prior that scales the time left
shown before a notebook of the run has finished.

The estimates (`pglab.report.estimate`) are fitted to the reference machine; another machine runs some notebooks
2× slower and others barely slower, so a run's first line could be off by an hour. After each notebook of a run
that kept no earlier measurements, the driver records its estimate and how long it took, in the state folder
(`<state>/pace/<profile>.json`, one file per profile so that two profiles' runs never overwrite each other's;
machine-local, removed by `make clean`); the next run of that profile starts from those paces. Like the model, a
pace includes what that run did once (downloads, initdb, SSB loads): a run that finds its clusters loaded goes
faster than it says at first, and the progress line corrects it as its notebooks finish. A run that measured
nothing (`make experiment` whose every cell failed) teaches nothing: `forget` puts the record it replaced back."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ..core import paths

MIN_ESTIMATE_S = 5.0  # below this a notebook's ratio is mostly kernel start-up: it takes the profile's overall pace


def _file(profile: str) -> Path:
    return paths.state_dir() / "pace" / f"{profile}.json"


def _recorded(profile: str) -> dict[str, dict]:
    """The profile's records that are well formed; none from a missing, torn or foreign file."""
    try:
        data = json.loads(_file(profile).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {nb: r for nb, r in data.items() if _valid(r)}


def _valid(r) -> bool:
    return (
        isinstance(r, dict)
        and all(isinstance(r.get(k), (int, float)) for k in ("estimate_s", "took_s"))
        and r["estimate_s"] >= 0
        and r["took_s"] > 0
    )


def record(profile: str, notebook: str, estimate_s: float, took_s: float, run_id: str | None) -> None:
    """Keep how long `notebook` of `profile` took against its estimate (replacing the previous run's). Never
    raises: a state folder that cannot be written costs the next run its prior, not this run its measurements."""
    data = _recorded(profile)
    before = data.get(notebook)
    data[notebook] = {"estimate_s": round(estimate_s, 1), "took_s": round(took_s, 1), "run_id": run_id}
    if before is not None:  # kept for `forget`: one level, not a history
        data[notebook]["previous"] = {k: x for k, x in before.items() if k != "previous"}
    _write(profile, data)


def forget(profile: str, notebook: str, run_id: str | None) -> bool:
    """Undo what run `run_id` taught about `notebook` (its record replaced by the one before it, or removed): a
    failed run's time says nothing about the next one's. Whether there was such a record."""
    data = _recorded(profile)
    notebook = notebook if notebook in data else f"{notebook}.ipynb"  # the driver's records name the .ipynb
    mine = data.get(notebook)
    if mine is None or mine.get("run_id") != run_id:
        return False
    if _valid(mine.get("previous")):
        data[notebook] = mine["previous"]
    else:
        data.pop(notebook)
    _write(profile, data)
    return True


def _write(profile: str, data: dict) -> None:
    target = _file(profile)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, target)  # a crash mid-write leaves the previous file
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        print(f"  note: this machine's pace not kept ({e}); the next run's first estimate is the model's", flush=True)


def paces(profile: str, notebooks: list[str]) -> dict[str, float]:
    """Per notebook, how many times its estimate it took here last time: its own ratio where its estimate was
    long enough to tell, else the profile's overall one; 1.0 with no record of the profile."""
    own = _recorded(profile)
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

"""How long each notebook of `make report` will take: the estimate behind the run's "~m:ss left".

Per notebook a small model of what it runs, from the params' sizes (each stage's own, `Study.estimate_s`): the
servers the study will use (chosen by `servers.for_study` itself, with a stand-in for every version the run
would download, so nothing is fetched or started), times the rounds, runs, rows and SF of its section, times a
per-unit cost (`pglab.core.run.estimate.COST`, fitted to measured runs on the reference machine).

What the model leaves out: downloads and initdb on a machine's first run, loads skipped because a cluster
still holds the dataset, and a busier or faster machine. The progress line corrects for all of them by how
long the notebooks done so far took against their estimates (`RunProgress.left_s`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from subprocess import SubprocessError

from ..core.installs.installs import InstallError, discover, from_params
from ..core.run.estimate import COST, stand_in
from ..core.servers.servers import Server, select
from ..params import Params
from ..studies import STUDIES

REPORT_NOTEBOOK = "99_report.ipynb"


def run_servers(p: Params) -> list[Server]:
    """The run's servers as `servers.select` picks them: the installs found (probed, nothing started) and a
    stand-in for each of servers.versions (not downloaded)."""
    try:
        installs = discover(from_params(p.servers))
    except (InstallError, OSError, SubprocessError):  # an estimate never stops a run; params_checks reports it
        installs = []
    names = {i.name for i in installs}
    for v in p.servers.versions:
        inst = stand_in(v)
        installs.append(inst if inst.name not in names else replace(inst, name=f"{inst.name}-download"))
        names.add(installs[-1].name)
    try:
        return select(p, installs)
    except KeyError:  # servers.use names a server this machine lacks: params_checks reports it
        return []


def estimate_s(notebook: str, p: Params, base: list[Server], stages=STUDIES) -> float:
    """Seconds notebook `notebook` (e.g. "30_pgbench.ipynb") should take with params `p`, on the servers `base`
    (`run_servers`) and as many cores as this machine has."""
    if notebook == REPORT_NOTEBOOK:
        return COST["report"]
    stage = next((s for s in stages if f"{Path(s.notebook).name}.ipynb" == notebook), None)
    # a notebook no stage knows: a minute
    return COST["notebook"] + (stage.estimate_s(p, base) if stage else 60.0)


def estimates(notebooks: list[str], p: Params, base: list[Server] | None = None, stages=STUDIES) -> dict[str, float]:
    base = run_servers(p) if base is None else base
    return {nb: estimate_s(nb, p, base, stages) for nb in notebooks}

"""The pgbench workload's script files, checked before any server starts (`checks.check` calls this): every file
of `scripts:` (`file@weight`) exists and holds a statement; each failure a ParamsError naming the file, the
experiment and the key, all of one experiment's missing scripts at once."""

from __future__ import annotations

from pathlib import Path

from ...core.config import ParamsError
from .checks import _statement, where
from .params import Experiment
from .pgbench_params import script_files


def check_files(experiments: list[Experiment], shown) -> None:
    for i, e in enumerate(experiments):
        if e.workload.pgbench is None or e.workload.pgbench.scripts is None:
            continue  # a single `script:` is checks.check_files' own
        problems = []
        for key, path in script_files(e):
            p = Path(path)
            if not p.is_file():
                problems.append(f"{where(i, e, key)}: no such file {str(p)!r}")
            elif _statement(p) is None:
                problems.append(f"{where(i, e, key)}: {str(p)!r} is empty (no SQL statement)")
        if problems:
            raise ParamsError(f"{shown}: " + f"\n{shown}: ".join(problems))

"""`make experiment PARAMS=<file>`: only the `experiments:` of a params file (and the environment capture), their
notebooks and report.html under build/experiment-<profile>/<run id>/, `latest` (and report.html beside it) pointing at
the last complete run's: a re-run never overwrites an earlier run's report.

    python -m pglab.report.experiment --params params/examples/work_mem_ssb.yaml [--out DIR] [--run-id ID]

The params are checked before any server starts (exit 2, naming file, experiment and key); the notebooks run as in
`make report` (00_environment, 80_experiments: one run id, resumable), the run is then marked complete, so
`make derive RUN_ID=<id>` re-derives its tables, and 80_experiments is written as the self-contained report.html."""

from __future__ import annotations

import argparse
import sys

from .. import params as params_mod
from ..core import paths
from ..core.paramtypes import run_id_arg
from ..core.store import begin_run, finish_run
from . import driver

NOTEBOOKS = ("00_environment", "80_experiments")


def default_out(profile: str):
    return paths.ROOT / "build" / f"experiment-{profile}"


def _point(link, target: str) -> None:
    """`link` -> `target` (relative), replacing what was there at once (an older kit's report.html file too)."""
    import os

    tmp = link.with_name(f".{link.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def mark_latest(run_dir) -> None:
    """build/experiment-<profile>/latest -> <run id>/ and report.html -> <run id>/report.html: where the last
    complete run's report is, under a name that does not change."""
    _point(run_dir.parent / "latest", run_dir.name)
    _point(run_dir.parent / driver.HTML, f"{run_dir.name}/{driver.HTML}")


def unmeasured(p, run_id: str) -> list[str]:
    """The experiments of which no cell could be measured, each with every error named (file, statement, server,
    the server's message) on stderr; their run teaches the time estimate nothing (`pace.forget`)."""
    from ..core.store import RunStore
    from ..studies.experiments import derive as xderive
    from . import pace

    t = xderive.derive(RunStore(run_id), p)
    if not t:
        return []
    cells, errors = t["experiments_cells"], t["experiments_errors"]
    failed = [
        name
        for name in t["experiments_setup"]["experiment"]
        if cells.filter(experiment=name, status="measured").is_empty()
    ]
    for r in errors.unique(
        ["experiment", "stage", "server", "file", "statement", "item"], maintain_order=True
    ).iter_rows(named=True):
        at = f"{r['file']}: statement {r['statement']} ({r['first_line']})" if r["file"] else r["item"] or "setup"
        print(
            f"error: experiment {r['experiment']}: {r['stage']} {at} failed on {r['server']}: {r['error']}",
            file=sys.stderr,
        )
    for name in failed:
        mine = cells.filter(experiment=name)
        why = "every cell failed" if mine.filter(status="error").height else "no cell is testable on these servers"
        print(f"error: experiment {name}: nothing measured ({why}; {mine.height} cell(s))", file=sys.stderr)
    if failed:
        pace.forget(p.profile, NOTEBOOKS[-1], run_id)
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.report.experiment", description=__doc__.splitlines()[0])
    ap.add_argument("--params", required=True)
    ap.add_argument("--out", default=None, help="default: build/experiment-<profile>/<run id>/")
    ap.add_argument("--run-id", default=None, type=run_id_arg)
    args = ap.parse_args(argv)
    try:
        p = params_mod.load(args.params)
    except params_mod.ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not p.experiments:
        print(
            f"error: {args.params}: experiments: expected at least one experiment (docs/experiments.md)",
            file=sys.stderr,
        )
        return 2
    run_id = begin_run(p.profile, args.run_id or p.run_id)
    out = paths.resolve(args.out) if args.out else default_out(p.profile) / run_id
    code = driver.main(
        [
            "--params",
            args.params,
            "--out",
            str(out),
            "--run-id",
            run_id,
            *[x for nb in NOTEBOOKS for x in ("--only", nb)],
        ]
    )
    if code:
        return code
    finish_run(p.profile, run_id)
    from .html_export import write_html

    html = write_html(out / f"{NOTEBOOKS[-1]}.ipynb", out / driver.HTML)
    if not args.out:
        mark_latest(out)
    print(f"pglab experiment: run {run_id} -> {html}", flush=True)
    return 1 if unmeasured(p, run_id) else 0


if __name__ == "__main__":
    sys.exit(main())

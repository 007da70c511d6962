"""`make report`: run every notebook in order through papermill, writing the executed notebooks.

    python -m pglab.report --params params/quick.yaml [--out report] [--run-id ID] [--only 00_environment]

`--only 99` re-renders the report alone from data/derived/ in seconds, without any server.

Params are validated before anything starts. The run id is chosen once (an interrupted run of the same
profile is resumed) and handed to every notebook, so all stages record into one run. The params path is
handed over relative to the project root, so an executed notebook re-runs unchanged in another clone.
The report notebook is also written as one self-contained HTML file, `<out>/report.html`.

The measuring notebooks write their derived tables into a working copy of the profile's folder, swapped in
only once they have all succeeded (derived.stage / publish): a failed run leaves the previous tables."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from .. import params as params_mod
from ..core import derived, paths
from ..core.config import check_reference
from ..core.paramtypes import run_id_arg
from ..core.run.session import check_resume
from ..core.servers import servers
from ..core.store import begin_run, finish_run
from ..studies import STUDIES
from . import pace

KERNEL = "pglab"
REPORT_NOTEBOOK = "99_report.ipynb"
HTML = "report.html"


def notebooks(stages=STUDIES) -> list[Path]:
    """Every stage's notebook in run order, then the report's."""
    return [notebook_path(s.notebook) for s in stages] + [paths.NOTEBOOKS / REPORT_NOTEBOOK]


def notebook_path(name: str) -> Path:
    """notebooks/<name>.ipynb; a path as it is (a study outside the kit, e.g. a test's)."""
    return Path(name).with_suffix(".ipynb") if Path(name).is_absolute() else paths.NOTEBOOKS / f"{name}.ipynb"


def _stable_injected_id(path: Path) -> None:
    """papermill gives its injected-parameters cell a random id; a fixed one keeps re-runs byte-identical."""
    import nbformat  # here, not at the top: 1.5 s of imports a refused params file need not wait for

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.id = f"{path.stem}-injected-parameters"
    strip_run_metadata(nb)
    nbformat.write(nb, path)


def strip_run_metadata(nb) -> None:
    """What papermill records about the execution itself (this machine's absolute paths, timestamps,
    durations) says nothing about the study and makes every re-run differ: dropped. Outputs stay."""
    pm = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path", "start_time", "end_time", "duration"):
        pm.pop(key, None)
    for cell in nb.cells:
        cell.metadata.get("papermill", {}).clear()
        cell.metadata.pop("execution", None)


def _shown_run(profile: str) -> str | None:
    """The run whose tables the report alone re-renders: named in it as when it was measured, so `make report
    ONLY=99` on unchanged data gives the committed notebook byte for byte."""
    try:
        manifest = json.loads((derived.profile_dir(profile) / derived.MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    runs = {e.get("run_id") for e in manifest.values() if isinstance(e, dict)} - {None}
    return runs.pop() if len(runs) == 1 else None


def _todo(only: list[str] | None, stages=STUDIES) -> list[Path]:
    return [nb for nb in notebooks(stages) if not only or any(nb.name.startswith(o) for o in only)]


def default_out(profile: str) -> Path:
    """The reference profile's report is the committed one; any other profile writes beside it, never over it."""
    return paths.REPORT if profile == "default" else paths.ROOT / "build" / f"report-{profile}"


def _publish(profile: str, staged: Path, final_root: Path) -> None:
    os.environ.pop("PGLAB_DERIVED_DIR", None)
    print(f"  derived tables -> {derived.publish(profile, staged, final_root)}", flush=True)


def main(argv: list[str] | None = None, stages=STUDIES) -> int:
    """`stages`: the run's stages (pglab.studies.STUDIES; a test passes its own)."""
    ap = argparse.ArgumentParser(prog="python -m pglab.report", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params/default.yaml")
    ap.add_argument(
        "--out",
        default=None,
        help="default: report/ for the reference profile (default), build/report-<profile>/ otherwise",
    )
    ap.add_argument("--run-id", default=None, type=run_id_arg)
    ap.add_argument("--only", action="append", help="run only notebooks whose name starts with this")
    args = ap.parse_args(argv)
    todo = _todo(args.only, stages)
    # the report notebook alone reads data/derived/ only: it needs no run (and must not start one)
    measuring = any(nb.name != REPORT_NOTEBOOK for nb in todo)

    try:
        # the machine's checks build the servers params build from source (minutes, the first time): not for a
        # report asked for alone
        p = params_mod.load(args.params, check_servers=measuring or not args.only)
        check_reference(p)  # a copy of default.yaml would write the committed report/ and data/derived/default/
    except params_mod.ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # nothing of an unfinished build is kept (pg_build)
        print(
            "\npglab report: interrupted while checking params; nothing was measured: run the same command again",
            file=sys.stderr,
        )
        return 130
    from .estimate import estimates as estimate_all
    from .progress import RunProgress

    out = paths.resolve(args.out) if args.out else default_out(p.profile)
    out.mkdir(parents=True, exist_ok=True)
    params_path = paths.resolve(args.params)
    if params_path.is_relative_to(paths.ROOT):
        params_path = params_path.relative_to(paths.ROOT)
    run_id = begin_run(p.profile, args.run_id or p.run_id) if measuring else args.run_id or _shown_run(p.profile)
    kept = None
    if measuring:
        try:  # before any server: a resume with other params would mix two settings in one run
            kept = check_resume(run_id, p)
        except params_mod.ParamsError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    shown = run_id or "none (the report reads data/derived only)"
    print(f"pglab report: profile {p.profile}, run {shown}, {len(todo)} notebooks -> {out}", flush=True)
    if kept is not None:
        print(f"  resuming run {run_id}: {kept} measurements kept (taken with the same params)", flush=True)
    final_root = paths.derived_dir()
    staged = None
    if measuring:
        staged = paths.raw_dir() / run_id / "derived-work"
        try:
            derived.stage(p.profile, staged, final_root)
        except derived.FormatError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        os.environ["PGLAB_DERIVED_DIR"] = str(staged)  # the kernels inherit it
        # what the kernels create on external servers is noted there and dropped (or kept) when the run ends
        os.environ[servers.CREATED_ENV] = str(paths.raw_dir() / run_id / servers.CREATED_FILE)
        for line in servers.external_notice(p):
            print(f"  {line}", flush=True)
    t_all = time.monotonic()
    names = [nb.name for nb in todo]
    # servers counted as the studies choose them; the report notebook alone needs none (finding them would build
    # params' source installs)
    estimates = estimate_all(names, p, base=None if measuring else [], stages=stages)
    paced = pace.paces(p.profile, names)
    if scaled := pace.described(p.profile, paced, estimates):
        print(f"  {scaled}", flush=True)
    resume = f"make report PARAMS={params_path} RUN_ID={run_id}" if measuring else None
    # a run resumed with measurements kept skips them: its times would teach the next run a pace too fast
    learn = (lambda nb, est, took: pace.record(p.profile, nb, est, took, run_id)) if measuring and not kept else None
    stopped_by: list[int] = []
    # what a kernel prints to its own stderr while it stops is kept with the run, off the terminal's one line
    after_stop = paths.raw_dir() / run_id / "kernel-stderr-after-stop.log" if measuring else None
    try:
        with (
            RunProgress(names, estimates, paces=paced, after_stop=after_stop) as progress,
            _ctrl_c(progress, resume, stopped_by),
        ):
            code = _execute(todo, out, params_path, run_id, estimates, progress, staged, p.profile, final_root, learn)
    except KeyboardInterrupt:
        # the one line was printed the moment the signal came; the kernel stopped its servers
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    finally:
        if measuring:  # also after a failure or Ctrl-C: nothing the run made is left unannounced
            for line in servers.drop_created(p.servers.external, Path(os.environ.pop(servers.CREATED_ENV))):
                print(f"pglab report: {line}", flush=True)
    if code:
        return code
    if staged and all(nb.name != REPORT_NOTEBOOK for nb in todo):  # else published before the report notebook
        _publish(p.profile, staged, final_root)
    if measuring and not args.only:
        finish_run(p.profile, run_id)
    print(f"pglab report: finished in {time.monotonic() - t_all:.1f} s; notebooks in {out}", flush=True)
    return 0


STOPPING = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _ctrl_c(progress, resume: str | None, stopped_by: list[int]):
    """Ctrl-C, or SIGTERM (a `kill`, a service manager): one line at once (what stopped, the command that resumes),
    the signal passed on to the kernel (in a session of its own, it gets none from a terminal or a `kill` of the
    driver), then quiet while the kernel stops its servers; no traceback of papermill's or the kernel's shutdown
    reaches the terminal. The signal's number is appended to `stopped_by`."""

    def handler(signum, frame):
        for sig in STOPPING:  # a second signal must not cut the servers' shutdown short
            signal.signal(sig, signal.SIG_IGN)
        stopped_by.append(signum)
        progress.quiet()
        where = progress.current or "between notebooks"
        then = (
            f"measurements recorded so far are kept; resume with: {resume}"
            if resume
            else "nothing was measured; run the same command again"
        )
        how = "interrupted" if signum == signal.SIGINT else f"stopped ({signal.Signals(signum).name})"
        print(f"\npglab report: {how} in {where}, stopping its servers; {then}", file=sys.stderr, flush=True)
        logging.disable(logging.CRITICAL)  # papermill and the kernel client log their own shutdown
        progress.interrupt_kernels()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in STOPPING}
    try:
        yield
    finally:
        for sig, was in previous.items():
            signal.signal(sig, was)


def _execute(todo, out, params_path, run_id, estimates, progress, staged, profile, final_root, learn=None) -> int:
    """Every notebook in turn through papermill (the measured tables published just before the report notebook
    reads them); 1, naming the partial notebook, when one fails. `learn(notebook, estimate, took)` is told each
    notebook's time."""
    import papermill

    from .html_export import write_html  # imports nbconvert, nbformat: only once params are good

    for nb in todo:
        if staged and nb.name == REPORT_NOTEBOOK:
            staged = _publish(profile, staged, final_root)
        progress.start(nb.name)
        try:
            papermill.execute_notebook(
                str(nb),
                str(out / nb.name),
                parameters={"params_file": str(params_path), "run_id": run_id},
                kernel_name=KERNEL,
                cwd=str(paths.NOTEBOOKS),
                progress_bar=False,
                kernel_manager_class=progress.kernel_manager_class,
            )
        except papermill.PapermillExecutionError as e:
            progress.finish(nb.name)
            print(f"error: {nb.name} failed in cell {e.exec_count}: {e.ename}: {e.evalue}", file=sys.stderr)
            print(f"  the partial notebook is {out / nb.name}; run again to resume run {run_id}", file=sys.stderr)
            return 1
        _stable_injected_id(out / nb.name)
        took = progress.finish(nb.name)
        paced = progress.expected_s(nb.name)
        also = f", {paced:.0f} s at this machine's last pace" if round(paced) != round(estimates[nb.name]) else ""
        print(f"  {nb.name} done in {took:.1f} s (estimated {estimates[nb.name]:.0f} s{also})", flush=True)
        if learn:
            learn(nb.name, estimates[nb.name], took)
        if nb.name == REPORT_NOTEBOOK:
            print(f"  {HTML}: {write_html(out / nb.name, out / HTML)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The checks of `experiments:` that need the machine, before any server starts (`pglab.params.load` runs them;
each failure is a ParamsError naming the file, the experiment and the key, and `make experiment` exits 2):

- every SQL file (workload, data setup) and pgbench script exists and holds a statement (all the files' problems
  of the params file named at once, one a line: a missing setup *and* a missing workload);
- every server an experiment names is one of the run's;
- every setting (factor values, fixed settings) is one that a server of the experiment accepts, with its value, by
  the install's own `postgres -C`. A setting some servers lack (io_method before 18) is no error: those cells are
  *not testable here* on those servers (`unavailable`), the rest run. One that no server has, or a value a server
  that has it refuses, is an error;
- the data fits in the free space of the clusters' folder."""

from __future__ import annotations

import glob
import shutil
import subprocess
from pathlib import Path

from ...core.config import ParamsError
from ...core.run import params_checks as pc
from .params import SERVER, Experiment

# values PostgreSQL has only in builds with an optional library: refused by every server here, they are cells not
# testable here, not a typo
BUILD_OPTIONAL = frozenset({("io_method", "io_uring")})


def where(i: int, e: Experiment, key: str) -> str:
    return f"experiments[{i}] ({e.name}).{key}"


def sql_files(e: Experiment) -> list[Path]:
    """The workload's SQL files, in the order given (each glob sorted)."""
    out: list[Path] = []
    for pattern in e.workload.sql or []:
        out += [Path(p) for p in sorted(glob.glob(pattern))] or [Path(pattern)]
    return out


def _statement(path: Path) -> str | None:
    """The file's text when it holds more than whitespace and comments, else None."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    return text if code.strip().strip(";").strip() else None


def check_files(experiments: list[Experiment], shown) -> None:
    """Every file problem of every experiment, raised once together (a fix-one-rerun-find-the-next loop is slow)."""
    problems = []
    for i, e in enumerate(experiments):
        files = []
        if e.workload.sql is not None:
            for pattern in e.workload.sql:
                if not glob.glob(pattern):
                    problems.append(f"{shown}: {where(i, e, 'workload.sql')}: no file matches {pattern!r}")
            found = [p for p in sql_files(e) if p.exists() or glob.glob(str(p))]
            files += [("workload.sql", p) for p in found]
            stems = [p.stem for p in found]
            twice = sorted({s for s in stems if stems.count(s) > 1})
            if twice:
                problems.append(
                    f"{shown}: {where(i, e, 'workload.sql')}: expected one file per query name; {twice} more than once"
                )
        if e.workload.pgbench is not None and e.workload.pgbench.script:
            files.append(("workload.pgbench.script", Path(e.workload.pgbench.script)))
        if e.data.sql:
            files.append(("data.sql", Path(e.data.sql)))
        for key, p in files:
            if not p.is_file():
                problems.append(f"{shown}: {where(i, e, key)}: no such file {str(p)!r}")
            elif _statement(p) is None:
                problems.append(f"{shown}: {where(i, e, key)}: {str(p)!r} is empty (no SQL statement)")
    if len(problems) == 1:
        raise ParamsError(problems[0])
    if problems:
        raise ParamsError(f"{len(problems)} problems:\n" + "\n".join(f"  {x}" for x in problems))


def experiment_installs(e: Experiment, installs: list) -> list:
    return installs if e.servers == "all" else [x for x in installs if x.name in e.servers]


def check_servers(experiments: list[Experiment], shown, installs: list, externals: list[str]) -> None:
    names = sorted({x.name for x in installs} | set(externals))
    for i, e in enumerate(experiments):
        wanted = [] if e.servers == "all" else list(e.servers)
        factor = e.factors.get(SERVER)
        if isinstance(factor, list):
            wanted += [str(v) for v in factor]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            key = "servers" if e.servers != "all" and set(unknown) & set(e.servers) else "factors.server"
            raise ParamsError(f"{shown}: {where(i, e, key)}: expected servers among {names}; got unknown {unknown}")
        base = e.baseline.get(SERVER)
        if base is not None and str(base) not in ("oldest", "newest", *names):
            raise ParamsError(
                f"{shown}: {where(i, e, 'baseline.server')}: expected oldest, newest or one of {names}; got {base!r}"
            )
        if SERVER in e.factors and len(experiment_installs(e, installs)) + len(externals) < 2 and factor == "all":
            raise ParamsError(
                f"{shown}: {where(i, e, 'factors.server')}: expected at least two servers to compare; "
                f"this machine has {names}"
            )


def has_setting(inst, folder: Path, run_as, name: str) -> bool:
    """Whether an install knows setting `name`: `postgres -C name` (its --describe-config leaves some out, e.g.
    application_name)."""
    out = subprocess.run(
        [str(inst.tool("postgres")), "-D", str(folder), "-C", name],
        capture_output=True,
        text=True,
        timeout=30,
        **run_as.popen_kwargs(),
    )
    return out.returncode == 0


def _entries(i: int, e: Experiment) -> list[tuple[str, str, object]]:
    out = [(where(i, e, f"settings.{k}"), k, v) for k, v in e.settings.items()]
    for k, values in e.setting_factors.items():
        out += [(where(i, e, f"factors.{k}[{j}]"), k, v) for j, v in enumerate(values)]
    return out


def check_settings(experiments: list[Experiment], shown, installs: list) -> None:
    """Each setting against the installs that know its name (`postgres -C`, in a throwaway folder); a name that no
    install of the experiment knows is an error, one that only some lack is not (`unavailable`)."""
    from ...core.servers import osuser, reach

    if not installs or not any(_entries(i, e) for i, e in enumerate(experiments)):
        return
    run_as = osuser.server_user()
    folder = pc.config_folder(run_as)
    try:
        runnable = {x.name: reach.server_install(x, run_as) for x in installs}
        for i, e in enumerate(experiments):
            mine = experiment_installs(e, installs)
            for key, name, value in _entries(i, e):
                having = [x for x in mine if "." in name or has_setting(runnable[x.name], folder, run_as, name)]
                if not having:
                    raise ParamsError(
                        f"{shown}: {key}: expected a setting a server of this experiment has; none of "
                        f"{[x.name for x in mine]} knows {name!r}"
                    )
                reasons = {
                    x.name: pc.postgres_c(runnable[x.name], folder, run_as, [(key, name, value)]) for x in having
                }
                optional = (name.lower(), str(value).lower()) in BUILD_OPTIONAL
                if all(r is not None for r in reasons.values()) and not optional:  # else a typo
                    x = having[0]
                    raise ParamsError(
                        f"{shown}: {key}: expected a value that a server of this experiment accepts; "
                        f"got {value!r}: {reasons[x.name]} ({x.name}, PostgreSQL {x.major}."
                        f"{x.minor})"
                    )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def refused_values(e: Experiment, inst) -> dict[str, str]:
    """'name=value' -> why, for each factor value the install refuses (io_method=io_uring in a build without
    liburing): those cells are not testable on it. The install's `postgres -C`, no server started."""
    from ...core.servers import osuser, reach

    run_as = osuser.server_user()
    folder = pc.config_folder(run_as)
    out = {}
    try:
        runnable = reach.server_install(inst, run_as)
        for k, values in e.setting_factors.items():
            if "." in k or not has_setting(runnable, folder, run_as, k):
                continue
            for value in values:
                reason = pc.postgres_c(runnable, folder, run_as, [(k, k, value)])
                if reason is not None:
                    out[f"{k}={value}"] = f"this server does not accept {k}={value}: {reason}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def unavailable(e: Experiment, known: set[str]) -> dict[str, str]:
    """The experiment's settings a server lacks, by name -> why (the cells that need them are not testable)."""
    names = set(e.settings) | set(e.setting_factors)
    return {n: f"this server has no setting {n}" for n in sorted(names) if "." not in n and n.lower() not in known}


def data_bytes(e: Experiment) -> tuple[str, float]:
    """(the database's key, its size on disk): datasets of the same key are one database, loaded once."""
    d = e.data
    if d.ssb is not None:
        return f"ssb-{d.ssb.sf:g}-{d.ssb.seed}", pc.EMPTY_DB + d.ssb.sf * pc.SSB_PER_SF
    if d.pgbench is not None:
        return f"pgbench-{d.pgbench.scale}", pc.EMPTY_DB + d.pgbench.scale * pc.PGBENCH_PER_SCALE
    return f"sql-{e.name}", pc.EMPTY_DB  # a setup script's size is not known before it runs


def check_disk(experiments: list[Experiment], shown, installs: list) -> None:
    if not installs or not experiments:
        return
    parts: dict[str, tuple[int, float]] = {}  # database key -> (first experiment using it, bytes on every server)
    for i, e in enumerate(experiments):
        key, size = data_bytes(e)
        total = size * max(len(experiment_installs(e, installs)), 1)
        parts[key] = (parts.get(key, (i, 0.0))[0], max(total, parts.get(key, (i, 0.0))[1]))
    need = sum(size for _, size in parts.values()) + pc.CLUSTER_OVERHEAD * len(installs)
    folder, free = pc.free_space(pc.clusters_folder())
    if need > free:
        i, _ = max(parts.values(), key=lambda x: x[1])
        e = experiments[i]
        raise ParamsError(
            f"{shown}: {where(i, e, 'data')}: expected data that fits on disk; the experiments would "
            f"write about {pc.human_size(need)} but {folder} has {pc.human_size(free)} free"
        )


def check(params, shown, installs: list | None = None) -> None:
    """Every check above, in order of cost; `installs`: the run's (params_checks' selection when None)."""
    experiments = list(getattr(params, "experiments", []) or [])
    if not experiments:
        return
    check_files(experiments, shown)
    from .pgbench_checks import check_files as check_scripts  # pgbench's weighted scripts

    check_scripts(experiments, shown)
    if installs is None:
        installs = pc.selected_installs(params, shown)
    check_servers(experiments, shown, installs, [x.name for x in params.servers.external])
    check_settings(experiments, shown, installs)
    check_disk(experiments, shown, installs)

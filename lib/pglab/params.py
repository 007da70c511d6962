"""Run parameters: `params/*.yaml`, validated before any server starts.

Every problem is reported as one message naming the file, the key and what was expected, e.g.
`params/quick.yaml: servers.installs[0].bin_dir: expected a folder with PostgreSQL's postgres, initdb and
pg_ctl; got '/opt/nope'`. The schema is checked first (this module); then, unless `check_servers=False`,
what needs the machine: binaries, dsns, every setting against each selected server's own rules, and the
disk space the run will fill (`params_checks`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import ValidationError, field_validator

from .core import paths
from .core.config import CommonParams, ParamsError, check_server_names, messages, read_yaml, valid_keys
from .studies import STUDIES
from .studies.auto_explain.params import AutoExplainParams
from .studies.experiments.params import Experiment, check_names
from .studies.jit_operators.params import JitOperatorsParams
from .studies.parallel_index.params import ParallelIndexParams
from .studies.partitioning.params import PartitioningParams
from .studies.pgbench.params import PgbenchParams
from .studies.ssb.params import SsbParams

# the studies' params sections, in run order (each a field of Params below: a test holds the two in step)
SECTIONS = tuple(s.params_key for s in STUDIES if s.params_key)


class Params(CommonParams):
    """A run's params: the common keys (core.config.CommonParams) and one section per study."""

    SECTIONS: ClassVar[tuple[str, ...]] = SECTIONS

    ssb: SsbParams = SsbParams()
    pgbench: PgbenchParams = PgbenchParams()
    auto_explain: AutoExplainParams = AutoExplainParams()
    jit_operators: JitOperatorsParams = JitOperatorsParams()
    parallel_index: ParallelIndexParams = ParallelIndexParams()
    partitioning: PartitioningParams = PartitioningParams()
    experiments: list[Experiment] = []  # the user's own (studies/experiments): not a section, a list

    @field_validator("experiments")
    @classmethod
    def _experiment_names(cls, v: list[Experiment]) -> list[Experiment]:
        return check_names(v)


def load(path: str | Path, check_servers: bool = True) -> Params:
    """Read and validate a params file; ParamsError with file, key and expectation on any problem."""
    path = paths.resolve(path)
    shown = path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path
    raw = read_yaml(path, shown)
    if "source" in raw:  # the model's own record of the file, not a key of the file
        raise ParamsError(f"{shown}: source: unknown key; expected one of: {', '.join(valid_keys((), Params))}")
    try:
        params = Params.model_validate(raw | {"source": str(shown)}, context={"params_dir": path.parent})
    except ValidationError as e:
        raise ParamsError("\n".join(messages(e, shown, Params, raw))) from None
    check_server_names(params, shown)
    if check_servers:
        from .core.run.params_checks import check_machine

        check_machine(params, shown)
        if params.experiments:
            from .studies.experiments.checks import check

            check(params, shown)
    return params

"""The one list of the run's stages, in the order `make report` runs their notebooks (`STUDIES`): the two that
record what the studies need (the environment, the SSB load) as plain `Stage`s, then every study's `Study`
(pglab.studies.base), exported by its package as STUDY. Everything that goes over the studies iterates this
tuple: params' sections, derive, the report's sections, setups and time estimate, the driver's notebooks,
pyproject's import contracts (a test holds them to it).

A derive function is `derive(store, params) -> {table name: DataFrame}`: `store` the run's RunStore,
`params` the run's params (data/raw/<run>/params.json). It reads no server, no derived folder and nothing
of the machine it runs on; what a stage saw on a live server the stage recorded into the raw store.
A table a stage writes only in some runs (every server skipped, one server only) is left out of the dict."""

from __future__ import annotations

from .auto_explain import STUDY as AUTO_EXPLAIN
from .base import Stage, Study, prefixed
from .jit_operators import STUDY as JIT_OPERATORS
from .parallel_index import STUDY as PARALLEL_INDEX
from .partitioning import STUDY as PARTITIONING
from .pgbench import STUDY as PGBENCH
from .ssb import STUDY as SSB

ENVIRONMENT = Stage(
    "environment",
    "00_environment",
    prefixed("environment", "machine servers settings timing"),
    "pglab.pgtools.environment:derive",
    "pglab.pgtools.environment:estimate_s",
)
SSB_LOAD = Stage(
    "ssb_load",
    "10_ssb_load",
    ("ssb_load_skipped", "ssb_load", "ssb_selectivity"),
    "pglab.studies.ssb.derive:load",
    "pglab.studies.ssb.estimate:load_s",
)

# the user's own experiments from params (`experiments:`): derived like a stage, judged in their own section
EXPERIMENTS = Stage(
    "experiments",
    "80_experiments",
    prefixed(
        "experiments",
        "setup cells runs summary paired noise verdicts plans queries errors latency timeline server_counters "
        "telemetry",
    ),
    "pglab.studies.experiments.derive:derive",
    "pglab.studies.experiments.run:estimate_s",
)

STUDIES: tuple[Stage | Study, ...] = (
    ENVIRONMENT,
    SSB_LOAD,
    SSB,
    PGBENCH,
    AUTO_EXPLAIN,
    JIT_OPERATORS,
    PARALLEL_INDEX,
    PARTITIONING,
    EXPERIMENTS,
)


def studies(stages: tuple[Stage | Study, ...] = STUDIES) -> list[Study]:
    """The studies alone (what has claims and a report section), in run order."""
    return [s for s in stages if isinstance(s, Study)]


def report_order(stages: tuple[Stage | Study, ...] = STUDIES) -> list[Study]:
    """The report's sections: in the order of the source studies they reproduce (S1 … S5, docs/studies.md),
    run order among those of one source."""
    return sorted(studies(stages), key=lambda s: s.section.sources[0])


def by_name(name: str) -> Stage | Study:
    for s in STUDIES:
        if s.name == name:
            return s
    raise KeyError(f"no study {name!r}; expected one of {[s.name for s in STUDIES]}")


def every_table() -> list[str]:
    return [t for s in STUDIES for t in s.tables]

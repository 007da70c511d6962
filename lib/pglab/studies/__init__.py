"""The stages of a run in report order: per notebook, the derived tables it writes and the function that
derives them from the run's raw store alone (`python -m pglab derive` runs them all; each notebook calls its
own and writes what it returns).

A derive function is `derive(store, params) -> {table name: DataFrame}`: `store` the run's RunStore,
`params` the run's params (data/raw/<run>/params.json). It reads no server, no derived folder and nothing
of the machine it runs on; what a stage saw on a live server the stage recorded into the raw store.
A table a stage writes only in some runs (every server skipped, one server only) is left out of the dict."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from ..core.config import CommonParams
    from ..core.store import RunStore


@dataclass(frozen=True)
class Study:
    name: str
    notebook: str  # notebooks/<notebook>.py
    tables: tuple[str, ...]  # every table the stage may write, in the order it writes them
    function: str  # "pglab.module:function", imported when called (the registry imports no study)
    report: str | None = None  # the study's report section module, imported when the report asks for it
    estimate: str | None = None  # the study's part of make report's time estimate (pglab.report.estimate)

    def derive(self, store: RunStore, params: CommonParams) -> dict[str, pl.DataFrame]:
        module, name = self.function.split(":")
        out = getattr(importlib.import_module(module), name)(store, params)
        unknown = sorted(set(out) - set(self.tables))
        if unknown:
            raise ValueError(f"{self.name}: {self.function} returned tables the registry does not list: {unknown}")
        return out


def _names(prefix: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{prefix}_{n}" for n in names)


STUDIES: tuple[Study, ...] = (
    Study("environment", "00_environment",
          _names("environment", "machine", "servers", "settings", "timing"),
          "pglab.pgtools.environment:derive"),
    Study("ssb_load", "10_ssb_load", ("ssb_load_skipped", "ssb_load", "ssb_selectivity"),
          "pglab.studies.ssb.derive:load"),
    Study("ssb", "20_ssb", _names("ssb", "skipped", "executions", "summary", "speedup", "jit", "plans", "checksums",
                                  "availability", "sweep", "fingerprints", "paired", "versions_paired", "aa",
                                  "noise", "drift", "sweep_paired", "answers", "plans_study_workers",
                                  "plans_scaled", "versions", "sweep_summary", "measurements"),
          "pglab.studies.ssb.derive:queries", "pglab.studies.ssb.report", "pglab.studies.ssb.estimate"),
    Study("pgbench", "30_pgbench", _names("pgbench", "skipped", "runs", "init", "init_steps", "select_only",
                                          "scaling", "series", "series_sizes", "init_summary",
                                          "select_only_summary", "scaling_summary", "series_summary",
                                          "series_trend", "versions", "timeseries", "settings", "servers", "paired",
                                          "noise", "drift", "no_vacuum", "version_curve", "measurements"),
          "pglab.studies.pgbench.derive:derive", "pglab.studies.pgbench.report"),
    Study("auto_explain", "40_auto_explain", _names("auto_explain", "skipped", "latencies", "summary", "ratios",
                                                    "study", "log_checks", "log_summary", "plans", "timer",
                                                    "servers", "noise", "drift", "findings", "measurements"),
          "pglab.studies.auto_explain.derive:derive", "pglab.studies.auto_explain.report"),
    Study("jit_operators", "50_jit_operators", _names("jit_operators", "skipped", "setup", "conditions", "settings",
                                                      "runs", "summary", "reduction", "results", "plans",
                                                      "jit_time", "paired", "overall", "noise", "drift",
                                                      "findings", "measurements"),
          "pglab.studies.jit_operators.derive:derive", "pglab.studies.jit_operators.report"),
    Study("parallel_index", "60_parallel_index", _names("parallel_index", "skipped", "builds", "summary", "speedup",
                                                        "suite_speedup", "paired", "paired_suite", "size_paired",
                                                        "noise", "drift", "setup", "measurements"),
          "pglab.studies.parallel_index.derive:derive", "pglab.studies.parallel_index.report"),
    Study("partitioning", "70_partitioning", _names("partitioning", "skipped", "setup", "partitions", "executions",
                                                    "summary", "speedup", "results", "plans", "gathers", "planner",
                                                    "paired", "noise", "drift", "measurements"),
          "pglab.studies.partitioning.derive:derive", "pglab.studies.partitioning.report"),
)  # fmt: skip


def by_name(name: str) -> Study:
    for s in STUDIES:
        if s.name == name:
            return s
    raise KeyError(f"no study {name!r}; expected one of {[s.name for s in STUDIES]}")


def every_table() -> list[str]:
    return [t for s in STUDIES for t in s.tables]


def report_section(section: str) -> ModuleType:
    """The report section `section` ("<study>_report"): the module the study's registry entry names."""
    for s in STUDIES:
        if s.report and f"{s.name}_report" == section:
            return importlib.import_module(s.report)
    known = [f"{s.name}_report" for s in STUDIES if s.report]
    raise KeyError(f"no report section {section!r}; expected one of {known}")


def estimate_module(name: str) -> ModuleType:
    """Study `name`'s estimate module (Study.estimate), for the report's time estimate."""
    study = by_name(name)
    if study.estimate is None:
        raise KeyError(f"study {name!r} has no estimate module")
    return importlib.import_module(study.estimate)

"""What a study is to the rest of the kit: one `Study` object per study package (`studies/<x>/__init__.py` exports
it as STUDY), listed once in `pglab.studies.STUDIES`. The report, derive, the time estimate, the disk check and
the notebooks all go through it; none names a study's modules.

Every study package has the same modules, found by name: run.py (`run_stage(session) -> StageResult`, on
servers), derive.py (`derive(store, params) -> tables`, from the raw store alone), verdicts.py (the claims under
the one rule, `pglab.core.stats.verdicts`), charts.py, report.py (`method`, `charts`, `findings` and the TABLES the
section reads), estimate.py (`estimate_s(params, servers)`: make report's time model) and params.py. The Study
object imports them when called, so `import pglab.studies` stays cheap.

A stage that is not a study (the environment, the SSB load) is a `Stage`: a notebook and its derive function."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from ..core.config import CommonParams
    from ..core.derived import Tables
    from ..core.run.session import Session
    from ..core.run.stage import StageResult
    from ..core.servers.servers import Server
    from ..core.stats.builds import Comparison
    from ..core.stats.verdicts import Regime
    from ..core.store import RunStore


@dataclass(frozen=True)
class Section:
    """A study's section of the report, and how the study's setup differs from ours."""

    title: str
    sources: tuple[str, ...]  # the source studies it sets beside our data ("S1", "S4": docs/studies.md)
    question: str
    theirs: dict[str, str]  # aspect -> the study's setup (scale, cores, versions, cache)
    ours_scale: tuple[str, str, str] | None  # (table, column, how to say it: "{}" gets the values)
    ours_cache: str
    why: str  # why the differences matter for reading the verdicts


def _call(target: str, *args: Any) -> Any:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)(*args)


def _check_tables(name: str, out: dict, tables: tuple[str, ...]) -> dict:
    unknown = sorted(set(out) - set(tables))
    if unknown:
        raise ValueError(f"{name}: derive returned tables the registry does not list: {unknown}")
    return out


@dataclass(frozen=True)
class Stage:
    """A notebook of the run that measures no claim: it records what the studies need (derive only)."""

    name: str
    notebook: str  # notebooks/<notebook>.py
    tables: tuple[str, ...]  # every table the stage may write, in the order it writes them
    derive_function: str  # "pglab.module:function" (store, params) -> tables, imported when called
    estimate_function: str  # "pglab.module:function" (params, servers) -> seconds, imported when called
    params_key: str | None = None

    def derive(self, store: RunStore, params: CommonParams) -> dict[str, pl.DataFrame]:
        return _check_tables(self.name, _call(self.derive_function, store, params), self.tables)

    def estimate_s(self, params: CommonParams, servers: list[Server]) -> float:
        return _call(self.estimate_function, params, servers)


@dataclass(frozen=True)
class Study:
    """One study: its notebook, params section, tables and report section, and what it does, through its
    package's modules (imported when first called)."""

    name: str  # the package under pglab.studies, the tables' prefix and the params section
    notebook: str  # notebooks/<notebook>.py
    tables: tuple[str, ...]  # every table derive may write, in the order it writes them
    section: Section
    params_key: str = field(default="")  # the params section; "" -> name
    regimes: tuple[Regime, ...] = ()  # sizes below which claims are not testable here (methodology rule 11)
    comparisons: tuple[Comparison, ...] = ()  # findings that compare servers: scored only between builds alike

    def __post_init__(self):
        if not self.params_key:
            object.__setattr__(self, "params_key", self.name)
        # every study's stage is sampled (`run`) and judged once (`record_findings`)
        extra = tuple(t for t in (f"{self.name}_machine", self.findings_name) if t not in self.tables)
        object.__setattr__(self, "tables", (*self.tables, *extra))

    @property
    def findings_name(self) -> str:
        """The table the study's verdicts are stored in, judged once (`record_findings`) and read by the report,
        `make compare`, `make stability` and the results database."""
        return f"{self.name}_findings"

    def module(self, name: str) -> ModuleType:
        """The study's module `name` (run, derive, verdicts, charts, report, estimate, params)."""
        return importlib.import_module(f"{__package__}.{self.name}.{name}")

    def run_stage(self, session: Session) -> StageResult:
        """The measuring itself: the package's run.run_stage."""
        return self.module("run").run_stage(session)

    def derive_tables(self, store: RunStore, params: CommonParams) -> dict[str, pl.DataFrame]:
        """The study's own tables: the package's derive.derive."""
        return self.module("derive").derive(store, params)

    def run(self, session: Session) -> StageResult:
        """Measure on the session's started servers, recording into its raw store (resumable); the machine is
        sampled from /proc meanwhile (`system_sampler`: derived into <name>_machine), kept even when it fails."""
        import time

        from ..core.run import system_sampler

        started, sampler = time.time(), system_sampler.SystemSampler()
        self._record_unbuilt(session)
        try:
            with sampler:
                return self.run_stage(session)
        finally:
            system_sampler.save_stage(sampler, session.store, self.name, started)

    def _record_unbuilt(self, session: Session) -> None:
        """An optional source build for this study that this machine could not make (`installs.unbuilt`): a
        recorded skip of the study's experiment, so its section and claims say why that server is missing."""
        from ..core.installs import installs
        from ..core.run import outcomes

        params = getattr(session, "params", None)  # a stage driven without params (a test's) has none to record
        missing = installs.unbuilt(params.servers, self.params_key) if params is not None else {}
        if not missing:  # the common case: nothing to record, no module to import
            return
        derive = self.module("derive")
        experiment = getattr(derive, "EXPERIMENT", None) or next(iter(getattr(derive, "EXPERIMENTS", ())), None)
        for name, why in missing.items():
            if experiment is not None:
                print(f"SKIPPED {name}: {why}")
                outcomes.skip(session.store, experiment, name, why)

    def derive(self, store: RunStore, params: CommonParams) -> dict[str, pl.DataFrame]:
        """Every table of the study from the raw store alone: no server, no derived folder; <name>_machine too
        when the run sampled the machine (runs before that have none, and derive as they did)."""
        from ..core.run import system_sampler
        from ..core.stats import hosts

        # priors and re-run floors are those of the host kind the run was measured on, not the deriving machine's
        with hosts.using(hosts.of_store(store)):
            out = _check_tables(self.name, self.derive_tables(store, params), self.tables)
        system = system_sampler.stage_table(store, self.name)
        # a stage that measured on no server leaves no tables (the report then says it was not run): nor this one
        measured = any(not name.endswith("_skipped") for name in out)
        return out | ({f"{self.name}_machine": system} if system.height and measured else {})

    @property
    def report_tables(self) -> tuple[str, ...]:
        """The tables the report section needs, its findings among them: without them the section says the study
        was not run."""
        own = self.module("report").TABLES
        return own if self.findings_name in own else (*own, self.findings_name)

    def judge(self, tables: Tables) -> pl.DataFrame:
        """The findings: every claim of the study under the one rule (`pglab.core.stats.verdicts`), the claims measured
        below their regime (`regimes`) not testable here, those comparing servers built otherwise than in their
        version (`comparisons`, `pglab.core.stats.builds`) not comparable. Called once per run, by `record_findings`:
        everything else reads the stored table (`findings`)."""
        from ..core.stats import hosts, verdicts
        from ..core.stats.builds import apply_comparability

        # the measuring host's kind (its priors and floors) and what a round, cluster or run of the stage costs
        # (the minutes an undetermined claim's hint names)
        with hosts.using(hosts.of_tables(tables)), verdicts.costs(verdicts.stage_cost(tables, self.name)):
            found = verdicts.apply_regimes(self.module("report").findings(tables), self.regimes, tables)
        return apply_comparability(found, self.comparisons, tables)

    def was_run(self, tables: Tables) -> bool:
        """Whether the run holds the tables the study's section and judge read (without them: not run)."""
        return all(t in tables for t in self.report_tables if t != self.findings_name)

    def record_findings(self, profile: str, root: Path | None = None) -> pl.DataFrame | None:
        """Judge the study once from its derived tables as written (and the earlier stages') and store the verdicts
        as `<name>_findings` beside them; None (nothing written) where the study was not run. The notebooks call it
        after writing their tables, `python -m pglab derive` after each stage's: the same inputs, the same bytes."""
        from ..core import derived

        tables = derived.Tables(profile, root)
        if not self.was_run(tables):
            return None
        found = self.judge(tables)
        derived.write({self.findings_name: found}, profile, root=root)
        return found

    def findings(self, tables: Tables) -> pl.DataFrame:
        """The stored verdicts (`record_findings`); an empty findings table where the study was not run."""
        from ..core.stats import findings

        return tables[self.findings_name] if self.findings_name in tables else findings.table([])

    def answers(self, tables: Tables) -> list[str]:
        """Plain sentences a DBA can act on, for the report's first screen (`report.answers(tables, findings)`),
        each with its scale or setup; [] where the study has none."""
        fn = getattr(self.module("report"), "answers", None)
        return fn(tables, self.findings(tables)) if fn else []

    def method(self, tables: Tables) -> str:
        """How it was measured (Markdown)."""
        return self.module("report").method(tables)

    def charts(self, tables: Tables) -> list:
        return self.module("report").charts(tables)

    def estimate_s(self, params: CommonParams, servers: list[Server]) -> float:
        """Seconds the study's notebook should take on `servers` (make report's estimate, `core.estimate`)."""
        return self.module("estimate").estimate_s(params, servers)


def prefixed(prefix: str, names: str) -> tuple[str, ...]:
    """("<prefix>_a", "<prefix>_b") from "a b": a study's tables all carry its name."""
    return tuple(f"{prefix}_{n}" for n in names.split())

"""Experiments declared in params (issue 33): `experiments:` is a list, each a question of the user's own, measured
with the studies' machinery (interleaved rounds, warm-ups, an A/A control, paired intervals, the one verdict rule).

    experiments:
      - name: work_mem_reports
        question: Does work_mem 64MB speed up my reporting queries?
        data: {ssb: {sf: 0.05}}            # or {pgbench: {scale: 10}}, or {sql: setup.sql}: once per cluster
        workload: {sql: queries/*.sql}     # or {pgbench: {builtin: select-only, clients: 2, duration_s: 5}}
                                           # or {pgbench: {scripts: [tpcb-like@9, my.sql@1], rate: 200,
                                           #               protocol: prepared}}
        servers: all                       # or [pg18, pg15]
        factors: {work_mem: [4MB, 64MB]}   # settings, and/or {server: all | [pg15, pg18]}; pgbench workloads
                                           # also clients, threads, scale, rate (-R) and protocol (-M)
        baseline: {work_mem: 4MB}          # a value per factor; server: oldest | newest | <name>
        expect: {ratio: 0.8}               # optional: B / A of the measured value (time, or tps for pgbench)
        rounds: 10

Paths are relative to the params file. This module is imported by `pglab.params`: it checks the schema only;
what needs the machine (files, settings each server accepts, disk) is `checks.py`, before any server starts."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ...core.paramtypes import SafeName, SettingName, Settings, SettingValue, Strict

SERVER = "server"  # the factor that compares servers rather than settings
# pgbench's own options as factors of a pgbench workload: they go on pgbench's command line, never into a server's
# configuration (scale: the data, one database per value)
CLIENTS, THREADS, SCALE, RATE, PROTOCOL = "clients", "threads", "scale", "rate", "protocol"
PGBENCH_FACTORS = (CLIENTS, THREADS, SCALE, RATE, PROTOCOL)
PROTOCOLS = ("simple", "extended", "prepared")  # pgbench -M
BUILTINS = ("select-only", "tpcb-like", "simple-update")  # pgbench -b
AA_SUFFIX = "~aa"  # the A/A copy of the baseline condition: same settings, its own label


class SsbData(Strict):
    sf: float = Field(default=0.05, gt=0, le=100)
    seed: int = 1


class PgbenchData(Strict):
    scale: int = Field(default=1, ge=1, le=10_000)


class Data(Strict):
    """Exactly one kind of data, loaded once per server (kept for the next run when it is already there)."""

    ssb: SsbData | None = None
    pgbench: PgbenchData | None = None
    sql: str | None = None  # a setup script, made absolute when loaded

    @model_validator(mode="after")
    def _one(self):
        given = [k for k in ("ssb", "pgbench", "sql") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"expected one of ssb, pgbench or sql; got {given}")
        return self

    @field_validator("sql")
    @classmethod
    def _absolute(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _absolute(v, info)

    @property
    def kind(self) -> str:
        return next((k for k in ("ssb", "pgbench", "sql") if getattr(self, k) is not None), "none")


class PgbenchWorkload(Strict):
    builtin: Literal["select-only", "tpcb-like", "simple-update"] | None = None
    script: str | None = None  # a custom script, made absolute when loaded
    # several scripts, each `name@weight` (pgbench -b builtin@weight / -f file@weight; no @: weight 1); a name
    # that is not a builtin is a file, made absolute when loaded
    scripts: list[str] | None = Field(default=None, min_length=1)
    clients: int = Field(default=1, ge=1, le=1000)
    threads: int = Field(default=1, ge=1, le=1000)
    duration_s: int = Field(default=5, ge=1, le=3600)  # pgbench -T takes whole seconds
    rate: float | None = Field(default=None, gt=0)  # -R: transactions per second, all clients together
    protocol: Literal["simple", "extended", "prepared"] = "simple"  # -M

    @model_validator(mode="after")
    def _one(self):
        if sum(x is not None for x in (self.builtin, self.script, self.scripts)) != 1:
            raise ValueError("expected exactly one of builtin, script or scripts")
        return self  # threads against clients: with the factors (pgbench_params.check_factors)

    @field_validator("script")
    @classmethod
    def _absolute(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _absolute(v, info)

    @field_validator("scripts")
    @classmethod
    def _weighted(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if v is None:
            return v
        out = []
        for i, spec in enumerate(v):
            name, weight = split_weight(spec, f"scripts[{i}]")
            out.append(f"{name if name in BUILTINS else _absolute(name, info)}@{weight}")
        return out

    def weighted(self) -> list[tuple[str, int]]:
        """(builtin name or script path, weight) of every script the workload runs."""
        if self.scripts is not None:
            return [split_weight(x, "scripts") for x in self.scripts]
        return [(self.builtin or self.script, 1)]


def split_weight(spec: str, key: str) -> tuple[str, int]:
    """'name@weight' -> (name, weight); no @: weight 1. A weight must be a whole number from 1 (pgbench's -f/-b)."""
    name, at, weight = str(spec).rpartition("@")
    if not at:
        name, weight = str(spec), "1"
    if not name.strip():
        raise ValueError(f"{key}: expected script@weight (a builtin or a file); got {spec!r}")
    if not weight.isdigit() or int(weight) < 1:
        raise ValueError(f"{key}: expected a weight that is a positive whole number; got {weight!r} in {spec!r}")
    return name, int(weight)


class Workload(Strict):
    sql: str | list[str] | None = None  # files or globs, made absolute when loaded; one statement a file
    pgbench: PgbenchWorkload | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.sql is None) == (self.pgbench is None):
            raise ValueError("expected exactly one of sql or pgbench")
        return self

    @field_validator("sql")
    @classmethod
    def _absolute(cls, v, info: ValidationInfo):
        if v is None:
            return v
        return [_absolute(x, info) for x in ([v] if isinstance(v, str) else v)]

    @property
    def kind(self) -> str:
        return "sql" if self.sql is not None else "pgbench"


class Expect(Strict):
    """The hypothesis: B / A of the measured value (time for SQL: 0.8 = 20 % faster; tps for pgbench: 1.2 =
    20 % more), scored with the one rule and its declared tolerance (`core.verdicts.verdict`)."""

    ratio: float = Field(gt=0)

    @field_validator("ratio")
    @classmethod
    def _not_one(cls, v: float) -> float:
        if v == 1:
            raise ValueError("expected a ratio other than 1 (an effect); 'no effect' is what the A/A control shows")
        return v


class Experiment(Strict):
    name: SafeName
    question: str = Field(min_length=1)
    data: Data = Data()
    workload: Workload
    servers: Literal["all"] | list[SafeName] = "all"
    factors: dict[SettingName, list[SettingValue] | Literal["all"]] = Field(min_length=1)
    baseline: dict[SettingName, SettingValue] = {}
    expect: Expect | None = None
    settings: Settings = {}  # held fixed in every condition (server or session level, as each setting is)
    rounds: int = Field(default=10, ge=2, le=1000)
    warmups: int = Field(default=1, ge=0, le=100)
    shuffle_seed: int = 1
    timeout_s: float = Field(default=60, gt=0, le=3600)  # per SQL statement

    @model_validator(mode="after")
    def _factors(self):
        for k, v in self.factors.items():
            if v == "all" and k != SERVER:
                raise ValueError(f"factors.{k}: 'all' is for the server factor only; give a list of values")
            if v != "all" and (len(v) < 2 or len(set(map(str, v))) != len(v)):
                raise ValueError(f"factors.{k}: expected at least two different values; got {v!r}")
        unknown = sorted(set(self.baseline) - set(self.factors))
        if unknown:
            raise ValueError(f"baseline: {unknown} are not factors ({sorted(self.factors)})")
        for k, v in self.baseline.items():
            values = self.factors[k]
            if k == SERVER:
                continue  # oldest / newest / a name: resolved against the servers when the run begins
            if str(v) not in map(str, values):
                raise ValueError(f"baseline.{k}: expected one of the factor's values {values}; got {v!r}")
        return self

    @model_validator(mode="after")
    def _pgbench_factors(self):
        from .pgbench_params import check_factors

        check_factors(self)
        return self

    @property
    def setting_factors(self) -> dict[str, list]:
        """The factors that are server settings (not the server, not pgbench's own options)."""
        return {k: v for k, v in self.factors.items() if k != SERVER and k not in PGBENCH_FACTORS}

    @property
    def condition_factors(self) -> dict[str, list]:
        """The factors a condition is made of: settings and pgbench's options (the server is not a condition)."""
        return {k: v for k, v in self.factors.items() if k != SERVER}

    def conditions(self) -> dict[str, dict]:
        """Every combination of the condition factors' values: label -> settings, the baseline first, then its A/A
        copy (the baseline's settings under a label of its own), then the others in the factors' order."""
        f = self.condition_factors
        combos = [dict(zip(f, vs, strict=True)) for vs in itertools.product(*f.values())] if f else [{}]
        base = self.baseline_settings()
        out = {label(base): base, label(base) + AA_SUFFIX: base}
        out |= {label(c): c for c in combos if c != base}
        return out

    def baseline_settings(self) -> dict:
        return {k: self.baseline.get(k, v[0]) for k, v in self.condition_factors.items()}

    def baseline_condition(self) -> str:
        return label(self.baseline_settings())


def label(settings: dict) -> str:
    """A condition's name: its settings as `k=v` joined by ', ' ('baseline' when no setting varies)."""
    return ", ".join(f"{k}={_text(v)}" for k, v in settings.items()) or "baseline"


def _text(v) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def _absolute(v: str | None, info: ValidationInfo) -> str | None:
    # resolved once here, as servers.installs' bin_dir: papermill runs the notebooks in notebooks/
    if v is None:
        return v
    base = (info.context or {}).get("params_dir")
    return str(Path(base) / v) if base and not Path(v).is_absolute() else v


def check_names(experiments: list[Experiment]) -> list[Experiment]:
    names = [e.name for e in experiments]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"expected each experiment name once; {twice} more than once")
    return experiments


def setting_dicts(experiments: list[Experiment]) -> dict[str, dict]:
    """Every setting value of the experiments by its params key, for the `postgres -C` check: each factor value
    on its own (one dict per value, so the key names the value that fails), and the fixed settings."""
    out: dict[str, dict] = {}
    for i, e in enumerate(experiments):
        if e.settings:
            out[f"experiments[{i}].settings"] = dict(e.settings)
        for k, values in e.setting_factors.items():
            for j, v in enumerate(values):
                out[f"experiments[{i}].factors.{k}[{j}]"] = {k: v}
    return out

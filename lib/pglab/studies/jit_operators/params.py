"""Study S4 test 1
(JIT per operator): a generated numeric table, SELECT <agg>(col) per operator, JIT off vs on:
the `jit_operators:` section of params and the study's reference numbers.

The source (S4 of docs/studies.md, PGECons WG1 2018, PostgreSQL 11 on a 36-core Xeon) says only: simple queries with
arithmetic and aggregates ("SELECT sum(col1) FROM ..."), pg_prewarm beforehand, run through psql. It names
neither the table, its size, nor the JIT thresholds or parallel settings. What we chose instead is here, in
the defaults, and recorded with the data. The stage: `jit_operators_run` (table, interleaved runs, plans),
`jit_operators_results` (derived tables), `jit_operators_charts`, `jit_operators_report` (the report
section and the findings).

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ...core.paramtypes import SettingValue, Strict, setting_name_problem

EXPERIMENT = "jit_operators"
SCHEMA = "public"
TABLE = "jit_ops"
# always schema-qualified: an unqualified name follows search_path, and on a server the kit did not create
# "$user".jit_ops (someone else's table) comes before public.jit_ops
QUALIFIED = f"{SCHEMA}.{TABLE}"

# operator -> (the aggregate in `SELECT <agg> FROM jit_ops`, its label in the study's table). The seed's
# "mul" and "sub" are arithmetic inside an aggregate: sum(c1 * c2), sum(c1 - c2).
OPERATORS: dict[str, tuple[str, str]] = {
    "mul": ("sum(c1 * c2)", "mul"),
    "sub": ("sum(c1 - c2)", "sub"),
    "sum": ("sum(c1)", "sum"),
    "avg": ("avg(c1)", "avg"),
    "max": ("max(c1)", "max"),
    "count": ("count(c1)", "count"),
    "count_star": ("count(*)", "count(*)"),
    "stddev": ("stddev(c1)", "stddev"),
    "var_samp": ("var_samp(c1)", "var_samp"),
}
Operator = Literal["mul", "sub", "sum", "avg", "max", "count", "count_star", "stddev", "var_samp"]

# the study's result (検証1): time reduction with JIT per operator, percent
STUDY_REDUCTION_PCT: dict[str, float] = {
    "mul": 18.2,
    "sub": 19.5,
    "sum": 25.0,
    "avg": 30.3,
    "max": 32.4,
    "count": 30.8,
    "count_star": 16.5,
    "stddev": 27.8,
    "var_samp": 27.5,
}
STUDY_SUMMARY = "JIT worked for every operator: roughly 20-30 % less time whatever the query's duration"

# the generator: deterministic, no random(); c1 cycles 1..1000, c2 a different cycle 1..997
GENERATOR = "c1 = i % 1000 + 1, c2 = (i * 7) % 997 + 1 for i in generate_series(1, rows)"


def _on_off(v):
    """YAML 1.1 reads unquoted on / off (and yes / no, true / false) as booleans: back to the names."""
    return ("on" if v else "off") if isinstance(v, bool) else v


def _as_int(v: SettingValue) -> int | None:
    try:
        return int(str(v).strip())
    except ValueError:
        return None  # not a number: PostgreSQL will say so when the condition's connection is made


def default_conditions() -> dict[str, dict[str, SettingValue]]:
    return {
        "off": {"jit": False},
        # JIT forced on; inlining and optimisation at PostgreSQL's defaults (as in 11), which a plan of our
        # size stays below: expressions and deforming compiled, not optimised
        "on": {"jit": True, "jit_above_cost": 0, "jit_inline_above_cost": 500000, "jit_optimize_above_cost": 500000},
        # everything JIT can do, as a plan over the study's (much larger) table would have got it
        "on_optimized": {"jit": True, "jit_above_cost": 0, "jit_inline_above_cost": 0, "jit_optimize_above_cost": 0},
    }


class JitOperatorsParams(Strict):
    """The `jit_operators:` section of params."""

    rows: int = Field(default=3_000_000, ge=100, le=2_000_000_000)
    column_type: Literal["integer", "bigint", "double precision", "numeric"] = "integer"
    database: str = Field(default="pglab_jit_operators", pattern=r"^[a-z0-9_]+$")  # the kit's own database
    operators: list[Operator] = list(OPERATORS)
    prewarm: bool = True  # pg_prewarm the table before measuring, as the study did
    # session setting in every condition: 0 = serial (each parallel worker would compile its own code)
    max_parallel_workers_per_gather: int = Field(default=0, ge=0, le=64)
    conditions: dict[str, dict[str, SettingValue]] = Field(default_factory=default_conditions)
    baseline: str = "off"  # reductions are 1 - condition / baseline
    # A/A control: the baseline measured a second time under its own label (`<baseline>_aa`), interleaved like
    # every condition; how far it strays from the baseline is this machine's noise floor (pglab.core.stats.noise)
    aa_control: bool = True
    study_condition: str = "on"  # the condition set beside the study's percentages in the findings
    # the time the findings and the where-the-time-goes view use: wall = client wall time as psql's \timing
    # (the study's); cpu = the backend's own CPU time (kit servers, serial only), which leaves out time spent
    # waiting for a CPU but on a shared VM still moves with other load. Both are recorded, and shown, always.
    # wall by default: the study's measure, and our CPU times stayed within ~0.4 ms of it, jumps included.
    metric: Literal["cpu", "wall"] = "wall"
    repetitions: int = Field(default=10, ge=1)
    # per round, each operator's conditions run together, `executions` passes over them (`schedule.plan_blocked`);
    # the round's value of a cell is its fastest execution (round_value: min) or the median. On a shared VM
    # a query runs ~1.6× slower in bursts of 0.5–4 s (every operator, every condition, CPU time too): the
    # fastest of 3 back-to-back executions is the query's own cost, where one execution was 30 % burst
    executions: int = Field(default=1, ge=1, le=20)
    round_value: Literal["min", "median"] = "min"
    # where the passes go: "round" = pass k over every operator before pass k+1, so one cell's executions are
    # ~10 s apart and a burst rarely covers all three; "block" = an operator's passes back to back (1-2 s apart:
    # one burst often slowed every execution of one condition, and the fastest was still burst)
    spread: Literal["round", "block"] = "round"
    # how on / off are compared: "fast" = the 10 % quantile of every execution of a cell (all rounds) over the
    # baseline's, rounds resampled together (`paired.fast_compare`): on this VM whole rounds of one condition ran
    # ~2x slow, which no per-round value survives; "round" = one value per round, ratios paired within rounds
    estimate: Literal["fast", "round"] = "fast"
    warmups: int = Field(default=1, ge=0)
    shuffle_seed: int | None = 1
    statement_timeout_s: float = Field(default=300, gt=0)

    @field_validator("database")
    @classmethod
    def _own_database(cls, v: str) -> str:
        if v == "postgres" or v.startswith("template"):
            raise ValueError(
                "expected a database of the study's own, e.g. 'pglab_jit_operators' (the table is "
                "dropped and re-created there); not postgres or template*"
            )
        return v

    @field_validator("conditions", mode="before")
    @classmethod
    def _condition_keys(cls, v):
        if not isinstance(v, dict):
            return v  # pydantic says what is wrong
        out = {}
        for name, settings in v.items():
            key = _on_off(name)
            if key in out:
                raise ValueError(f"condition {key!r} is given twice (once as {name!r})")
            out[key] = settings
        return out

    @field_validator("baseline", "study_condition", mode="before")
    @classmethod
    def _condition_name(cls, v):
        return _on_off(v)

    @field_validator("operators")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"expected a non-empty list of distinct operators among {list(OPERATORS)}")
        return v

    @field_validator("conditions")
    @classmethod
    def _names(cls, v: dict) -> dict:
        for name, settings in v.items():
            if not name.replace("_", "a").isalnum():
                raise ValueError(f"condition names are letters, digits and _; {name!r} is not")
            for key in settings:
                problem = setting_name_problem(key)  # the one rule of every settings dict in params
                if problem:
                    raise ValueError(f"condition {name!r}: {key}: {problem}")
            if not isinstance(settings.get("jit"), bool):
                raise ValueError(f"condition {name!r} must set jit: true or false")
        return v

    @model_validator(mode="after")
    def _known_conditions(self):
        if self.aa_condition in self.conditions:
            raise ValueError(f"condition {self.aa_condition!r} is the baseline's A/A control's name: rename it")
        for key in ("baseline", "study_condition"):
            if getattr(self, key) not in self.conditions:
                raise ValueError(f"{key} {getattr(self, key)!r} is not among conditions {list(self.conditions)}")
        if self.conditions[self.baseline]["jit"]:
            raise ValueError(f"the baseline condition {self.baseline!r} must have jit: false")
        if self.metric == "cpu":
            for c in self.conditions:
                workers = _as_int(self.session_settings(c)["max_parallel_workers_per_gather"])
                if workers:
                    raise ValueError(
                        f"metric: cpu counts the backend's CPU time only, not its parallel workers'; condition "
                        f"{c!r} runs with max_parallel_workers_per_gather = {workers}: expected metric: wall, "
                        "or max_parallel_workers_per_gather: 0"
                    )
        return self

    def sql(self, operator: str) -> str:
        return f"SELECT {OPERATORS[operator][0]} FROM {QUALIFIED}"

    @property
    def aa_condition(self) -> str:
        return f"{self.baseline}_aa"

    def measured_conditions(self) -> list[str]:
        """The conditions the schedule runs: params' conditions, then the A/A copy of the baseline."""
        return [*self.conditions, *([self.aa_condition] if self.aa_control else [])]

    def session_settings(self, condition: str) -> dict[str, SettingValue]:
        settings = self.conditions[self.baseline if condition == self.aa_condition else condition]
        return {"max_parallel_workers_per_gather": self.max_parallel_workers_per_gather} | settings

    def setting_dicts(self) -> dict[str, dict]:
        """Every settings dict of this section by its key under the section (checked with each server's own
        rules before any server starts)."""
        return self.session_setting_dicts()

    def session_setting_dicts(self) -> dict[str, dict]:
        """The settings dicts that go with a connection (set at its start, so no server-wide ones)."""
        return {f"conditions.{c}": s for c, s in self.conditions.items()}

    def disk_bytes(self) -> dict[str, float]:
        """What this section puts on each server's disk, by the key that decides it (params_checks.check_disk)."""
        from ...core.run.params_checks import EMPTY_DB, INT_ROW, WIDE_ROW

        row = INT_ROW if self.column_type == "integer" else WIDE_ROW
        return {"rows": EMPTY_DB + row * self.rows}


def label(operator: str) -> str:
    return OPERATORS[operator][1]

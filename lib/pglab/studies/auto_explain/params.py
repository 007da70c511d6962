"""Study S2 (auto_explain overhead): its settings and numbers, and the `auto_explain:` section of params.

The source study (S2 of docs/studies.md, PostgreSQL 14.1) ran `pgbench -c 1 -j 1` on two one-statement scripts over
`tab1(c1 int)` with 1e6 rows and compared `latency average` under auto_explain conditions. The defaults
here are its settings and conditions, plus an A/A control, on a table of 1e5 rows with 200 transactions a run
(the study's size and counts take hours: params/default.yaml). The stage: `auto_explain_setup` (settings,
table, plans per server), `auto_explain_run` (the interleaved matrix), `auto_explain_logcheck` (the proof
from the server log, read with `serverlog`), `auto_explain_results` (summaries, paired ratios, the study's
table), `auto_explain_findings` (claims, noise floor, drift, verdicts), `auto_explain_charts`.

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ...core.paramtypes import Settings, SettingValue, Strict

EXPERIMENT = "auto_explain"
NAME = r"^[A-Za-z0-9_]+$"

# postgresql.conf of the study, for every condition (logging_collector is always on in the kit's clusters; the
# study's log destination is STUDY_LOG_DESTINATION)
STUDY_SETTINGS: dict[str, SettingValue] = {
    "shared_buffers": "2GB",
    "autovacuum": False,
    "effective_cache_size": "6GB",
    "maintenance_work_mem": "512MB",
    "wal_buffers": "16MB",
    "random_page_cost": 1.1,
    "effective_io_concurrency": 200,
    "work_mem": "5242kB",
    "min_wal_size": "1GB",
    "max_wal_size": "4GB",
    "max_worker_processes": 4,
    "max_parallel_workers_per_gather": 2,
    "max_parallel_workers": 4,
    "max_parallel_maintenance_workers": 2,
}

# The study's log: logging_collector = on and log_destination at its default, stderr (a text log), which the
# logged conditions' cost includes. The kit's clusters log jsonlog (csvlog before 15) and own the setting (a params
# file cannot move the log away from the kit: paramtypes.KIT_OWNED_SETTINGS), so it is not among server_settings:
# the stage sets it on the servers it configures, for its runs only, and the log check reads whichever destination
# the server writes (its current_logfiles).
STUDY_LOG_DESTINATION = "stderr"

# latency average (ms) the study reported, by condition and item ("count" = count.pgbench as configured,
# i.e. parallel; "count_serial" = with max_parallel_workers_per_gather = 0)
STUDY_LATENCY_MS: dict[tuple[str, str], float] = {
    ("not_loaded", "limit"): 0.110,
    ("loaded_disabled", "limit"): 0.111,
    ("loaded_disabled", "count"): 22.521,
    ("loaded_disabled", "count_serial"): 50.726,
    ("explain", "limit"): 0.112,
    ("explain", "count"): 22.532,
    ("explain", "count_serial"): 51.448,
    ("analyze", "limit"): 0.112,
    ("analyze", "count"): 38.268,
    ("analyze", "count_serial"): 96.212,
    ("analyze_no_timing", "limit"): 0.111,
    ("analyze_no_timing", "count"): 24.396,
    ("analyze_no_timing", "count_serial"): 56.766,
    ("explain_logged", "limit"): 0.146,
    ("analyze_logged", "limit"): 0.149,
}
STUDY_BASELINE = "loaded_disabled"


class Item(Strict):
    """What one pgbench run executes: a one-statement script and session settings for its connection."""

    sql: str = Field(min_length=1)
    label: str = ""
    settings: Settings = {}


class Condition(Strict):
    """A named set of auto_explain settings. `load: false` = auto_explain not loaded at all."""

    label: str = ""
    load: bool = True
    settings: Settings = {}
    items: Literal["all"] | list[str] = "all"
    # the log proof: a plan for every transaction, or none; "auto" = every when log_min_duration is 0
    expect_plans: Literal["auto", "every", "none"] = "auto"

    @field_validator("settings")
    @classmethod
    def _names(cls, v: dict) -> dict:
        # the names are checked by `Settings` (paramtypes.setting_name_problem) before this runs
        if "auto_explain.log_min_duration" in v:
            min_duration_ms(v["auto_explain.log_min_duration"])
        return v

    @model_validator(mode="after")
    def _unloaded_has_no_settings(self):
        if not self.load and any(k.startswith("auto_explain.") for k in self.settings):
            raise ValueError("a condition with load: false cannot have auto_explain.* settings")
        return self

    def setting(self, name: str, default=None):
        return self.settings.get(f"auto_explain.{name}", default)

    @property
    def analyze(self) -> bool:
        return self.load and as_bool(self.setting("log_analyze", False))

    @property
    def timing(self) -> bool:
        """Per-node times in ANALYZE plans (auto_explain.log_timing defaults to on)."""
        return self.analyze and as_bool(self.setting("log_timing", True))

    @property
    def expected_plans(self) -> str:
        if self.expect_plans != "auto":
            return self.expect_plans
        if not self.load:
            return "none"
        return "every" if min_duration_ms(self.setting("log_min_duration", -1)) == 0 else "none"


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}


def min_duration_ms(value) -> float:
    """auto_explain.log_min_duration in ms: a number (ms) or text with a unit ('10s'); -1 = off."""
    if isinstance(value, bool):
        raise ValueError(f"auto_explain.log_min_duration: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)\s*", str(value))
    if not m or m.group(2) not in ("", *_UNITS_MS):
        raise ValueError(f"auto_explain.log_min_duration: expected a number of ms or e.g. '10s'; got {value!r}")
    return float(m.group(1)) * _UNITS_MS.get(m.group(2) or "ms")


def as_bool(value) -> bool:
    """A boolean setting as PostgreSQL reads it (on/off, true/false, yes/no, 1/0)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1", "t", "y"):
        return True
    if text in ("off", "false", "no", "0", "f", "n"):
        return False
    raise ValueError(f"expected on/off, got {value!r}")


def _study_conditions() -> dict[str, Condition]:
    nothing = {"auto_explain.log_min_duration": 10000}  # 10 s: above any query's time here
    every = {"auto_explain.log_min_duration": 0}
    analyze = {"auto_explain.log_analyze": True}
    no_timing = {"auto_explain.log_analyze": True, "auto_explain.log_timing": False}
    return {
        "not_loaded": Condition(label="not loaded", load=False, items=["limit"]),
        "loaded_disabled": Condition(
            label="loaded, disabled (log_min_duration = -1)", settings={"auto_explain.log_min_duration": -1}
        ),
        # the A/A control: the baseline again under another label, interleaved like the rest (the noise floor)
        "loaded_disabled_aa": Condition(
            label="loaded, disabled (A/A control)", settings={"auto_explain.log_min_duration": -1}
        ),
        "explain": Condition(label="EXPLAIN, nothing logged", settings=nothing),
        "analyze": Condition(label="EXPLAIN ANALYZE, nothing logged", settings=nothing | analyze),
        "analyze_no_timing": Condition(label="ANALYZE, log_timing off, nothing logged", settings=nothing | no_timing),
        "explain_logged": Condition(label="EXPLAIN, every plan logged", settings=every, items=["limit"]),
        "analyze_logged": Condition(
            label="EXPLAIN ANALYZE, every plan logged", settings=every | analyze, items=["limit"]
        ),
        # not in the study: the log proof that plans logged with log_timing off carry no times
        "analyze_no_timing_logged": Condition(
            label="ANALYZE, log_timing off, every plan logged", settings=every | no_timing, items=["limit"]
        ),
    }


def _study_items() -> dict[str, Item]:
    count = "SELECT COUNT(c1) FROM tab1;"
    return {
        "limit": Item(sql="SELECT c1 FROM tab1 LIMIT 1;", label="limit (1 row)"),
        # a parallel plan with 2 workers as the study's on a table below min_parallel_table_scan_size (8MB), which
        # at 1e5 rows is cheaper serial unless the setup cost is waived
        "count": Item(
            sql=count,
            label="count, parallel (all rows)",
            settings={"min_parallel_table_scan_size": 0, "parallel_setup_cost": 0},
        ),
        "count_serial": Item(
            sql=count, label="count, serial (all rows)", settings={"max_parallel_workers_per_gather": 0}
        ),
    }


class RunParams(Strict):
    """How long each pgbench run is, and how often. mode "transactions": `-t` per item and condition (the study's
    own counts, 5,000,000 and 50,000, take hours); mode "time": `-T duration_s` per condition. The conditions that
    load auto_explain share one run, interleaved (`run.Batches`)."""

    mode: Literal["time", "transactions"] = "transactions"
    duration_s: int = Field(default=1, ge=1, le=86_400)
    transactions: dict[str, int] = {"limit": 5_000, "count": 100, "count_serial": 100}
    # interleaved runs: a SET script per condition between the queries, on average this many queries after each
    queries_per_set: int = Field(default=2, ge=1, le=1000)
    repetitions: int = Field(default=5, ge=1, le=1000)  # per cluster: 10 in all on the default's two
    warmups: int = Field(default=1, ge=0, le=100)
    # warm-ups run -T warmup_duration_s in either mode; null: a warm-up is a run like the measured ones
    warmup_duration_s: int | None = Field(default=1, ge=1, le=3600)
    # after every restart: one unrecorded pgbench run of this many seconds over all items' scripts, since
    # the first queries after a start run slower (fresh caches); 0 = none
    settle_s: int = Field(default=1, ge=0, le=600)
    shuffle_seed: int | None = 1  # order within a round (recorded with the data); null: the listed order
    timeout_s: float | None = Field(default=None, gt=0)  # per pgbench run; default: duration + 120 s
    # a run's value: "median" = the median of its transactions' latencies (pgbench -l), robust to a burst of
    # other load covering part of the run; "mean" = 1000 / tps, pgbench's latency average (the study's).
    # Both are recorded with every run.
    latency: Literal["median", "mean"] = "median"
    # items whose runs put the client on one CPU and the server's backend on another (core.servers.cpus): a query
    # of tens of µs reads 13 or 70 µs by where the scheduler placed the two, and a condition run alone (not loaded)
    # cannot share that with the others. Not for an item that runs parallel workers (they would start on the
    # backend's CPU)
    split_cpus: list[str] = ["limit"]

    @field_validator("transactions")
    @classmethod
    def _positive(cls, v: dict) -> dict:
        bad = {k: n for k, n in v.items() if n < 1}
        if bad:
            raise ValueError(f"expected transaction counts of at least 1; got {bad}")
        return v


class LogCheckParams(Strict):
    """The proof from the server log: a plan per transaction where one must be logged, none elsewhere."""

    enabled: bool = True
    tolerance: float = Field(default=0.001, ge=0, le=0.5)  # relative difference of plans vs transactions
    tolerance_abs: int = Field(default=2, ge=0)  # plus this many (the run's last transaction at -T's end)
    parse_sample: int = Field(default=20, ge=1, le=100_000)  # plans per run parsed with pglab.pgtools.explain
    wait_s: float = Field(default=30, gt=0, le=600)  # for the logging collector to catch up after a run
    prune: bool = True  # delete log files this stage filled once read (logged runs write ~0.5 kB a plan)


class AutoExplainParams(Strict):
    """The `auto_explain:` section of params (study S2). Defaults are the study's."""

    rows: int = Field(default=100_000, ge=1, le=2_000_000_000)  # the study: 1,000,000 (see params/default.yaml)
    # clusters per kit server for this study (null: servers.clusters); its comparisons and findings pool them
    clusters: int | None = Field(default=None, ge=1, le=8)
    database: str = Field(default="pglab_auto_explain", pattern=r"^[a-z_][a-z0-9_]*$")
    loading: Literal["shared_preload", "session_preload"] = "shared_preload"
    prewarm: bool = True
    client: Literal["newest", "own"] = "newest"
    server_settings: Settings = STUDY_SETTINGS
    items: dict[str, Item] = Field(default_factory=_study_items)
    conditions: dict[str, Condition] = Field(default_factory=_study_conditions)
    baseline: str = STUDY_BASELINE
    # how conditions are compared: "fast" = the 10 % quantile of every transaction of a cell (all rounds, from
    # the latencies each run keeps) over the baseline's, rounds resampled together (`paired.fast_compare`): on
    # this VM whole 1-s runs went ~2x slow, which no per-run value survives (A/A floors ±40-75 %); "round" = one
    # value per run (run.latency), ratios paired within rounds. Runs that kept no latencies use "round".
    estimate: Literal["fast", "round"] = "fast"
    # the A/A control: a condition with the baseline's settings, compared with it like any other (noise floor),
    # or a list of them (more A/A pairs per item: each one per cluster); null: no control, and no floor
    aa_condition: str | list[str] | None = "loaded_disabled_aa"
    run: RunParams = RunParams()
    log_check: LogCheckParams = LogCheckParams()
    # "costs nothing" holds when the ratio's whole 95 % interval lies within 1 ± negligible
    negligible: float = Field(default=0.05, gt=0, lt=1)

    @field_validator("items")
    @classmethod
    def _item_names(cls, v: dict) -> dict:
        bad = [k for k in v if not re.fullmatch(NAME, k)]
        if bad or not v:
            raise ValueError(f"expected at least one item, named with letters, digits and _; got {bad or 'none'}")
        return v

    @field_validator("conditions")
    @classmethod
    def _conditions_refer_to_items(cls, v: dict, info) -> dict:
        items = info.data.get("items")
        bad_names = [k for k in v if not re.fullmatch(NAME, k)]
        if bad_names or not v:
            raise ValueError(f"expected conditions named with letters, digits and _; got {bad_names or 'none'}")
        if items is None:
            return v
        for name, cond in v.items():
            if cond.items != "all":
                unknown = [i for i in cond.items if i not in items]
                if unknown or not cond.items:
                    raise ValueError(f"{name}.items: expected 'all' or names among {sorted(items)}; got {cond.items}")
        return v

    @field_validator("baseline")
    @classmethod
    def _baseline_is_a_condition(cls, v: str, info) -> str:
        conditions = info.data.get("conditions")
        if conditions is not None and v not in conditions:
            raise ValueError(f"expected one of the conditions {sorted(conditions)}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _no_default_control_without_its_condition(cls, data):
        """Conditions given by the params without the default A/A condition: no control, unless one is named."""
        if isinstance(data, dict) and "aa_condition" not in data and isinstance(data.get("conditions"), dict):
            default = cls.model_fields["aa_condition"].default
            if default not in data["conditions"]:
                data = data | {"aa_condition": None}
        return data

    @model_validator(mode="after")
    def _aa_is_the_baseline_again(self):
        conditions, baseline = self.conditions, self.baseline
        if self.aa_condition == []:
            raise ValueError("aa_condition: expected a condition, a list of conditions or null")
        for v in self.aa_names:
            if v not in conditions or v == baseline:
                raise ValueError(
                    f"aa_condition: expected a condition other than the baseline among {sorted(conditions)}, or null"
                )
            a, b = conditions[v], conditions[baseline]
            if (a.load, a.settings, a.items) != (b.load, b.settings, b.items):
                raise ValueError(
                    f"aa_condition: expected {v!r} to have the baseline {baseline!r}'s load, settings and "
                    "items (an A/A control)"
                )
        return self

    @property
    def aa_names(self) -> list[str]:
        """The A/A conditions (none, one or several), in the params' order."""
        v = self.aa_condition
        return [] if v is None else [v] if isinstance(v, str) else list(dict.fromkeys(v))

    @field_validator("run")
    @classmethod
    def _counts_for_items(cls, v: RunParams, info) -> RunParams:
        items = info.data.get("items")
        if items is not None and v.mode == "transactions":
            missing = [i for i in items if i not in v.transactions]
            if missing:
                raise ValueError(f"mode transactions: expected transactions for every item; missing {missing}")
        if items is not None and (unknown := [i for i in v.split_cpus if i not in items]):
            if "split_cpus" in v.model_fields_set:
                raise ValueError(f"split_cpus: expected names among {sorted(items)}; got {unknown}")
            v = v.model_copy(update={"split_cpus": [i for i in v.split_cpus if i in items]})  # the default's limit
        return v

    def setting_dicts(self) -> dict[str, dict]:
        """Every settings dict of this section by its key under the section (checked with each server's own
        rules before any server starts)."""
        return {"server_settings": self.server_settings} | self.session_setting_dicts()

    def session_setting_dicts(self) -> dict[str, dict]:
        """The settings dicts that go with a connection (set at its start, so no server-wide ones)."""
        out = {f"items.{k}.settings": i.settings for k, i in self.items.items()}
        return out | {f"conditions.{k}.settings": c.settings for k, c in self.conditions.items()}

    def items_of(self, condition: str) -> list[str]:
        c = self.conditions[condition]
        return list(self.items) if c.items == "all" else [i for i in self.items if i in c.items]

    def cells(self) -> list[tuple[str, str]]:
        """(condition, item) pairs the stage measures, in the order the params list them."""
        return [(c, i) for c in self.conditions for i in self.items_of(c)]

    def disk_bytes(self) -> dict[str, float]:
        """What this section puts on each server's disk, by the key that decides it (params_checks.check_disk)."""
        from ...core.run.params_checks import EMPTY_DB, INT_ROW

        return {"rows": EMPTY_DB + INT_ROW * self.rows}

"""Study S4 test C (parallel B-tree index build on SSB lineorder): CREATE INDEX on 1-4 key columns against
max_parallel_maintenance_workers; the `parallel_index:` section of params and the study's reference numbers.

The study (S4 of docs/studies.md, PGECons WG1 2018, test C): on the fact table of SSB at scale factor 100 (≈ 600 M rows,
PostgreSQL 11 on the consortium's 72-core server) it ran CREATE INDEX with 1, 2, 3 and 4 key columns
(lo_orderkey; + lo_custkey; + lo_partkey; + lo_suppkey) at increasing worker counts and found the time to fall
as workers were added, "close to inversely proportional", and to depend on the size of the index (its number of
distinct key combinations). The seed gives the chart only: no seconds, and not the worker counts it used.

The stage: `parallel_index_build` (one observed build), `parallel_index_run` (settings, the interleaved grid),
`parallel_index_results` (derived tables), `parallel_index_charts`, `parallel_index_report` (findings).

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ...core.paramtypes import Strict

EXPERIMENT = "parallel_index"
STUDY = "S4"

# the study's key columns, in the order they were added, and its table of distinct key combinations (SF 100)
STUDY_KEY_COLUMNS = ("lo_orderkey", "lo_custkey", "lo_partkey", "lo_suppkey")
STUDY_COMBINATIONS = {1: 150_000_000, 2: 150_000_000, 3: 600_036_916, 4: 600_038_145}
STUDY_SF = 100
STUDY_VERSION = "11"
STUDY_CORES = 72  # the WG1 server of the scale-up tests ("多コアCPU(72)"), which test C shares
STUDY_SETUP = (
    f"PostgreSQL {STUDY_VERSION}, SSB SF {STUDY_SF} with ≈ 600 M lineorder rows, the WG's "
    f"{STUDY_CORES}-core server, psql on the server"
)

# PostgreSQL gives a parallel build's participants maintenance_work_mem / (workers + 1) each and plans fewer
# workers while that share is below 32 MB (plan_create_index_workers)
MIN_MEM_PER_PARTICIPANT_KB = 32 * 1024

_LINEORDER = (
    "lo_orderkey",
    "lo_linenumber",
    "lo_custkey",
    "lo_partkey",
    "lo_suppkey",
    "lo_orderdate",
    "lo_orderpriority",
    "lo_shippriority",
    "lo_quantity",
    "lo_extendedprice",
    "lo_ordertotalprice",
    "lo_discount",
    "lo_revenue",
    "lo_supplycost",
    "lo_tax",
    "lo_commitdate",
    "lo_shipmode",
)
_MEMORY = re.compile(r"^(\d+)\s*(kB|MB|GB|TB)?$")


class ParallelIndexParams(Strict):
    """The `parallel_index:` section of params."""

    key_columns: list[str] = list(STUDY_KEY_COLUMNS)  # lineorder columns, in the order they join the key
    column_counts: list[int] = [1, 2, 3, 4]  # one index on the first k key columns for each k
    # the worker counts: either 0 … max_workers (None: this machine's cores) or the list worker_counts, not both
    max_workers: int | None = Field(default=None, ge=0, le=64)
    worker_counts: list[int] | None = None  # max_parallel_maintenance_workers values (0 is always added)
    # session setting of every build; raised to 32 MB per participant of the largest build if below (build_memory)
    maintenance_work_mem: str = "1GB"
    repetitions: int = Field(default=3, ge=1, le=1000)
    warmups: int = Field(default=1, ge=0, le=100)  # warm-up rounds, recorded as warm-ups
    # which cells a warm-up round builds: every (server, key, workers) cell, or per (server, key) only the one
    # at the largest worker count (a third of the builds with N = 2: the cells of a key differ only in a session
    # setting and read the same prewarmed table)
    warmup_cells: Literal["all", "largest_workers"] = "all"
    shuffle_seed: int | None = 1  # order within each round (recorded with the data)
    # A/A control: every key's serial build a second time per round ("workers=0_aa"): the noise floor
    aa_control: bool = True
    statement_timeout_s: float = Field(default=600, gt=0)

    @field_validator("key_columns")
    @classmethod
    def _lineorder_columns(cls, v: list[str]) -> list[str]:
        unknown = [c for c in v if c not in _LINEORDER]
        if unknown:
            raise ValueError(f"expected columns of lineorder ({', '.join(_LINEORDER)}); unknown {unknown}")
        if len(set(v)) != len(v) or not v:
            raise ValueError("expected at least one column, each once")
        return v

    @field_validator("worker_counts")
    @classmethod
    def _counts(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or any(w < 0 or w > 64 for w in v) or len(set(v)) != len(v)):
            raise ValueError("expected distinct worker counts between 0 and 64")
        return v

    @field_validator("maintenance_work_mem")
    @classmethod
    def _memory(cls, v: str) -> str:
        if not _MEMORY.match(v.strip()):
            raise ValueError("expected a PostgreSQL memory size such as 512MB or 1GB")
        return v.strip()

    @model_validator(mode="after")
    def _one_worker_choice(self):
        # both given: one would be ignored without a word
        if self.max_workers is not None and self.worker_counts is not None:
            raise ValueError("max_workers, worker_counts: expected one of the two, not both (set the other to null)")
        return self

    @model_validator(mode="after")
    def _column_counts(self):
        bad = [k for k in self.column_counts if not 1 <= k <= len(self.key_columns)]
        if bad or not self.column_counts or len(set(self.column_counts)) != len(self.column_counts):
            raise ValueError(
                f"column_counts: expected distinct counts from 1 to {len(self.key_columns)} "
                f"(the number of key_columns); got {self.column_counts}"
            )
        return self

    # -- what the params mean --------------------------------------------------------------------------------

    def setting_dicts(self) -> dict[str, dict]:
        """Every setting this section gives a session, by its key under the section ("": the section's own key),
        checked with each server's own rules before any server starts."""
        return self.session_setting_dicts()

    def session_setting_dicts(self) -> dict[str, dict]:
        return {"": {"maintenance_work_mem": self.maintenance_work_mem}}

    def n_workers(self) -> int:
        """N: the largest worker count (default: this machine's cores)."""
        if self.worker_counts is not None:
            return max(self.worker_counts)
        return self.max_workers if self.max_workers is not None else (os.cpu_count() or 1)

    def workers(self) -> list[int]:
        """The max_parallel_maintenance_workers values, always with 0 (the serial baseline) first."""
        counts = self.worker_counts if self.worker_counts is not None else range(self.n_workers() + 1)
        return sorted(set(counts) | {0})

    def column_sets(self) -> dict[int, list[str]]:
        return {k: self.key_columns[:k] for k in sorted(self.column_counts)}


def with_overrides(p: ParallelIndexParams, **overrides) -> ParallelIndexParams:
    """The section with a notebook's non-None parameters on top, validated again. A notebook's max_workers
    against params' worker_counts is refused like both keys in params (one of them would be ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if given.get("max_workers") is not None and p.worker_counts is not None:
        raise ValueError(
            f"notebook parameter max_workers={given['max_workers']} and params' "
            f"parallel_index.worker_counts {p.worker_counts}: expected one of the two, not both; "
            "set worker_counts: null in params or leave max_workers = None"
        )
    return ParallelIndexParams(**(p.model_dump() | given))


def memory_kb(text: str) -> int:
    """'1GB' -> 1048576 (PostgreSQL's units: kB, MB, GB, TB; a bare number is kB)."""
    m = _MEMORY.match(text.strip())
    if not m:
        raise ValueError(f"not a PostgreSQL memory size: {text!r}")
    return int(m.group(1)) * {"kB": 1, None: 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}[m.group(2)]


def build_memory(p: ParallelIndexParams) -> str:
    """maintenance_work_mem of every build: the params' value, or 32 MB for each of the N + 1 participants of the
    largest build if that is more (below it PostgreSQL plans fewer workers than allowed). The same for every
    worker count of a run; what was used is recorded with the data."""
    need = MIN_MEM_PER_PARTICIPANT_KB * (p.n_workers() + 1)
    return p.maintenance_work_mem if memory_kb(p.maintenance_work_mem) >= need else f"{need // 1024}MB"


AA_SUFFIX = "_aa"  # the A/A copy of the serial condition: "workers=0_aa"


def columns_label(k: int) -> str:
    return f"{k} column" + ("s" if k != 1 else "")


CLAIMS: dict[str, str] = {
    "time_falls": "S4 test C: CREATE INDEX on lineorder (1–4 key columns) took less time as "
    f"max_parallel_maintenance_workers rose ({STUDY_SETUP}).",
    "near_inverse": "S4 test C: time against the number of workers looked close to inversely proportional "
    "(≈ 1/N) for every column set.",
    "size": "S4 test C: the time depends on the size of the index built, i.e. its distinct key combinations "
    f"(SF {STUDY_SF}: "
    + ", ".join(f"{k} col. {n / 1e6:,.0f} M" for k, n in STUDY_COMBINATIONS.items())
    + "): more columns, longer builds.",
}

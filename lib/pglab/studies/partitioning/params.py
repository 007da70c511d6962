"""Study S5
(hash partitioning and Parallel Append): count(*), avg(x) over a hash-partitioned table, serial vs parallel:
the `partitioning:` section of params and the study's reference numbers.

The source (S5 of docs/studies.md: a PostgreSQL 11 development build, Advent Calendar 2017) made `t`
hash-partitioned by `id` into six partitions (modulus 6) on three NVMe tablespaces, inserted 600 M rows
`(x, 100*random(), 100*random(), 100*random(), md5(x::text))` and timed
`SELECT count(*), avg(x) FROM t WHERE y < z` once serially
(`max_parallel_workers_per_gather = 0`: Aggregate over an Append of Seq Scans) and once with
`max_parallel_workers_per_gather = 100` (Gather with 7 workers planned, Partial Aggregate, Parallel Append):
158.4 s against 27.6 s, with the OS cache dropped and minimal shared_buffers.

The stage: `partitioning_setup` (settings, tablespaces, table, load, data checksum, prewarm per server),
`partitioning_run` (the interleaved timing, the plans), `partitioning_plans` (the plan shape checks and the
planner's worker rule), `partitioning_results` (derived tables), `partitioning_findings`,
`partitioning_report` (the report section and the charts the notebook shows too).

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ...core.paramtypes import Settings, Strict

EXPERIMENT = "partitioning"
ITEM = "count_avg"
# the study's query, the table schema-qualified: unqualified, search_path would put "$user".t first
QUERY = "SELECT count(*), avg(x) FROM public.t WHERE y < z"

# -- the study's numbers ------------------------------------------------------------------------------------
STUDY_ROWS = 600_000_000
STUDY_PARTITIONS = 6
STUDY_TABLESPACES = 3  # NVMe drives, two partitions each
STUDY_PARTITION_MB = (8057, 8057, 8056, 8055, 8056, 8056)  # \d+ after the load
STUDY_SERIAL_S = 158.4
STUDY_PARALLEL_S = 27.6
STUDY_ALLOWED_WORKERS = 100  # max_parallel_workers_per_gather of its parallel run
STUDY_WORKERS_PLANNED = 7
STUDY_COUNT = 300_006_886
STUDY_AVG_SERIAL = "50.0030065651906"
STUDY_AVG_PARALLEL = "50.0030065651742"
STUDY_SPEEDUP = STUDY_SERIAL_S / STUDY_PARALLEL_S  # 5.74
# iostat during the runs: one device at 313 MB/s serially, three at 538-647 MB/s each in parallel
STUDY_SERIAL_MB_S = 313.12
STUDY_PARALLEL_MB_S = (634.81, 647.02, 537.76)


class Tablespaces(Strict):
    """Partitions in tablespaces of their own (the study spread its six over three NVMe drives).

    On a kit-managed server each partition gets a directory under the cluster's state directory, unless
    `locations` names directories for that server. An external server needs `locations` (directories on
    its machine, existing, empty and owned by its OS user); the kit refuses otherwise. With fewer
    locations than partitions, partition i goes to location i mod n (the study: 3 for 6)."""

    enabled: bool = False
    locations: dict[str, list[str]] = {}

    @field_validator("locations")
    @classmethod
    def _absolute(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for server, dirs in v.items():
            if not dirs:
                raise ValueError(f"expected at least one directory for server {server!r}")
            bad = [d for d in dirs if not d.startswith("/")]
            if bad:
                raise ValueError(f"expected absolute directories for server {server!r}; got {bad}")
            if len(set(dirs)) != len(dirs):
                raise ValueError(f"expected each directory once for server {server!r}; got {dirs}")
        return v


class PartitioningParams(Strict):
    """The `partitioning:` section of params."""

    rows: int = Field(default=3_000_000, ge=1000, le=2_000_000_000)  # the study: 600 M
    partitions: int = Field(default=STUDY_PARTITIONS, ge=2, le=256)  # hash modulus
    seed: float = Field(default=0.5, ge=-1, le=1)  # setseed() before the INSERT: identical rows everywhere
    # a database of the kit's own: the stage creates it and drops and re-creates public.t in it
    database: str = Field(default="pglab_partitioning", pattern=r"^[a-z_][a-z0-9_]*$")
    max_workers: int = Field(default=4, ge=1, le=64)  # timed at max_parallel_workers_per_gather = 1 … this
    repetitions: int = Field(default=10, ge=1, le=1000)
    warmups: int = Field(default=1, ge=0, le=100)
    shuffle_seed: int | None = 1  # order of the cells within each round (null: as listed)
    prewarm: bool = True  # pg_prewarm every partition after loading and after any restart
    # A/A control: serial measured a second time per round as "serial_aa": the machine's noise floor
    aa_control: bool = True
    statement_timeout_s: float = Field(default=600, gt=0)
    # server settings for this stage on kit servers, on top of params' `settings` (reset afterwards);
    # max_worker_processes / max_parallel_workers are raised to what max_workers needs in any case
    server_settings: Settings = {}
    tablespaces: Tablespaces = Tablespaces()

    @field_validator("database")
    @classmethod
    def _own_database(cls, v: str) -> str:
        if v == "postgres" or v.startswith("template"):
            raise ValueError(
                "expected a database of the kit's own (the stage drops and re-creates table t in it), "
                "not postgres or a template database"
            )
        return v

    def setting_dicts(self) -> dict[str, dict]:
        """Every settings dict of this section by its key under the section (checked with each server's own
        rules before any server starts)."""
        return {"server_settings": self.server_settings}

    def conditions(self) -> list[tuple[str, int]]:
        """(condition, max_parallel_workers_per_gather): serial first, then 1 … max_workers."""
        return [("serial", 0)] + [(condition_name(k), k) for k in range(1, self.max_workers + 1)]

    def timed_conditions(self) -> list[tuple[str, int]]:
        """The conditions the schedule times: `conditions()` and the A/A copy of serial (no plan of its own)."""
        return self.conditions() + ([("serial_aa", 0)] if self.aa_control else [])

    def disk_bytes(self) -> dict[str, float]:
        """What this section puts on each server's disk, by the key that decides it (params_checks.check_disk)."""
        from ...core.run.params_checks import EMPTY_DB, PARTITION_ROW

        return {"rows": EMPTY_DB + PARTITION_ROW * self.rows}


def unknown_location_servers(p: PartitioningParams, known: list[str]) -> list[str]:
    """Server names under tablespaces.locations that name no server (a typo would otherwise fall back to the
    kit's own directories, or to a refusal, without a word about the name)."""
    return sorted(set(p.tablespaces.locations) - set(known))


def condition_name(workers: int) -> str:
    return "serial" if workers == 0 else f"workers={workers}"


def condition_workers(condition: str) -> int:
    return 0 if condition in ("serial", "serial_aa") else int(condition.split("=", 1)[1])

"""The `ssb:` section of params: dataset, query set and the experiment grid of studies S1 and S4."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ...core.paramtypes import Settings, Strict, check_versions, key_error

# parallel_aa: the parallel mode again under a second label, the A/A control that measures the noise floor;
# parallel_jit_forced: JIT with inlining and optimisation forced (every jit_*_above_cost = 0), beside S1's defaults
MODES = ("serial", "parallel", "parallel_aa", "parallel_jit", "parallel_jit_forced")
JIT_MODES = ("parallel_jit", "parallel_jit_forced")
Mode = Literal["serial", "parallel", "parallel_aa", "parallel_jit", "parallel_jit_forced"]


class SsbParams(Strict):
    sf: float = Field(default=1.0, gt=0, le=1000)
    seed: int = Field(default=1, ge=0, lt=2**63)  # flavor spec's streams; dbgen's are fixed (recorded all the same)
    # the generator (datasets.ssb.flavors): dbgen makes ssb-dbgen's data byte for byte (whole SF from 1 on, any
    # fraction below 1); spec follows the SSB rules with streams of its own, chosen by seed, at any SF
    flavor: Literal["dbgen", "spec"] = "dbgen"
    query_set: Literal["pg_ssb_run", "ssb_paper"] = "pg_ssb_run"
    queries: list[str] | Literal["all"] = "all"
    prewarm: bool = True  # pg_prewarm every table after loading, as study S1 did
    load_method: Literal["copy_freeze", "copy"] = "copy_freeze"
    # settings for the whole SSB stage on kit servers, on top of params' `settings`: wal_level minimal
    # lets the COPY into a table created in the same transaction skip WAL; queries are read-only
    stage_settings: Settings = {"wal_level": "minimal", "max_wal_senders": 0}
    modes: list[Mode] = ["serial", "parallel", "parallel_jit"]
    # the A/A control (mode parallel_aa) on every server, or on the first server of the run only (cheaper;
    # the machine's noise is shared by its servers)
    aa_servers: Literal["all", "first"] = "all"
    workers: int | None = Field(default=None, ge=1, le=64)  # parallel modes; None: the machine's cores
    repetitions: int = Field(default=5, ge=1, le=1000)
    warmups: int = Field(default=1, ge=0, le=100)
    shuffle_seed: int | None = None  # shuffle the order within each round (recorded)
    statement_timeout_s: float = Field(default=600, gt=0)
    # S4 test B: each query at max_parallel_workers_per_gather = each of these (None: 0 … workers)
    worker_sweep: list[int] | None = None
    sweep_repetitions: int = Field(default=3, ge=1, le=1000)
    # how modes, versions and worker counts are compared: "fast" = the 10 % quantile of a cell's executions
    # (all rounds) over the baseline's, rounds resampled together (`paired.fast_compare`): a query of 50-500 ms
    # that a burst of the VM slowed ~2x in one round breaks that round's ratio (A/A floor ±10-12 % round by round,
    # ±1.1-7 % fast in three runs); "round" = one ratio per round, their geometric mean (`paired.paired_compare`)
    estimate: Literal["fast", "round"] = "fast"
    sweep_queries: list[str] | Literal["all"] = "all"
    # parallel_jit_forced compiles with inlining and optimisation, about a second per query whatever the SF:
    # only the queries of S1's JIT claims (q1.x clearly, q3.1 and q4.3 a little) by default
    jit_forced_queries: list[str] | Literal["all"] = ["q1.1", "q1.2", "q1.3", "q3.1", "q4.3"]
    # the PostgreSQL versions this study compares (S1: 16 and 17), downloaded when missing; null: the run's
    # servers. jit_installs adds every install of the run that has JIT, for the parallel_jit mode
    versions: list[int | str] | None = None
    # where each of `versions` comes from: any (an install of the run when one matches, else a download) or
    # download (always the npm packages, built alike for every major: a version compared, not a build)
    builds: Literal["any", "download"] = "any"
    jit_installs: bool = True
    # the servers added for their JIT only (jit_installs; not among `versions`) hold SSB at this scale and run
    # their modes there, in rounds of their own (jit_repetitions, null: repetitions): the JIT claims' regime,
    # where the plans cost more than the default inlining and optimisation thresholds (500,000), or any scale with
    # parallel_jit_forced. null: sf, in the versions' rounds. Set, that block runs one server (cluster) at a time,
    # its database read into memory first, then jit_warmups warm-up rounds and its timed rounds, with the disk bytes
    # read and, where pg_stat_statements can be loaded, the JIT compile time of every execution (run.run_jit_block;
    # methodology rule 17)
    jit_sf: float | None = Field(default=None, gt=0, le=1000)
    # parallel workers per Gather in that block; null: the machine's cores - 1 (at least 1), so that the leader and
    # each worker compile and run on a core of their own, as S1's 5 workers did on a larger machine: with more
    # processes than cores one's JIT compile waits behind another's, and the leader's compile time, which the
    # JIT claims subtract, no longer spans the compile phase
    jit_workers: int | None = Field(default=None, ge=1, le=64)
    jit_repetitions: int | None = Field(default=None, ge=1, le=1000)
    jit_warmups: int | None = Field(default=None, ge=0, le=100)  # null: warmups
    # those servers on this many of the run's clusters (servers.clusters), each costing a load and its rounds;
    # null: all of them
    jit_clusters: int | None = Field(default=None, ge=1, le=8)

    @field_validator("versions", mode="before")
    @classmethod
    def _versions(cls, v):
        return check_versions(v, allow_none=True)

    @field_validator("queries", "sweep_queries", "jit_forced_queries")
    @classmethod
    def _known_queries(cls, v):
        from ...datasets.ssb import QUERY_IDS

        if v != "all":
            unknown = [q for q in v if q not in QUERY_IDS]
            if unknown:
                raise ValueError(f"expected query ids among {list(QUERY_IDS)}; unknown {unknown}")
        return v

    @field_validator("queries", "sweep_queries", "jit_forced_queries")
    @classmethod
    def _some_queries(cls, v):
        if v != "all" and (not v or len(set(v)) != len(v)):
            raise ValueError("expected 'all' or a non-empty list of distinct query ids")
        return v

    @field_validator("modes")
    @classmethod
    def _distinct_modes(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"expected a non-empty list of distinct modes among {list(MODES)}")
        return v

    @field_validator("worker_sweep")
    @classmethod
    def _sweep(cls, v: list[int] | None) -> list[int] | None:
        # max_parallel_workers_per_gather values: 0 (serial) … 64, as `workers`
        if v is not None and (not v or any(w < 0 or w > 64 for w in v) or len(set(v)) != len(v)):
            raise ValueError("expected null or a non-empty list of distinct worker counts from 0 to 64")
        return v

    @model_validator(mode="after")
    def _generator_takes_sf(self):
        # refuse here what the generator would refuse at the load, by its own rule (dbgen.counts): ssb-dbgen
        # truncates 1.5 to 1, so the dbgen flavor makes whole SF from 1 on only (spec: any SF > 0)
        from ...datasets.ssb.dbgen.counts import counts

        if self.flavor == "dbgen":
            for key in ("sf", "jit_sf"):
                try:
                    if getattr(self, key) is not None:
                        counts(getattr(self, key))
                except ValueError:
                    raise key_error(
                        SsbParams,
                        key,
                        getattr(self, key),
                        "expected a whole number from 1 on with flavor dbgen (1, 2, 10 ...), "
                        "or a fraction below 1, or flavor: spec",
                    ) from None
        return self

    def setting_dicts(self) -> dict[str, dict]:
        """Every settings dict of this section by its key under the section (checked with each server's own
        rules before any server starts)."""
        return {"stage_settings": self.stage_settings}

    def query_ids(self) -> list[str]:
        from ...datasets.ssb import QUERY_IDS

        return list(QUERY_IDS) if self.queries == "all" else list(self.queries)

    def sweep_query_ids(self) -> list[str]:
        return (
            self.query_ids()
            if self.sweep_queries == "all"
            else [q for q in self.query_ids() if q in self.sweep_queries]
        )

    def mode_query_ids(self, mode: str) -> list[str]:
        if mode == "parallel_jit_forced" and self.jit_forced_queries != "all":
            return [q for q in self.query_ids() if q in self.jit_forced_queries]
        return self.query_ids()

    def disk_bytes(self) -> dict[str, float]:
        """What this section puts on each server's disk, by the key that decides it (params_checks.check_disk)."""
        from ...core.run.params_checks import EMPTY_DB, SSB_INDEX_PER_SF, SSB_PER_SF

        return {"sf": EMPTY_DB + (SSB_PER_SF + SSB_INDEX_PER_SF) * self.sf}

    def run_disk_bytes(self) -> dict[str, float]:
        """What this section puts on disk once per run beyond every server's share: the JIT servers' larger
        dataset (ssb.jit_sf), counted for one install with JIT on jit_clusters clusters (an estimate)."""
        from ...core.run.params_checks import EMPTY_DB, SSB_INDEX_PER_SF, SSB_PER_SF

        if self.jit_sf is None or self.jit_sf <= self.sf or not self.jit_installs:
            return {}
        extra = (SSB_PER_SF + SSB_INDEX_PER_SF) * (self.jit_sf - self.sf)
        return {"jit_sf": (self.jit_clusters or 1) * (EMPTY_DB + extra)}

"""Study S3 (pgbench across versions) and S4's scale-up: the `pgbench:` section of params.

Which experiments run, on what grid, at what sizes. Defaults fit a 2-core laptop; the study's own sizes are
given as "full" in the comments of `params/default.yaml`. Every key is checked when params are loaded,
before any server starts. The experiments themselves are in `pgbench_stage` (kept apart: params are
imported by everything, the stage imports servers and the store)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_serializer, field_validator, model_validator

from ...core.paramtypes import Strict, check_version, check_versions, key_error

EXPERIMENTS = ("load", "select_only", "scaling", "series", "buffers")
Experiment = Literal["load", "select_only", "scaling", "series", "buffers"]
# what runs when params name no experiments: the version study. `buffers` restarts its server once per condition and
# round, so it runs where params ask for it by name (params/default.yaml)
DEFAULT_EXPERIMENTS = ("load", "select_only", "scaling", "series")
Mode = Literal["select-only", "tpcb"]


def _scales(v: list[int]) -> list[int]:
    if not v:
        raise ValueError("expected at least one scale factor")
    if len(set(v)) != len(v):
        raise ValueError(f"expected each scale factor once; got {v}")
    return sorted(v)


def _threads(v):
    # "auto" (the default) is stored as 0: min(clients, CPU cores) at run time
    if v == "auto":
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError("expected 'auto' or a whole number of threads >= 1")
    return v


class InitParams(Strict):
    repetitions: int = Field(default=3, ge=1, le=100)
    # CHECKPOINT before each load, so that one load's dirty pages are not written during the next
    checkpoint: bool = True


class SelectOnlyParams(Strict):
    clients: int = Field(default=30, ge=1, le=5000)
    duration_s: int = Field(default=10, ge=1, le=86400)
    repetitions: int = Field(default=3, ge=1, le=1000)
    warmup_s: int = Field(default=3, ge=0, le=3600)  # one unrecorded-in-summaries run per cell; 0 = none
    # the A/A control (the noise floor): every cell, or the baseline server's, run twice per round under two
    # labels (item "select-only" and "select-only-aa"); none: no floor measured
    aa_control: Literal["all", "baseline", "none"] = "all"


class SeriesParams(Strict):
    scales: list[int] | None = None  # default: pgbench.scales
    runs: int = Field(default=15, ge=2, le=1000)
    clients: int = Field(default=30, ge=1, le=5000)
    transactions: int | None = Field(default=100, ge=1)  # per client (-t), as the study
    duration_s: int | None = Field(default=None, ge=1, le=86400)  # or time-based runs (-T)
    repetitions: int = Field(default=1, ge=1, le=100)  # whole series, each from a fresh load

    @field_validator("scales")
    @classmethod
    def _check_scales(cls, v):
        return None if v is None else _scales([_positive(x) for x in v])

    @model_validator(mode="after")
    def _one_length(self):
        if (self.transactions is None) == (self.duration_s is None):
            raise ValueError("expected exactly one of transactions (-t) or duration_s (-T); set the other to null")
        return self


class ScalingParams(Strict):
    scale: int | None = Field(default=None, ge=1)  # default: the largest of pgbench.scales
    modes: list[Mode] = ["select-only", "tpcb"]
    max_clients: int = Field(default=16, ge=1, le=5000)  # clients 1, 2, 4, ... up to this
    duration_s: int = Field(default=4, ge=1, le=86400)
    repetitions: int = Field(default=3, ge=1, le=1000)
    warmup_s: int = Field(default=1, ge=0, le=3600)
    # the versions the scale-up compares (S4: 10 and 11), among pgbench's; null: all of pgbench's servers
    versions: list[int | str] | None = None

    @field_validator("versions", mode="before")
    @classmethod
    def _versions(cls, v):
        return check_versions(v, allow_none=True)

    @field_validator("modes")
    @classmethod
    def _check_modes(cls, v):
        if not v or len(set(v)) != len(v):
            raise ValueError("expected a non-empty list of distinct modes")
        return v

    def client_counts(self) -> list[int]:
        out, c = [], 1
        while c < self.max_clients:
            out.append(c)
            c *= 2
        return [*out, self.max_clients]


# a shared_buffers value as PostgreSQL reads it, with its unit (a bare number would be 8 kB buffers: refused, unclear)
_SIZE = re.compile(r"(\d+)\s*(kB|MB|GB|TB)")
_UNIT_BYTES = {"kB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
MIN_SHARED_BUFFERS = 128 * 2**10  # PostgreSQL's floor: 16 buffers of 8 kB


def size_bytes(value: str) -> int:
    """'2MB' -> 2097152 (PostgreSQL's units: kB, MB, GB, TB, powers of 1024)."""
    m = _SIZE.fullmatch(str(value).strip())
    if m is None:
        raise ValueError(f"expected a size with its unit (kB, MB, GB or TB), e.g. 2MB or 2GB; got {value!r}")
    return int(m[1]) * _UNIT_BYTES[m[2]]


class BuffersParams(Strict):
    """S3's explanation of its select-only ranking tested on one server (`Stage.buffers`): select-only tps under
    each shared_buffers, the server restarted with it, the databases small enough to stay in the OS cache."""

    # the server: that version among pgbench's servers (its first cluster); null = the newest of them
    version: int | str | None = None
    scales: list[int] = [1, 10]
    shared_buffers: list[str] = ["2MB", "2GB"]  # sorted smallest first: the small one over the largest
    clients: int = Field(default=30, ge=1, le=5000)
    duration_s: int = Field(default=2, ge=1, le=86400)
    repetitions: int = Field(default=5, ge=1, le=1000)
    warmup_s: int = Field(default=1, ge=0, le=3600)  # after each restart, one run per scale first; 0 = none

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v):
        return v if v is None else check_version(v)

    @field_validator("scales")
    @classmethod
    def _check_scales(cls, v):
        return _scales([_positive(x) for x in v])

    @field_validator("shared_buffers", mode="before")
    @classmethod
    def _check_sizes(cls, v):
        if not isinstance(v, list):
            raise ValueError("expected a list of sizes, e.g. [2MB, 2GB]")
        sizes = {}
        for x in v:
            b = size_bytes(x)
            if b < MIN_SHARED_BUFFERS:
                raise ValueError(f"{x}: PostgreSQL's shared_buffers is at least 128kB (16 buffers)")
            if b in sizes:
                raise ValueError(f"expected each size once; {sizes[b]} and {x} are the same")
            sizes[b] = str(x).strip().replace(" ", "")
        if len(sizes) < 2:
            raise ValueError(f"expected at least two sizes to compare; got {v}")
        return [sizes[b] for b in sorted(sizes)]

    @property
    def small(self) -> str:
        return self.shared_buffers[0]

    @property
    def large(self) -> str:
        return self.shared_buffers[-1]


def _positive(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"expected whole numbers >= 1; got {v!r}")
    return v


class PgbenchParams(Strict):
    """The `pgbench:` section of params."""

    experiments: list[Experiment] = list(DEFAULT_EXPERIMENTS)
    client: Literal["newest", "own"] = "newest"  # one pgbench for all servers, or each server's own (as S3)
    scales: list[int] = [1, 10]
    threads: int = 0  # -j; 'auto' in params: min(clients, CPU cores)
    query_mode: Literal["simple", "extended", "prepared"] = "simple"
    aggregate_log_s: int = Field(default=0, ge=0, le=3600)  # > 0: --aggregate-interval logs of timed runs
    # around every measured run: the per-transaction log (per-second timeline, latency percentiles), server
    # counters before and after (a checkpoint inside the run flagged) and the /proc sampler (bench.Bench)
    telemetry: bool = True
    shuffle_seed: int | None = 1  # order of cells within a round; null = fixed order
    run_timeout_s: int = Field(default=3600, ge=10)  # a pgbench -i or -t run longer than this is a failure
    init: InitParams = InitParams()
    select_only: SelectOnlyParams = SelectOnlyParams()
    series: SeriesParams = SeriesParams()
    scaling: ScalingParams = ScalingParams()
    buffers: BuffersParams = BuffersParams()
    # the versions this study compares (S3's sweep: 10 … 18), downloaded when missing; null: the run's servers
    versions: list[int | str] | None = None
    # where each of `versions` comes from: any (an install of the run when one matches, else a download) or
    # download (always the npm packages, built alike for every major: a version compared, not a build)
    builds: Literal["any", "download"] = "any"
    # the version every other server is compared with (null: the oldest); e.g. the oldest built like the rest
    baseline: int | str | None = None

    @field_validator("versions", mode="before")
    @classmethod
    def _versions(cls, v):
        return check_versions(v, allow_none=True)

    @field_validator("baseline", mode="before")
    @classmethod
    def _baseline(cls, v):
        return v if v is None else check_version(v)

    @field_validator("scales", mode="before")
    @classmethod
    def _check_scales(cls, v):
        if not isinstance(v, list):
            raise ValueError("expected a list of scale factors, e.g. [1, 10]")
        return _scales([_positive(x) for x in v])

    @field_validator("threads", mode="before")
    @classmethod
    def _check_threads(cls, v):
        return _threads(v)

    @field_serializer("threads", when_used="json")
    def _dump_threads(self, v: int):
        return "auto" if v == 0 else v  # what params say: the run's params.json validates back (pglab derive)

    @field_validator("experiments")
    @classmethod
    def _check_experiments(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"expected each experiment once; got {v}")
        return v

    @model_validator(mode="after")
    def _baseline_among_versions(self):
        if (
            self.baseline is not None
            and self.versions is not None
            and str(self.baseline) not in map(str, self.versions)
        ):
            raise key_error(PgbenchParams, "baseline", self.baseline, f"expected one of versions {self.versions}")
        return self

    @property
    def series_scales(self) -> list[int]:
        return self.series.scales or self.scales

    @property
    def scaling_scale(self) -> int:
        return self.scaling.scale or max(self.scales)

    def disk_bytes(self) -> dict[str, float]:
        """What this section puts on each server's disk, by the key that decides it (params_checks.check_disk)."""
        from ...core.run.params_checks import EMPTY_DB, PGBENCH_PER_SCALE

        b = self
        scales = set(b.scales) | {b.scaling_scale} if {"load", "select_only", "scaling"} & set(b.experiments) else set()
        series = set(b.series_scales) if "series" in b.experiments else set()
        if "buffers" in b.experiments:  # the same databases as select-only (pgbench_sS): only the scales it adds
            scales |= set(b.buffers.scales)
        return {"scales": sum(EMPTY_DB + PGBENCH_PER_SCALE * s for s in [*scales, *series])}

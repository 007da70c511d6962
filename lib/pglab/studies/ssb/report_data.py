"""The SSB report section's data: the derived tables of one profile read once (`_Data`), and the number
formatting its text shares. No server, no raw store."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from ...core import derived, stats
from . import reference as ref

# the tables every dataset has, old (before the paired analysis) and new
TABLES = (
    "environment_servers", "environment_machine", "environment_settings", "ssb_load", "ssb_availability",
    "ssb_executions", "ssb_summary", "ssb_speedup", "ssb_jit", "ssb_plans", "ssb_plans_study_workers",
    "ssb_checksums", "ssb_sweep", "ssb_sweep_summary",
)  # fmt: skip

NEAR_CEILING = stats.NEAR_CEILING  # share of the ceiling the studies' parallel gains reached (module docstring)
SETTINGS = ("shared_buffers", "effective_cache_size", "work_mem", "maintenance_work_mem", "max_worker_processes",
            "max_parallel_workers", "max_parallel_workers_per_gather", "min_parallel_table_scan_size", "jit")
_UNITS = {"8kB": 8192, "kB": 1024, "MB": 2**20, "B": 1}
_MODE_WORDS = {"serial": "serially", "parallel": "in parallel", "parallel_jit": "in parallel with JIT"}


# -- reading ----------------------------------------------------------------------------------------------------


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    return derived.read_table(name, profile, root=root)


def _floats(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
    # a table written without rows reads back as strings
    return df.with_columns(pl.col(c).cast(pl.Float64) for c in cols if c in df.columns)


class _Data:
    """The derived tables of one profile, with the few facts every part of the section needs."""

    def __init__(self, profile: str, root: Path | None):
        t = {n: _read(n, profile, root) for n in TABLES}
        self.execs = _floats(t["ssb_executions"], "seconds")
        self.timed = self.execs.filter(~pl.col("warmup"))
        self.ok = self.timed.filter(pl.col("error").is_null() & pl.col("seconds").is_not_null())
        self.sweep = _floats(t["ssb_sweep"], "seconds")
        self.sweep_ok = self.sweep.filter(~pl.col("warmup"), pl.col("error").is_null(), pl.col("seconds").is_not_null())
        self.summary = _floats(t["ssb_summary"], "median", "min", "max", "ci_low", "ci_high")
        self.speedup = _floats(t["ssb_speedup"], "median", "median_baseline", "ratio", "ci_low", "ci_high")
        self.jit = _floats(t["ssb_jit"], "median", "median_baseline", "ratio", "ci_low", "ci_high")
        self.plans, self.study_plans = t["ssb_plans"], t["ssb_plans_study_workers"]
        self.availability, self.checksums = t["ssb_availability"], t["ssb_checksums"]
        self.load, self.settings = t["ssb_load"], t["environment_settings"]
        self.sweep_summary = t["ssb_sweep_summary"]
        names = sorted(set(self.execs["server"]))
        env = t["environment_servers"].filter(pl.col("server").is_in(names))
        self.env = {r["server"]: r for r in env.sort("version_num", "server").iter_rows(named=True)}
        self.servers = [s for s in self.env] + [s for s in names if s not in self.env]  # oldest version first
        self.machine = dict(t["environment_machine"].select("key", "value").iter_rows())
        self.cores = int(self.machine["cpu_cores"]) if self.machine.get("cpu_cores") else None
        self.queries = [q for q in ref.QUERIES if q in set(self.execs["query"])]

    def version(self, server: str) -> str:
        e = self.env.get(server)
        return f"{e['major']}.{e['minor']}" if e else "unknown version"

    def workers(self, server: str) -> int | None:
        """Workers per Gather allowed in the timed parallel mode."""
        w = self.plans.filter(pl.col("server") == server, pl.col("mode") == "parallel")["allowed_workers"]
        return int(w.max()) if w.len() else None

    def ceiling(self, n_workers: int) -> float:
        return float(min(n_workers + 1, self.cores) if self.cores else n_workers + 1)

    def jit_reason(self, server: str) -> str | None:
        """Why the JIT mode has no data for this server (None when it has)."""
        a = self.availability.filter(pl.col("server") == server, pl.col("mode") == "parallel_jit")
        if a.is_empty():
            return "the parallel + JIT mode was not in this profile's modes"
        if not a["available"][0]:
            return f"{server} ({self.version(server)}) cannot run it: {a['reason'][0]}"
        if self.jit.filter(pl.col("server") == server).drop_nulls("ratio").is_empty():
            return "no successful parallel + JIT executions to compare"
        return None


# -- formatting -------------------------------------------------------------------------------------------------


def _inv(ratio, low, high) -> tuple:
    """A time ratio turned into a speed factor (how many times as fast), interval ends swapped."""

    def inv(v):
        return None if v is None or v == 0 or not math.isfinite(v) else 1 / v

    return inv(ratio), inv(high), inv(low)


def _x(v, low, high) -> str:
    text = stats.ratio_with_interval(v, low, high, none="no data")
    return text + (" (no interval)" if v is not None and not stats.interval(low, high) else "")


def _pct(v, low, high) -> str:
    if v is None:
        return "no data"
    return f"{v:+.0f} % " + (stats.interval(low, high, "+.0f") or "(no interval)")


def _size(n_bytes: float) -> str:
    for unit, f in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n_bytes >= f and n_bytes % f == 0:
            return f"{int(n_bytes // f)}{unit}"
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes >= 2**20 else f"{int(n_bytes)} B"


def _setting(row: dict) -> str:
    unit = row["unit"] or ""
    if unit in _UNITS and row["setting"].lstrip("-").isdigit() and int(row["setting"]) >= 0:
        return _size(int(row["setting"]) * _UNITS[unit])
    return row["setting"]


def _range(values: list[float], fmt: str = ".2f", unit: str = "×") -> str:
    return f"{min(values):{fmt}}–{max(values):{fmt}}{unit}" if values else "none"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _span(s: pl.Series) -> str:
    lo, hi = int(s.min()), int(s.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"


# -- findings ---------------------------------------------------------------------------------------------------


def _row(study: str, finding: str, claim: str, server: str, verdict: str, evidence: str) -> dict:
    return {"study": study, "finding": finding, "claim": claim, "server": server, "verdict": verdict,
            "evidence": evidence}  # fmt: skip


def _suite(ok: pl.DataFrame, cond: str, n_queries: int) -> pl.DataFrame:
    """Sum of the query times per (server, condition, repetition), for repetitions where every query ran."""
    return (
        ok.group_by("server", cond, "repetition")
        .agg(pl.col("seconds").sum().alias("total"), pl.col("query").n_unique().alias("queries"))
        .filter(pl.col("queries") == n_queries)
        .sort("server", cond, "repetition")
    )


def _totals(suite: pl.DataFrame, server: str, cond: str, value) -> list[float]:
    return suite.filter(pl.col("server") == server, pl.col(cond) == value)["total"].to_list()


def _ceiling_text(d: _Data, n: int) -> str:
    c = d.ceiling(n)
    capped = f", capped at the machine's {d.cores} cores" if d.cores and d.cores < n + 1 else ""
    return f"ceiling {c:g}× ({n} workers + the leader{capped}); a match needs ≥ {NEAR_CEILING * c:.2f}×"



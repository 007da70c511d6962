"""The SSB report section's data: the derived tables of one profile read once (`Data`), and the tables of the
paired analysis (`optional`). No server, no raw store."""

from __future__ import annotations

import polars as pl

from ...core import replicas
from ...core.installs import installs
from . import reference as ref
from .params import JIT_MODES

# the tables the section needs; those of the paired analysis are read by `optional`
TABLES = (
    "environment_servers",
    "environment_machine",
    "environment_settings",
    "ssb_load",
    "ssb_availability",
    "ssb_executions",
    "ssb_summary",
    "ssb_speedup",
    "ssb_jit",
    "ssb_plans",
    "ssb_plans_study_workers",
    "ssb_checksums",
    "ssb_sweep",
    "ssb_sweep_summary",
)


# -- reading ----------------------------------------------------------------------------------------------------


class Data:
    """The derived tables of one profile, with the few facts every part of the section needs."""

    def __init__(self, tables):
        t = {n: tables[n] for n in TABLES}
        self.execs, self.sweep, self.summary = t["ssb_executions"], t["ssb_sweep"], t["ssb_summary"]
        self.speedup, self.jit = t["ssb_speedup"], t["ssb_jit"]
        self.plans, self.study_plans = t["ssb_plans"], t["ssb_plans_study_workers"]
        self.availability, self.checksums = t["ssb_availability"], t["ssb_checksums"]
        self.load, self.settings = t["ssb_load"], t["environment_settings"]
        self.sweep_summary = t["ssb_sweep_summary"]
        names = sorted(set(self.execs["server"]))
        env = t["environment_servers"].filter(pl.col("server").is_in(names))
        self.env = {r["server"]: r for r in env.sort("version_num", "server").iter_rows(named=True)}
        self.servers = [s for s in self.env] + [s for s in names if s not in self.env]  # oldest version first
        self.bases = replicas.base_names(names)  # ssb_speedup and ssb_jit hold base servers (pooled clusters)
        skipped = tables.optional("ssb_skipped")
        # optional source builds this machine could not make (servers.installs[].optional): the claims say why
        self.unbuilt = (
            dict(
                skipped.filter(pl.col("reason").str.starts_with(installs.UNBUILT))
                .select("server", "reason")
                .iter_rows()
            )
            if {"server", "reason"} <= set(skipped.columns)
            else {}
        )
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
        a = self.availability.filter(pl.col("server") == server, pl.col("mode").is_in(list(JIT_MODES)))
        if a.is_empty():
            return "the parallel + JIT mode was not in this profile's modes"
        if not a["available"].any():
            return f"{server} ({self.version(server)}) cannot run it: {a['reason'][0]}"
        if self.jit.filter(pl.col("server") == self.bases.get(server, server)).drop_nulls("ratio").is_empty():
            return "no successful parallel + JIT executions to compare"
        return None

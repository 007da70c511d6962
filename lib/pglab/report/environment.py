"""The report's view of the recorded environment (derived tables `environment_*` of 00_environment)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ..core import derived

MACHINE_KEYS = ("cpu_model", "cpu_cores", "memory_gib", "os", "kernel", "clocksource", "cpu_governor", "python",
                "pglab_revision")  # fmt: skip


def machine_table(profile: str, root: Path | None = None) -> pl.DataFrame:
    m = derived.read_table("environment_machine", profile, root).with_columns(pl.col("value").cast(pl.String))
    order = {k: i for i, k in enumerate(MACHINE_KEYS)}
    return (
        m.filter(pl.col("key").is_in(MACHINE_KEYS))
        .with_columns(pl.col("value").fill_null("—"))
        .sort(pl.col("key").replace_strict(order, default=len(order)))
    )


def servers_table(profile: str, root: Path | None = None) -> pl.DataFrame:
    s = derived.read_table("environment_servers", profile, root)
    return s.select(
        "server", pl.col("version_string").str.split(" on ").list.first().alias("version"), "source",
        "data_checksums", "block_size",
        pl.when(pl.col("jit_available")).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("JIT available"),
    ).sort("server")  # fmt: skip


def versions(profile: str, root: Path | None = None) -> dict[str, str]:
    """server name -> "PostgreSQL 15.18" (for sentences in the report)."""
    s = derived.read_table("environment_servers", profile, root)
    return {r["server"]: f"PostgreSQL {r['major']}.{r['minor']}" for r in s.iter_rows(named=True)}


def timer_chart(profile: str, root: Path | None = None) -> alt.Chart:
    t = derived.read_table("environment_timing", profile, root)
    return (
        alt.Chart(t)
        .mark_bar()
        .encode(
            x=alt.X("per_loop_ns:Q", title="ns per clock read (pg_test_timing)"),
            y=alt.Y("server:N", title=None),
            tooltip=["server", alt.Tooltip("per_loop_ns:Q", title="ns per read")],
        )
        .properties(height=alt.Step(28), title="Cost of one clock read, per server")
    )

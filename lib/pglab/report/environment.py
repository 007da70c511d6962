"""The report's view of the recorded environment (derived tables `environment_*` of 00_environment)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import altair as alt
import polars as pl

from ..core import derived, replicas
from ..core.stats import builds

MACHINE_KEYS = (
    "cpu_model",
    "cpu_cores",
    "memory_gib",
    "os",
    "kernel",
    "clocksource",
    "cpu_governor",
    "python",
    "pglab_revision",
    "captured_utc",
    "booted_utc",
)
REFERENCE = "default"


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
    build = (
        pl.col("build")
        if "build" in s.columns  # runs before the build identity: the compiler alone
        else pl.col("version_string").map_elements(_compiler, return_dtype=pl.String)
    )
    return s.select(
        "server",
        pl.col("version_string").str.split(" on ").list.first().alias("version"),
        "source",
        build.alias("build"),
        pl.when(pl.col("jit_available")).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("JIT available"),
    ).sort("server")


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


def _compiler(version_string: str) -> str:
    """'gcc 7.5' from "PostgreSQL 14.17 on x86_64-pc-linux-gnu, compiled by gcc (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0,
    64-bit": the build's compiler, what a version comparison must hold equal."""
    return builds.compiler(version_string) or "compiler not recorded"


def run_header(profile: str, params, root: Path | None = None) -> str:
    """The report's first lines, in Markdown: which run this is (id, date, profile, machine, servers with their
    builds) and, for any profile but the reference, a banner saying what it is."""
    manifest = json.loads((derived.profile_dir(profile, root) / "MANIFEST.json").read_text())
    run_ids = sorted({e["run_id"] for e in manifest.values() if isinstance(e, dict) and e.get("run_id")})
    run = ", ".join(f"`{r}`" for r in run_ids) or "not recorded"
    m = dict(
        derived.read_table("environment_machine", profile, root)
        .select("key", pl.col("value").cast(pl.String))
        .iter_rows()
    )
    when = m.get("captured_utc")
    if not when and run_ids and (d := re.search(r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})\d{2}$", run_ids[0])):
        when = f"{d[1]}-{d[2]}-{d[3]} {d[4]}:{d[5]} UTC"
    machine = (
        f"{m.get('cpu_model') or 'CPU not recorded'}, {m.get('cpu_cores')} cores, {m.get('memory_gib')} GiB, "
        f"{m.get('os')}"
    )
    s = derived.read_table("environment_servers", profile, root).sort("major", "server")
    # params servers.clusters: a server's replica clusters share its build, so it is named once with their count
    bases = replicas.base_names(s["server"].to_list())
    count = Counter(bases.values())

    sizes = set(count.values())
    each = sizes.pop() if len(sizes) == 1 else None  # every server on as many clusters: said once, at the end

    # servers grouped by build (source, compiler, flags, JIT), so ten servers fit in two lines of the first screen
    groups: dict[str, list[str]] = {}
    for r in s.iter_rows(named=True):
        if bases[r["server"]] != r["server"]:
            continue
        k = count[r["server"]]
        build = (
            f"{r['source']}, {_compiler(r['version_string'])}"
            f"{' ' + r['build_opt'] if r.get('build_opt') else ''}{', JIT' if r['jit_available'] else ''}"
            f"{f', {k} clusters' if k > 1 and each is None else ''}"
        )
        groups.setdefault(build, []).append(f"{r['server']} {r['major']}.{r['minor']}")
    servers = "; ".join(f"{', '.join(names)} ({build})" for build, names in groups.items())
    if each and each > 1:
        servers += f"; each on {each} clusters"
    what = "the reference, `params/default.yaml`" if profile == REFERENCE else f"`{params.source}`"
    lines = [
        f"**Run {run}**, measured {when or 'at a time not recorded'} with profile `{profile}` ({what}) on {machine}.",
        "",
        f"**Servers:** {servers}.",
    ]
    if profile != REFERENCE:
        lines = [_banner(profile, params), ""] + lines
    return "\n".join(lines)


def _banner(profile: str, params) -> str:
    ssb = getattr(params, "ssb", None)
    sizes = f"SSB at SF {ssb.sf:g}, {ssb.repetitions} rounds" if ssb is not None else "its own sizes"
    smoke = ssb is not None and ssb.repetitions < 5
    said = (
        "a smoke test of every path: too few rounds for a verdict to be a finding"
        if smoke
        else "its verdicts hold for its own params, which differ from the reference's"
    )
    return f"> ⚠ **Not the reference report.** Profile `{profile}` ({sizes}): {said}."

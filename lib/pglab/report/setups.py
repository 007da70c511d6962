"""Each report section's question and how the study's setup differs from ours (scale, cores, versions, cache),
with why it matters: the default `question()` and `discussion()` of `report_sections` (a section module may
define its own). The studies' side is from docs/studies.md; ours is read from the run's derived tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..core import derived


@dataclass(frozen=True)
class Setup:
    question: str
    theirs: dict[str, str]  # aspect -> the study's setup (scale, cores, versions, cache)
    ours_scale: tuple[str, str, str] | None  # (table, column, how to say it: "{}" gets the values)
    ours_cache: str
    why: str


SETUPS = {
    "ssb_report": Setup(
        "Is a newer version faster on the Star Schema Benchmark, with and without parallel query; does JIT help; "
        "does q4.3 get fewer workers than allowed? (S1; S4 tests 2, A and B)",
        {"scale": "SSB SF 70 (S1, `lineorder` 41 GB); SF 100 (S4, ≈ 60 GB)",
         "cores": "8 cores / 16 threads (S1); 36 cores (S4 JIT), many-core server (S4 parallel)",
         "versions": "16.6 and 17.2 (S1); 9.5, 9.6, 10 and 11 (S4)",
         "cache": "pg_prewarm into shared_buffers of 48 GB (S1); pg_prewarm (S4)"},
        ("ssb_load", "sf", "SSB SF {}"), "pg_prewarm into shared_buffers (warm), every server alike",
        "At a small scale factor a query runs in tens of milliseconds, where fixed costs (planning, starting "
        "workers, JIT compilation) weigh far more than at SF 70: speed-ups and JIT gains shrink, and with few "
        "cores a 5-worker speed-up cannot be reached. Versions other than the study's answer 'is newer faster' "
        "for today's versions, not for 16.6 vs 17.2."),  # fmt: skip
    "auto_explain_report": Setup(
        "What do loading auto_explain and its settings (log_analyze, log_timing, logging every plan) cost, for a "
        "one-row and a million-row query? (S2)",
        {"scale": "1,000,000 rows in `tab1`, 5,000,000 / 50,000 pgbench transactions",
         "cores": "4 virtual CPUs (Hyper-V guest on a Core i5-6600)", "versions": "14.1",
         "cache": "the table in shared_buffers of 2 GB; log to a SATA SSD"},
        None, "the table prewarmed, shared_buffers as the params file sets it; the server log on this machine's disk",
        "The overhead of log_analyze is the clock read per row and node: its size depends on this machine's timer "
        "(shown under the environment) more than on the version; a Hyper-V guest's clock is slower, so the "
        "study's ANALYZE cost may be larger than ours. Fewer transactions than the study's widen our intervals."),
    "pgbench_report": Setup(
        "How did pgbench throughput change across versions; does it degrade without vacuum; how does it scale "
        "with clients? (S3; S4 scale-up)",
        {"scale": "pgbench scale 1, 10 and 100 (S3); the WG's benchmark (S4)",
         "cores": "a Core 2 Quad, 4 cores (S3); 72 cores (S4)", "versions": "7.3 … 9.1 (S3); 10 and 11 (S4)",
         "cache": "every setting at its default, OS cache (S3)"},
        ("pgbench_init", "scale", "pgbench scale {}"), "explicit settings from the params file, the same on every "
        "server (not each version's defaults)",
        "S3 compared versions whose defaults differed; we give every server the same explicit settings, so a "
        "difference here is the engine's, not its defaults'. Versions 7.3 … 9.1 are not run: HOT (8.3) and the "
        "old degradation cannot be seen, and on few cores the client scaling of a 72-core server cannot either."),
    "jit_operators_report": Setup(
        "How much time does JIT compilation save per aggregate operator? (S4 test 1)",
        {"scale": "SSB SF 100 `lineorder` (≈ 600 M rows)", "cores": "36 (Xeon Gold 6140)", "versions": "11",
         "cache": "pg_prewarm"},
        ("jit_operators_setup", "rows", "{} rows"), "pg_prewarm, serial plans (no parallel workers)",
        "JIT's saving is a share of the per-row work, and its compile cost is fixed: on a table this much smaller "
        "the fixed cost weighs more, so our savings can be smaller than 20–30 % without contradicting the "
        "mechanism. A server built without LLVM cannot test the claims at all."),
    "parallel_index_report": Setup(
        "Does a parallel B-tree build on lineorder get faster with more maintenance workers, and longer for larger "
        "indexes? (S4 test C)",
        {"scale": "SSB SF 100 `lineorder` (≈ 600 M rows)", "cores": "many-core server", "versions": "11",
         "cache": "not stated"},
        ("parallel_index_setup", "lineorder_rows", "`lineorder` of {} rows"), "the table prewarmed",
        "A sort's parallel gain needs cores: with as many workers as cores the leader and the workers compete, so "
        "'close to 1/N' can only show up to this machine's core count; a smaller index sorts in memory."),
    "partitioning_report": Setup(
        "Do hash partitioning and Parallel Append speed up a full scan spread over several drives? (S5)",
        {"scale": "600,000,000 rows, 6 partitions of ≈ 8 GB", "cores": "not stated (7 workers planned)",
         "versions": "11 development build", "cache": "OS cache dropped, minimal shared_buffers, 3 NVMe drives"},
        ("partitioning_setup", "rows", "{} rows in 6 partitions"), "warm: every partition pg_prewarm'ed",
        "The study's gain came from reading three drives at once (cold cache); ours is CPU-bound in a warm cache, "
        "so the speed-up is capped by this machine's cores, not by drive bandwidth: the claim about drives cannot "
        "be tested here, the plan shape and the spread of rows can."),
}


def _values(profile: str, root: Path | None, table: str, column: str) -> str | None:
    """The distinct values of one column of a derived table, as text ("1, 10"); None when it is not there."""
    path = derived.profile_dir(profile, root) / f"{table}.csv"
    if not path.exists():
        return None
    df = derived.read_table(table, profile, root)
    if column not in df.columns:
        return None
    vals = sorted(set(df[column].drop_nulls().to_list()))
    return ", ".join(f"{x:,g}" if isinstance(x, float) else f"{x:,}" if isinstance(x, int) else str(x) for x in vals)


def ours(name: str, profile: str, root: Path | None = None) -> dict[str, str]:
    """Our side of the comparison, from the run's environment and the section's setup table."""
    d = derived.profile_dir(profile, root)
    out = {"scale": "see how it was measured", "cores": "not recorded", "versions": "not recorded",
           "cache": SETUPS[name].ours_cache}  # fmt: skip
    spec = SETUPS[name].ours_scale
    if spec and (vals := _values(profile, root, spec[0], spec[1])):
        out["scale"] = spec[2].format(vals)
    if (d / "environment_machine.csv").exists():
        m = dict(derived.read_table("environment_machine", profile, root).cast(pl.String).iter_rows())
        out["cores"] = f"{m.get('cpu_cores') or '?'} cores ({m.get('cpu_model') or 'model not recorded'}), " \
                       f"{m.get('memory_gib') or '?'} GiB"  # fmt: skip
    if (d / "environment_servers.csv").exists():
        s = derived.read_table("environment_servers", profile, root)
        out["versions"] = ", ".join(f"{r['server']}: {r['major']}.{r['minor']}" for r in s.iter_rows(named=True))
    return out


def question(name: str) -> str:
    return SETUPS[name].question if name in SETUPS else ""


def discussion(name: str, profile: str, root: Path | None = None) -> str:
    """Markdown: the study's setup beside ours, then why the differences matter for reading the verdicts."""
    if name not in SETUPS:
        return ""
    s, o = SETUPS[name], ours(name, profile, root)
    rows = [f"| {k} | {s.theirs[k]} | {o[k]} |" for k in ("scale", "cores", "versions", "cache")]
    return "\n".join(["| | the study | this run |", "|---|---|---|", *rows, "", f"**Why it matters.** {s.why}"])

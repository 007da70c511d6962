"""How a study's setup differs from ours (scale, cores, versions, cache), with why it matters: the study's side
is its `Section` (from docs/studies.md), ours is read from the run's derived tables."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..core import derived
from ..studies.base import Section


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


def ours(section: Section, profile: str, root: Path | None = None) -> dict[str, str]:
    """Our side of the comparison, from the run's environment and the section's setup table."""
    out = {
        "scale": "see how it was measured",
        "cores": "not recorded",
        "versions": "not recorded",
        "cache": section.ours_cache,
    }
    spec = section.ours_scale
    if spec and (vals := _values(profile, root, spec[0], spec[1])):
        out["scale"] = spec[2].format(vals)
    tables = derived.Tables(profile, root)
    if "environment_machine" in tables:
        m = dict(derived.read_table("environment_machine", profile, root).cast(pl.String).iter_rows())
        out["cores"] = (
            f"{m.get('cpu_cores') or '?'} cores ({m.get('cpu_model') or 'model not recorded'}), "
            f"{m.get('memory_gib') or '?'} GiB"
        )
    if "environment_servers" in tables:
        s = derived.read_table("environment_servers", profile, root)
        out["versions"] = ", ".join(f"{r['server']}: {r['major']}.{r['minor']}" for r in s.iter_rows(named=True))
    return out


def discussion(section: Section, profile: str, root: Path | None = None) -> str:
    """Markdown: the study's setup beside ours, then why the differences matter for reading the verdicts."""
    o = ours(section, profile, root)
    rows = [f"| {k} | {section.theirs[k]} | {o[k]} |" for k in ("scale", "cores", "versions", "cache")]
    return "\n".join(["| | the study | this run |", "|---|---|---|", *rows, "", f"**Why it matters.** {section.why}"])

"""The report's appendix: every derived table with its size, checksum, the run that measured it and the kit
revision that derived it (MANIFEST.json; entries written before runs and revisions were recorded have neither),
and which revisions measured and derived this report's data, a `+dirty` one (uncommitted changes) flagged; and the
run's artefact rounds (`core.artefacts`), listed."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from ..core import derived
from ..core.stats import artefacts, paired

DIRTY = "+dirty"


def manifest(profile: str, root: Path | None = None) -> pl.DataFrame:
    """One row per table: table, rows, columns, sha256 (first 12), run_id, derived_by (null where not recorded)."""
    m = json.loads((derived.profile_dir(profile, root) / derived.MANIFEST).read_text())
    rows = [
        {
            "table": name.removesuffix(".csv"),
            "rows": e["rows"],
            "columns": len(e["columns"]),
            "sha256": e["sha256"][:12],
            "run_id": e.get("run_id"),
            "derived_by": e.get("derived_by"),
        }
        for name, e in sorted(m.items())
    ]
    schema = {
        "table": pl.String,
        "rows": pl.Int64,
        "columns": pl.Int64,
        "sha256": pl.String,
        "run_id": pl.String,
        "derived_by": pl.String,
    }
    return pl.from_dicts(rows, schema=schema)


def short_revision(rev: str | None) -> str:
    """'0ef1a006c2d9+dirty' from a full revision; '—' when not recorded."""
    if not rev:
        return "—"
    base, dirty = rev.removesuffix(DIRTY), rev.endswith(DIRTY)
    return f"`{base[:12]}`" + (f" **{DIRTY}**" if dirty else "")


def measured_by(profile: str, root: Path | None = None) -> str | None:
    """The kit revision that took the measurements, as 00_environment recorded it (environment_machine)."""
    if "environment_machine" not in derived.Tables(profile, root):
        return None
    m = derived.read_table("environment_machine", profile, root).cast(pl.String)
    return dict(m.iter_rows()).get("pglab_revision")


def provenance_markdown(profile: str, root: Path | None = None) -> str:
    """Which revisions measured and derived the data, and whether any had uncommitted changes."""
    measured = measured_by(profile, root)
    t = manifest(profile, root)
    derived_revs = sorted(set(t["derived_by"].drop_nulls()))
    runs = sorted(set(t["run_id"].drop_nulls()))
    unrecorded = t.filter(pl.col("derived_by").is_null()).height
    lines = [f"- **Measured by** kit revision {short_revision(measured)} (recorded by `00_environment`)."]
    if derived_revs:
        lines.append(
            "- **Derived by** "
            + ", ".join(short_revision(r) for r in derived_revs)
            + (f"; {unrecorded} table(s) from before revisions were recorded" if unrecorded else "")
            + "."
        )
    else:
        lines.append("- **Derived by**: not recorded (this manifest predates the record of revisions).")
    lines.append(
        "- **Runs**: " + (", ".join(f"`{r}`" for r in runs) if runs else "not recorded in this manifest") + "."
    )
    if any(r and r.endswith(DIRTY) for r in [measured, *derived_revs]):
        lines.append(
            f"- ⚠ A revision marked **{DIRTY}** had uncommitted changes: the code that produced these "
            "numbers is not exactly any commit."
        )
    return "\n".join(lines)


def inventory_markdown(profile: str, root: Path | None = None) -> str:
    """The tables as a Markdown table, with the manifest's check (every file matches its checksum)."""
    t = manifest(profile, root)
    problems = derived.verify(profile, root)
    check = (
        "Every table matches its SHA-256 checksum in the manifest."
        if not problems
        else f"**Checksum MISMATCH**: {', '.join(problems)}."
    )
    lines = [check, "", "| table | rows | columns | sha256 | run | derived by |", "|---|--:|--:|---|---|---|"]
    for r in t.iter_rows(named=True):
        lines.append(
            f"| `{r['table']}` | {r['rows']:,} | {r['columns']} | `{r['sha256']}` | "
            f"{r['run_id'] or '—'} | {short_revision(r['derived_by'])} |"
        )
    if t["run_id"].null_count() or t["derived_by"].null_count():
        lines += ["", "— : not recorded (the table was written before the manifest kept its run and revision)."]
    return "\n".join(lines)


def artefact_rounds(profile: str, root: Path | None = None) -> pl.DataFrame:
    """Every artefact round of the run's measurement tables (`core.artefacts`, methodology rule 18): table, cell
    (experiment, server, condition, item, metric where the table has them), round, its value, the median of the
    cell's other rounds and their ratio. Each is in raw and left out of every estimate, floor and prior."""
    tables = derived.Tables(profile, root)
    frames = []
    for name in tables:
        if not name.endswith("_measurements"):
            continue
        m = tables[name]
        if not {"server", "condition", "item", "round", "value", "warmup"} <= set(m.columns):
            continue
        cell = [c for c in ("experiment", "server", "condition", "item", "metric") if c in m.columns]
        timed = m.filter(~pl.col("warmup").cast(pl.Boolean)).with_columns(pl.col(cell).cast(pl.String))
        bad = artefacts.flagged(paired.round_values(timed, cell, artefacts=False), cell)
        if bad.height:
            frames.append(
                bad.select(
                    pl.lit(name).alias("table"),
                    pl.concat_str(cell, separator=" · ").alias("cell"),
                    "round",
                    "round_value",
                    "others",
                    "factor",
                )
            )
    schema = {
        "table": pl.String,
        "cell": pl.String,
        "round": pl.Int64,
        "round_value": pl.Float64,
        "others": pl.Float64,
        "factor": pl.Float64,
    }
    return pl.concat([f.cast(schema) for f in frames]) if frames else pl.DataFrame(schema=schema)


def artefacts_markdown(profile: str, root: Path | None = None) -> str:
    """The artefact rounds as a Markdown paragraph and table (or the sentence that there were none)."""
    t = artefact_rounds(profile, root)
    rule = (
        f"**Artefact rounds**: {artefacts.RULE}. Each is kept in the raw data, left out of every estimate, noise floor"
        " and prior, and measured again once (in runs made since the rule)."
    )
    if t.is_empty():
        return rule + " This run had none."
    lines = [
        rule,
        "",
        "| table | cell | round | its value | the other rounds' median | ratio |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for r in t.iter_rows(named=True):
        lines.append(
            f"| `{r['table']}` | {r['cell']} | {r['round']} | {r['round_value']:.4g} | {r['others']:.4g} | "
            f"{r['factor']:.2f}× |"
        )
    return "\n".join(lines)

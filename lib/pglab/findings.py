"""The shape every study's findings take in the report: one row per (study, finding, server), the source
study's claim beside our evidence (numbers with their 95 % interval) and a verdict from a fixed vocabulary."""

from __future__ import annotations

import polars as pl

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
UNDETERMINED = "undetermined"  # the interval is too wide to tell
NOT_RUN = "not run"  # not in this profile, or the server cannot run it (e.g. no JIT)
VERDICTS = (SUPPORTED, NOT_SUPPORTED, UNDETERMINED, NOT_RUN)

SCHEMA = {
    "study": pl.String,  # "S1" … "S5", the studies of docs/studies.md
    "finding": pl.String,  # short key, e.g. "q4.3_workers"
    "claim": pl.String,  # what the source study reported, in words and numbers
    "server": pl.String,  # our server, or "all"
    "verdict": pl.String,  # one of VERDICTS
    "evidence": pl.String,  # our sentence, computed from the data, with its uncertainty
}


def table(rows: list[dict]) -> pl.DataFrame:
    """Findings as a polars table with SCHEMA, checked, in a stable order."""
    df = pl.from_dicts(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)
    bad = sorted(set(df["verdict"]) - set(VERDICTS))
    if bad:
        raise ValueError(f"findings: verdicts {bad} are not among {VERDICTS}")
    missing = df.filter(pl.any_horizontal(pl.all().is_null()))
    if not missing.is_empty():
        raise ValueError(f"findings: rows with empty fields: {missing.to_dicts()}")
    return df.sort("study", "finding", "server", maintain_order=True)


def markdown(f: pl.DataFrame) -> str:
    """Findings for reading: each claim of the study once, then per server our verdict and evidence."""
    out = []
    for (finding, claim), g in f.group_by("finding", "claim", maintain_order=True):
        out.append(f"**{claim}** *(source study; finding `{finding}`)*\n")
        out += [f"- {r['server']}: **{r['verdict']}**. {r['evidence']}" for r in g.iter_rows(named=True)]
        out.append("")
    return "\n".join(out) if out else "*No findings.*"

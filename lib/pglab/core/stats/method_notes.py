"""Sentences every study's method writes alike: what its pooled clusters rest on. A study supplies its own nouns
(what a cluster was loaded with, which tables keep the clusters apart); the wording is kept here once."""

from __future__ import annotations

from collections.abc import Sequence


def clusters_paragraph(
    parts: Sequence[str], data: str, tables: str, over: str, how: str = "", more: str = ""
) -> str | None:
    """A study method's paragraph on its clusters: what each was loaded with (`data`), where its rows keep their own
    name (`tables`), what the clusters' disagreement is measured over (`over`), and per pooled table what it rests
    on (`parts`, e.g. `clusters_text`'s); `how` says how a comparison pairs its clusters where not side by side,
    `more` adds the study's own sentences. None where nothing was pooled (one cluster per server)."""
    if not parts:
        return None
    return (
        "- **Clusters**: every server measured on several independently made and loaded clusters (own initdb, data "
        f"directory and {data}; `<server>_c<k>` in the {tables}), interleaved; each comparison is the geometric mean "
        f"over its clusters{how}, its interval the rounds' plus the between-cluster variance (how the clusters "
        f"disagreed over {over}): " + "; ".join(parts) + "." + (f" {more}" if more else "")
    )

"""`make compare A=… B=…`: two derived datasets side by side (two machines, settings or versions).

    python -m pglab.report.compare --a default --b quick [--out build/compare/default-vs-quick]

A and B are each a profile, a run id or a folder of derived tables (compare_sources). Every function here
returns a tidy polars table; notebooks/compare.ipynb only calls them and shows the result.

- `ratios`: per study, table and key (server, query, condition …) of every table of medians with an interval
  (the `*_summary` tables), B / A of the medians. Its interval is the ratio of bounds, low_B / high_A …
  high_B / low_A: every ratio the two intervals allow, so it is conservative (wider than a bootstrap interval
  of the ratio would be). Those intervals are the tables' 95 % CIs, or min–max where a table has no CI.
  A change counts only when that interval excludes 1.
- `verdict_changes`: the same study / finding / server with a different verdict in the `*_findings` tables.
- `plan_changes`: plan fingerprint and shape columns that differ per server / query / condition (`*_plans*`).
- `environment_differences`: machine, server versions and settings (the `environment_*` tables).
- `effects`: whether each effect held. Every table of paired ratios both hold (the `*_paired` tables: a condition
  against its baseline within the same rounds, e.g. an experiment's work_mem=64MB / work_mem=1MB) gives the
  effect in A and in B, each with its own interval; the effect *held* when both intervals lie on the same side
  of 1 and overlap. Two runs of one experiment on a busy machine differ in their medians (the host's load moved),
  while the effect, measured within rounds, is what the experiment asks about: the notebook leads with it."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import altair as alt
import polars as pl

from ..core import charts, paths
from ..pgtools.environment import FOLDER_COLUMNS
from .compare_sources import (
    CompareError,
    Dataset,
    available,
    check_comparable,
    measure_keys,
    params_differences,
    resolve,
    study_of,
)

__all__ = ["CompareError", "Dataset", "available", "check_comparable", "params_differences", "resolve"]
NOTEBOOK = "compare.ipynb"
KERNEL = "pglab"
PLAN_KEYS = ("server", "mode", "query", "item", "condition", "operator", "workers", "key_columns")
PLAN_SHAPE = (
    "fingerprint",
    "nodes",
    "shape",
    "node_type",
    "leftmost_node_type",
    "leftmost_relation",
    "workers_planned",
    "nodes_below",
    "gathers",
    "parallel_append_under_gather",
)
# chosen afresh by the kit for every cluster or run, or where this clone lies: a difference says nothing of the runs
RUN_LOCAL = (
    "port",
    "unix_socket_directories",
    *FOLDER_COLUMNS,  # the server's folders: its install, its cluster, its socket
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
    "external_pid_file",
    "log_directory",
    "captured_utc",
)
# what a table's medians measure: (unit, which way is better)
UNITS = {
    "auto_explain": ("ms", "lower"),
    "jit_operators": ("ms", "lower"),
    "parallel_index": ("s", "lower"),
    "partitioning": ("s", "lower"),
    "pgbench_init": ("s", "lower"),
    "ssb": ("s", "lower"),
    "ssb_sweep": ("s", "lower"),
    "pgbench_scaling": ("tps", "higher"),
    "pgbench_select_only": ("tps", "higher"),
    "pgbench_series": ("tps", "higher"),
    "pgbench_buffers": ("tps", "higher"),
}
RATIO_SCHEMA = {
    "study": pl.String,
    "metric": pl.String,
    "server": pl.String,
    "item": pl.String,
    "a_median": pl.Float64,
    "a_low": pl.Float64,
    "a_high": pl.Float64,
    "b_median": pl.Float64,
    "b_low": pl.Float64,
    "b_high": pl.Float64,
    "ratio": pl.Float64,
    "ratio_low": pl.Float64,
    "ratio_high": pl.Float64,
    "interval": pl.String,
    "change": pl.String,
    "unit": pl.String,
    "better": pl.String,
}
BEYOND = ("B higher", "B lower")  # `change` values of a ratio whose interval excludes 1


_PLAIN = {
    "workers": "{} workers",
    "clients": "{} clients",
    "scale": "scale {}",
    "key_columns": "{} key columns",
    "run": "run {}",
}


def _item(keys: list[str]) -> pl.Expr:
    """The key columns other than server as plain words, e.g. 'parallel · q1.1' or 'scale 10 · 4 clients'."""
    if not keys:
        return pl.lit("")
    parts = []
    for k in keys:
        v = pl.col(k).cast(pl.String).fill_null("—")
        if k in _PLAIN:
            before, after = _PLAIN[k].split("{}")
            v = pl.lit(before) + v + pl.lit(after)
        parts.append(v)
    return pl.concat_str(parts, separator=" · ")


def _joined(a: pl.DataFrame, b: pl.DataFrame, keys: list[str], values: dict[str, str]) -> pl.DataFrame:
    """A's and B's rows joined on `keys`, each side's `values` (column: name) as floats named a_<name>, b_<name>."""

    def side(df: pl.DataFrame, s: str) -> pl.DataFrame:
        return df.select(
            *[pl.col(k).cast(pl.String) for k in keys],  # A may read "1" as a number, B as text
            *[pl.col(c).cast(pl.Float64).alias(f"{s}_{name}") for c, name in values.items()],
        )

    return side(a, "a").join(side(b, "b"), on=keys, how="inner", nulls_equal=True)


def _table_ratios(table: str, a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    low, high, interval = ("ci_low", "ci_high", "95 % CI") if "ci_low" in a.columns else ("min", "max", "min–max")
    j = _joined(a, b, keys, {"median": "median", low: "low", high: "high"})
    base = table.removesuffix("_summary")
    metric = pl.lit(base) + (pl.lit(" (") + pl.col("metric") + pl.lit(")") if "metric" in keys else pl.lit(""))
    rest = [k for k in keys if k not in ("server", "metric")]
    positive = pl.col("a_median") > 0
    j = j.with_columns(
        ratio=pl.when(positive).then(pl.col("b_median") / pl.col("a_median")),
        ratio_low=pl.when(positive & (pl.col("a_high") > 0)).then(pl.col("b_low") / pl.col("a_high")),
        ratio_high=pl.when(positive & (pl.col("a_low") > 0)).then(pl.col("b_high") / pl.col("a_low")),
    )
    change = (
        pl.when(pl.col("ratio_low").is_null() | pl.col("ratio_high").is_null())
        .then(pl.lit("no interval"))
        .when(pl.col("ratio_low") > 1)
        .then(pl.lit(BEYOND[0]))
        .when(pl.col("ratio_high") < 1)
        .then(pl.lit(BEYOND[1]))
        .otherwise(pl.lit("inside interval"))
    )
    unit, better = UNITS.get(base, ("", "lower"))
    unit_e, better_e = pl.lit(unit), pl.lit(better)
    if "metric" in keys:  # a table of several measures (e.g. an experiment's time_s and tps): each row its own
        m = pl.col("metric").cast(pl.String)
        unit_e = (
            pl.when(m.str.contains("tps"))
            .then(pl.lit("tps"))
            .when(m.str.ends_with("_ms"))
            .then(pl.lit("ms"))
            .when(m.str.ends_with("_s"))
            .then(pl.lit("s"))
            .otherwise(unit_e)
        )
        better_e = pl.when(m.str.contains("tps")).then(pl.lit("higher")).otherwise(better_e)
    return j.select(
        pl.lit(study_of(table)).alias("study"),
        metric.alias("metric"),
        (pl.col("server") if "server" in keys else pl.lit("all")).alias("server"),
        _item(rest).alias("item"),
        *[c for c in RATIO_SCHEMA if c[:2] in ("a_", "b_") or c.startswith("ratio")],
        pl.lit(interval).alias("interval"),
        change.alias("change"),
        unit_e.alias("unit"),
        better_e.alias("better"),
    ).cast(RATIO_SCHEMA)


def ratios(a: Dataset, b: Dataset) -> pl.DataFrame:
    """B / A per key of every table of medians both hold, with the ratio-of-bounds interval."""
    frames = [pl.DataFrame(schema=RATIO_SCHEMA)]
    for table in sorted(set(a.tables) & set(b.tables)):
        keys = measure_keys(a.columns(table))
        if keys is not None and keys == measure_keys(b.columns(table)):
            frames.append(_table_ratios(table, a.read(table), b.read(table), keys))
    return pl.concat(frames).sort("study", "metric", "server", "item")


def largest_changes(r: pl.DataFrame, k: int = 10) -> pl.DataFrame:
    """The K ratios furthest from 1 (in either direction) among those whose interval excludes 1."""
    return (
        r.filter(pl.col("change").is_in(BEYOND))
        .sort(pl.col("ratio").log().abs(), descending=True)
        .head(k)
        .with_columns(outcome(), *[_with_unit(c) for c in ("a_median", "b_median")])
        .select(
            "study", "metric", "server", "item", "a_median", "b_median", "ratio", "ratio_low", "ratio_high", "outcome"
        )
    )


def _with_unit(col: str) -> pl.Expr:
    """A median as text with its unit, e.g. '0.340 s', '23,742 tps'."""
    v = pl.col(col)
    text = (
        pl.when(v.abs() >= 100)
        .then(v.round(0).cast(pl.Int64).cast(pl.String))
        .otherwise(v.round_sig_figs(3).cast(pl.String))
    )
    return (text + pl.lit(" ") + pl.col("unit")).str.strip_chars().alias(col)


def outcome() -> pl.Expr:
    """B against A in the reader's terms: better, worse (beyond the interval, in the table's own sense of
    better: times lower, tps higher) or no change; 'no interval' where there is none."""
    up = pl.col("change") == BEYOND[0]
    return (
        pl.when(pl.col("change").is_in(BEYOND))
        .then(pl.when(up == (pl.col("better") == "higher")).then(pl.lit("B better")).otherwise(pl.lit("B worse")))
        .when(pl.col("change") == "no interval")
        .then(pl.lit("no interval"))
        .otherwise(pl.lit("no change"))
        .alias("outcome")
    )


def _findings(ds: Dataset) -> pl.DataFrame:
    cols = ["finding", "server", "claim", "verdict", "evidence"]
    frames = [pl.DataFrame(schema={"study": pl.String, **dict.fromkeys(cols, pl.String)})]
    for t in (t for t in ds.tables if t.endswith("_findings")):
        frames.append(ds.read(t).select(pl.lit(study_of(t)).alias("study"), *[pl.col(c).cast(pl.String) for c in cols]))
    return pl.concat(frames)


def verdict_changes(a: Dataset, b: Dataset) -> pl.DataFrame:
    """Findings (same study, finding and server) whose verdict differs between A and B."""
    j = _findings(a).join(_findings(b), on=["study", "finding", "server"], how="inner", suffix="_b")
    return (
        j.filter(pl.col("verdict") != pl.col("verdict_b"))
        .select(
            "study",
            "finding",
            "server",
            pl.col("verdict").alias("verdict_a"),
            "verdict_b",
            "claim",
            pl.col("evidence").alias("evidence_a"),
            "evidence_b",
        )
        .sort("study", "finding", "server")
    )


def _plan_shapes(df: pl.DataFrame, keys: list[str], shape: list[str]) -> pl.DataFrame:
    """One row per key (several rows of one plan fold into their sorted distinct values), all as text."""
    text = df.select(*[pl.col(c).cast(pl.String).fill_null("—") for c in keys + shape])
    return text.group_by(keys).agg(pl.col(c).unique().sort().str.join("; ") for c in shape)


def plan_changes(a: Dataset, b: Dataset) -> pl.DataFrame:
    """Per plan table, server and query/condition: each fingerprint or shape column whose value differs."""
    schema = dict.fromkeys(("study", "table", "server", "item", "column", "a", "b"), pl.String)
    frames = [pl.DataFrame(schema=schema)]
    for table in sorted(t for t in set(a.tables) & set(b.tables) if "_plans" in t):
        cols = [c for c in a.columns(table) if c in b.columns(table)]
        keys, shape = [c for c in cols if c in PLAN_KEYS], [c for c in cols if c in PLAN_SHAPE]
        if not keys or not shape:
            continue
        j = _plan_shapes(a.read(table), keys, shape).join(
            _plan_shapes(b.read(table), keys, shape), on=keys, how="inner", suffix="_b"
        )
        rest = [k for k in keys if k != "server"]
        for c in shape:
            frames.append(
                j.filter(pl.col(c) != pl.col(f"{c}_b")).select(
                    pl.lit(study_of(table)).alias("study"),
                    pl.lit(table).alias("table"),
                    (pl.col("server") if "server" in keys else pl.lit("all")).alias("server"),
                    _item(rest).alias("item"),
                    pl.lit(c).alias("column"),
                    pl.col(c).alias("a"),
                    pl.col(f"{c}_b").alias("b"),
                )
            )
    return pl.concat(frames).sort("study", "table", "server", "item", "column")


def _environment(ds: Dataset) -> pl.DataFrame:
    """Machine keys, server descriptions and settings as (section, server, item, value) text."""
    frames = [pl.DataFrame(schema=dict.fromkeys(("section", "server", "item", "value"), pl.String))]

    def add(section: str, df: pl.DataFrame, server: pl.Expr, item: str, value: pl.Expr) -> None:
        kept = df.filter(~pl.col(item).is_in(RUN_LOCAL))
        frames.append(kept.select(section=pl.lit(section), server=server, item=pl.col(item), value=value))

    if (m := ds.read("environment_machine")) is not None:
        add("machine", m, pl.lit(""), "key", pl.col("value").cast(pl.String))
    if (s := ds.read("environment_servers")) is not None:
        long = s.select(pl.all().cast(pl.String)).unpivot(index="server", variable_name="item", value_name="value")
        add("server", long, pl.col("server"), "item", pl.col("value"))
    if (st := ds.read("environment_settings")) is not None:
        value = pl.concat_str(
            [pl.col("setting").cast(pl.String), pl.col("unit").cast(pl.String)], separator=" ", ignore_nulls=True
        )
        add("setting", st, pl.col("server").cast(pl.String), "name", value.str.strip_chars())
    return pl.concat(frames)


def environment_differences(a: Dataset, b: Dataset) -> pl.DataFrame:
    """Every machine key, server property and setting whose value differs or exists on one side only. Server
    properties only where both sides record them: a column one side lacks is a newer kit, not another server."""
    keys = ["section", "server", "item"]
    ea, eb = _environment(a), _environment(b)
    recorded = set(ea.filter(section="server")["item"]) & set(eb.filter(section="server")["item"])
    j = ea.join(eb, on=keys, how="full", coalesce=True, suffix="_b")
    j = j.filter((pl.col("section") != "server") | pl.col("item").is_in(recorded))
    order = pl.col("section").replace_strict({"machine": 0, "server": 1, "setting": 2}, return_dtype=pl.Int8)
    return (
        j.filter(pl.col("value").ne_missing(pl.col("value_b")))
        .sort(order, "server", "item")
        .select(*keys, pl.col("value").alias("a"), pl.col("value_b").alias("b"))
    )


def by_study(r: pl.DataFrame, verdicts: pl.DataFrame, plans: pl.DataFrame) -> pl.DataFrame:
    """Per study: medians compared, how many moved beyond their interval each way, verdict and plan changes."""
    counts = r.group_by("study").agg(
        compared=pl.len(),
        b_higher=(pl.col("change") == BEYOND[0]).sum(),
        b_lower=(pl.col("change") == BEYOND[1]).sum(),
        geometric_mean_ratio=pl.col("ratio").log().mean().exp(),
    )
    v = verdicts.group_by("study").agg(verdict_changes=pl.len())
    p = plans.unique(["study", "table", "server", "item"]).group_by("study").agg(plan_changes=pl.len())
    out = counts.join(v, on="study", how="full", coalesce=True).join(p, on="study", how="full", coalesce=True)
    return out.with_columns(pl.col(pl.UInt32).fill_null(0)).sort("study")


def what_changed(
    env: pl.DataFrame, verdicts: pl.DataFrame, plans: pl.DataFrame, r: pl.DataFrame, params: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The one-screen summary: how many of each kind of difference, the params first."""
    params = params if params is not None else pl.DataFrame(schema={"kind": pl.String})
    judged = r.with_columns(outcome())["outcome"]
    rows = [
        ("params differences: workload (what is measured)", params.filter(pl.col("kind") == "workload").height),
        ("params differences: settings, servers, initdb", params.filter(pl.col("kind") == "settings").height),
        ("environment differences (machine, servers, settings; paths left out)", env.height),
        ("verdict changes", verdicts.height),
        (
            "plan changes (plans with a differing fingerprint or shape)",
            plans.unique(["table", "server", "item"]).height,
        ),
        ("medians compared (B / A)", r.height),
        ("… beyond their interval (the interval of B / A excludes 1)", r.filter(pl.col("change").is_in(BEYOND)).height),
        ("… of those, B better (times lower, tps higher)", (judged == "B better").sum()),
        ("… of those, B worse", (judged == "B worse").sum()),
    ]
    return pl.DataFrame(rows, schema={"what": pl.String, "count": pl.Int64}, orient="row")


OUTCOME_COLOURS = {"B better": "#1a9850", "B worse": "#d73027", "no change": "#8c8c8c", "no interval": "#c7c7c7"}


def ratio_chart(r: pl.DataFrame, k: int = 30, per_metric: int = 5) -> alt.Chart:
    """B / A with its interval on a log scale symmetric about 1 (a 20 % change is as wide either way, and ±5-50 %
    stay visible), a rule at 1, green where B is better, red where worse, grey where the interval holds 1: the K
    ratios furthest from 1, at most `per_metric` of each metric so that one table's many rows do not hide the
    others."""
    distance = pl.col("ratio").log().abs()
    data = (
        r.drop_nulls("ratio")
        .filter(pl.col("ratio") > 0)
        .sort(distance, descending=True)
        .filter(pl.int_range(pl.len()).over("metric") < per_metric)
        .head(k)
        .with_columns(
            outcome(),
            label=pl.concat_str(["metric", "server", "item"], separator=" · ").str.strip_chars(" ·"),
            lo=pl.coalesce(pl.when(pl.col("ratio_low") > 0).then("ratio_low"), "ratio"),
            hi=pl.coalesce("ratio_high", "ratio"),
        )
    )
    # the reach of the ratios themselves (an interval wider than that is clipped at the edge): one wide interval
    # must not squeeze every ±20 % change into a few pixels
    reach = min(max([1.1, *(max(x, 1 / x) for x in data["ratio"].to_list())]) * 1.25, 10.0)
    y = alt.Y(
        "label:N", sort=alt.EncodingSortField("ratio", order="descending"), title=None, axis=alt.Axis(labelLimit=420)
    )
    color = alt.Color(
        "outcome:N",
        title="B against A",
        scale=alt.Scale(domain=list(OUTCOME_COLOURS), range=list(OUTCOME_COLOURS.values())),
    )
    return charts.log_ratio_chart(
        data,
        y,
        color,
        "B / A of the medians (interval: ratio of bounds; log scale)",
        reach,
        ["study", "metric", "server", "item", "unit", "better", "a_median", "b_median", "ratio", "lo", "hi", "outcome"],
        50,
        f"B / A: the {data.height} ratios furthest from 1 (at most {per_metric} per metric)",
    )


# -- did each effect hold? ------------------------------------------------------------------------------------

# the statistics of a table of paired ratios (core.paired, between_runs.pool_clusters); every column before
# `n_rounds` is a key, and of those after it only these
PAIRED_AFTER_KEYS = ("workers",)
NOT_CONTEXT = ("kind", "better", "baseline", "a", "b")
HELD = {  # the outcome of an effect in A and B, in the order the notebook lists them (the news first)
    "reversed": "reversed: the intervals lie on opposite sides of 1",
    "not reproduced": "A's effect is not in B (B's interval holds 1)",
    "appeared": "an effect in B only (A's interval holds 1)",
    "held, other size": "held: same direction, but the intervals do not overlap",
    "held": "held: same direction, the intervals overlap",
    "no effect in either": "both intervals hold 1",
    "no interval": "a side has no interval",
}
HELD_COLOURS = {"A": "#4c78a8", "B": "#f58518"}
EFFECT_SCHEMA = {
    "study": pl.String,
    "table": pl.String,
    "effect": pl.String,
    "context": pl.String,
    "a_ratio": pl.Float64,
    "a_low": pl.Float64,
    "a_high": pl.Float64,
    "b_ratio": pl.Float64,
    "b_low": pl.Float64,
    "b_high": pl.Float64,
    "b_over_a": pl.Float64,
    "held": pl.String,
    "headline": pl.String,
}


def paired_keys(columns: list[str]) -> list[str] | None:
    """The key columns of a table of paired ratios (condition, baseline and what they were measured on), None
    for any other table. Read from the table's shape, not its name: a study or experiment that adds rows or key
    columns is compared as it is."""
    if not {"n_rounds", "ratio", "low", "high"} <= set(columns):
        return None
    if "baseline" not in columns and not {"a", "b"} <= set(columns):
        return None
    first = columns.index("n_rounds")
    return columns[:first] + [c for c in columns[first:] if c in PAIRED_AFTER_KEYS]


SELF_NAMED = ("condition", "b")  # condition columns whose values say what they are ("work_mem=64MB")
AA = ("_aa", "~aa")  # the suffixes of the A/A copies of a baseline (a study's, an experiment's)


def _condition_column(keys: list[str]) -> str | None:
    """The column of the condition an effect is of: `b` (against `a`) in an experiment's table, else the key
    column just before `baseline` (a mode, a server, a setting's value)."""
    if {"a", "b"} <= set(keys):
        return "b"
    before = keys[: keys.index("baseline")]
    return before[-1] if before else None


def _effect_label(keys: list[str]) -> pl.Expr:
    """'work_mem=64MB vs work_mem=1MB', 'mode parallel vs serial': the condition against its baseline."""
    cond = _condition_column(keys)
    base = "a" if cond == "b" else "baseline"
    if cond is None:
        return pl.col(base).cast(pl.String)
    named = pl.lit("") if cond in SELF_NAMED else pl.lit(f"{cond} ")
    return pl.concat_str([named, pl.col(cond).cast(pl.String), pl.lit(" vs "), pl.col(base).cast(pl.String)])


# context columns whose values say what they are (pg18, q1.1, time_s); any other goes with its name (workers 1)
SELF_NAMED_CONTEXT = (
    "experiment",
    "server",
    "query",
    "item",
    "metric",
    "mode",
    "operator",
    "what",
    "group",
    "condition",
)


def _context(keys: list[str], cond: str | None) -> pl.Expr:
    parts = [
        pl.col(k).cast(pl.String) if k in SELF_NAMED_CONTEXT else pl.lit(f"{k} ") + pl.col(k).cast(pl.String)
        for k in keys
        if k not in NOT_CONTEXT and k != cond
    ]
    if not parts:
        return pl.lit("")
    return pl.concat_str(parts, separator=" · ", ignore_nulls=True)


def _side(prefix: str) -> pl.Expr:
    """-1, 0 or 1: the side of 1 an interval lies on (0: it holds 1); null without an interval."""
    lo, hi = pl.col(f"{prefix}_low"), pl.col(f"{prefix}_high")
    return pl.when(lo.is_null() | hi.is_null()).then(None).when(hi < 1).then(-1).when(lo > 1).then(1).otherwise(0)


def _ratio_text(prefix: str) -> pl.Expr:
    def num(c: str) -> pl.Expr:  # two decimals: an interval's end at 0.998 must not read "1.0"
        return pl.col(c).map_elements(lambda x: f"{x:.2f}", return_dtype=pl.String)

    return pl.concat_str(
        [num(f"{prefix}_ratio"), pl.lit("× ["), num(f"{prefix}_low"), pl.lit("–"), num(f"{prefix}_high"), pl.lit("]")]
    ).fill_null(pl.concat_str([num(f"{prefix}_ratio"), pl.lit("× (no interval)")]))


def _table_effects(table: str, a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    cond = _condition_column(keys)

    def effects_only(df: pl.DataFrame) -> pl.DataFrame:
        # an A/A control (the baseline against its own copy) is the noise floor, not an effect
        if "kind" in df.columns:
            df = df.filter(pl.col("kind").cast(pl.String).ne_missing("A/A"))
        if cond is not None:
            df = df.filter(~pl.col(cond).cast(pl.String).str.ends_with(AA[0]).fill_null(False))
            df = df.filter(~pl.col(cond).cast(pl.String).str.ends_with(AA[1]).fill_null(False))
        return df

    j = _joined(effects_only(a), effects_only(b), keys, {c: c for c in ("ratio", "low", "high")})
    sa, sb = _side("a"), _side("b")
    overlap = (pl.col("a_low") <= pl.col("b_high")) & (pl.col("b_low") <= pl.col("a_high"))
    held = (
        pl.when(sa.is_null() | sb.is_null())
        .then(pl.lit("no interval"))
        .when((sa == 0) & (sb == 0))
        .then(pl.lit("no effect in either"))
        .when(sa == 0)
        .then(pl.lit("appeared"))
        .when(sb == 0)
        .then(pl.lit("not reproduced"))
        .when(sa != sb)
        .then(pl.lit("reversed"))
        .when(overlap)
        .then(pl.lit("held"))
        .otherwise(pl.lit("held, other size"))
    )
    out = j.with_columns(
        effect=_effect_label(keys),
        context=_context(keys, cond),
        b_over_a=pl.col("b_ratio") / pl.col("a_ratio"),
        held=held,
    )
    headline = pl.concat_str(
        [
            pl.lit("the effect of "),
            pl.col("effect"),
            pl.when(pl.col("context") != "").then(pl.lit(" (") + pl.col("context") + pl.lit(")")).otherwise(pl.lit("")),
            pl.lit(" was "),
            _ratio_text("a"),
            pl.lit(" in A and "),
            _ratio_text("b"),
            pl.lit(" in B: "),
            pl.col("held"),
        ]
    )
    return out.select(
        pl.lit(study_of(table)).alias("study"),
        pl.lit(table).alias("table"),
        *list(EFFECT_SCHEMA)[2:-1],
        headline.alias("headline"),
    ).cast(EFFECT_SCHEMA)


def effects(a: Dataset, b: Dataset) -> pl.DataFrame:
    """Every effect both runs measured (a row of a `*_paired` table in both, the A/A control left out): its B / A
    within rounds in A and in B with their intervals, and whether it held (HELD). The experiments first, the
    news (reversed, not reproduced, appeared) first within each study."""
    frames = [pl.DataFrame(schema=EFFECT_SCHEMA)]
    for table in sorted(set(a.tables) & set(b.tables)):
        keys = paired_keys(a.columns(table))
        if keys is not None and keys == paired_keys(b.columns(table)):
            frames.append(_table_effects(table, a.read(table), b.read(table), keys))
    order = pl.col("held").replace_strict({h: i for i, h in enumerate(HELD)}, default=len(HELD), return_dtype=pl.Int8)
    return pl.concat(frames).sort(pl.col("study") != "experiments", "study", order, "table", "effect", "context")


def effects_held(e: pl.DataFrame) -> pl.DataFrame:
    """Per study, how many effects came out each way (HELD's order), with what each outcome means."""
    counts = e.group_by("study", "held").agg(effects=pl.len())
    order = pl.col("held").replace_strict({h: i for i, h in enumerate(HELD)}, default=len(HELD), return_dtype=pl.Int8)
    return (
        counts.with_columns(meaning=pl.col("held").replace_strict(HELD, default=""))
        .sort(pl.col("study") != "experiments", "study", order)
        .select("study", "held", "effects", "meaning")
    )


def effects_markdown(e: pl.DataFrame, k: int = 12) -> str:
    """The headline: how many effects held, then one line per effect in words, the experiments' all (up to 3 K),
    the studies' news (reversed, not reproduced, appeared) up to K."""
    if not e.height:
        return "No effect both runs measured: they share no table of paired ratios (`*_paired`)."
    n = dict(e.group_by("held").len().iter_rows())
    counts = ", ".join(f"{n[h]} {h}" for h in HELD if n.get(h))
    lines = [f"**Of {e.height} effects both runs measured: {counts}.**", ""]
    mine = e.filter(pl.col("study") == "experiments")
    news = e.filter((pl.col("study") != "experiments") & pl.col("held").is_in(list(HELD)[:3]))
    for rows, limit in ((mine, 3 * k), (news, k)):
        lines += [f"- {h}" for h in rows["headline"].head(limit)]
        if rows.height > limit:
            lines.append(f"- … and {rows.height - limit} more in the table below")
    if not (mine.height or news.height):
        lines.append("Every effect held or was absent in both runs.")
    return "\n".join(lines)


def effect_chart(e: pl.DataFrame, k: int = 30) -> alt.Chart:
    """Each effect's B / A in run A and in run B, with their intervals, side by side on a log scale about 1: an
    effect that held has two bars on the same side of the dashed rule. The experiments' effects first, at most K."""
    rows = e.drop_nulls(["a_ratio", "b_ratio"]).filter((pl.col("a_ratio") > 0) & (pl.col("b_ratio") > 0)).head(k)
    label = pl.concat_str(
        [pl.col("effect"), pl.when(pl.col("context") != "").then(pl.lit(" · ") + pl.col("context"))],
        ignore_nulls=True,
    )
    rows = rows.with_columns(label=pl.concat_str([label, pl.lit(" — "), pl.col("held")]))
    long = pl.concat(
        [
            rows.select(
                "label",
                "held",
                pl.lit(run).alias("run"),
                pl.col(f"{s}_ratio").alias("ratio"),
                pl.coalesce(f"{s}_low", f"{s}_ratio").alias("lo"),
                pl.coalesce(f"{s}_high", f"{s}_ratio").alias("hi"),
            )
            for run, s in (("A", "a"), ("B", "b"))
        ]
    )
    values = [v for v in long["ratio"].to_list() + long["lo"].to_list() + long["hi"].to_list() if v and v > 0]
    reach = min(max([1.1, *(max(v, 1 / v) for v in values)]) * 1.1, 10.0)
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=520))
    color = alt.Color("run:N", title="run", scale=alt.Scale(domain=["A", "B"], range=list(HELD_COLOURS.values())))
    return charts.log_ratio_chart(
        long,
        y,
        color,
        "the effect: condition / baseline within rounds (log scale)",
        reach,
        ["label", "run", "ratio", "lo", "hi", "held"],
        45,
        f"Did each effect hold? A's and B's ratio with its interval ({rows.height} effects)",
        yOffset=alt.YOffset("run:N"),
    )


def out_dir(a: Dataset, b: Dataset) -> Path:
    return paths.ROOT / "build" / "compare" / f"{a.label}-vs-{b.label}"


def _for_notebook(ds: Dataset) -> str:
    """The spec as the notebook (cwd notebooks/) resolves it: a folder relative to the project root."""
    return paths.shown(ds.path) if ds.kind == "folder" else ds.spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.report.compare", description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="profile, run id or folder of derived tables")
    ap.add_argument("--b", required=True, help="profile, run id or folder of derived tables")
    ap.add_argument("--out", default=None, help="default: build/compare/<A>-vs-<B>/")
    ap.add_argument("--force", action="store_true", help="compare runs of other workloads too (shown as such)")
    args = ap.parse_args(argv)
    try:
        a, b = resolve(args.a), resolve(args.b)
        studies = check_comparable(a, b, force=args.force)
    except CompareError as e:
        print(f"error: cannot compare A {args.a!r} with B {args.b!r}: {e}", file=sys.stderr)
        return 2
    import papermill  # only once the two sides are good: a refusal need not wait for it

    from .html_export import write_html
    from .progress import ipc_kernel_manager

    out = paths.resolve(args.out) if args.out else out_dir(a, b)
    out.mkdir(parents=True, exist_ok=True)
    print(f"pglab compare: A {a.shown()} vs B {b.shown()}; studies {', '.join(studies)} -> {out}", flush=True)
    t0 = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="pglab-compare-"))  # the kernel's IPC sockets: private, no TCP warning
    try:
        papermill.execute_notebook(
            str(paths.NOTEBOOKS / NOTEBOOK),
            str(out / NOTEBOOK),
            parameters={"a": _for_notebook(a), "b": _for_notebook(b), "force": args.force},
            kernel_name=KERNEL,
            cwd=str(paths.NOTEBOOKS),
            progress_bar=False,
            kernel_manager_class=ipc_kernel_manager(folder),
        )
    except papermill.PapermillExecutionError as e:
        print(f"error: {NOTEBOOK} failed in cell {e.exec_count}: {e.ename}: {e.evalue}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    html = write_html(out / NOTEBOOK, out / "compare.html")
    print(f"pglab compare: {paths.shown(html)} in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

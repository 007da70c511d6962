"""Report section of study S4 test 1 (JIT per operator), computed from the derived tables only.

Verdicts, per server and operator, on the study's claim "JIT reduced the time by x %": supported when our
reduction's 95 % interval lies wholly above 0 (JIT detectably faster; the evidence says whether the study's
x lies inside, above or below our interval); not supported when JIT is detectably slower, or when no
difference is detectable and a reduction as large as the study's lies outside the interval; undetermined
otherwise; not run on a server without JIT or for an operator this profile left out."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from . import findings as fnd
from . import stats
from .derived import read_table
from .jit_operators_charts import jit_time_chart, reduction_chart, times_chart
from .jit_operators_study import GENERATOR, OPERATORS, STUDY_REDUCTION_PCT, STUDY_SUMMARY, TABLE, label

TITLE = "S4 · JIT per operator"
TABLES = (
    "jit_operators_setup",
    "jit_operators_conditions",
    "jit_operators_summary",
    "jit_operators_reduction",
    "jit_operators_jit_time",
)
STUDY = "S4"


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    return read_table(name, profile, root=root)


def _version(s: str | None) -> str:
    return (s or "unknown version").split(" on ")[0]


def _available(setup: pl.DataFrame) -> pl.DataFrame:
    return setup.filter(pl.col("jit_available") & pl.col("reason").is_null())


def _study_condition(conds: pl.DataFrame) -> str:
    rows = conds.filter(pl.col("role") == "study")["condition"].to_list()
    return rows[0] if rows else conds.filter(pl.col("role") != "baseline").sort("order")["condition"][0]


def method(profile: str, root: Path | None = None) -> str:
    setup = _read("jit_operators_setup", profile, root).sort("server")
    conds = _read("jit_operators_conditions", profile, root).sort("order")
    summ = _read("jit_operators_summary", profile, root)
    first = setup.row(0, named=True)
    servers = []
    for r in setup.iter_rows(named=True):
        state = "JIT available" if r["jit_available"] and r["reason"] is None else (r["reason"] or "not available")
        servers.append(f"{r['server']} ({_version(r['version_string'])}): {state}")
    ran = _available(setup)
    size = ""
    if ran.height and ran["table_bytes"][0] is not None:
        size = f", {ran['table_bytes'][0] / 2**20:.0f} MiB"
        warm = ran["prewarmed_blocks"][0]
        size += f", pg_prewarm'd ({warm:,} blocks)" if warm else ", not prewarmed"
    ops = ", ".join(f"{label(op)} `{OPERATORS[op][0]}`" for op in OPERATORS if op in set(summ["operator"]))
    cond_text = "; ".join(f"**{c['condition']}** ({c['role']}): `{c['settings']}`" for c in conds.iter_rows(named=True))
    seed = first["shuffle_seed"]
    return "\n".join([
        "Notebook 50 ran the study's simple aggregates with JIT off and on, on every server with JIT, after a "
        "warm-up, interleaved, every run kept.",
        "",
        f"- **Servers**: {'; '.join(servers)}.",
        f"- **Data**: `{TABLE}(c1 {first['column_type']}, c2 {first['column_type']})`, {first['rows']:,} rows "
        f"({GENERATOR}), VACUUM (FREEZE, ANALYZE){size}.",
        f"- **Queries**: `SELECT <aggregate> FROM {TABLE}` for {ops or 'no operator'}.",
        f"- **Conditions**, session settings per connection: {cond_text}.",
        f"- **Timing**: client wall time of each statement (send to last row, one connection per condition, as "
        f"psql's \\timing) and the backend's CPU time over it (`/proc/<pid>/schedstat`, kit servers); the "
        f"findings use {METRIC_WORDS[first['metric']]}. {first['repetitions']} repetitions after "
        f"{first['warmups']} warm-up round(s), "
        f"interleaved across conditions and operators"
        f"{f' (order shuffled within rounds, seed {seed})' if seed is not None else ''}. "
        "Reduction = 1 − median(JIT) / median(off), 95 % bootstrap interval. JIT phase times come from one "
        "separate, untimed `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` per server, condition and operator.",
    ])  # fmt: skip


def charts(profile: str, root: Path | None = None) -> list[alt.TopLevelMixin]:
    red = _read("jit_operators_reduction", profile, root)
    summ = _read("jit_operators_summary", profile, root)
    jt = _read("jit_operators_jit_time", profile, root)
    if red.is_empty():
        return []
    order = red.sort("operator_order")["label"].unique(maintain_order=True).to_list()
    return [reduction_chart(red), jit_time_chart(jt), times_chart(summ.sort("server", "condition"), order)]


def _where(pct: float, low: float, high: float) -> str:
    if pct < low:
        return f"the study's {pct:.1f} % is below our interval"
    if pct > high:
        return f"the study's {pct:.1f} % is above our interval"
    return f"the study's {pct:.1f} % lies inside our interval"


def _claim(operator: str) -> str:
    return f"JIT cut the time of {label(operator)} by {STUDY_REDUCTION_PCT[operator]:.1f} %"


METRIC_WORDS = {"cpu": "backend CPU time", "wall": "wall time"}


def operator_finding(r: dict | None, operator: str, server: str, condition: str) -> dict:
    pct = STUDY_REDUCTION_PCT[operator]
    row = {"study": STUDY, "finding": f"reduction_{operator}", "claim": _claim(operator), "server": server}
    if r is None or r["ratio"] is None:
        return row | {"verdict": fnd.NOT_RUN, "evidence": f"{server}: {label(operator)} not measured in this profile"}
    red, v = r["reduction_pct"], r["verdict"]
    times = f"({METRIC_WORDS[r['metric']]}, {r['n_baseline']} runs off / {r['n']} with JIT)"
    if v in (stats.TOO_FEW, stats.NO_DATA, stats.UNDEFINED, stats.NO_BASELINE):
        return row | {"verdict": fnd.UNDETERMINED, "evidence": f"{server} {condition}: {red:.1f} % {times}; {v}"}
    low, high = r["reduction_ci_low"], r["reduction_ci_high"]
    ci = f"[{low:.1f} – {high:.1f}]"
    if v == stats.LOWER:
        verdict, text = fnd.SUPPORTED, f"{red:.1f} % {ci} less time with JIT"
    elif v == stats.HIGHER:
        verdict, text = fnd.NOT_SUPPORTED, f"{-red:.1f} % [{-high:.1f} – {-low:.1f}] more time with JIT"
    else:
        verdict = fnd.NOT_SUPPORTED if pct > high else fnd.UNDETERMINED
        text = f"no detectable difference: {red:.1f} % {ci}"
    return row | {"verdict": verdict, "evidence": f"{server} {condition}: {text} {times}; {_where(pct, low, high)}"}


def _listed(measured: list[tuple[str, dict]], verdict: str) -> str:
    hits = [f"{label(op)} {r['reduction_pct']:.1f} % [{r['reduction_ci_low']:.1f} – {r['reduction_ci_high']:.1f}]"
            for op, r in measured if r["verdict"] == verdict]  # fmt: skip
    return "; ".join(hits) if hits else "none"


def findings_from(setup: pl.DataFrame, reduction: pl.DataFrame, study_condition: str) -> pl.DataFrame:
    """Per server: one finding per operator of the study and one on its summary, in the setup's metric
    (wall time for a server that gives no CPU time)."""
    rows = []
    red = reduction.filter((pl.col("condition") == study_condition) & pl.col("ratio").is_not_null())
    for s in setup.sort("server").iter_rows(named=True):
        server = s["server"]
        if not (s["jit_available"] and s["reason"] is None):
            why = s["reason"] or "JIT not available"
            for op in OPERATORS:
                rows.append({"study": STUDY, "finding": f"reduction_{op}", "server": server, "verdict": fnd.NOT_RUN,
                             "claim": _claim(op), "evidence": f"{server}: {why}"})  # fmt: skip
            rows.append({"study": STUDY, "finding": "all_operators", "claim": STUDY_SUMMARY, "server": server,
                         "verdict": fnd.NOT_RUN, "evidence": f"{server}: {why}"})  # fmt: skip
            continue
        ours = red.filter(pl.col("server") == server)
        metric = s["metric"] if s["metric"] in set(ours["metric"]) else "wall"
        mine = {r["operator"]: r for r in ours.filter(pl.col("metric") == metric).iter_rows(named=True)}
        ops = [operator_finding(mine.get(op), op, server, study_condition) for op in OPERATORS]
        rows += ops
        measured = [(op, mine[op]) for op in OPERATORS if op in mine]
        verdicts = [f["verdict"] for f in ops if f["verdict"] != fnd.NOT_RUN]
        if not verdicts:
            overall, evidence = fnd.NOT_RUN, f"{server}: no operator measured"
        else:
            unclear = [label(op) for op, r in measured if r["verdict"] not in (stats.LOWER, stats.HIGHER)]
            overall = (fnd.SUPPORTED if all(v == fnd.SUPPORTED for v in verdicts) and len(verdicts) == len(OPERATORS)
                       else fnd.NOT_SUPPORTED if fnd.NOT_SUPPORTED in verdicts else fnd.UNDETERMINED)  # fmt: skip
            evidence = (f"{server} {study_condition}, {METRIC_WORDS[metric]}, reduction [95 % CI]: detectably "
                        f"faster with JIT: {_listed(measured, stats.LOWER)}; detectably slower: "
                        f"{_listed(measured, stats.HIGHER)}; "
                        f"no detectable difference: {', '.join(unclear) or 'none'} ({len(measured)} operators "
                        "measured)")  # fmt: skip
        rows.append({"study": STUDY, "finding": "all_operators", "claim": STUDY_SUMMARY, "server": server,
                     "verdict": overall, "evidence": evidence})  # fmt: skip
    return fnd.table(rows)


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    setup = _read("jit_operators_setup", profile, root)
    conds = _read("jit_operators_conditions", profile, root)
    red = _read("jit_operators_reduction", profile, root)
    return findings_from(setup, red, _study_condition(conds))


"""Report section of study S4 test 1 (JIT per operator), computed from the derived tables only.

Verdicts, per server and operator, on the study's claim "JIT reduced the time by x %", from our reduction's
95 % interval [low, high] (see `judge`): supported only when the interval lies wholly above 0 AND holds x;
not supported when it lies wholly above 0 but below x (JIT helped, less than the study) or above x (more),
when JIT is detectably slower, or when it holds 0 but not x; undetermined when it holds both 0 and x, or
when there are too few runs for an interval; not run on a server without JIT or for an operator this profile
left out. The study's summary ("every operator") is supported only when every one of its operators was
measured and each is supported."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from ...core import findings as fnd
from ...core import paired, stats
from ...core.derived import profile_dir, read_table
from . import verdicts as jv
from .charts import jit_time_chart, reduction_chart, times_chart
from .params import GENERATOR, OPERATORS, QUALIFIED, STUDY_REDUCTION_PCT, STUDY_SUMMARY, label

TITLE = "S4 · JIT per operator"
TABLES = (
    "jit_operators_setup",
    "jit_operators_conditions",
    "jit_operators_summary",
    "jit_operators_reduction",
    "jit_operators_jit_time",
)
STUDY = "S4"


def _executions_text(first: dict) -> str:
    """How many executions a cell had per round and which one counts (older runs: one, not recorded)."""
    k = first.get("executions")
    if not k or k == 1:
        return ""
    pick = "the fastest" if first.get("round_value", "min") == "min" else "their median"
    if first.get("spread") == "round":  # runs before the field existed ran their passes back to back
        return (f", {k} passes per round over every operator, each operator's conditions together within a pass "
                f"({pick} of a cell's {k} counts: bursts of other load only add time, and its executions are a "
                "whole pass apart)")
    return (f", each operator's conditions together and {k} passes over them per round ({pick} counts: bursts "
            "of other load only add time)")


def _read(name: str, profile: str, root: Path | None) -> pl.DataFrame:
    return read_table(name, profile, root=root)


def _fast(profile: str, root: Path | None) -> bool:
    """Whether the comparisons were made in the fast mode (`paired.fast_compare`), not round by round."""
    return paired.is_fast(_read("jit_operators_paired", profile, root)["method"])


def _paired(profile: str, root: Path | None) -> bool:
    """Whether the run derived the paired tables (newer runs); the committed older data has none."""
    return (profile_dir(profile, root) / "jit_operators_noise.csv").exists()


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
        f"- **Data**: `{QUALIFIED}(c1 {first['column_type']}, c2 {first['column_type']})`, {first['rows']:,} rows "
        f"({GENERATOR}), VACUUM (FREEZE, ANALYZE){size}.",
        f"- **Queries**: `SELECT <aggregate> FROM {QUALIFIED}` for {ops or 'no operator'}.",
        f"- **Conditions**, session settings per connection: {cond_text}.",
        f"- **Timing**: client wall time of each statement (send to last row, one connection per condition, as "
        f"psql's \\timing) and the backend's own CPU time over it (`/proc/<pid>/schedstat`, kit servers: "
        f"the time it spent on a CPU, without time waiting for one; on this shared VM it still moves with other "
        f"load); the "
        f"findings use {METRIC_WORDS[first['metric']]}; failed runs count as missing, in both. "
        f"{first['repetitions']} rounds after "
        f"{first['warmups']} warm-up round(s), "
        f"interleaved across conditions and operators{_executions_text(first)}"
        f"{f' (order shuffled within rounds, seed {seed})' if seed is not None else ''}. "
        "Reduction = 1 − median(JIT) / median(off), 95 % bootstrap interval. JIT phase times come from one "
        "separate, untimed `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` per server, condition and operator.",
        *([jv.noise_markdown(_read("jit_operators_noise", profile, root), _read("jit_operators_drift", profile, root),
                             conds.filter(pl.col("role") == "baseline")["condition"][0], _fast(profile, root))]
          if _paired(profile, root) else []),
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
        return "below"
    if pct > high:
        return "above"
    return "inside"


def _claim(operator: str) -> str:
    return f"JIT cut the time of {label(operator)} by {STUDY_REDUCTION_PCT[operator]:.1f} %"


METRIC_WORDS = {"cpu": "backend CPU time", "wall": "wall time"}

# how our interval stands to 0 and to the study's figure -> (verdict, the words for it)
OUTCOMES = {
    "inside": (fnd.SUPPORTED, "less time with JIT, the study's figure inside our interval"),
    "less": (fnd.NOT_SUPPORTED, "less time with JIT, but less than the study"),
    "more": (fnd.NOT_SUPPORTED, "less time with JIT, and more than the study"),
    "slower": (fnd.NOT_SUPPORTED, "more time with JIT"),
    "no_difference_excludes": (fnd.NOT_SUPPORTED, "no detectable difference, the study's figure outside"),
    "no_difference_holds": (fnd.UNDETERMINED, "no detectable difference, the study's figure inside too"),
    "no_interval": (fnd.UNDETERMINED, "no interval to judge"),
}


def judge(r: dict, pct: float) -> str:
    """The outcome (a key of OUTCOMES) of one reduction row against the study's `pct`. The direction is the
    ratio's verdict from `pglab.stats.compare` (LOWER = the reduction's interval lies wholly above 0)."""
    v = r["verdict"]
    if v not in (stats.LOWER, stats.HIGHER, stats.NO_DIFFERENCE):
        return "no_interval"
    if v == stats.HIGHER:
        return "slower"
    where = _where(pct, r["reduction_ci_low"], r["reduction_ci_high"])
    if v == stats.LOWER:
        return {"inside": "inside", "above": "less", "below": "more"}[where]
    return "no_difference_holds" if where == "inside" else "no_difference_excludes"


def _ci(r: dict) -> str:
    return f"{r['reduction_pct']:.1f} % {stats.interval(r['reduction_ci_low'], r['reduction_ci_high'], '.1f')}"


def operator_finding(r: dict | None, operator: str, server: str, condition: str) -> dict:
    pct = STUDY_REDUCTION_PCT[operator]
    row = {"study": STUDY, "finding": f"reduction_{operator}", "claim": _claim(operator), "server": server}
    if r is None or r["ratio"] is None:
        return row | {"verdict": fnd.NOT_RUN, "evidence": f"{server}: {label(operator)} not measured in this profile"}
    red = r["reduction_pct"]
    times = f"({METRIC_WORDS[r['metric']]}, {r['n_baseline']} runs off / {r['n']} with JIT)"
    outcome = judge(r, pct)
    verdict = OUTCOMES[outcome][0]
    if outcome == "no_interval":
        return row | {"verdict": verdict, "evidence": f"{server} {condition}: {red:.1f} % {times}; {r['verdict']}"}
    low, high = r["reduction_ci_low"], r["reduction_ci_high"]
    study = f"the study's {pct:.1f} %"
    text = {
        "inside": f"{_ci(r)} less time with JIT {times}; {study} lies inside our interval",
        "less": f"JIT helped, but less than the study: {_ci(r)} less time with JIT {times}; {study} is above "
                "our interval",
        "more": f"JIT helped more than the study: {_ci(r)} less time with JIT {times}; {study} is below our "
                "interval",
        "slower": f"{-red:.1f} % {stats.interval(-high, -low, '.1f')} more time with JIT {times}, where the study "
                  f"saw {pct:.1f} % less",
        "no_difference_excludes": f"no detectable difference: {_ci(r)} {times}; {study} is above our interval",
        "no_difference_holds": f"no detectable difference: {_ci(r)} {times}; our interval holds both 0 and {study}"
                               ", too wide to tell",
    }[outcome]  # fmt: skip
    return row | {"verdict": verdict, "evidence": f"{server} {condition}: {text}"}


def _overall(server: str, condition: str, metric: str, measured: list[tuple[str, dict]]) -> tuple[str, str]:
    """The verdict on the study's summary and its evidence: supported only if every operator of the study
    was measured and each one is supported."""
    outcomes = {op: judge(r, STUDY_REDUCTION_PCT[op]) for op, r in measured}
    verdicts = [OUTCOMES[o][0] for o in outcomes.values()]
    n_ok = verdicts.count(fnd.SUPPORTED)
    if n_ok == len(OPERATORS):
        overall = fnd.SUPPORTED
    elif fnd.NOT_SUPPORTED in verdicts:
        overall = fnd.NOT_SUPPORTED
    else:
        overall = fnd.UNDETERMINED
    parts = []
    for key, (_, words) in OUTCOMES.items():
        hits = [f"{label(op)} {_ci(r)}" if key != "no_interval" else label(op)
                for op, r in measured if outcomes[op] == key]  # fmt: skip
        if hits:
            parts.append(f"{words}: {'; '.join(hits)}")
    missing = len(OPERATORS) - len(measured)
    tail = f"; {missing} of the study's {len(OPERATORS)} operators not measured" if missing else ""
    evidence = (f"{server} {condition}, {METRIC_WORDS[metric]}: {n_ok} of {len(measured)} operators measured "
                f"support the study's figure{tail}. Reduction [95 % CI]: {'. '.join(parts)}")
    return overall, evidence


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
        if not measured:
            overall, evidence = fnd.NOT_RUN, f"{server}: no operator measured"
        else:
            overall, evidence = _overall(server, study_condition, metric, measured)
        rows.append({"study": STUDY, "finding": "all_operators", "claim": STUDY_SUMMARY, "server": server,
                     "verdict": overall, "evidence": evidence})  # fmt: skip
    return fnd.table(rows)


def findings(profile: str, root: Path | None = None) -> pl.DataFrame:
    setup = _read("jit_operators_setup", profile, root)
    conds = _read("jit_operators_conditions", profile, root)
    if _paired(profile, root):  # the one verdict rule on paired rounds with the A/A noise floor
        return jv.findings_from(setup, *(_read(f"jit_operators_{n}", profile, root) for n in
                                         ("paired", "overall", "noise")), _study_condition(conds))  # fmt: skip
    red = _read("jit_operators_reduction", profile, root)
    return findings_from(setup, red, _study_condition(conds))


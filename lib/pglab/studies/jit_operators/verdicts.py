"""S4 test 1 (JIT per operator) under the one verdict rule (`core.stats.verdicts`, issue 16): JIT on vs off compared
within each round (`core.stats.paired`), the machine's noise floor from the A/A control (the baseline measured twice
per round under two labels, `pglab.core.stats.noise`), and the findings from those.

Each round gives one value per cell: the fastest of its back-to-back executions (params `executions`,
`round_value`), since on a shared VM bursts of other load only ever add time.

Why paired: the baseline itself was bimodal on this VM (count(*) 106–196 ms with JIT off, in runs minutes
apart); an unpaired interval over all runs mixes those modes into both conditions and flips verdicts. Within a
round both conditions ran seconds apart, so such a shift cancels.

Derived tables (all computable from the raw store's runs): `jit_operators_paired` (per server, metric, operator,
condition: the paired ratio over the baseline), `jit_operators_overall` (per server and condition: all operators
pooled, the geometric mean of each round's operator ratios), `jit_operators_drift`, `jit_operators_noise`."""

from __future__ import annotations

import numpy as np
import polars as pl

from ...core import replicas
from ...core.stats import between_runs as br
from ...core.stats import cluster_priors, noise, paired
from ...core.stats import findings as fnd
from ...core.stats import verdicts as vd
from .params import OPERATORS, STUDY_REDUCTION_PCT, STUDY_SUMMARY, JitOperatorsParams, label

STUDY = "S4"
METRIC_COLUMNS = {"wall": "ms", "cpu": "cpu_ms"}
# "roughly 20–30 % less time": a ratio of 0.75 with ±7 % (0.70–0.80)
SUMMARY_CLAIM = vd.Claim(STUDY_SUMMARY, vd.LOWER, 0.75, 0.07)
NEEDS_JIT = "needs a build with JIT (llvmjit)"


def operator_claim(operator: str) -> vd.Claim:
    pct = STUDY_REDUCTION_PCT[operator]
    return vd.Claim(f"JIT cut the time of {label(operator)} by {pct:.1f} %", vd.LOWER, 1 - pct / 100)


def timed(runs: pl.DataFrame, metric: str, round_value: str | None = "min") -> pl.DataFrame:
    """Timed, successful runs in the findings' metric (per server: wall time where it gives no CPU time), one
    value per cell and round: the fastest of the round's executions (round_value min) or their median; None:
    every execution."""
    ok = runs.filter(~pl.col("warmup") & pl.col("error").is_null())
    col = METRIC_COLUMNS[metric]
    has = ok.group_by("server").agg(pl.col(col).is_not_null().any().alias("_has"))
    ok = ok.join(has, on="server", how="left")
    use = pl.when(pl.col("_has")).then(pl.lit(metric)).otherwise(pl.lit("wall"))
    every = (
        ok.with_columns(metric=use)
        .with_columns(value=pl.when(pl.col("metric") == "cpu").then(pl.col("cpu_ms")).otherwise(pl.col("ms")))
        .select("server", "metric", "condition", "operator", "round", "value")
    )
    if round_value is None:
        return every
    return every.group_by("server", "metric", "condition", "operator", "round", maintain_order=True).agg(
        pl.col("value").min() if round_value == "min" else pl.col("value").median()
    )


def overall(t: pl.DataFrame, baseline: str) -> pl.DataFrame:
    """All operators pooled, per server, metric and condition: each round's operator ratios averaged in logs,
    then the ratio and interval over rounds as for one operator."""
    pr = paired.paired_ratios(t, ["server", "metric", "operator"], "condition", baseline, "round", "value")
    per_round = pr.group_by("server", "metric", "condition", "round").agg(pl.col("ratio").log().mean().alias("lr"))
    keys = ["server", "metric", "condition"]
    rows = [
        dict(zip(keys, k, strict=True)) | {"baseline": baseline, **paired.log_ratio_interval(np.asarray(g["lr"]))}
        for k, g in per_round.sort("round").group_by(keys, maintain_order=True)
    ]
    schema = dict.fromkeys([*keys, "baseline"], pl.String) | paired.PAIRED_SCHEMA
    return pl.from_dicts(rows, schema=schema).sort("server", "condition") if rows else pl.DataFrame(schema=schema)


def overall_fast(every: pl.DataFrame, baseline: str) -> pl.DataFrame:
    """All operators pooled in the fast mode, per server, metric and condition: the geometric mean of the
    operators' fast-mode ratios (every operator weighs alike), the rounds resampled together for all of them."""
    return paired.fast_compare(
        every, ["server", "metric"], "condition", baseline, "round", "value", item_col="operator"
    )


def noise_table(t: pl.DataFrame, baseline: str, aa: str, compare=paired.paired_compare) -> pl.DataFrame:
    """Per (base) server and metric: the A/A comparisons over the operators (by the study's `compare`), their
    false-difference rate and floor, over a server's A/A pairs pooled over its clusters (`noise.pool_aa`)."""
    cmp = noise.pool_aa(
        noise.aa_comparisons(
            t, ["server", "metric", "operator"], "condition", baseline, aa, "round", "value", compare=compare
        )
    )
    rows = [
        noise.row(STUDY, s, m, noise.noise_floor(g))
        for (s, m), g in cmp.group_by("server", "metric", maintain_order=True)
    ]
    return noise.table(rows).sort("server")


def compared(runs: pl.DataFrame, p: JitOperatorsParams, metric: str) -> pl.DataFrame:
    """The values the study compares in `metric` (per server: wall time where it gives no CPU time): fast mode,
    every execution of a cell (its quantile, `paired.fast_compare`); round, one value per round."""
    return timed(runs, metric, None if p.estimate == "fast" else p.round_value)


OPERATOR_KEYS = ["metric", "operator", "condition"]  # what names a per-operator comparison besides its server


def per_operator(
    every: pl.DataFrame, p: JitOperatorsParams, priors: str | None = "jit_operators_paired"
) -> tuple[pl.DataFrame, dict | None]:
    """Every condition over the baseline per server, metric and operator (`compared`'s values, by the study's
    comparison): jit_operators_paired. With replica clusters (params servers.clusters): one row per base server
    and comparison, its interval with the between-cluster variance from how its clusters disagreed over the
    operators (not the A/A copy's: both its sides share a cluster), shrunk toward the `priors` table's
    (`cluster_priors`; None: the run's own). Returns the table and that variance (None without)."""
    compare = paired.fast_compare if p.estimate == "fast" else paired.paired_compare
    pair = compare(every, ["server", "metric", "operator"], "condition", p.baseline, "round", "value")
    if not br.has_replicas(pair["server"].unique().to_list()):
        return pair, None
    var = br.cluster_variances(pair, OPERATOR_KEYS, variance_rows=pl.col("condition") != p.aa_condition)
    prior = cluster_priors.priors(priors) if priors else None
    return br.pool_clusters(pair, OPERATOR_KEYS, variances=var, priors=prior), var


def tables(runs: pl.DataFrame, p: JitOperatorsParams) -> dict[str, pl.DataFrame]:
    t = timed(runs, p.metric, p.round_value)
    by = ["server", "metric", "operator"]
    every = compared(runs, p, p.metric)
    compare, pooled = (paired.fast_compare, overall_fast) if p.estimate == "fast" else (paired.paired_compare, overall)
    pair, var = per_operator(every, p)
    over = pooled(every.filter(pl.col("condition") != p.aa_condition), p.baseline)
    if var is not None:
        # the pooled summary takes the operators' variance (an upper bound for a mean over operators, whose own
        # rows are too few to estimate it), and its own priors: its figure moves less between runs than one
        # operator's
        prior = cluster_priors.priors("jit_operators_overall")
        over = br.pool_clusters(over, ["metric", "condition"], variances=var, priors=prior)
    return {
        "jit_operators_paired": pair,
        "jit_operators_overall": over,
        "jit_operators_drift": paired.drift(t, by, "condition", p.baseline, "round", "value"),
        "jit_operators_noise": noise_table(every, p.baseline, p.aa_condition, compare),
    }


# -- findings ---------------------------------------------------------------------------------------------------------


def _untested(setup_row: dict) -> vd.Verdict:
    why = setup_row["reason"] or "JIT not available"
    if setup_row["jit_available"]:  # JIT is there, but the kit may not run here (an external server)
        return vd.not_run(why)
    return vd.not_testable(why, NEEDS_JIT)


def study_condition(conds: pl.DataFrame) -> str:
    """The condition the study's claims are scored on (`jit_operators_conditions`' role "study"), else the first
    after the baseline."""
    rows = conds.filter(pl.col("role") == "study")["condition"].to_list()
    return rows[0] if rows else conds.filter(pl.col("role") != "baseline").sort("order")["condition"][0]


def findings_from(
    setup: pl.DataFrame, pair: pl.DataFrame, pooled: pl.DataFrame, noise_tab: pl.DataFrame, study_condition: str
) -> pl.DataFrame:
    """Per server: one finding per operator of the study (its reduction as a ratio JIT / off) and one on its
    summary (all operators pooled), each by `verdicts.verdict` with the server's A/A noise floor."""
    rows = []
    bases = replicas.base_names(setup["server"].to_list())
    if br.has_replicas(setup["server"].to_list()):  # params servers.clusters: findings per base server, pooled
        setup = setup.filter(pl.col("server").replace_strict(bases) == pl.col("server"))
    for s in setup.sort("server").iter_rows(named=True):
        server = s["server"]
        claims = [(f"reduction_{op}", operator_claim(op), op) for op in OPERATORS]
        claims.append(("all_operators", SUMMARY_CLAIM, None))
        if not (s["jit_available"] and s["reason"] is None):
            rows += [vd.finding_row(STUDY, f, c, server, _untested(s)) for f, c, _ in claims]
            continue
        nz = noise_tab.filter(pl.col("server") == server)
        floor = nz["floor"][0] if nz.height else None
        mine = pair.filter((pl.col("server") == server) & (pl.col("condition") == study_condition))
        pool = pooled.filter((pl.col("server") == server) & (pl.col("condition") == study_condition))
        for finding, claim, op in claims:
            src = pool if op is None else mine.filter(pl.col("operator") == op)
            if src.is_empty():
                rows.append(
                    vd.finding_row(STUDY, finding, claim, server, vd.not_run(f"{server}: not measured in this profile"))
                )
                continue
            r = src.row(0, named=True)
            ev = vd.Evidence.from_row(r)
            v = vd.verdict(claim, ev, floor)
            how = "in the fast mode" if paired.is_fast(r.get("method")) else "paired within rounds"
            tail = f" ({r['metric']} time, JIT {study_condition} / off {how}{br.on_clusters(r)}"
            if "noise floor" not in v.reason:
                tail += f"; noise floor ±{floor:.1%}".replace("%", " %") if floor is not None else "; no A/A floor"
            v = vd.Verdict(v.label, v.reason + tail + ")", v.needs)
            rows.append(vd.finding_row(STUDY, finding, claim, server, v, ev))
    return fnd.table(rows)


def noise_markdown(noise_tab: pl.DataFrame, drift: pl.DataFrame, baseline: str, fast: bool = False) -> str:
    """The noise floor and drift, in a sentence per server, for the method text."""
    parts = []
    for r in noise_tab.iter_rows(named=True):
        if r["floor"] is None:
            parts.append(f"{r['server']}: no A/A interval ({r['method']})")
            continue
        d = drift.filter(pl.col("server") == r["server"])["drift"].drop_nulls()
        dtext = (
            f"; baseline drift 2nd / 1st half of rounds {d.min():.2f}–{d.max():.2f}× over the operators"
            if d.len()
            else ""
        )
        parts.append(
            f"{r['server']} ({r['metric']} time): noise floor ±{r['floor']:.1%}, A/A false-difference "
            f"rate {r['false_difference_rate']:.0%} of {r['n_pairs']} operator pairs{dtext}".replace("%", " %")
        )
    how = (
        "JIT on vs off in the machine's fast mode: the 10 % quantile of every execution of a cell (all rounds) "
        "over the baseline's, the interval from resampling the rounds (both sides alike), since on this VM "
        "whole rounds of one condition ran ~2× slow, which no per-round ratio survives"
        if fast
        else "JIT on vs off compared within each round (geometric mean of the round ratios; min–max below 10 rounds, "
        "labelled so)"
    )
    return (
        f"- **Paired, with a noise floor**: {how}; an A/A control ({baseline!r} measured twice per round under "
        "two labels, compared the same way) gives the noise floor every verdict uses. " + "; ".join(parts) + "."
    )

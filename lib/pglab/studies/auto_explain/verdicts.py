"""Study S2's claims scored with the one rule (`core.stats.verdicts`), from the raw runs alone.

Every comparison is paired within rounds (`paired.paired_compare`, the schedule's round as the block): the
stage runs every condition in every round, so a round's ratio B / A cancels whatever the machine did during it.
An A/A control (the baseline condition twice under two labels, interleaved like the rest) gives the noise floor
per server and item (`noise.aa_comparisons` + `noise.noise_floor`), passed to `verdicts.verdict`. "Costs
nothing" claims are "no change within ±negligible" (params, 5 % by default). Claims are quoted as S2 states
them (docs/studies.md), with its figures; what it only explained (the clock) is shown, not scored.

With replica clusters (params servers.clusters: pg15, pg15_c2, ...) a finding is per base server: each cluster's
figure and interval from its own rounds, pooled over the clusters (`between_runs.pool_clusters`): the geometric
mean, its interval the rounds' plus the between-cluster variance, the ratios' from the ratio table's comparisons
(or the ratio claims' own), the scale-free quantities' (ns per row, share removed, overhead ratio) from those
quantities' own disagreement between clusters; the noise floor per base server over all its clusters' A/A
pairs. The evidence says what each figure rests on (the method's "pooled: ... across k clusters × n rounds")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ...core import replicas
from ...core.stats import between_runs, cluster_priors, noise, paired
from ...core.stats import verdicts as v
from .params import STUDY_LATENCY_MS, AutoExplainParams

STUDY = "S2"
STUDY_ROWS = 1_000_000  # tab1's rows in the study: what its ns per row divide by


def _ms(cond: str, item: str) -> float:
    return STUDY_LATENCY_MS[(cond, item)]


def _r(b: tuple[str, str], a: tuple[str, str]) -> float:
    return _ms(*b) / _ms(*a)


@dataclass(frozen=True)
class Spec:
    """One claim: condition over baseline on an item, paired by round. `versus` (another item) compares the
    item with it: a ratio of the two items' paired ratios, or with quantity "overhead_ratio" of their overheads."""

    key: str
    condition: str
    baseline: str
    item: str
    claim: v.Claim
    versus: str | None = None
    # a claim scored on a scale-free quantity (rule 11) rather than the ratio: "ns_per_row", the overhead
    # (condition - baseline) per row of the table; "share_removed", how much of the overhead over `origin` (the
    # run without auto_explain) the condition removes from the baseline's; "overhead_ratio", the overhead
    # (condition - baseline) on the item over that on `versus`, the same rows on both sides
    quantity: str | None = None
    origin: str | None = None


def specs(p: AutoExplainParams) -> list[Spec]:
    """The claims of S2 (docs/studies.md), each with the study's own figures."""
    eps, base = p.negligible, p.baseline
    same = f"(no change within ±{eps:.0%})".replace("%", " %")
    out = [
        Spec(
            "loading",
            base,
            "not_loaded",
            "limit",
            v.Claim(
                "Loading auto_explain costs nothing measurable: limit 0.110 ms not loaded, 0.111 ms loaded "
                f"and disabled "
                f"(1.01×) {same}.",
                v.SAME,
                1.0,
                eps,
            ),
        )
    ]
    names = {"limit": "limit", "count": "count (parallel)", "count_serial": "serial count"}
    for item in ("limit", "count", "count_serial"):
        out.append(
            Spec(
                f"explain_{item}",
                "explain",
                base,
                item,
                v.Claim(
                    "Plain EXPLAIN (nothing logged) costs little and does not depend on the rows processed: "
                    f"{names[item]} "
                    f"{_ms(base, item):g} → {_ms('explain', item):g} ms ({_r(('explain', item), (base, item)):.2f}×) "
                    f"{same}.",
                    v.SAME,
                    1.0,
                    eps,
                ),
            )
        )
    out.append(
        Spec(
            "analyze_limit",
            "analyze",
            base,
            "limit",
            v.Claim(
                "log_analyze costs in proportion to the rows processed, so nothing on a one-row query: limit 0.111 → "
                f"0.112 ms (1.01×) {same}.",
                v.SAME,
                1.0,
                eps,
            ),
        )
    )
    # The count's claims are scored on the quantities their mechanism fixes (rule 11), for the parallel count as
    # for the serial one: a ratio of latencies depends on the table's size, the per-row cost does not. The
    # overhead is a difference, ANALYZE's latency less the baseline's in the same round, so what a query costs
    # once whatever its rows (the parallel plan's worker start-up, the statement's round trip) cancels in it and
    # what is left grows with the rows: divided by them it is the same at our 1e5 rows as at the study's 1e6.
    # (What ANALYZE itself adds once per query does not cancel: ~1 µs on the one-row query (analyze_limit); the
    # parallel plan's instrumentation of its workers, not measured apart, is taken to be small against the
    # ~1.6 ms the study's 15.7 ns per row give our 1e5 rows.)
    # Wall-clock, as the study's figures are. Tolerances, decided before any figure of ours was looked at: the
    # declared ×/÷ TOLERANCE for all of them, as for the serial claims, since the study gives one figure per cell
    # and no spread that would justify a factor of a claim's own. This machine's 2 cores run the parallel plan's 3
    # processes 2 at a time where the study's 4 vCPUs ran them side by side: its per-row cost can be divided by
    # at most 2 here, by 3 there (parallel_flag flags a speed-up beyond the cores); a parallel count costing more
    # per row than the study's, and less of a gap to the serial one, may be this machine's, not the mechanism's.
    for item in ("count", "count_serial"):
        ns = (_ms("analyze", item) - _ms(base, item)) / STUDY_ROWS * 1e6
        claim = v.Claim(
            f"log_analyze costs in proportion to the rows processed (1e6 rows): {names[item]} "
            f"{_ms(base, item):g} → {_ms('analyze', item):g} ms, {ns:.1f} ns per row.",
            v.HIGHER,
            ns,
            quantity="ns per row",
        )
        out.append(Spec(f"analyze_{item}", "analyze", base, item, claim, quantity="ns_per_row"))
    # The study: "with parallel query off the difference widens further" (パラレル無効にするとその差はさらに広がります),
    # the difference being ANALYZE's latency less the baseline's, and "parallel mode gives the better result"
    # (workers read the clock less often). So the quantity is the absolute overhead, serial over parallel: the
    # ratio of the two ns-per-row figures (the rows cancel, as the fixed costs do in each difference), 45.5 over
    # 15.7 ns, 2.89×. Not the ratio of the two latency ratios (1.90× over 1.70×, 1.12×): the study compares the
    # differences, and a latency ratio moves with the table's size and the parallel plan's start-up. Scored as a
    # ratio (the log-scale zones, 1 = no effect: equal overheads contradict the claim), not in proportion to the
    # study's value as a quantity is (0 = no effect), with no A/A floor (that is a latency ratio's; the rounds'
    # interval carries this one's noise): supported within 2.03×–4.91×, contradicted below 1.42×.
    ser, par = ((_ms("analyze", i) - _ms(base, i)) / STUDY_ROWS * 1e6 for i in ("count_serial", "count"))
    out.append(
        Spec(
            "analyze_serial_vs_parallel",
            "analyze",
            base,
            "count_serial",
            v.Claim(
                "log_analyze costs more without parallel query (workers read the clock less often): its overhead "
                f"grows from {par:.1f} ns per row on the parallel count to {ser:.1f} on the serial one, "
                f"{ser / par:.2f}× the parallel count's.",
                v.HIGHER,
                ser / par,
            ),
            versus="count",
            quantity="overhead_ratio",
        )
    )
    for item in ("count", "count_serial"):  # the claim's own quantity: the share of log_analyze's overhead removed
        a, n, b = _ms("analyze", item), _ms("analyze_no_timing", item), _ms(base, item)
        share = (a - n) / (a - b)
        claim = v.Claim(
            f"log_timing = off removes most of the log_analyze overhead: {names[item]} {a:g} → {n:g} ms over "
            f"{b:g} ms without auto_explain, {share:.0%} of the overhead removed.".replace("%", " %"),
            v.HIGHER,
            share,
            quantity="of the overhead removed",
        )
        out.append(
            Spec(f"timing_{item}", "analyze_no_timing", "analyze", item, claim, quantity="share_removed", origin=base)
        )
    for logged, quiet, what in (("explain_logged", "explain", "EXPLAIN"), ("analyze_logged", "analyze", "ANALYZE")):
        # The study's "≈ 30 %" is judged by the declared rule, ×/÷ TOLERANCE of its effect on the log scale (a
        # "±5 %" this text once gave was never what the rule did): the text states the band the rule uses.
        r = _r((logged, "limit"), (quiet, "limit"))
        band = f"{r ** (1 / v.TOLERANCE):.2f}×–{r**v.TOLERANCE:.2f}×"
        out.append(
            Spec(
                f"logging_{quiet}",
                logged,
                quiet,
                "limit",
                v.Claim(
                    f"Writing every plan to the log costs ≈ 30 % on a tiny query: limit {_ms(quiet, 'limit'):g} → "
                    f"{_ms(logged, 'limit'):g} ms ({what}, {r:.2f}×; ≈ read as within ×/÷ {v.TOLERANCE:g} of its "
                    f"effect, {band}).",
                    v.HIGHER,
                    r,
                ),
            )
        )
    return out


# -- evidence ---------------------------------------------------------------------------------------------------


def measured(runs: pl.DataFrame) -> pl.DataFrame:
    """Recorded (not warm-up) runs with a value and a round."""
    if runs.is_empty() or "round" not in runs.columns:
        return pl.DataFrame(
            schema={
                "server": pl.String,
                "condition": pl.String,
                "item": pl.String,
                "round": pl.Int64,
                "value": pl.Float64,
            }
        )
    return runs.filter(~pl.col("warmup").cast(pl.Boolean)).with_columns(pl.col("value").cast(pl.Float64))


def _pair(m: pl.DataFrame, server: str, item: str, cond: str, base: str) -> pl.DataFrame:
    """Per round: cond / base on one server and item."""
    d = m.filter((pl.col("server") == server) & (pl.col("item") == item) & pl.col("condition").is_in([cond, base]))
    return paired.paired_ratios(d, [], "condition", base, "round").select("round", "ratio")


def _round_medians(m: pl.DataFrame, server: str, item: str, conds: list[str]) -> pl.DataFrame:
    """Per round, the median run latency (ms) of each condition: one column per condition, rounds with all."""
    d = m.filter((pl.col("server") == server) & (pl.col("item") == item) & pl.col("condition").is_in(conds))
    if d.is_empty():
        return pl.DataFrame()
    wide = d.group_by("round", "condition").agg(pl.col("value").median()).pivot("condition", index="round")
    return wide.drop_nulls() if all(c in wide.columns for c in conds) else pl.DataFrame()


def quantity_rounds(m: pl.DataFrame, server: str, s: Spec, rows: int) -> np.ndarray | None:
    """The spec's scale-free quantity per round on one server (ns per row, share removed, or one item's overhead
    over another's); None without a round that has every condition (and item) it needs."""
    conds = [s.condition, s.baseline] + ([s.origin] if s.origin else [])
    w = _round_medians(m, server, s.item, conds)
    if s.quantity == "overhead_ratio" and not w.is_empty():  # both items in the same round
        o = _round_medians(m, server, s.versus, conds)
        w = w.join(o, on="round", suffix="_versus") if not o.is_empty() else o
    if w.is_empty():
        return None
    if s.quantity == "ns_per_row":
        q = (w[s.condition] - w[s.baseline]) / rows * 1e6
    elif s.quantity == "overhead_ratio":  # the rows cancel: the ratio of the two items' ns per row
        q = (w[s.condition] - w[s.baseline]) / (w[f"{s.condition}_versus"] - w[f"{s.baseline}_versus"])
    else:  # share_removed: (baseline - condition) / (baseline - origin)
        q = (w[s.baseline] - w[s.condition]) / (w[s.baseline] - w[s.origin])
    return q.to_numpy()


def _not_positive(q: np.ndarray, unit: str, flags: tuple[str, ...], where: str = "") -> v.Evidence | None:
    """Evidence without an interval when some round had no overhead (or none removed): no log to take; None when
    every round's quantity is positive."""
    ok = np.isfinite(q) & (q > 0)
    if ok.all():
        return None
    med = float(np.median(q))  # shown, not judged; a ratio only where the ratio strip's log scale can show it
    med = med if np.isfinite(med) and (med > 0 or unit != "×") else None
    how = f"per round, {int((~ok).sum())} of {len(q)} not positive{where}"
    return v.Evidence(med, None, None, len(q), None, how, flags, unit)


def quantity_evidence(m: pl.DataFrame, server: str, s: Spec, rows: int, flags: tuple[str, ...] = ()) -> v.Evidence:
    """The spec's scale-free quantity per round (`quantity_rounds`), its geometric mean and the interval over
    rounds (`paired.log_ratio_interval`): rounds pair the conditions (and items) as they do for a ratio."""
    unit = s.claim.quantity or "×"  # a ratio of two overheads is judged as a ratio
    q = quantity_rounds(m, server, s, rows)
    if q is None:
        return v.Evidence(None, None, None, unit=unit, flags=flags)
    if (none := _not_positive(q, unit, flags)) is not None:
        return none
    row = paired.log_ratio_interval(np.log(q))
    return v.Evidence(
        row["ratio"], row["low"], row["high"], row["n_rounds"], row["coverage"], row["method"], flags, unit
    )


def evidence(
    m: pl.DataFrame, server: str, s: Spec, flags: tuple[str, ...] = (), txns: pl.DataFrame | None = None
) -> v.Evidence:
    """Our ratio for a spec. With the runs' transactions (`txns`): in the fast mode (`paired.fast_compare`, every
    transaction of every round); else the geometric mean of the round ratios, interval over rounds (min–max < 10).
    A ratio of two items' ratios (`versus`) is always taken round by round."""
    if txns is not None and s.versus is None:
        d = txns.filter(
            (pl.col("server") == server)
            & (pl.col("item") == s.item)
            & pl.col("condition").is_in([s.condition, s.baseline])
        )
        fc = paired.fast_compare(d, [], "condition", s.baseline, "round")
        if fc.height:
            row = fc.row(0, named=True)
            return v.Evidence(
                row["ratio"], row["low"], row["high"], row["n_rounds"], row["coverage"], row["method"], flags
            )
    r = _pair(m, server, s.item, s.condition, s.baseline)
    if s.versus is not None:  # ratio of ratios, round by round: both items measured in the same round
        o = _pair(m, server, s.versus, s.condition, s.baseline).rename({"ratio": "other"})
        r = r.join(o, on="round").select("round", (pl.col("ratio") / pl.col("other")).alias("ratio"))
    logs = np.log(r["ratio"].to_numpy()) if r.height else np.array([])
    row = paired.log_ratio_interval(logs)
    return v.Evidence(row["ratio"], row["low"], row["high"], row["n_rounds"], row["coverage"], row["method"], flags)


# -- the noise floor, drift and the ceiling ----------------------------------------------------------------------


TXN_RESOLUTION_MS = 0.001  # pgbench's per-transaction log: latencies in whole microseconds


def noise_table(m: pl.DataFrame, p: AutoExplainParams, txns: pl.DataFrame | None = None) -> pl.DataFrame:
    """A/A (each aa_condition over the baseline, within rounds; in the fast mode with `txns`, as `evidence`) per
    server and item, per item over every server, per server over its items, and over everything: n_pairs,
    false-difference rate, floor. With replica clusters a server is a base server, its floor over the A/A pairs of
    all its clusters."""
    if not p.aa_names or m.is_empty():
        return noise.table([])
    fast = txns is not None
    aa = pl.concat(
        [
            noise.aa_comparisons(
                txns if fast else m,
                ["server", "item"],
                "condition",
                p.baseline,
                name,
                compare=paired.fast_compare if fast else paired.paired_compare,
            )
            for name in p.aa_names
        ],
        how="diagonal_relaxed",
    )
    how = "in the fast mode" if fast else "paired by round"
    aa_text = " and ".join(p.aa_names)
    rows = []
    # the values' resolution per base server and item: its coarsest cluster's step
    res: dict[tuple[str, str], float] = {}
    steps = resolutions(txns, p)
    bases = replicas.base_names(sorted({c for c, _ in steps}))
    for (cluster, item), step in steps.items():
        res[(bases[cluster], item)] = max(step, res.get((bases[cluster], item), 0.0))

    def add(server: str, metric: str, g: pl.DataFrame) -> None:
        # an item's floor is never below its values' resolution; a floor over several items is their A/A noise
        # alone (the coarsest item's step is not the others': `floor_of` applies each item's own)
        steps = [res[(sv, it)] for sv, it in zip(g["server"], g["item"], strict=True) if (sv, it) in res]
        one_item = g["item"].n_unique() == 1
        f = noise.noise_floor(g, max(steps) if steps and one_item else None)
        rows.append(noise.row(STUDY, server, metric, f | {"method": f"{aa_text} / {p.baseline}, {how}: {f['method']}"}))

    # a base server's A/A pairs pooled over its clusters (params servers.clusters), as its comparisons are
    aa = noise.pool_aa(aa)
    for (server,), g in aa.sort("server", "item").group_by(["server"], maintain_order=True):
        for item in g["item"].unique(maintain_order=True):
            add(server, f"latency, {item}", g.filter(pl.col("item") == item))
        add(server, "latency, all items", g)
    if aa.height:
        for item in aa["item"].unique(maintain_order=True):
            add("all", f"latency, {item}", aa.filter(pl.col("item") == item))
        add("all", "latency, all items", aa)
    return noise.table(rows)


def resolutions(txns: pl.DataFrame | None, p: AutoExplainParams) -> dict[tuple[str, str], float]:
    """{(cluster, item): the smallest relative step of its fast-mode ratio}: pgbench -l logs whole microseconds,
    so a quantile moves in steps of 1 µs over the baseline's value (none outside the fast mode)."""
    if txns is None:
        return {}
    q = (
        txns.filter(pl.col("condition") == p.baseline)
        .group_by("server", "item")
        .agg(pl.col("value").quantile(paired.FAST_QUANTILE, "linear").alias("q"))
    )
    return {(r["server"], r["item"]): TXN_RESOLUTION_MS / r["q"] for r in q.iter_rows(named=True) if r["q"]}


def floor_of(
    noise_df: pl.DataFrame, server: str, items: list[str], resolution: dict[str, float] | None = None
) -> float | None:
    """The largest floor of a server's items (a comparison of two items is as noisy as the noisier one); an
    item's own where its A/A pairs (one per A/A condition, pooled over the clusters) reach `noise.MIN_AA_PAIRS`,
    else the item's over every server (the same query: the default's two A/A conditions on two servers, four
    pairs), else the server's over all its items (a 1 ms query's bursts would gate a 5 ms one's claims: the last
    resort), else the run's over everything; a floor not the item's own is raised to the item's `resolution`
    ({item: relative step})."""
    candidates = [(server, "latency, all items"), ("all", "latency, all items")]
    vals = []
    for i in items:
        own = (server, f"latency, {i}")
        r = noise.floor_from(noise_df, [own, ("all", f"latency, {i}"), *candidates])
        if r is not None:
            shared = (r["server"], r["metric"]) != own
            vals.append(max(r["floor"], (resolution or {}).get(i, 0.0)) if shared else r["floor"])
    return float(max(vals)) if vals else None


def drift_table(m: pl.DataFrame, p: AutoExplainParams) -> pl.DataFrame:
    """How much the baseline moved between the first and the second half of the rounds, per server and item."""
    return paired.drift(m, ["server", "item"], "condition", p.baseline, "round")


def parallel_flag(m: pl.DataFrame, plans: pl.DataFrame, server: str, p: AutoExplainParams) -> str | None:
    """The baseline's parallel speed-up (serial count over count, paired by round) against min(processes,
    cores): above it the parallel figures are a measurement problem."""
    if plans.is_empty() or "processes" not in plans.columns:
        return None
    pr = plans.filter((pl.col("server") == server) & (pl.col("item") == "count"))["processes"]
    d = m.filter(
        (pl.col("server") == server)
        & (pl.col("condition") == p.baseline)
        & pl.col("item").is_in(["count", "count_serial"])
    )
    if pr.len() == 0 or d.is_empty():
        return None
    if int(pr[0]) < 2:  # e.g. parallel query off on the server: the "parallel" figures describe a serial plan
        return "count ran without parallel workers (1 process): its parallel figures are a measurement problem"
    r = paired.paired_ratios(d, [], "item", "count", "round")["ratio"]
    cores = int(m["cores"].drop_nulls().max()) if "cores" in m.columns and m["cores"].drop_nulls().len() else None
    speedup = float(np.exp(np.log(r.to_numpy()).mean())) if r.len() else None
    return noise.ceiling_check(speedup, int(pr[0]), cores)


# -- the findings ------------------------------------------------------------------------------------------------


def _needs(s: Spec, p: AutoExplainParams) -> list[str]:
    """Conditions and items a spec needs in the profile's matrix."""
    items = [s.item] + ([s.versus] if s.versus else [])
    missing = [c for c in (s.condition, s.baseline) if c not in p.conditions]
    missing += [
        f"{c} on {i}" for c in (s.condition, s.baseline) if c in p.conditions for i in items if i not in p.items_of(c)
    ]
    return missing


def clusters_of(servers) -> dict[str, list[str]]:
    """{base server: its clusters' names, first cluster first} (`replicas`); one cluster each without replicas."""
    bases = replicas.base_names(servers)
    out: dict[str, list[str]] = {}
    for n in sorted(servers, key=lambda n: (bases[n], replicas.split_name(n)[1] if bases[n] != n else 1)):
        out.setdefault(bases[n], []).append(n)
    return out


def _is_ratio(s: Spec) -> bool:
    """A claim on one ratio of the ratio table (condition over baseline on an item), not a quantity derived from
    several (ns per row, share removed, a ratio of two items')."""
    return s.quantity is None and s.versus is None


def _evidence_rows(per_cluster: dict[str, dict[str, v.Evidence]]) -> pl.DataFrame:
    """The clusters' evidence as a paired table (server = cluster, finding = the comparison) for
    `between_runs.pool_clusters`; a figure that is no positive ratio has none to pool."""
    rows = [
        {
            "server": cluster,
            "finding": key,
            "ratio": ev.ratio if ev.ratio is not None and ev.ratio > 0 else None,
            "low": ev.low,
            "high": ev.high,
            "n_rounds": ev.n_rounds,
            "coverage": ev.coverage,
            "method": ev.method,
        }
        for cluster, evs in per_cluster.items()
        for key, ev in evs.items()
    ]
    schema = {"server": pl.String, "finding": pl.String, **paired.PAIRED_SCHEMA}
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def design(m: pl.DataFrame) -> str:
    """The suffix of the S2 tables' prior names (`cluster_priors.DESIGNS`): ":interleaved" where the runs interleaved
    the conditions (`run.Batches`), "" for archived runs that measured each condition in a run of its own."""
    interleaved = "batch_order" in m.columns and m["batch_order"].drop_nulls().len() > 0
    return DESIGN_SUFFIX if interleaved else ""


DESIGN_SUFFIX = ":interleaved"


def pooled_evidence(
    m: pl.DataFrame,
    base: str,
    per_cluster: dict[str, dict[str, v.Evidence]],
    p: AutoExplainParams,
    flags: dict[str, tuple[str, ...]],
    ratio_variance: tuple[float, int] | None = None,
) -> dict[str, v.Evidence]:
    """One base server's findings pooled over its clusters ({cluster: {finding: evidence}}): per finding the
    geometric mean of the clusters' figures, its interval the rounds' plus the between-cluster variance
    (`between_runs.pool_clusters`). The ratio claims take `ratio_variance` (the ratio table's, from every
    comparison of the server but the A/A; None: from the ratio claims' own clusters), the scale-free quantities
    the variance of their own disagreement between clusters (a ns per row or a share moves between clusters
    otherwise than a latency ratio). A quantity some round of some cluster has not positive has no interval:
    the median over every cluster's rounds, shown, not judged."""
    by = {s.key: s for s in specs(p)}
    table = _evidence_rows(per_cluster)
    out: dict[str, v.Evidence] = {}
    k = len(per_cluster)
    for ratio in (True, False):
        t = table.filter(pl.col("finding").is_in([key for key, s in by.items() if _is_ratio(s) == ratio]))
        if t.is_empty():
            continue
        variances = {base: ratio_variance} if ratio and ratio_variance is not None else None
        # the ratios' variance shrinks toward the ratio table's prior, the quantities' toward their own
        prior = cluster_priors.priors(("auto_explain_ratios" if ratio else "auto_explain_quantities") + design(m))
        pooled = between_runs.pool_clusters(t, ["finding"], variances=variances, priors=prior)
        for r in pooled.iter_rows(named=True):
            s = by[r["finding"]]
            unit = s.claim.quantity or "×"
            if s.quantity:  # per round: a round of some cluster with no overhead leaves no log to take
                qs = [quantity_rounds(m, c, s, p.rows) for c in per_cluster]
                if all(q is not None for q in qs):
                    q = np.concatenate(qs)
                    where = f" over {k} clusters"
                    if (none := _not_positive(q, unit, flags[s.key], where)) is not None:
                        out[s.key] = none
                        continue
            method = r["method"]
            if not ratio and r["cluster_sd"] is not None:  # say which variance: the quantities', not the ratios'
                method = method.replace("between-cluster sd", "between-cluster sd of the quantities")
            out[s.key] = v.Evidence(
                r["ratio"], r["low"], r["high"], r["n_rounds"], r["coverage"], method, flags[s.key], unit
            )
    return out


# the evidence table (`auto_explain_evidence`): per claim and server the claim, our figure and the floor, which
# `judge` turns into findings under the one rule; derive writes it, Study.judge reads it (judged once)
CLAIM_COLUMNS = {
    "study": pl.String,
    "finding": pl.String,
    "server": pl.String,
    "statement": pl.String,
    "direction": pl.String,
    "study_ratio": pl.Float64,
    "margin": pl.Float64,
    "tolerance": pl.Float64,
    "quantity": pl.String,
    "not_run": pl.String,  # why the claim was not run here (its conditions missing from the matrix), else null
}
EVIDENCE_COLUMNS = {
    "ratio": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "n_rounds": pl.Int64,
    "coverage": pl.Float64,
    "method": pl.String,
    "flags": pl.String,  # the measurement problems, "; "-joined (null: none)
    "unit": pl.String,
    "floor": pl.Float64,  # the noise floor the claim is judged against (null: none, a quantity's claim)
}


def _evidence_row(s: Spec, server: str, ev: v.Evidence | None, floor: float | None, not_run: str | None) -> dict:
    c, e = s.claim, ev or v.Evidence(None, None, None)
    claim = {"statement": c.statement, "direction": c.direction, "study_ratio": c.ratio, "margin": c.margin}
    claim |= {"tolerance": c.tolerance, "quantity": c.quantity, "not_run": not_run}
    ours = {k: getattr(e, k) for k in ("ratio", "low", "high", "n_rounds", "coverage", "method", "unit")}
    return {"study": STUDY, "finding": s.key, "server": server, **claim, **ours} | {
        "flags": "; ".join(e.flags) or None,
        "floor": floor,
    }


def evidence_table(
    runs: pl.DataFrame,
    plans: pl.DataFrame,
    noise_df: pl.DataFrame,
    p: AutoExplainParams,
    txns: pl.DataFrame | None = None,
    variances: dict[str, tuple[float, int]] | None = None,
) -> pl.DataFrame:
    """One row per (claim, server): the claim, our evidence and the noise floor it is judged against (`judge`).
    With replica clusters one row per (claim, base server), each cluster's evidence pooled (`pooled_evidence`;
    the ratio claims with `variances`, {base server: (variance, df)} of the ratio table, where given)."""
    m = measured(runs)
    # a ratio of two items' ratios is taken round by round even in the fast mode: its floor must be too
    by_round = txns is not None and any(s.versus and not s.quantity for s in specs(p))
    round_noise = noise_table(m, p) if by_round else noise_df
    res = resolutions(txns, p)
    rows = []
    servers = clusters_of(m["server"].unique().to_list()) if m.height else {}
    for server, clusters in sorted(servers.items()):
        cluster_flags = {c: parallel_flag(m, plans, c, p) for c in clusters}
        flag = "; ".join(dict.fromkeys(f if len(clusters) == 1 else f"{c}: {f}" for c, f in cluster_flags.items() if f))
        todo, flags = [], {}
        for s in specs(p):
            if _needs(s, p):
                continue
            items = [s.item] + ([s.versus] if s.versus else [])
            flags[s.key] = (flag,) if flag and "count" in items else ()
            todo.append(s)
        per_cluster = {
            c: {
                s.key: quantity_evidence(m, c, s, p.rows, flags[s.key])
                if s.quantity
                else evidence(m, c, s, flags[s.key], txns)
                for s in todo
            }
            for c in clusters
        }
        # each item's values' resolution on this server: the coarsest of its clusters'
        steps = {i: max((x for (c, it), x in res.items() if c in clusters and it == i), default=0.0) for i in p.items}
        if len(clusters) == 1:
            evs = per_cluster[clusters[0]]
        else:
            evs = pooled_evidence(m, server, per_cluster, p, flags, (variances or {}).get(server))
        for s in specs(p):
            missing = _needs(s, p)
            if missing:
                rows.append(_evidence_row(s, server, None, None, f"not in this profile's matrix: {', '.join(missing)}"))
                continue
            items = [s.item] + ([s.versus] if s.versus else [])
            floor = None
            if not s.quantity:
                floor = floor_of(round_noise, server, items) if s.versus else floor_of(noise_df, server, items, steps)
            rows.append(_evidence_row(s, server, evs[s.key], floor, None))
    schema = CLAIM_COLUMNS | EVIDENCE_COLUMNS
    return pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def judge(evidence_df: pl.DataFrame) -> pl.DataFrame:
    """The findings (`core.stats.findings`' shape, numbers and all): each row of the evidence table under the one
    rule (`verdicts.verdict`), a claim whose conditions the matrix lacked not run."""
    from ...core.stats.findings import table

    rows = []
    for r in evidence_df.iter_rows(named=True):
        claim = v.Claim(r["statement"], r["direction"], r["study_ratio"], r["margin"], r["tolerance"], r["quantity"])
        if r["not_run"] is not None:
            rows.append(v.finding_row(r["study"], r["finding"], claim, r["server"], v.not_run(r["not_run"])))
            continue
        ev = v.Evidence(
            r["ratio"], r["low"], r["high"], r["n_rounds"], r["coverage"], r["method"],
            (r["flags"],) if r["flags"] else (), r["unit"],
        )  # fmt: skip
        verdict = v.verdict(claim, ev) if claim.quantity else v.verdict(claim, ev, r["floor"])
        rows.append(v.finding_row(r["study"], r["finding"], claim, r["server"], verdict, ev))
    return table(rows)


def findings(
    runs: pl.DataFrame,
    plans: pl.DataFrame,
    noise_df: pl.DataFrame,
    p: AutoExplainParams,
    txns: pl.DataFrame | None = None,
    variances: dict[str, tuple[float, int]] | None = None,
) -> pl.DataFrame:
    """The findings straight from the runs (`evidence_table`, then `judge`): what the stored tables give too."""
    return judge(evidence_table(runs, plans, noise_df, p, txns, variances))

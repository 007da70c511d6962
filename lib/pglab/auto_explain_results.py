"""From the stage's raw runs to the report: summaries, overhead ratios with 95 % CIs, the study's table
beside ours, the log proof, the timer explanation and a verdict per finding of the study.

Ratios are median latency of a condition over median latency of the baseline ("loaded, disabled") for
the same server and item, with a bootstrap interval (`pglab.stats`); the cost of writing the log is the
ratio of a logged condition to its nothing-logged counterpart (same settings, log_min_duration apart)."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from . import derived, stats
from .auto_explain_study import STUDY_BASELINE, STUDY_LATENCY_MS, AutoExplainParams
from .findings import NOT_RUN, NOT_SUPPORTED, SUPPORTED, UNDETERMINED

KEY = ["server", "condition", "item"]


def measured(runs: pl.DataFrame) -> pl.DataFrame:
    """The recorded (not warm-up) runs, one row each; failed runs keep value null."""
    if runs.is_empty():
        return pl.DataFrame(schema={**dict.fromkeys(KEY, pl.String), "repetition": pl.Int64, "value": pl.Float64})
    return runs.filter(~pl.col("warmup")).with_columns(pl.col("value").cast(pl.Float64))


def latencies(runs: pl.DataFrame) -> pl.DataFrame:
    """Every run, warm-ups included and flagged: the derived table of raw latencies."""
    cols = ["server", "condition", "item", "repetition", "warmup", "round", "value", "latency_avg_ms",
            "transactions", "tps",
            "elapsed_s", "loading", "preloaded", "restarted_before", "restarts", "error", "command",
            "client_version", "session_settings", "ts"]  # fmt: skip
    have = [c for c in cols if c in runs.columns]
    return runs.select(have).rename({"value": "latency_ms", "latency_avg_ms": "latency_printed_ms"}, strict=False)


def _labels(params: AutoExplainParams) -> pl.DataFrame:
    return pl.DataFrame(
        {"condition": list(params.conditions), "label": [c.label or n for n, c in params.conditions.items()],
         "condition_order": list(range(len(params.conditions)))}
    )  # fmt: skip


def study_latency(condition: str, item: str) -> float | None:
    return STUDY_LATENCY_MS.get((condition, item))


def study_ratio(condition: str, item: str, baseline: str = STUDY_BASELINE) -> float | None:
    a, b = study_latency(condition, item), study_latency(baseline, item)
    return a / b if a is not None and b else None


def summary(runs: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """Per server × condition × item: n, median, min, max, CI of the median (ms), and the study's ms."""
    s = stats.summarize(measured(runs), KEY, "value")
    study = [study_latency(c, i) for c, i in zip(s["condition"], s["item"], strict=True)]
    return s.with_columns(pl.Series("study_ms", study, dtype=pl.Float64)).join(_labels(params), on="condition")


def counterparts(params: AutoExplainParams) -> dict[str, str]:
    """Each logged condition and the nothing-logged one with the same settings otherwise."""
    def rest(c):
        return {k: v for k, v in c.settings.items() if k != "auto_explain.log_min_duration"}

    out = {}
    for name, c in params.conditions.items():
        if c.expected_plans != "every":
            continue
        for other, o in params.conditions.items():
            if o.load and o.expected_plans == "none" and rest(o) == rest(c) and other != params.baseline:
                out[name] = other
                break
    return out


def ratios(runs: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """Overhead ratios with 95 % CIs: every condition / baseline, and every logged condition / its
    nothing-logged counterpart (comparison "logging"). Study ratios beside, where the study has them."""
    m = measured(runs)
    base = stats.compare(m, ["server", "item"], "condition", params.baseline, "value")
    base = base.with_columns(pl.lit("overhead").alias("comparison"))
    rows = []
    for logged, quiet in counterparts(params).items():
        for (server, item), g in m.filter(pl.col("condition").is_in([logged, quiet])).group_by(
            ["server", "item"], maintain_order=True
        ):
            a = g.filter(pl.col("condition") == logged)["value"].to_list()
            b = g.filter(pl.col("condition") == quiet)["value"].to_list()
            if not a or not b:
                continue
            r = stats.ratio_ci(a, b)
            rows.append({"server": server, "item": item, "condition": logged, "baseline": quiet, "n": r["n_a"],
                         "n_baseline": r["n_b"], "median": r["stat_a"], "median_baseline": r["stat_b"],
                         "ratio": r["ratio"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "verdict": r["verdict"], "comparison": "logging"})  # fmt: skip
    both = pl.concat([base, pl.from_dicts(rows, schema=base.schema)], how="vertical") if rows else base
    study = [study_ratio(c, i, b) for c, i, b in zip(both["condition"], both["item"], both["baseline"], strict=True)]
    return both.with_columns(pl.Series("study_ratio", study, dtype=pl.Float64)).join(_labels(params), on="condition")


def log_checks(runs: pl.DataFrame) -> pl.DataFrame:
    """The log proof of every run (warm-ups too: every run is checked)."""
    cols = ["server", "condition", "item", "repetition", "warmup", "expect_plans", "log_check", "log_reason",
            "transactions", "plans_logged", "plans_parsed", "parse_errors", "plans_with_rows", "plans_with_times",
            "plans_other_query", "plan_format", "log_entries", "log_bytes", "plan_bytes",
            "log_bytes_per_txn"]  # fmt: skip
    return runs.select([c for c in cols if c in runs.columns])


def _sum(col: str) -> pl.Expr:
    """The sum, or null where nothing was counted (a log out of reach is not 0 plans logged)."""
    return pl.when(pl.col(col).is_not_null().any()).then(pl.col(col).sum())


def log_summary(checks: pl.DataFrame, params: AutoExplainParams) -> pl.DataFrame:
    """Per server × condition × item: runs checked and passed, plans logged against transactions."""
    if "log_check" not in checks.columns or checks.is_empty():
        return pl.DataFrame()
    # a server whose log the kit cannot read (an external one) has no counts at all: null columns, not missing
    num = ("plans_logged", "transactions", "plans_parsed", "plans_with_rows", "plans_with_times", "log_bytes_per_txn")
    checks = checks.with_columns([(pl.col(c) if c in checks.columns else pl.lit(None)).cast(pl.Float64).alias(c)
                                  for c in num])  # fmt: skip
    if "log_reason" not in checks.columns:
        checks = checks.with_columns(log_reason=pl.lit(None, dtype=pl.String))
    agg = checks.group_by(KEY + ["expect_plans"], maintain_order=True).agg(
        pl.len().alias("runs"),
        (pl.col("log_check") == "passed").sum().alias("passed"),
        (pl.col("log_check") == "failed").sum().alias("failed"),
        pl.col("log_check").filter(pl.col("log_check").is_in(["passed", "failed"]).not_()).first().alias("other"),
        pl.col("log_reason").drop_nulls().first().alias("first_reason"),
        _sum("plans_logged").alias("plans_logged"),
        _sum("transactions").alias("transactions"),
        _sum("plans_parsed").alias("plans_parsed"),
        _sum("plans_with_rows").alias("with_actual_rows"),
        _sum("plans_with_times").alias("with_times"),
        pl.col("log_bytes_per_txn").median().alias("log_bytes_per_txn"),
    )
    return agg.join(_labels(params), on="condition").sort(["server", "condition_order", "item"])


def timer(summary_df: pl.DataFrame, plans: pl.DataFrame, timer_df: pl.DataFrame, params: AutoExplainParams,
          analyze: str = "analyze", no_timing: str = "analyze_no_timing") -> pl.DataFrame:  # fmt: skip
    """The study's explanation on our data: ANALYZE with timing reads the clock twice per node call
    (a call per row returned, per loop); the extra latency over the baseline, per row processed and per
    clock read, next to what pg_test_timing says one read costs."""
    if plans.is_empty() or summary_df.is_empty():
        return pl.DataFrame()
    med = summary_df.select("server", "condition", "item", "median")

    def lat(cond, name):
        return med.filter(pl.col("condition") == cond).select("server", "item", pl.col("median").alias(name))

    t = (
        plans.select("server", "item", "nodes", "rows_processed", "node_calls", "processes")
        .join(timer_df.select("server", "per_loop_ns"), on="server", how="left")
        .join(lat(params.baseline, "baseline_ms"), on=["server", "item"], how="left")
        .join(lat(analyze, "analyze_ms"), on=["server", "item"], how="left")
        .join(lat(no_timing, "no_timing_ms"), on=["server", "item"], how="left")
    )
    cores = os.cpu_count() or 1
    return t.with_columns(
        (2 * pl.col("node_calls")).alias("clock_reads"),
        # the processes of a parallel plan run at once only as far as there are cores for them
        pl.min_horizontal(pl.col("processes"), pl.lit(cores)).alias("parallelism"),
        (pl.col("analyze_ms") - pl.col("baseline_ms")).alias("extra_ms"),
        (pl.col("no_timing_ms") - pl.col("baseline_ms")).alias("extra_no_timing_ms"),
    ).with_columns(
        (pl.col("extra_ms") * 1e6 / pl.col("rows_processed")).alias("extra_ns_per_row"),
        # the timing part alone (ANALYZE minus ANALYZE without timing), per clock read in one process
        ((pl.col("analyze_ms") - pl.col("no_timing_ms")) * 1e6 * pl.col("parallelism") / pl.col("clock_reads"))
        .alias("timing_ns_per_clock_read"),
        # what pg_test_timing predicts for the reads, spread over the processes that share the rows
        (pl.col("clock_reads") * pl.col("per_loop_ns") / pl.col("parallelism") / 1e6).alias("predicted_timing_ms"),
    ).sort(["server", "item"])


# -- the study's table -----------------------------------------------------------------------------------------


def study_table(ratios_df: pl.DataFrame, summary_df: pl.DataFrame) -> pl.DataFrame:
    """Long: condition × item × server with the study's latency and ratio beside our median and ratio."""
    over = ratios_df.filter(pl.col("comparison") == "overhead")
    keep = summary_df.select("server", "condition", "item", "label", "condition_order", "study_ms",
                             pl.col("median").alias("median_ms"))  # fmt: skip
    r = over.select("server", "condition", "item", "ratio", "ci_low", "ci_high", "verdict", "study_ratio")
    return keep.join(r, on=["server", "condition", "item"], how="left").sort(["condition_order", "item", "server"])


def _fmt_ratio(ratio, low, high) -> str:
    if ratio is None:
        return "—"
    if low is None or high is None:
        return f"{ratio:.2f}×"
    return f"{ratio:.2f}× [{low:.2f}–{high:.2f}]"


def study_table_wide(long: pl.DataFrame, items: list[str]) -> pl.DataFrame:
    """One row per condition: per item the study's ms and ratio, then our ratio [95 % CI] per server."""
    rows = []
    servers = sorted(long["server"].unique().to_list())
    for (cond, label), g in long.group_by(["condition", "label"], maintain_order=True):
        row = {"condition": label}
        for item in items:
            gi = g.filter(pl.col("item") == item)
            st_ms, st_r = study_latency(cond, item), study_ratio(cond, item)
            row[f"{item}: study"] = "" if st_ms is None else (
                f"{st_ms:g} ms" + (f" = {st_r:.2f}×" if st_r is not None and cond != STUDY_BASELINE else ""))
            for s in servers:
                r = gi.filter(pl.col("server") == s)
                if r.is_empty():
                    row[f"{item}: {s}"] = ""
                    continue
                r = r.row(0, named=True)
                if cond == STUDY_BASELINE or r["ratio"] is None:
                    row[f"{item}: {s}"] = f"{r['median_ms']:.3f} ms" if r["median_ms"] is not None else "failed"
                else:
                    row[f"{item}: {s}"] = _fmt_ratio(r["ratio"], r["ci_low"], r["ci_high"])
        rows.append(row)
    return pl.from_dicts(rows)


# -- findings -----------------------------------------------------------------------------------------------------


def _get(ratios_df: pl.DataFrame, server: str, condition: str, item: str, comparison: str = "overhead") -> dict | None:
    r = ratios_df.filter((pl.col("server") == server) & (pl.col("condition") == condition)
                         & (pl.col("item") == item) & (pl.col("comparison") == comparison))  # fmt: skip
    if r.is_empty():
        return None
    row = r.row(0, named=True)
    return row if row["ratio"] is not None else None


def _r(x: dict) -> str:
    return _fmt_ratio(x["ratio"], x["ci_low"], x["ci_high"])


def _pct(x: dict) -> str:
    return f"{(x['ratio'] - 1) * 100:+.1f} %"


def _has_ci(x: dict | None) -> bool:
    return x is not None and x["ci_low"] is not None


def _null_claim(x: dict | None, eps: float, what: str) -> tuple[str, str]:
    """A claim that something costs nothing, tested as equivalence: supported when the ratio's whole
    95 % interval lies within 1 ± eps, not supported when it lies wholly outside, undetermined otherwise
    (an interval that contains 1 but is wider than the band shows no difference, and no equivalence
    either)."""
    if x is None:
        return NOT_RUN, f"{what}: not measured"
    if not _has_ci(x):
        return UNDETERMINED, f"{what}: {_r(x)}, too few repetitions for an interval"
    lo, hi = x["ci_low"], x["ci_high"]
    band = f"±{eps * 100:g} %"
    if 1 - eps <= lo and hi <= 1 + eps:
        return SUPPORTED, f"{what}: {_r(x)}, within {band}"
    if lo > 1 + eps or hi < 1 - eps:
        return NOT_SUPPORTED, f"{what}: {_pct(x)}, {_r(x)}, beyond {band}"
    if lo <= 1 <= hi:
        return UNDETERMINED, f"{what}: no detectable difference, {_r(x)}, but the interval is wider than {band}"
    return UNDETERMINED, f"{what}: {_pct(x)}, {_r(x)}: detectable, partly beyond {band}"


def _combine(verdicts: list[str]) -> str:
    verdicts = [v for v in verdicts if v != NOT_RUN]
    if not verdicts:
        return NOT_RUN
    if NOT_SUPPORTED in verdicts:
        return NOT_SUPPORTED
    return SUPPORTED if all(v == SUPPORTED for v in verdicts) else UNDETERMINED


def _above(a: dict, b: dict) -> bool | None:
    """a's interval entirely above b's (True), entirely below (False), overlapping (None)."""
    if not (_has_ci(a) and _has_ci(b)):
        return None
    if a["ci_low"] > b["ci_high"]:
        return True
    if a["ci_high"] < b["ci_low"]:
        return False
    return None


def _finding_loading(rt, server, p) -> tuple[str, str]:
    x = _get(rt, server, "not_loaded", "limit")
    if x is not None:  # loaded / not loaded is the inverse of not_loaded / loaded_disabled
        x = x | {"ratio": 1 / x["ratio"], "ci_low": 1 / x["ci_high"] if x["ci_high"] else None,
                 "ci_high": 1 / x["ci_low"] if x["ci_low"] else None}  # fmt: skip
    v, text = _null_claim(x, p.negligible, "loaded and disabled vs not loaded, limit")
    return v, text + " (study: 0.111 / 0.110 ms = 1.01×)."


def _finding_explain(rt, server, p) -> tuple[str, str]:
    items = p.items_of("explain") if "explain" in p.conditions else []
    if not items:
        return NOT_RUN, "no condition 'explain' in this profile."
    parts = [_null_claim(_get(rt, server, "explain", i), p.negligible, f"{i}") for i in items]
    return _combine([v for v, _ in parts]), "EXPLAIN without ANALYZE, nothing logged: " + "; ".join(
        t for _, t in parts) + " (study: 1.00–1.01×)."  # fmt: skip


# Derived figures (a difference of medians, a share of an overhead) get their interval the way
# pglab.stats gives ratios theirs: percentile bootstrap of the medians, every sample resampled
# independently, fixed seed, the interval ends the resampled values just outside 2.5 % and 97.5 %.


def boot_medians(m: pl.DataFrame, server: str, cells: list[tuple[str, str]], n_boot: int = 10_000,
                 seed: int = 0) -> tuple[list[float], list[np.ndarray] | None] | None:  # fmt: skip
    """Median latency of each (condition, item) of `server` and, when every sample has two values or
    more, `n_boot` bootstrap medians of each; None when a sample is missing."""
    samples = []
    for cond, item in cells:
        v = m.filter((pl.col("server") == server) & (pl.col("condition") == cond) & (pl.col("item") == item))
        samples.append(np.sort(v["value"].drop_nulls().to_numpy().astype(float)))
    if any(x.size == 0 for x in samples):
        return None
    med = [float(np.median(x)) for x in samples]
    if any(x.size < 2 for x in samples):
        return med, None
    rng = np.random.default_rng(seed)
    return med, [np.median(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1) for x in samples]


def interval(values: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(values, 0.025, method="lower")), float(np.quantile(values, 0.975, method="higher"))


def _ci_text(low, high, fmt: str, unit: str = "") -> str:
    return "" if low is None else f" [{low:{fmt}}–{high:{fmt}}{unit}]"


def extra_difference(m: pl.DataFrame, server: str, condition: str, baseline: str, item_a: str, item_b: str,
                     n_boot: int = 10_000, seed: int = 0) -> dict | None:  # fmt: skip
    """How much more `condition` adds to item_a's latency than to item_b's, in ms: (median a − median of a's
    baseline) − (the same for b), with a 95 % bootstrap interval, and each of the two extras with its own.
    None when a sample is missing."""
    b = boot_medians(m, server, [(condition, item_a), (baseline, item_a), (condition, item_b), (baseline, item_b)],
                     n_boot, seed)  # fmt: skip
    if b is None:
        return None
    med, boot = b
    out = {"diff_ms": (med[0] - med[1]) - (med[2] - med[3]), "extra_a_ms": med[0] - med[1],
           "extra_b_ms": med[2] - med[3], "ci_low": None, "ci_high": None, "extra_a_ci": (None, None),
           "extra_b_ci": (None, None)}  # fmt: skip
    if boot is None:
        return out
    out["ci_low"], out["ci_high"] = interval((boot[0] - boot[1]) - (boot[2] - boot[3]))
    out["extra_a_ci"], out["extra_b_ci"] = interval(boot[0] - boot[1]), interval(boot[2] - boot[3])
    return out


def _finding_analyze(rt, server, p, timer_df, m) -> tuple[str, str]:
    lim, par, ser = (_get(rt, server, "analyze", i) for i in ("limit", "count", "count_serial"))
    if par is None or ser is None or lim is None:
        return NOT_RUN, "not measured (needs analyze on limit, count and count_serial)."
    texts = [f"ANALYZE, nothing logged: limit {_r(lim)}, count parallel {_r(par)}, serial {_r(ser)} "
             "(study: 1.01×, 1.70×, 1.90×)"]  # fmt: skip
    verdicts = []
    # more rows, more cost: count's overhead detectable and above limit's
    if par["verdict"] == stats.HIGHER and _above(par, lim):
        verdicts.append(SUPPORTED)
        texts.append("the 1e6-row count pays far more than the 1-row limit")
    elif par["verdict"] in (stats.LOWER,) or _above(par, lim) is False:
        verdicts.append(NOT_SUPPORTED)
        texts.append("count does not pay more than limit")
    else:
        verdicts.append(UNDETERMINED)
        texts.append("count's overhead is not distinguishable from limit's")
    # worse without parallelism: the time ANALYZE adds to a serial count above what it adds to a parallel one
    diff = extra_difference(m, server, "analyze", p.baseline, "count_serial", "count") if m is not None else None
    if diff is None or diff["ci_low"] is None:
        verdicts.append(UNDETERMINED)
        texts.append("too few runs to compare the serial and parallel overheads")
    else:
        worse = True if diff["ci_low"] > 0 else False if diff["ci_high"] < 0 else None
        verdicts.append({True: SUPPORTED, False: NOT_SUPPORTED, None: UNDETERMINED}[worse])
        texts.append(f"ANALYZE adds {diff['extra_a_ms']:.1f} ms{_ci_text(*diff['extra_a_ci'], '.1f')} to a serial "
                     f"count and {diff['extra_b_ms']:.1f} ms{_ci_text(*diff['extra_b_ci'], '.1f')} to a parallel "
                     f"one: {diff['diff_ms']:+.1f} ms [{diff['ci_low']:+.1f} to {diff['ci_high']:+.1f}] "
                     + {True: "(worse without parallelism)", False: "(better without parallelism)",
                        None: "(no detectable difference)"}[worse] + " (study: +45.5 ms vs +15.7 ms)")  # fmt: skip
    if not timer_df.is_empty() and m is not None:
        t = timer_df.filter((pl.col("server") == server) & (pl.col("item") == "count_serial"))
        b = boot_medians(m, server, [("analyze", "count_serial"), (p.baseline, "count_serial")])
        if t.height and t["rows_processed"][0] and b is not None:
            rows = t["rows_processed"][0]
            (a, base), boot = b
            ci = interval((boot[0] - boot[1]) * 1e6 / rows) if boot is not None else (None, None)
            texts.append(f"serial count: {(a - base) * 1e6 / rows:.0f} ns{_ci_text(*ci, '.0f')} extra per row "
                         "processed")  # fmt: skip
    return _combine(verdicts), "; ".join(texts) + "."


def _finding_timing(rt, server, p, m) -> tuple[str, str]:
    """Share of ANALYZE's overhead that log_timing = off removes: (A − N) / (A − B) of the median
    latencies (ANALYZE, ANALYZE without timing, baseline); "most" is supported when its whole interval
    lies above one half."""
    verdicts, texts = [], []
    for item in ("count", "count_serial"):
        a, n = _get(rt, server, "analyze", item), _get(rt, server, "analyze_no_timing", item)
        if a is None or n is None:
            continue
        if a["verdict"] != stats.HIGHER:
            verdicts.append(UNDETERMINED)
            texts.append(f"{item}: no detectable ANALYZE overhead to remove ({_r(a)})")
            continue
        removed = (a["ratio"] - n["ratio"]) / (a["ratio"] - 1)
        b = boot_medians(m, server, [("analyze", item), ("analyze_no_timing", item), (p.baseline, item)]) \
            if m is not None else None  # fmt: skip
        ci = (None, None)
        if b is not None and b[1] is not None:
            ba, bn, bb = b[1]
            over = ba - bb
            # a resample without overhead (A ≤ B) has no share to remove: too many of them, no interval
            if (over <= 0).mean() <= 0.025:
                with np.errstate(divide="ignore", invalid="ignore"):
                    share = np.where(over > 0, (ba - bn) / over, np.nan)
                share = share[~np.isnan(share)]
                ci = interval(share)
        if ci[0] is None:
            verdicts.append(UNDETERMINED)
            ci_text = " (no interval)"
        else:
            verdicts.append(SUPPORTED if ci[0] > 0.5 else NOT_SUPPORTED if ci[1] < 0.5 else UNDETERMINED)
            ci_text = f" [{ci[0] * 100:.0f}–{ci[1] * 100:.0f} %]"
        texts.append(f"{item}: {_r(a)} with timing, {_r(n)} without: {removed * 100:.0f} %{ci_text} of the "
                     "overhead removed")  # fmt: skip
    if not texts:
        return NOT_RUN, "not measured."
    return _combine(verdicts), "; ".join(texts) + " (study: 88 % parallel, 87 % serial; 'most' = above half)."


def _finding_logging(rt, server, p, checks) -> tuple[str, str]:
    verdicts, texts = [], []
    for logged in ("explain_logged", "analyze_logged"):
        x = _get(rt, server, logged, "limit", "logging")
        if x is None:
            continue
        if not _has_ci(x):
            verdicts.append(UNDETERMINED)
        else:
            verdicts.append({stats.HIGHER: SUPPORTED, stats.LOWER: NOT_SUPPORTED}.get(x["verdict"], UNDETERMINED))
        size = ""
        if not checks.is_empty() and "log_bytes_per_txn" in checks.columns:
            b = checks.filter((pl.col("server") == server) & (pl.col("condition") == logged)
                              & (pl.col("item") == "limit"))["log_bytes_per_txn"].drop_nulls()  # fmt: skip
            size = f", {b.median():.0f} bytes of log per transaction" if len(b) else ""
        study = study_ratio(logged, "limit", x["baseline"])
        within = ""
        if _has_ci(x) and study is not None:
            within = "; the study's " + (f"{study:.2f}× is within our interval" if x["ci_low"] <= study <= x["ci_high"]
                                         else f"{study:.2f}× is outside our interval")  # fmt: skip
        texts.append(f"{logged} vs {x['baseline']}: {_pct(x)}, {_r(x)}{size}{within}")
    if not texts:
        return NOT_RUN, "not measured."
    return _combine(verdicts), "; ".join(texts) + "."


def _finding_clock(timer_df, server, m, no_timing: str = "analyze_no_timing") -> tuple[str, str]:
    """The timing part of ANALYZE (ANALYZE − ANALYZE without timing) per clock read and core, against
    pg_test_timing's cost of one read: explained when the whole interval lies within a factor 2."""
    if timer_df.is_empty():
        return NOT_RUN, "not measured."
    t = timer_df.filter(pl.col("server") == server).sort("item")
    t = t.filter(pl.col("item").is_in(["count", "count_serial"]) & pl.col("timing_ns_per_clock_read").is_not_null()
                 & pl.col("per_loop_ns").is_not_null())  # fmt: skip
    if t.is_empty():
        return NOT_RUN, "no timer figure or no ANALYZE runs for this server."
    verdicts, texts = [], []
    for r in t.iter_rows(named=True):
        per_read = r["parallelism"] * 1e6 / r["clock_reads"]  # ns per read of one ms of timing
        b = boot_medians(m, server, [("analyze", r["item"]), (no_timing, r["item"])]) if m is not None else None
        lo = hi = None
        if b is not None and b[1] is not None:
            lo, hi = interval((b[1][0] - b[1][1]) * per_read)
        if lo is None:
            verdicts.append(UNDETERMINED)
            ci, ms, inside = "", "", " (too few runs for an interval)"
        else:
            qlo, qhi = lo / r["per_loop_ns"], hi / r["per_loop_ns"]
            verdicts.append(SUPPORTED if 0.5 <= qlo and qhi <= 2 else NOT_SUPPORTED if qhi < 0.5 or qlo > 2
                            else UNDETERMINED)  # fmt: skip
            ci, ms = f" [{lo:.0f}–{hi:.0f}]", f" [{lo / per_read:.2f}–{hi / per_read:.2f}]"
            inside = f" ({'inside' if lo <= r['per_loop_ns'] <= hi else 'outside'} our interval)"
        texts.append(f"{r['item']}: timing costs {r['analyze_ms'] - r['no_timing_ms']:.2f}{ms} ms per query for "
                     f"{r['clock_reads'] / r['parallelism']:.3g} clock reads per core = "
                     f"{r['timing_ns_per_clock_read']:.0f}{ci} ns per read against {r['per_loop_ns']:.0f} ns from "
                     f"pg_test_timing{inside}")  # fmt: skip
    return _combine(verdicts), "; ".join(texts) + " (explained: the whole interval within a factor 2)."


FINDINGS = [
    ("loading", "Loading auto_explain (disabled) costs nothing: limit 0.110 ms not loaded, 0.111 ms loaded "
                "and disabled (1.01×)."),
    ("explain", "EXPLAIN only (no ANALYZE), nothing logged, costs little: 1.00–1.01× on limit, count and "
                "serial count."),
    ("analyze", "log_analyze costs in proportion to rows processed, worse without parallelism: limit 1.01×, "
                "count 1.70× (+15.7 ms), serial count 1.90× (+45.5 ms)."),
    ("timing", "log_timing = off removes most of the ANALYZE overhead: count 1.70× → 1.08× (88 % removed), "
               "serial count 1.90× → 1.12× (87 %)."),
    ("clock", "The ANALYZE overhead is the clock: two reads per node per row returned, each at the cost "
              "pg_test_timing measures."),
    ("logging", "Writing every plan to the log costs ≈ 30 % on a tiny query: limit 0.112 → 0.146 ms (EXPLAIN, "
                "1.30×), 0.112 → 0.149 ms (ANALYZE, 1.33×)."),
]  # fmt: skip


def findings(ratios_df: pl.DataFrame, timer_df: pl.DataFrame, checks: pl.DataFrame,
             params: AutoExplainParams, runs: pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """One row per (finding, server): verdict and a sentence computed from the data."""
    m = measured(runs) if runs is not None else None
    rows = []
    for server in sorted(ratios_df["server"].unique().to_list()) if not ratios_df.is_empty() else []:
        for key, claim in FINDINGS:
            if key == "loading":
                v, text = _finding_loading(ratios_df, server, params)
            elif key == "explain":
                v, text = _finding_explain(ratios_df, server, params)
            elif key == "analyze":
                v, text = _finding_analyze(ratios_df, server, params, timer_df, m)
            elif key == "timing":
                v, text = _finding_timing(ratios_df, server, params, m)
            elif key == "clock":
                v, text = _finding_clock(timer_df, server, m)
            else:
                v, text = _finding_logging(ratios_df, server, params, checks)
            rows.append({"finding": key, "claim": claim, "server": server, "verdict": v, "evidence": text})
    schema = {"finding": pl.String, "claim": pl.String, "server": pl.String, "verdict": pl.String,
              "evidence": pl.String}  # fmt: skip
    return pl.from_dicts(rows, schema=schema)


# -- everything at once -------------------------------------------------------------------------------------------


def analyse(result, params: AutoExplainParams) -> dict[str, pl.DataFrame]:
    """All derived tables of the stage, keyed by their derived-table name."""
    runs = result.runs
    summ = summary(runs, params)
    rat = ratios(runs, params)
    checks = log_checks(runs)
    tim = timer(summ, result.plans, result.timer, params)
    return {
        "auto_explain_latencies": latencies(runs),
        "auto_explain_summary": summ,
        "auto_explain_ratios": rat,
        "auto_explain_study": study_table(rat, summ),
        "auto_explain_log_checks": checks,
        "auto_explain_log_summary": log_summary(checks, params),
        "auto_explain_plans": result.plans,
        "auto_explain_timer": tim,
        "auto_explain_servers": result.servers,
        "auto_explain_findings": findings(rat, tim, checks, params, runs),
    }


def write(tables: dict[str, pl.DataFrame], profile: str) -> list[str]:
    written = []
    for name, df in tables.items():
        if df.width:
            derived.write_table(df, name, profile)
            written.append(name)
    return written

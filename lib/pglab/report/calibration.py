"""Do the intervals hold across a re-run, and which verdicts move? Several recorded runs of one design compared.

- `calibration`: for every estimate with an interval that two runs both hold (a ratio with low/high or
  ci_low/ci_high and a `method`, in any derived table), whether the two figures differ by more than their joint
  interval allows: |log r1 - log r2| > z · sqrt(se1² + se2²), each se read off its own interval (log scale,
  symmetric, at its stated coverage). Per interval family (the method with its round count): the share of run
  pairs beyond it, which a calibrated 95 % interval keeps near 5 %.
- `flip_table`: per claim, over every pair of runs, how often its verdict differed; claims that cannot flip
  (every run: not comparable, not testable, not run, or an exact check whose figure has no spread) are counted apart.
- `reused`: stages of a run that reused data instead of making it fresh (e.g. an SSB load skipped because the
  cluster already held it): such a run is not an independent re-run."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import polars as pl

from ..core.stats import between_runs, cluster_priors, hosts
from ..core.stats.verdicts import CONTRADICTED, DIRECTION_ONLY, SUPPORTED, UNTESTED

# verdict pairs that reverse a reader's conclusion
SEVERE = ({SUPPORTED, CONTRADICTED}, {CONTRADICTED, DIRECTION_ONLY})
_VALUE = {
    "ratio",
    "low",
    "high",
    "ci_low",
    "ci_high",
    "coverage",
    "method",
    "n_rounds",
    "median",
    "median_baseline",
    "study_ratio",
    "verdict",
    "flag",
    "label",
    "condition_order",
    "better",
}
# not part of a comparison's key either: what a pooled interval is made of; a column of these that is empty in one
# run reads as text there and would split that run's keys from another's
_NOT_KEYS = _VALUE | set(between_runs.POOLED_COLUMNS)


def family(method: str) -> str:
    """'fast mode, 10 rounds', 'min–max, 5 rounds', 'paired bootstrap, 10 rounds', … from a method label."""
    m = re.search(r"n=(\d+)", method or "")
    rounds = f", {m.group(1)} rounds" if m else ""
    text = method or "no method"
    if text.startswith("fast mode"):
        return "fast mode" + rounds
    if text.startswith("min–max"):
        return "min–max" + rounds
    if "bootstrap" in text:
        return "paired bootstrap" + rounds
    # what a pooled row rests on (its clusters, their sd) is the run's, not the family's
    return re.sub(r",?\s*n=\d+", "", text.split("; pooled")[0]) + rounds


def estimates(folder: Path) -> pl.DataFrame:
    """Every estimate with an interval in a derived folder: table, key (the table's other text and integer
    columns), ratio, low, high, coverage, method."""
    frames = []
    for f in sorted(folder.glob("*.csv")):
        df = pl.read_csv(f, infer_schema_length=None)
        low, high = ("low", "high") if "low" in df.columns else ("ci_low", "ci_high")
        if not {"ratio", low, high, "method"} <= set(df.columns):
            continue
        keys = [c for c in df.columns if c not in _NOT_KEYS and df.schema[c] in (pl.String, pl.Int64, pl.Boolean)]
        key = (
            pl.concat_str([pl.col(k).cast(pl.String).fill_null("") for k in keys], separator="|")
            if keys
            else pl.lit("")
        )
        frames.append(
            df.select(
                pl.lit(f.stem).alias("table"),
                key.alias("key"),
                pl.col("ratio").cast(pl.Float64),
                pl.col(low).cast(pl.Float64).alias("low"),
                pl.col(high).cast(pl.Float64).alias("high"),
                (pl.col("coverage").cast(pl.Float64) if "coverage" in df.columns else pl.lit(0.95)).alias("coverage"),
                pl.col("method").cast(pl.String),
            )
        )
    schema = {
        "table": pl.String,
        "key": pl.String,
        "ratio": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
        "coverage": pl.Float64,
        "method": pl.String,
    }
    out = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    return out.filter((pl.col("ratio") > 0) & (pl.col("low") > 0) & (pl.col("high") > pl.col("low")))


def _z(coverage: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(0.5 + min(max(coverage, 0.5), 0.999) / 2))


def calibration(runs: dict[str, Path], confidence: float = 0.95) -> pl.DataFrame:
    """Per interval family: run pairs compared, how many lie beyond their joint `confidence` interval, the share."""
    est = {name: estimates(folder) for name, folder in runs.items()}
    rows = []
    for x, y in itertools.combinations(est, 2):
        j = est[x].join(est[y], on=["table", "key"], suffix="_b")
        for r in j.iter_rows(named=True):
            se = [
                (math.log(r[h]) - math.log(r[lo])) / (2 * _z(r[c] or confidence))
                for lo, h, c in (("low", "high", "coverage"), ("low_b", "high_b", "coverage_b"))
            ]
            d = abs(math.log(r["ratio"]) - math.log(r["ratio_b"]))
            rows.append({"family": family(r["method"]), "beyond": d > _z(confidence) * math.hypot(*se)})
    if not rows:
        return pl.DataFrame(schema={"family": pl.String, "pairs": pl.Int64, "beyond": pl.Int64, "share": pl.Float64})
    return (
        pl.from_dicts(rows)
        .group_by("family")
        .agg(pl.len().cast(pl.Int64).alias("pairs"), pl.col("beyond").sum().cast(pl.Int64).alias("beyond"))
        .with_columns((pl.col("beyond") / pl.col("pairs")).alias("share"))
        .sort("family")
    )


def _by_claim(found: dict[str, pl.DataFrame]) -> list[tuple[str, str, dict[str, str], bool]]:
    """Per claim (study, finding): its verdict in each run and whether it can flip at all (not when every run has it
    not comparable, not testable or not run, or every run checks an exact figure)."""
    from ..core.stats.verdicts import claim_verdicts

    per = {name: claim_verdicts(df.select("study", "finding", "server", "verdict")) for name, df in found.items()}
    exact = {name: _exact_claims(df) for name, df in found.items()}
    claims = sorted({(r["study"], r["finding"]) for df in per.values() for r in df.iter_rows(named=True)})
    out = []
    for study, finding in claims:
        vs = {}
        for name, df in per.items():
            hit = df.filter((pl.col("study") == study) & (pl.col("finding") == finding))
            vs[name] = hit["verdict"][0] if hit.height else "(missing)"
        untestable = all(v in UNTESTED for v in vs.values())
        fixed = all((study, finding) in exact[n] for n in vs)
        out.append((study, finding, vs, not (untestable or fixed)))
    return out


def flip_table(found: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Per claim (study, finding): the verdict in each run, how many run pairs disagree, the flip probability, whether
    it can flip at all, and its severe flips (pairs that reverse a reader's conclusion)."""
    pairs = list(itertools.combinations(found, 2))
    rows = []
    for study, finding, vs, flippable in _by_claim(found):
        flips = sum(vs[a] != vs[b] for a, b in pairs)
        severe = sum({vs[a], vs[b]} in SEVERE for a, b in pairs)
        rows.append(
            {
                "study": study,
                "finding": finding,
                "flippable": flippable,
                "pairs": len(pairs),
                "flips": flips,
                "flip_probability": flips / len(pairs) if pairs else 0.0,
                "severe": severe,
                "verdicts": "; ".join(f"{n}: {v}" for n, v in vs.items()),
            }
        )
    return pl.from_dicts(rows) if rows else pl.DataFrame()


def pair_agreement(found: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Per pair of runs (a, b): how many of the claims that can flip (over all the runs) got the same verdict in
    both (same, of flippable): issue 30's mark is ≥ 95 % in every pair, not over the pairs pooled."""
    claims = [vs for _, _, vs, flippable in _by_claim(found) if flippable]
    rows = [
        {"a": a, "b": b, "same": sum(vs[a] == vs[b] for vs in claims), "flippable": len(claims)}
        for a, b in itertools.combinations(found, 2)
    ]
    return pl.from_dicts(rows) if rows else pl.DataFrame()


def host(folder: Path) -> dict:
    """What a run's derived folder says of its host: the median clock read cost over its servers (pg_test_timing,
    ns: this VM lands on ~21 ns and ~30 ns hosts, whose figures differ) and when the machine last started (runs
    before the kit recorded it: None)."""
    clock = booted = None
    timing = folder / "environment_timing.csv"
    if timing.is_file():
        t = pl.read_csv(timing, infer_schema_length=None)
        if "per_loop_ns" in t.columns and t["per_loop_ns"].drop_nulls().len():
            clock = float(t["per_loop_ns"].drop_nulls().cast(pl.Float64).median())
    machine = folder / "environment_machine.csv"
    if machine.is_file():
        m = pl.read_csv(machine, infer_schema_length=0).filter(pl.col("key") == "booted_utc")
        booted = m["value"][0] if m.height else None
    return {"clock_ns": clock, "booted_utc": booted}


def _host_text(h: dict) -> str:
    clock = f"clock read {h['clock_ns']:.0f} ns" if h["clock_ns"] is not None else "clock read not recorded"
    return f"{clock}, booted {h['booted_utc'] or 'when: not recorded'}"


def _boots(a: dict | None, b: dict | None) -> str:
    """Whether two runs' hosts (`host`) shared a boot, as far as both recorded it."""
    boots = [h["booted_utc"] if h else None for h in (a, b)]
    if not all(boots):
        return "boots not recorded"
    return "one boot" if boots[0] == boots[1] else "different boots"


def _exact_claims(df: pl.DataFrame) -> set[tuple[str, str]]:
    """Claims every server of which checks an exact figure (interval of no width: answers right, plan shapes)."""
    if not {"our_low", "our_high"} <= set(df.columns):
        return set()
    g = df.group_by("study", "finding").agg(
        ((pl.col("our_low") == pl.col("our_high")) & pl.col("our_low").is_not_null()).all().alias("exact")
    )
    return {(r["study"], r["finding"]) for r in g.filter("exact").iter_rows(named=True)}


def reused(folder: Path) -> list[str]:
    """What a run did not make fresh: each stage's own record of data it found already there."""
    out = []
    load = folder / "ssb_load.csv"
    if load.is_file():
        df = pl.read_csv(load, infer_schema_length=None)
        if "skipped" in df.columns:
            servers = sorted(set(df.filter(pl.col("skipped").cast(pl.Boolean))["server"]))
            if servers:
                out.append(f"SSB load reused on {', '.join(servers)} (the clusters already held the data)")
    return out


BUILD_COLUMNS = ("version", "build", "built_from")  # a server's identity as environment_servers.csv records it


def builds_differ(folders: dict[str, Path]) -> list[str]:
    """Servers whose binaries differ between the runs (environment_servers.csv: version, toolchain and flags,
    source): their figures do not re-run one build (a new Debian upload between runs, a rebuilt cache), so a
    flip there may be the build's."""
    seen: dict[str, dict[tuple, list[str]]] = {}
    for run, folder in folders.items():
        f = folder / "environment_servers.csv"
        if not f.is_file():
            continue
        df = pl.read_csv(f, infer_schema_length=0)
        cols = [c for c in BUILD_COLUMNS if c in df.columns]
        for r in df.select("server", *cols).unique(maintain_order=True).iter_rows(named=True):
            ident = tuple((r[c] or "") for c in cols)
            seen.setdefault(r["server"], {}).setdefault(ident, []).append(run)
    out = []
    for server, idents in seen.items():
        if len(idents) > 1:
            each = "; ".join(
                f"{', '.join(runs)}: {' / '.join(x for x in ident if x)}" for ident, runs in idents.items()
            )
            out.append(f"{server} was built otherwise between runs ({each})")
    return out


def summary_text(found: dict[str, pl.DataFrame], folders: dict[str, Path]) -> str:
    """What `make stability ARCHIVES=…` prints after the pairs: flippable agreement, flip probabilities, severe
    flips, the calibration table, any stage that reused data and any server built otherwise between runs."""
    flips = flip_table(found)
    lines = []
    if flips.height:
        f = flips.filter("flippable")
        n_pairs = int(flips["pairs"][0])
        same = int((f["pairs"] - f["flips"]).sum())
        total = f.height * n_pairs
        lines.append(
            f"flippable claims: {f.height} of {flips.height} (the rest not comparable / not testable / "
            f"not run in every run, or exact checks); over {n_pairs} pair(s): {same} of {total} the same "
            f"({same / total:.1%})"
            if total
            else "no flippable claim"
        )
        lines.append(
            f"severe flips (supported <-> contradicted, contradicted <-> direction only): {int(flips['severe'].sum())}"
        )
        moving = f.filter(pl.col("flips") > 0).sort("flip_probability", descending=True)
        for r in moving.iter_rows(named=True):
            lines.append(f"  {r['flip_probability']:.0%} {r['study']} {r['finding']}: {r['verdicts']}")
        hosts = {name: host(folder) for name, folder in folders.items()}
        lines.append("\neach run's host (runs of one boot share its host and its neighbours):")
        lines += [f"  {name}: {_host_text(h)}" for name, h in hosts.items()]
        lines.append("flippable claims the same, per pair (the mark: ≥ 95 % in every pair):")
        for r in pair_agreement(found).iter_rows(named=True):
            share = f" ({r['same'] / r['flippable']:.1%})" if r["flippable"] else ""
            boot = _boots(hosts.get(r["a"]), hosts.get(r["b"]))
            lines.append(f"  {r['a']} vs {r['b']}: {r['same']} of {r['flippable']}{share}; {boot}")
    cal = calibration(folders)
    lines.append("\ncalibration: run pairs beyond their joint 95 % interval, per interval family (5 % expected)")
    for r in cal.iter_rows(named=True):
        lines.append(f"  {r['family']}: {r['beyond']} of {r['pairs']} ({r['share']:.0%})")
    for name, folder in folders.items():
        for what in reused(folder):
            lines.append(f"run {name}: {what}: not an independent re-run")
    for what in builds_differ(folders):
        lines.append(f"{what}: its figures do not re-run one build")
    return "\n".join(lines)


# -- the between-cluster priors (core.cluster_priors) --------------------------------------------------------------

# the tables whose pooled rows carry one between-cluster variance per base server, or one for all (pgbench's,
# per experiment: `between_runs.pool_shared`); the prior's key in core.cluster_priors is "<table>" or
# "<table>:<what>"
_SHARED = {"pgbench_paired": "what", "pgbench_no_vacuum": None}
# the quantities' between-cluster sd in a finding's evidence, and the run's own estimate where a prior moderated it
_QUANTITIES = re.compile(r"between-cluster sd of the quantities ([0-9.]+) %(?: \(df \d+: this run's ([0-9.]+) %)?")


def _ae_quantities(folder: Path) -> str:
    """The prior's key of a run's auto_explain quantities, per design as its ratio table says (`SPLIT`)."""
    path = folder / "auto_explain_ratios.csv"
    if path.exists() and "design" in (t := pl.read_csv(path, infer_schema_length=0)).columns:
        if (t["design"] == "interleaved").any():
            return "auto_explain_quantities:interleaved"
    return "auto_explain_quantities"


def cluster_sds(folder: Path) -> pl.DataFrame:
    """Each derived table's between-cluster sd per base server as the run itself estimated it (`cluster_sd_run`;
    `cluster_sd` in a folder derived before priors): table (the prior's key), server ("*" where one is shared by
    every server), sd. auto_explain's quantities come from its findings' evidence."""
    rows = []
    for path in sorted(folder.glob("*.csv")):
        t = pl.read_csv(path, infer_schema_length=0)
        col = "cluster_sd_run" if "cluster_sd_run" in t.columns else "cluster_sd"
        if col not in t.columns:
            if path.stem == "auto_explain_findings" and "evidence" in t.columns:
                for server, ev in t.select("server", "evidence").drop_nulls().unique().iter_rows():
                    if m := _QUANTITIES.search(ev):  # the run's own, not the moderated one (which holds the prior)
                        sd = float(m[2] or m[1]) / 100
                        rows.append({"table": _ae_quantities(folder), "server": server, "sd": sd})
            continue
        t = t.filter(pl.col(col).is_not_null()).with_columns(pl.col(col).cast(pl.Float64))
        if path.stem in _SHARED:
            by = _SHARED[path.stem]
            for key, g in t.group_by(by or pl.lit("").alias("_k"), maintain_order=True):
                name = f"{path.stem}:{key[0]}" if by else path.stem
                rows.append({"table": name, "server": "*", "sd": float(g[col][0])})
            continue
        if "server" not in t.columns:
            continue
        t = t.with_columns(_q=cluster_priors.quantity_expr(path.stem, t.columns))  # a split table: per quantity
        for (q, s), g in t.group_by("_q", "server", maintain_order=True):
            rows.append({"table": q, "server": s, "sd": float(g[col][0])})
    schema = {"table": pl.String, "server": pl.String, "sd": pl.Float64}
    return pl.from_dicts(rows, schema=schema).unique(maintain_order=True) if rows else pl.DataFrame(schema=schema)


def priors(folders: dict[str, Path]) -> pl.DataFrame:
    """Per table and server, the runs' own between-cluster sds and the prior they give: the root mean of their
    variances (sd), over how many runs (runs), for core.cluster_priors."""
    frames = [cluster_sds(f).with_columns(run=pl.lit(r)) for r, f in folders.items()]
    every = pl.concat(frames) if frames else pl.DataFrame()
    if every.is_empty():
        return every
    return (
        every.group_by("table", "server", maintain_order=True)
        .agg(
            (pl.col("sd").pow(2).mean().sqrt()).alias("prior"),
            pl.len().alias("runs"),
            pl.col("sd").alias("sds"),
        )
        .sort("table", "server")
    )


def priors_text(folders: dict[str, Path]) -> str:
    """The priors these runs give, as core.cluster_priors' PRIORS literal (to paste there when a new design's
    archived runs replace the previous ones), with each run's own sd as a comment."""
    t = priors(folders)
    if t.is_empty():
        return "between-cluster priors: no pooled table in these runs"
    lines = [f"between-cluster priors over {len(folders)} runs ({', '.join(folders)}), for core.cluster_priors:"]
    for r in t.iter_rows(named=True):
        runs = ", ".join(f"{x:.1%}" for x in r["sds"])
        lines.append(f'    ("{r["table"]}", "{r["server"]}"): {r["prior"]:.4f},  # {runs}')
    return "\n".join(lines)


_OUR = r"^Our ([0-9.]+(?:e[+-]?[0-9]+)?)"  # our figure in a finding's evidence: "Our 30 ns per row", "Our 1.40×"


def pooled_figures(folder: Path) -> pl.DataFrame:
    """Every pooled figure of a derived folder (a row over two or more clusters): table (the prior's key, as in
    `cluster_sds`), server ("*" where the table shares one variance), key (the row's other columns), log (of its
    ratio). auto_explain's quantities are its findings' own figures (our_value, else the evidence's), where alone
    they are written.
    An A/A copy's row is left out (`between_runs.is_aa_copy`): it does not move between runs as a comparison does."""
    frames = []
    for path in sorted(folder.glob("*.csv")):
        df = pl.read_csv(path, infer_schema_length=None)
        if path.stem == "auto_explain_findings" and "evidence" in df.columns:
            # our_value where the findings keep it (a ratio: "1.40×"), else the evidence's ("Our 30 ns per row")
            value = pl.coalesce(
                pl.col("our_value").cast(pl.Float64), pl.col("evidence").str.extract(_OUR, 1).cast(pl.Float64)
            )
            quantities = df.filter(pl.col("evidence").str.contains(_QUANTITIES.pattern), value > 0)
            frames.append(
                quantities.select(
                    table=pl.lit(_ae_quantities(folder)),
                    server=pl.col("server").cast(pl.String),
                    key=pl.col("finding").cast(pl.String),
                    log=value.log(),
                )
            )
            continue
        if not {"ratio", "n_clusters", "server"} <= set(df.columns):
            continue
        df = df.filter(pl.col("n_clusters") > 1, pl.col("ratio").cast(pl.Float64) > 0)
        keys = [c for c in df.columns if c not in _NOT_KEYS and df.schema[c] in (pl.String, pl.Int64, pl.Boolean)]
        strings = [k for k in keys if df.schema[k] == pl.String]
        if strings:  # an empty key column is no A/A copy: null reads as not one
            aa = pl.any_horizontal(
                pl.col(k).str.contains(between_runs.AA_COPY.pattern).fill_null(False) for k in strings
            )
            df = df.filter(~aa)
        key = pl.concat_str([pl.col(k).cast(pl.String).fill_null("") for k in keys], separator="|")
        if path.stem in _SHARED:
            by = _SHARED[path.stem]
            table = (pl.lit(path.stem + ":") + pl.col(by).cast(pl.String)) if by else pl.lit(path.stem)
            server = pl.lit("*")
        else:
            table, server = cluster_priors.quantity_expr(path.stem, df.columns), pl.col("server").cast(pl.String)
        frames.append(
            df.select(
                table.alias("table"), server.alias("server"), key.alias("key"), pl.col("ratio").cast(pl.Float64).log()
            ).rename({"ratio": "log"})
        )
    schema = {"table": pl.String, "server": pl.String, "key": pl.String, "log": pl.Float64}
    return pl.concat([f.cast(schema) for f in frames]) if frames else pl.DataFrame(schema=schema)


def spreads(folders: dict[str, Path]) -> pl.DataFrame:
    """Per table: how far the same pooled figure moved between the runs, for a kind's spreads in
    core.cluster_priors.KINDS: spread (the pooled sd of each comparison's log across the runs that hold it,
    on every server: Σ (runs −
    1)·variance over Σ (runs − 1)), df (that Σ (runs − 1)). A comparison two or more runs hold counts, not only
    those every run holds: one that a run could not estimate (no interval, a non-positive round) is often the one
    that moves most. One per table, not per server: a server's own would rest on as few as 2 df (one comparison over
    three runs). The df treats the comparisons as independent, which a shift common to a run's comparisons is not:
    it sets only the t quantile of the floor (`between_runs.floor_interval`), 1.96–2.8 for every table here."""
    frames = [pooled_figures(f).with_columns(run=pl.lit(r)) for r, f in folders.items()]
    every = pl.concat(frames) if frames else pl.DataFrame()
    if every.is_empty() or len(folders) < 2:
        return pl.DataFrame(schema={"table": pl.String, "spread": pl.Float64, "df": pl.Int64})
    per_key = (
        every.group_by("table", "server", "key")
        .agg(pl.col("log").var(ddof=1).alias("var"), (pl.col("run").n_unique() - 1).alias("dof"))
        .filter(pl.col("dof") >= 1)
    )
    return (
        per_key.group_by("table")
        .agg(
            ((pl.col("var") * pl.col("dof")).sum() / pl.col("dof").sum()).sqrt().alias("spread"),
            pl.col("dof").sum().cast(pl.Int64).alias("df"),
        )
        .sort("table")
    )


def spreads_text(folders: dict[str, Path]) -> str:
    """The re-run spreads these runs give, all kinds together: {table: (sd, df)}."""
    t = spreads(folders)
    if t.is_empty():
        return "re-run spreads: no pooled figure that every run holds"
    lines = [f"re-run spreads over {len(folders)} runs ({', '.join(folders)}), all kinds together:"]
    for r in t.iter_rows(named=True):
        lines.append(f'    "{r["table"]}": ({r["spread"]:.4f}, {r["df"]}),')
    return "\n".join(lines)


def host_kind(folder: Path) -> hosts.Host | None:
    """The host a run's derived folder was measured on (`core.hosts`), None when it did not record one."""
    tables = {}
    for name in ("environment_machine", "environment_timing"):
        path = folder / f"{name}.csv"
        if path.is_file():
            tables[name] = pl.read_csv(path, infer_schema_length=0)
    return hosts.of_tables(tables)


def by_kind(folders: dict[str, Path]) -> dict[str, dict[str, Path]]:
    """The runs grouped by host kind (`Host.same_kind` with the group's first run; runs that recorded no host:
    "unknown"), keyed by the group's label (its runs' median clock read), in the runs' order: a prior or a floor is
    estimated per kind, never across kinds (methodology rule 15)."""
    groups: list[tuple[hosts.Host | None, dict[str, Path], list[float]]] = []
    for run, folder in folders.items():
        h = host_kind(folder)
        group = next((g for g in groups if (h is None and g[0] is None) or (h and h.same_kind(g[0]))), None)
        if group is None:
            group = (h, {}, [])
            groups.append(group)
        group[1][run] = folder
        if h:
            group[2].append(h.clock_ns)
    out = {}
    for h, runs, clocks in groups:
        label = "unknown" if h is None else hosts.Host(h.cpu_model, h.clocksource, float(np.median(clocks))).label
        out[label] = runs
    return out


def kinds_text(folders: dict[str, Path]) -> str:
    """Per host kind of these runs, the core.cluster_priors.KINDS entry they give: the host (the runs' median clock
    read), the runs, their priors and their re-run spreads (a kind of one run: priors only, no spread)."""
    lines = ["per host kind, for core.cluster_priors.KINDS:"]
    for label, runs in by_kind(folders).items():
        if label == "unknown":
            lines.append(f"    # runs that recorded no host: {', '.join(runs)}")
            continue
        h = [x for x in map(host_kind, runs.values()) if x]
        ns = float(np.median([x.clock_ns for x in h]))
        lines.append("    HostKind(")
        lines.append(f"        host=hosts.Host({h[0].cpu_model!r}, {h[0].clocksource!r}, {ns:.1f}),")
        lines.append(f"        runs={tuple(runs)!r},")
        lines.append("        priors={")
        for r in priors(runs).iter_rows(named=True):
            each = ", ".join(f"{x:.1%}" for x in r["sds"])
            lines.append(f'            ("{r["table"]}", "{r["server"]}"): {r["prior"]:.4f},  # {each}')
        lines.append("        },")
        lines.append("        spreads={")
        for r in spreads(runs).iter_rows(named=True):
            lines.append(f'            "{r["table"]}": ({r["spread"]:.4f}, {r["df"]}),')
        lines.append("        },")
        lines.append("    ),")
    return "\n".join(lines)

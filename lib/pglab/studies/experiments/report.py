"""An experiment's section of the report, from its derived tables alone: its question, the setup, a chart of every
comparison (B / A with its interval, the A/A floor shaded; an SQL experiment's queries each a row beside the
suite's), the table, the verdicts, the per-query answers (both medians in ms, the query's verdict beside the
suite's, the plan change and the spill behind it; a query going against the suite first), the errors (file,
statement, server), the cells not testable here and what differs between the servers' builds
(`core.builds.difference`)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import charts
from ...core.stats import builds
from . import pgbench_report

METRIC_WORDS = {
    "time_s": "time (B / A: below 1 is faster)",
    "tps": "tps (B / A: above 1 is more)",
    "p95_ms": "p95 latency (B / A: below 1 is faster)",
}


def comparison_label(r: dict) -> str:
    where = r["server"] if r["kind"] != "server" else r["condition"]
    return f"{r['b']} vs {r['a']} ({where})"


def row_label(r: dict) -> str:
    """A chart row in full: where (server, or the condition of a server comparison), what (the suite or a query),
    B vs A: 'pg15 · q1_sort: work_mem=64MB vs work_mem=4MB'."""
    where = r["server"] if r["kind"] != "server" else r["condition"]
    what = r.get("item") or "suite"
    return f"{where} · {what}: {r['b']} vs {r['a']}"


def chart_rows(verdicts: pl.DataFrame, queries: pl.DataFrame | None = None) -> pl.DataFrame:
    """The chart's rows: each verdict (the suite's, for an SQL experiment) then its queries'."""
    cols = ["kind", "server", "condition", "item", "a", "b", "metric", "ratio", "low", "high", "floor", "verdict"]
    df = verdicts.with_columns(reason=pl.col("reason")).select(*cols, "reason")
    if queries is not None and queries.height:
        floors = verdicts.select("kind", "server", "condition", "a", "b", "floor").unique()
        q = ordered(queries).join(
            floors, on=["kind", "server", "condition", "a", "b"], how="left", nulls_equal=True, maintain_order="left"
        )
        q = q.with_columns(metric=pl.lit(df["metric"][0] if df.height else "time_s")).select(*cols, "reason")
        df = pl.concat([df, q], how="vertical_relaxed")
    return df


def chart(verdicts: pl.DataFrame, title: str, queries: pl.DataFrame | None = None) -> alt.Chart:
    """B / A with its interval per comparison (and per query), on a log axis around 1; colour: the verdict; grey
    band: A/A floor. Every row labelled in full (server, query, B vs A), never cut."""
    df = chart_rows(verdicts, queries).with_columns(
        comparison=pl.struct("kind", "server", "condition", "item", "a", "b").map_elements(
            row_label, return_dtype=pl.String
        ),
        floor_low=1 / (1 + pl.col("floor").fill_null(0)),
        floor_high=1 + pl.col("floor").fill_null(0),
    )
    lo = min([*df["low"].drop_nulls(), *df["floor_low"], 0.9]) * 0.9
    hi = max([*df["high"].drop_nulls(), *df["floor_high"], 1.1]) * 1.1
    scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
    x = alt.X("ratio:Q", scale=scale, title=METRIC_WORDS.get(df["metric"][0], "B / A"))
    y = alt.Y("comparison:N", title=None, sort=None, axis=alt.Axis(labelLimit=0))  # never "work_mem=…"
    base = alt.Chart(df)
    band = base.mark_bar(color="#dddddd", height=14).encode(x="floor_low:Q", x2="floor_high:Q", y=y)
    one = alt.Chart(pl.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
    x_low = alt.X("low:Q", scale=scale)
    points = base.mark_point(filled=True, size=70).encode(
        x=x,
        y=y,
        color=alt.Color("verdict:N", title="verdict"),
        tooltip=["comparison", *charts.tips(".3f", "ratio", "low", "high"), "verdict", "reason"],
    )
    rules = base.mark_rule(strokeWidth=2).encode(x=x_low, x2="high:Q", y=y, color="verdict:N")
    return (band + one + rules + points).properties(title=title, width=520, height=max(60, 28 * len(df)))


def _builds(servers: list[str], env: pl.DataFrame | None) -> str:
    if env is None or env.is_empty() or len(servers) < 2:
        return ""
    rows = {r["server"]: r for r in env.iter_rows(named=True)}
    lines = []
    for i, a in enumerate(servers):
        for b in servers[i + 1 :]:
            if a in rows and b in rows:
                d = builds.difference(rows[a], rows[b])
                lines.append(f"- {a} vs {b}: {d or 'built alike (compiler, optimisation, assertions, block size)'}")
    return "**The servers' builds.**\n\n" + "\n".join(lines) if lines else ""


def clusters_line(paired: pl.DataFrame | None) -> str | None:
    """What each interval rests on when every server was measured on several clusters (params servers.clusters);
    None for one cluster per server."""
    if paired is None or "n_clusters" not in paired.columns or paired.is_empty():
        return None
    pooled = paired.filter(pl.col("n_clusters") > 1)
    if pooled.is_empty():
        return None
    per = "/".join(map(str, (pooled["n_rounds"] // pooled["n_clusters"]).unique().sort().to_list()))
    sd = pooled["cluster_sd"].drop_nulls()
    spread = (
        f"; between-cluster sd {sd.min():.1%}–{sd.max():.1%}".replace("%", " %")
        if sd.len()
        else "; no between-cluster sd"
    )
    return (
        f"- Clusters: every server measured on {pooled['n_clusters'].max()} independently made and loaded clusters "
        f"(`<server>_c<k>` in the per-run tables), {per} rounds each; each comparison is the geometric mean over "
        "the clusters (a server against the baseline server: cluster k against cluster k), its interval the rounds' "
        f"plus the between-cluster variance{spread}; the A/A floor over the A/A pairs, each pooled over the clusters."
    )


def section(
    name: str, t: dict[str, pl.DataFrame], env: pl.DataFrame | None = None
) -> tuple[str, alt.Chart | None, pl.DataFrame]:
    """(Markdown of the section, its chart, its table) for experiment `name` from the experiments_* tables."""
    setup = t["experiments_setup"].filter(experiment=name).row(0, named=True)
    ver = t["experiments_verdicts"].filter(experiment=name)
    cells = t["experiments_cells"].filter(experiment=name)
    noise_df = t["experiments_noise"].filter(experiment=name)
    errors = t["experiments_errors"].filter(experiment=name)
    hyp = (
        f" Hypothesis (yours): B / A = {setup['expect']:g}, scored with the declared tolerance (×/÷ 1.5)."
        if setup["expect"] is not None
        else " No hypothesis: each comparison says whether B / A goes beyond the A/A floor."
    )
    md = [
        f"### {name}",
        f"**{setup['question']}**",
        "",
        f"Data: {setup['data']}; workload: {setup['workload']}; servers: {setup['servers']}; factors: "
        f"{setup['factors']}; baseline: {setup['baseline']}; {setup['rounds']} interleaved rounds after "
        f"{setup['warmups']} warm-up round(s), the baseline measured twice (A/A).{hyp}",
        "",
    ]
    for r in noise_df.iter_rows(named=True):
        if r["floor"] is not None:
            md.append(f"- A/A noise floor on {r['server']} ({r['metric']}): ±{r['floor']:.1%}")
    if clusters := clusters_line(
        t["experiments_paired"].filter(experiment=name) if "experiments_paired" in t else None
    ):
        md.append(clusters)
    md.append("")
    for r in ver.iter_rows(named=True):
        md.append(f"- **{r['verdict']}** — {comparison_label(r)}: {r['reason']}")
    queries = t["experiments_queries"].filter(experiment=name) if "experiments_queries" in t else None
    md += query_lines(queries)
    nt = cells.filter(~pl.col("testable")).unique(["server", "reason"]).sort("server")
    for r in nt.iter_rows(named=True):
        md.append(f"- *not testable here* on {r['server']}: {r['reason']}")
    md += error_lines(errors, cells)
    b = _builds([s.strip() for s in setup["servers"].split(",")], env)
    if b:
        md += ["", b]
    table = ver.select(
        "kind",
        "server",
        "condition",
        "a",
        "b",
        "n_rounds" if "n_rounds" in ver.columns else "method",
        pl.col("ratio", "low", "high").round(3),
        pl.col("floor").round(3),
        "verdict",
    )
    title = f"{name}: {setup['metric']}, B / A" + (
        " (the suite, then each query)" if queries is not None and queries.height else ""
    )
    return "\n".join(md), (chart(ver, title, queries) if ver.height else None), table


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def median_text(r: dict, side: str) -> str:
    """'574 ms [561–590]'."""
    if r[f"{side}_ms"] is None:
        return "—"
    ends = f" [{_ms(r[f'{side}_low_ms'])}–{_ms(r[f'{side}_high_ms'])}]" if r[f"{side}_low_ms"] is not None else ""
    return f"{_ms(r[f'{side}_ms'])} ms{ends}"


def ordered(queries: pl.DataFrame) -> pl.DataFrame:
    """A query going against the suite first, then per server the largest effects (the derived CSV keeps its own
    sort)."""
    return queries.sort(
        pl.col("against_suite").fill_null(False),
        pl.coalesce("server", "condition"),
        pl.col("ratio").log().abs().fill_null(0),
        descending=[True, False, True],
    )


def query_lines(queries: pl.DataFrame | None) -> list[str]:
    """A line per query going against the suite (slower while the suite got faster, or the reverse), first."""
    if queries is None or queries.is_empty():
        return []
    queries = ordered(queries)
    out = []
    for r in queries.filter(pl.col("against_suite")).iter_rows(named=True):
        where = r["server"] or r["condition"]
        out.append(
            f"- **{r['item']} got {r['verdict']}** on {where} while the suite got {r['suite_verdict']}: "
            f"{median_text(r, 'a')} → {median_text(r, 'b')} ({r['ratio']:.2f}×)"
            + (f"; plan: {r['plan']}" if r["plan_changed"] else "")
        )
    changed = queries.filter(pl.col("plan_changed").fill_null(False) & ~pl.col("against_suite"))
    for r in changed.iter_rows(named=True):
        out.append(f"- {r['item']} on {r['server'] or r['condition']}: the plan changed with {r['b']}: {r['plan']}")
    return out


def queries_table(queries: pl.DataFrame) -> pl.DataFrame:
    """The per-query answers as read: both medians in ms, B / A, the query's verdict and the suite's, the plan and
    what each side spilled (a query going against the suite first, as experiments_queries sorts them)."""
    rows = []
    for r in ordered(queries).iter_rows(named=True):
        rows.append(
            {
                "where": r["server"] or r["condition"],
                "query": r["item"],
                "B vs A": f"{r['b']} vs {r['a']}",
                "A": median_text(r, "a"),
                "B": median_text(r, "b"),
                "B / A": "—"
                if r["ratio"] is None
                else f"{r['ratio']:.2f}×" + (f" [{r['low']:.2f}–{r['high']:.2f}]" if r["low"] is not None else ""),
                "verdict": r["verdict"] + (" (against the suite)" if r["against_suite"] else ""),
                "suite": r["suite_verdict"] or "—",
                "plan": "changed: " + r["plan"] if r["plan_changed"] else "same" if r["plan_changed"] is False else "—",
                "A spill": r["a_spill"] or "—",
                "B spill": r["b_spill"] or "—",
                "buffers hit / read (A → B)": f"{r['a_shared_hit_blocks']} / {r['a_shared_read_blocks']} → "
                f"{r['b_shared_hit_blocks']} / {r['b_shared_read_blocks']}"
                if r["a_shared_hit_blocks"] is not None and r["b_shared_hit_blocks"] is not None
                else "—",
            }
        )
    return pl.DataFrame(rows)


def error_lines(errors: pl.DataFrame, cells: pl.DataFrame) -> list[str]:
    """Every failure named: setup (file, statement, first line, the server's error) and workload (per file and
    server, how many measurements failed), and the cells that read *error* because of them."""
    out = []
    if errors.is_empty():
        return out
    stage = errors["stage"] if "stage" in errors.columns else pl.Series(["workload"] * errors.height)
    errors = errors.with_columns(stage=stage)
    for r in errors.filter(stage="setup").iter_rows(named=True):
        at = f"{r['file']}: statement {r['statement']} ({r['first_line']})" if r.get("file") else "setup"
        out.append(f"- **error** on {r['server']}: {at}: {r['error']}")
    work = errors.filter(stage="workload")
    if work.height:
        keys = [c for c in ("server", "item", "file", "statement", "first_line") if c in work.columns]
        for g in work.group_by(keys, maintain_order=True).agg(pl.len(), pl.col("error").first()).iter_rows(named=True):
            at = f"{g['file']}: statement {g['statement']} ({g['first_line']})" if g.get("file") else g["item"]
            out.append(f"- **error** on {g['server']}: {at} failed {g['len']} time(s): {g['error']}")
    if "status" in cells.columns:
        n = cells.filter(status="error").height
        if n:
            out.append(f"- {n} of {cells.height} cell(s) read *error*: nothing measured there")
    return out


def show_all(t, env: pl.DataFrame | None = None, level: str = "###") -> int:
    """Display every experiment's section (Markdown, chart, table) from the experiments_* tables (a dict or
    `core.derived.Tables`); how many were shown. The full report and notebook 80 show them alike."""
    from IPython.display import Markdown, display

    if "experiments_setup" not in t:
        return 0
    names = t["experiments_setup"]["experiment"].to_list()
    for name in names:
        md, ch, table = section(name, t, env)
        display(Markdown(md.replace("### ", f"{level} ", 1)))
        if ch is not None:
            display(ch)
        display(charts.table(table))
        queries = t["experiments_queries"].filter(experiment=name) if "experiments_queries" in t else None
        if queries is not None and queries.height:
            display(Markdown("**Per-query answers** (a query that went against the suite first):"))
            display(charts.table(queries_table(queries)))
        for x in pgbench_report.section(name, t):  # a pgbench experiment's latency, timeline, counters
            display(x)
    return len(names)

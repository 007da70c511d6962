"""An experiment's section of the report, from its derived tables alone: its question, the setup, a chart of every
comparison (B / A with its interval, the A/A floor shaded), the table, the verdicts, the cells not testable here
and what differs between the servers' builds (`core.builds.difference`)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ...core import builds
from . import pgbench_report

METRIC_WORDS = {
    "time_s": "time (B / A: below 1 is faster)",
    "tps": "tps (B / A: above 1 is more)",
    "p95_ms": "p95 latency (B / A: below 1 is faster)",
}


def comparison_label(r: dict) -> str:
    where = r["server"] if r["kind"] != "server" else r["condition"]
    return f"{r['b']} vs {r['a']} ({where})"


def chart(verdicts: pl.DataFrame, title: str) -> alt.Chart:
    """B / A with its interval per comparison, on a log axis around 1; colour: the verdict; grey band: A/A floor."""
    df = verdicts.with_columns(
        comparison=pl.struct("kind", "server", "condition", "a", "b").map_elements(
            comparison_label, return_dtype=pl.String
        ),
        floor_low=1 / (1 + pl.col("floor").fill_null(0)),
        floor_high=1 + pl.col("floor").fill_null(0),
    )
    lo = min([*df["low"].drop_nulls(), *df["floor_low"], 0.9]) * 0.9
    hi = max([*df["high"].drop_nulls(), *df["floor_high"], 1.1]) * 1.1
    x = alt.X("ratio:Q", scale=alt.Scale(type="log", domain=[lo, hi]), title=METRIC_WORDS.get(df["metric"][0], "B / A"))
    y = alt.Y("comparison:N", title=None, sort=None)
    base = alt.Chart(df)
    band = base.mark_bar(color="#dddddd", height=14).encode(x="floor_low:Q", x2="floor_high:Q", y=y)
    one = alt.Chart(pl.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
    x_low = alt.X("low:Q", scale=alt.Scale(type="log", domain=[lo, hi]))
    points = base.mark_point(filled=True, size=70).encode(
        x=x,
        y=y,
        color=alt.Color("verdict:N", title="verdict"),
        tooltip=[
            "comparison",
            alt.Tooltip("ratio:Q", format=".3f"),
            alt.Tooltip("low:Q", format=".3f"),
            alt.Tooltip("high:Q", format=".3f"),
            "verdict",
            "reason",
        ],
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
        f"plus the between-cluster variance{spread}; the A/A floor over every cluster's pairs."
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
        f" Hypothesis: B / A = {setup['expect']:g}, scored with the declared tolerance (×/÷ 1.5)."
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
    nt = cells.filter(~pl.col("testable")).unique(["server", "reason"]).sort("server")
    for r in nt.iter_rows(named=True):
        md.append(f"- *not testable here* on {r['server']}: {r['reason']}")
    if errors.height:
        first = errors.row(0, named=True)
        md.append(
            f"- {errors.height} measurement(s) failed, e.g. {first['server']} {first['condition']} "
            f"{first['item']}: {first['error']}"
        )
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
    return "\n".join(md), (chart(ver, f"{name}: {setup['metric']}, B / A") if ver.height else None), table


def show_all(t, env: pl.DataFrame | None = None, level: str = "###") -> int:
    """Display every experiment's section (Markdown, chart, table) from the experiments_* tables (a dict or
    `core.derived.Tables`); how many were shown. The full report and notebook 80 show them alike."""
    from IPython.display import Markdown, display

    from ...core import charts

    if "experiments_setup" not in t:
        return 0
    names = t["experiments_setup"]["experiment"].to_list()
    for name in names:
        md, ch, table = section(name, t, env)
        display(Markdown(md.replace("### ", f"{level} ", 1)))
        if ch is not None:
            display(ch)
        display(charts.table(table))
        for x in pgbench_report.section(name, t):  # a pgbench experiment's latency, timeline, counters
            display(x)
    return len(names)

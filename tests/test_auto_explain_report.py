"""The report's auto_explain section (S2) on the committed default data, read from a copy so that nothing
can write to data/derived/default. The committed data is scored by the one rule (`pglab.core.stats.verdicts`, with an
`auto_explain_noise` table): every claim of `auto_explain.verdicts.specs` per server in the findings schema,
the study's figures in the claim, our ratio with its interval in the numbers and the evidence; the findings,
noise floor and drift recomputed from the committed runs (what notebook 40 does) equal the stored ones; charts
that serialise, a method that names every server, condition and command and describes pairing, noise floor and
drift, and the same output twice."""

import json
import re

import polars as pl
import pytest
from conftest import ROOT

from pglab.core import derived, raw_archive, replicas
from pglab.core.derived import Tables
from pglab.core.stats import findings as fs
from pglab.core.stats import paired, stats
from pglab.studies.auto_explain import report as auto_explain_report
from pglab.studies.auto_explain import verdicts as av
from pglab.studies.auto_explain.params import AutoExplainParams

P = AutoExplainParams()  # params/default.yaml's (tests/test_auto_explain_study.py checks they are equal)
SPECS = {s.key: s for s in av.specs(P)}

# figures that are not ratios of ours: the study's own, and the parallel ceiling check's speed-up and ceiling
_NOT_OURS = re.compile(
    r"\(study: [^)]*\)|[Tt]he study's \d+\.\d\d×|speed-up \d+\.\d\d×|ceiling \d+×"
    r"|\(\d+\.\d\d×–\d+\.\d\d×\)"
)  # the last: the tolerance band around the study's figure


@pytest.fixture(scope="module")
def root(committed_copy):
    return committed_copy


def _read(name, root):
    return derived.read_table(name, "default", root)


def _ratios_without_interval(evidence: str) -> list[str]:
    """Our ratios (N.NN×) not followed by their [low–high]."""
    text = _NOT_OURS.sub("", evidence)
    return [m.group() for m in re.finditer(r"\d\.\d\d×", text) if not re.match(r" \[\d", text[m.end() :])]


def _rounds(root) -> int:
    lat = _read("auto_explain_latencies", root)
    return lat.filter(~pl.col("warmup").cast(pl.Boolean))["round"].n_unique()


def _bases(root) -> list[str]:
    names = _read("auto_explain_servers", root)["server"].to_list()
    return sorted(set(replicas.base_names(names).values()))


def test_every_finding_of_the_study_for_every_server(root):
    f = auto_explain_report.findings(Tables("default", root))
    servers = _bases(root)  # params servers.clusters: one finding per base server, pooled over its clusters
    assert f.columns == list(fs.SCHEMA | fs.NUMBERS)
    assert sorted(zip(f["finding"], f["server"], strict=True)) == sorted((k, s) for k in SPECS for s in servers)
    assert set(f["study"]) == {"S2"} and set(f["verdict"]) <= set(fs.VERDICTS)
    assert all(c == SPECS[k].claim.statement for k, c in zip(f["finding"], f["claim"], strict=True))
    # the study's value on every claim: a quantity's in its unit (ns per row), a ratio's as ×
    assert all(v == pytest.approx(SPECS[k].claim.ratio) for k, v in zip(f["finding"], f["study_value"], strict=True))
    # the claims carry the study's figures
    claims = {k: s.claim.statement for k, s in SPECS.items()}
    assert "0.110 ms" in claims["loading"] and "15.7 ns per row" in claims["analyze_count"]
    assert "2.89×" in claims["analyze_serial_vs_parallel"] and "88 %" in claims["timing_count"]
    assert "0.146 ms" in claims["logging_explain"] and "45.5 ns per row" in claims["analyze_count_serial"]
    # our ratio with its interval: in the numbers for every row, and in the evidence wherever a ratio is quoted
    n = _rounds(root)
    # round by round: min–max below MIN_BOOTSTRAP rounds, else a bootstrap; in the fast mode a bootstrap over the
    # rounds (a ratio of two items' ratios stays round by round)
    by_round = f"min–max, n={n}" if n < paired.MIN_BOOTSTRAP else f"95 % bootstrap over rounds, n={n}"
    fast = {f"fast mode: 10 % quantile of every execution, {c} % bootstrap over rounds, n={n}" for c in (89, 95)}
    fast |= {by_round}
    # a claim on a scale-free quantity (ns per row, share removed) gives it in its evidence, not as a ratio (the
    # serial over the parallel overhead is one: a ratio)
    quantity = pl.col("finding").is_in([k for k, s in SPECS.items() if s.claim.quantity])
    ratios = f.filter(~quantity)
    # a quantity (or a ratio of two) without an interval where some round had none: says in how many
    # (params servers.clusters: a cluster's rounds pooled over the clusters, said after "; pooled:")
    none = {i for i in f["interval"] if re.fullmatch(r"per round, \d+ of \d+ not positive( over \d+ clusters)?", i)}
    own = {i.split("; pooled:")[0] for i in set(f["interval"]) - none}
    assert ratios["our_value"].is_not_null().all() and (own == {by_round} or own <= fast), own
    assert ((ratios["our_low"] <= ratios["our_value"]) & (ratios["our_value"] <= ratios["our_high"])).all()
    assert (
        f.filter(quantity)["evidence"]
        .str.contains(
            r"^(Our [\d.]+ (ns per row|of the overhead removed) \["
            r"|No interval \(per round, \d+ of \d+ not positive( over \d+ clusters)?\))"
        )
        .all()
    )
    for r in ratios.iter_rows(named=True):
        assert _ratios_without_interval(r["evidence"]) == [], (r["finding"], r["server"], r["evidence"])
        if r["evidence"].startswith("Our "):
            ours = stats.ratio_with_interval(r["our_value"], r["our_low"], r["our_high"])
            assert r["evidence"].startswith(f"Our {ours}")


def test_stored_verdicts_are_those_of_the_stage(root):
    from pglab.studies.auto_explain import STUDY

    stored = _read("auto_explain_findings", root).sort("finding", "server")
    # judged as the run judged them: its host kind's priors and its stage's costs (the hints' minutes)
    f = STUDY.judge(Tables("default", root)).sort("finding", "server")
    assert f.select("finding", "server", "verdict", "evidence").equals(
        stored.select("finding", "server", "verdict", "evidence")
    )


def test_scored_data_from_the_committed_runs(root, tmp_path_factory):
    """The committed run re-scored from its raw archive the way notebook 40 does (in the fast mode from its
    transactions, else paired by round; the A/A control's noise floor): the same findings, noise floor and drift
    as stored, and the report reads them with their numbers."""
    from pglab.core.stats import hosts
    from pglab.derive import open_run, run_params
    from pglab.studies.auto_explain import derive as aed

    run_id = json.loads((root / "default" / "MANIFEST.json").read_text())["auto_explain_findings.csv"]["run_id"]
    raw = tmp_path_factory.mktemp("raw")
    raw_archive.unpack(run_id, raw, ROOT / "data" / "raw-archive" / f"{run_id}.tar.xz")
    store = open_run(run_id, raw)
    with hosts.using(hosts.of_store(store)):  # as Study.derive: the run's own host kind's priors and floors
        got = aed.derive(store, run_params(store))
    for name, keys in (
        ("auto_explain_noise", ["server", "metric"]),
        ("auto_explain_drift", ["server", "item"]),
        ("auto_explain_evidence", ["finding", "server"]),
    ):
        want = _read(name, root).sort(keys)
        mine = got[name].sort(keys)
        assert mine.height == want.height and mine.height, name
        for col in want.columns:
            if want[col].dtype.is_float():
                assert mine[col].to_list() == pytest.approx(want[col].to_list(), nan_ok=True), (name, col)
            else:
                assert mine[col].cast(pl.String).to_list() == want[col].cast(pl.String).to_list(), (name, col)
    noise = got["auto_explain_noise"]
    assert (noise["server"] == "all").any() and noise["floor"].is_not_null().all()
    out = auto_explain_report.findings(Tables("default", root))
    assert out.height == len(SPECS) * len(_bases(root))
    quantity = pl.col("finding").is_in([k for k, s in SPECS.items() if s.claim.quantity])
    assert set(out["verdict"]) <= set(fs.VERDICTS) and out.filter(~quantity)["our_value"].is_not_null().all()


def test_method_names_servers_conditions_and_the_command(root):
    text = auto_explain_report.method(Tables("default", root))
    env = _read("environment_servers", root)
    for s in _bases(root):
        version = env.filter(server=s)["version_string"][0].split(" on ")[0]
        assert f"{s} = {version}" in text
    for label in set(_read("auto_explain_summary", root)["label"]):
        assert f"*{label}*" in text
    lat = _read("auto_explain_latencies", root)
    measured = lat.filter(~pl.col("warmup").cast(pl.Boolean))
    assert measured.height and all(f"`{c}`" in text for c in set(measured["command"]))
    warm = set(lat.filter(pl.col("warmup").cast(pl.Boolean))["command"]) - set(measured["command"])
    assert not any(f"`{c}`" in text for c in warm)  # the warm-up's command is not one the numbers come from
    n = _read("auto_explain_summary", root)["n"]
    per = ("server", "cluster")  # per cluster where params servers.clusters measured each server on several
    assert any(f"{n.min()} run(s) per {x}" in text or f"{n.min()}-{n.max()} run(s) per {x}" in text for x in per)
    # the statistics of the scored path: pairing, the noise floor per server and item, drift
    assert ("paired within rounds" in text or "fast mode" in text) and "**Noise floor**" in text
    assert "ratio of medians" not in text
    noise = _read("auto_explain_noise", root)
    for r in noise.filter(pl.col("server") != "all").iter_rows(named=True):
        item = r["metric"].removeprefix("latency, ")
        assert f"{r['server']} {item} ±{r['floor']:.1%}".replace("%", " %") in text
    every = noise.filter(pl.col("server") == "all")
    assert f"of {every['n_pairs'][0]} A/A comparisons" in text
    d = _read("auto_explain_drift", root)["drift"].drop_nulls()
    assert f"moved by {d.min():.2f}× to {d.max():.2f}× between the first and the second half" in text


def test_charts_serialise_with_tooltips_and_the_output_is_deterministic(root):
    charts = auto_explain_report.charts(Tables("default", root))
    assert len(charts) == 2
    specs = [json.dumps(c.to_dict(), sort_keys=True) for c in charts]
    assert all('"tooltip"' in s for s in specs) and '"study_ratio"' in specs[0]
    assert specs == [
        json.dumps(c.to_dict(), sort_keys=True) for c in auto_explain_report.charts(Tables("default", root))
    ]
    assert auto_explain_report.method(Tables("default", root)) == auto_explain_report.method(Tables("default", root))
    assert auto_explain_report.findings(Tables("default", root)).equals(
        auto_explain_report.findings(Tables("default", root))
    )


def test_the_logging_sentence_gives_the_servers_range_not_the_largest_as_a_minimum():
    """Two servers 0.79× and 0.98× are '2–21 % faster', not '21 % faster or more' (the reference said so)."""
    from pglab.studies.auto_explain.report import _range

    assert _range([0.79, 0.98]) == "2–21 % faster"
    assert _range([1.2, 1.03]) == "3–20 % slower"
    assert _range([0.9, 1.1]) == "between 10 % faster and 10 % slower"
    assert _range([1.0, 0.79]) == "up to 21 % faster"
    assert _range([0.79]) == "21 % faster"
    assert _range([0.997, 1.1]) == "up to 10 % slower"  # not 'between no different and 10 % slower'
    assert _range([0.9, 1.003]) == "up to 10 % faster"


def test_the_logging_sentence_claims_no_change_the_intervals_do_not_show():
    """When every server's interval holds 1, the first screen says so instead of reading the point figures as a
    gain (the reference: pg15 0.79× [0.58–1.08], pg18 0.98× [0.75–1.30] once read '2–21 % faster') or a wide
    interval as a small effect (pg15 2.04×, holding 1, once read 'within noise of unchanged')."""
    import polars as pl

    from pglab.studies.auto_explain.report import answers

    def f(rows):
        cols = ["server", "our_value", "our_low", "our_high"]
        return pl.DataFrame(
            [dict(zip(cols, r, strict=True)) | {"finding": "logging_analyze", "evidence": ""} for r in rows]
        )

    held = [s for s in answers(None, f([("pg15", 0.79, 0.58, 1.08), ("pg18", 0.98, 0.75, 1.30)])) if "log_analyze" in s]
    assert held == [
        "Logging every plan with log_analyze: no clear change for a tiny query "
        "(pg15 0.79×, pg18 0.98×; every interval holds 1, together 0.58–1.30×)."
    ]
    shown = [s for s in answers(None, f([("pg15", 0.79, 0.6, 0.9), ("pg18", 0.98, 0.75, 1.3)])) if "log_analyze" in s]
    # only the server whose interval shows a change gives the figure; the other is named as no clear change
    assert shown == [
        "Logging every plan with log_analyze makes a tiny query 21 % faster (pg15 0.79×); "
        "no clear change on pg18 (0.98× [0.75–1.30])."
    ]


def test_a_first_screen_figure_whose_interval_holds_1_reads_as_no_clear_change():
    """core.findings.shown, which every study's first-screen sentence uses: the index builds' pg15 0.92× [0.77–1.08]
    once read '8 % faster'."""
    from pglab.core.stats import findings as fnd

    assert fnd.shown({"our_value": 0.916, "our_low": 0.775, "our_high": 1.083}) == "no clear change (0.92× [0.78–1.08])"
    assert fnd.shown({"our_value": 0.827, "our_low": 0.707, "our_high": 0.967}) == "17 % faster"
    assert fnd.shown({"our_value": 1.2, "our_low": None, "our_high": None}) == "20 % slower"  # no interval: the figure

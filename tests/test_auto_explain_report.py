"""The report's auto_explain section (S2) on the committed default data, read from a copy so that nothing
can write to data/derived/default: every finding of the study per server in the findings schema, with the
study's numbers in the claim and an interval beside every ratio of ours; the findings recomputed from the
derived tables (what notebook 40 does) keep their intervals and say "not run" for a condition the matrix
lacks; charts that serialise, a method that names every server, and the same output twice. And the section on
data scored by the one rule (an `auto_explain_noise` table): the stored findings with their numbers, the method
with pairing, noise floor and drift."""

import json
import re

import polars as pl
import pytest

from pglab import auto_explain_findings as af
from pglab import auto_explain_report, derived
from pglab import findings as fs
from pglab.auto_explain_study import AutoExplainParams

OLD = auto_explain_report._OLD_CLAIMS  # the committed data was derived before pglab.verdicts

_STUDY_PART = re.compile(r"\(study: [^)]*\)|the study's \d+\.\d\d×")


@pytest.fixture(scope="module")
def root(committed_copy):
    return committed_copy


def _read(name, root):
    return derived.read_table(name, "default", root)


def _ratios_have_intervals(evidence: str) -> list[str]:
    """Our ratios (N.NN×) not followed by their [low–high]; the study's own figures are left out."""
    text = _STUDY_PART.sub("", evidence)
    return [m.group() for m in re.finditer(r"\d\.\d\d×", text) if not re.match(r" \[\d", text[m.end():])]


def test_every_finding_of_the_study_for_every_server(root):
    f = auto_explain_report.findings("default", root)
    servers = sorted(set(_read("auto_explain_servers", root)["server"]))
    assert f.columns == list(fs.SCHEMA | fs.NUMBERS)
    assert sorted(zip(f["finding"], f["server"], strict=True)) == sorted(
        (k, s) for k in OLD for s in servers)  # fmt: skip
    assert set(f["study"]) == {"S2"} and set(f["verdict"]) <= set(fs.VERDICTS)
    claims = OLD
    assert all(c == claims[k] for k, c in zip(f["finding"], f["claim"], strict=True))
    # the claims carry the study's figures
    assert "0.110 ms" in claims["loading"] and "1.70×" in claims["analyze"] and "0.146 ms" in claims["logging"]
    for r in f.iter_rows(named=True):
        assert _ratios_have_intervals(r["evidence"]) == [], (r["finding"], r["server"], r["evidence"])


def test_stored_verdicts_are_those_of_the_stage(root):
    stored = _read("auto_explain_findings", root).sort("finding", "server")
    f = auto_explain_report.findings("default", root).sort("finding", "server")
    assert f.select("finding", "server", "verdict", "evidence").equals(
        stored.select("finding", "server", "verdict", "evidence"))  # fmt: skip


def test_scored_data_from_the_committed_runs(root, tmp_path):
    """The committed latencies re-derived the new way (paired by round; no A/A control in them): the section
    then reads the stored findings with their numbers and describes the paired statistics."""
    import shutil

    p = AutoExplainParams()
    runs = _read("auto_explain_latencies", root).rename({"latency_ms": "value"})
    plans = _read("auto_explain_plans", root)
    m = af.measured(runs)
    noise = af.noise_table(m, p)
    f = af.findings(runs, plans, noise, p)
    assert set(f["verdict"]) <= set(fs.VERDICTS) - {fs.NOT_SUPPORTED}
    assert f.height == 12 * len(set(runs["server"]))
    # the old rule called "analyze" supported; its sizes are excluded on most servers and items now
    analyze = f.filter(pl.col("finding").is_in(["analyze_count", "analyze_count_serial"]))
    assert set(analyze["verdict"]) <= {fs.SUPPORTED, fs.DIRECTION_ONLY, fs.UNDETERMINED}
    assert analyze["our_low"].is_not_null().all() and set(analyze["interval"]) == {"min–max, n=6"}
    new = tmp_path / "derived"
    shutil.copytree(root / "default", new / "default")
    derived.write_table(f, "auto_explain_findings", "default", root=new)
    derived.write_table(noise if noise.height else noise.clear(), "auto_explain_noise", "default", root=new)
    derived.write_table(af.drift_table(m, p), "auto_explain_drift", "default", root=new)
    out = auto_explain_report.findings("default", new)
    assert out.select("finding", "server", "verdict").equals(f.select("finding", "server", "verdict"))
    assert out["our_value"].is_not_null().all()
    text = auto_explain_report.method("default", new)
    assert "paired within rounds" in text and "Noise floor" in text and "between the first and the second half" in text


def test_method_names_servers_conditions_and_the_command(root):
    text = auto_explain_report.method("default", root)
    env = _read("environment_servers", root)
    for s in set(_read("auto_explain_servers", root)["server"]):
        version = env.filter(server=s)["version_string"][0].split(" on ")[0]
        assert f"{s} = {version}" in text
    for label in set(_read("auto_explain_summary", root)["label"]):
        assert f"*{label}*" in text
    lat = _read("auto_explain_latencies", root)
    assert all(f"`{c}`" in text for c in set(lat["command"]))
    n = _read("auto_explain_summary", root)["n"]
    assert f"{n.min()} run(s) per server" in text or f"{n.min()}-{n.max()} run(s) per server" in text


def test_charts_serialise_with_tooltips_and_the_output_is_deterministic(root):
    charts = auto_explain_report.charts("default", root)
    assert len(charts) == 2
    specs = [json.dumps(c.to_dict(), sort_keys=True) for c in charts]
    assert all('"tooltip"' in s for s in specs) and '"study_ratio"' in specs[0]
    assert specs == [json.dumps(c.to_dict(), sort_keys=True) for c in auto_explain_report.charts("default", root)]
    assert auto_explain_report.method("default", root) == auto_explain_report.method("default", root)
    assert auto_explain_report.findings("default", root).equals(auto_explain_report.findings("default", root))

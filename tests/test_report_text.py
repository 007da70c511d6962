"""The report's words as a reader meets them, from the committed reference's findings (data/derived/default) and
from findings rows of the shape the studies write: no claim says its study twice ("S1 · S1"), no two rows of a
study read the same, the summary's key comes before its rows, and the first screen's sentences neither turn
noise into a range of effects nor give one server as a range ("pg18–pg18")."""

import re
from collections import Counter

import polars as pl
from conftest import ROOT

from pglab.core.derived import Tables
from pglab.report import evidence, sections, summary
from pglab.studies.auto_explain import report as ae_report
from pglab.studies.pgbench import report as pgb_report


def _reference():
    # the committed reference, not the tests' data directory
    return sections.all_findings("default", ROOT / "data" / "derived")


def test_no_claim_repeats_its_study_and_each_row_reads_differently():
    f = _reference()
    rows = summary.claims(f)
    assert rows.height > 10
    assert not [c for s, c in zip(rows["study"], rows["claim"], strict=True) if c and re.match(rf"{s}\b", c)]
    twice = [k for k, n in Counter(zip(rows["study"], rows["claim"], strict=True)).items() if n > 1]
    assert twice == []
    html = evidence.findings_html(f)
    assert not re.search(r"(S\d) · \1\b", html), re.search(r".{40}(S\d) · \1.{40}", html)


def test_the_summary_key_comes_before_its_rows():
    html = summary.summary_html(_reference())
    assert html.count("<tr>") > 10
    assert html.index("Ratios are B / A") < html.index("<table")


def _finding(server, value, low, high, finding="logging_analyze"):
    return {
        "study": "S2",
        "finding": finding,
        "claim": "x",
        "server": server,
        "verdict": "confirmed",
        "evidence": "",
        "study_value": None,
        "our_value": value,
        "our_low": low,
        "our_high": high,
        "interval": None,
        "unit": None,
    }


def test_noise_is_no_clear_change_not_a_range_of_effects():
    # pg15's interval holds 1 (noise), pg18's shows a change
    f = pl.DataFrame([_finding("pg15", 0.81, 0.62, 1.07), _finding("pg18", 1.12, 1.05, 1.2)])
    said = " ".join(ae_report.answers({}, f))
    assert "between" not in said and "19 % faster" not in said, said
    assert "12 % slower (pg18 1.12×); no clear change on pg15 (0.81× [0.62–1.07])" in said, said


def test_one_server_is_named_once():
    rows = [
        _finding("pg18", 0.98, 0.9, 1.05, "tpcb_versions_scale_1") | {"study": "S3"},
        _finding("pg18", 1.01, 0.95, 1.1, "select_only_scale_1") | {"study": "S3"},
    ]
    paired = pl.DataFrame({"baseline": ["pg15"]})
    said = " ".join(pgb_report.answers({"pgbench_paired": paired}, pl.DataFrame(rows)))
    assert "pg18–pg18" not in said and "pgbench at scale 1: pg18 gives 0.98× pg15's" in said, said


def test_s1_says_per_server_which_scale_and_build_it_measured():
    from pglab.studies.ssb import report as ssb_report

    text = ssb_report.method(Tables("default", ROOT / "data" / "derived"))
    data = next(line for line in text.splitlines() if line.startswith("- **Data**"))
    # the reference holds one scale factor (SF 1: the versions' rounds and the forced JIT block), named with its
    # servers, the JIT ones among them
    assert re.search(r"scale factor 1 on pg15, pg16, pg17, pg18llvm \(", data), data
    assert "scale factor 10" not in data and "the same rows on every server." in data
    builds = next(line for line in text.splitlines() if line.startswith("- **Builds**"))
    assert "-Os" in builds and "S1 compared versions built from source with -O2" in builds
    assert "ssb.builds: any" in builds and "cflags: -O2" in builds


def test_s1_charts_split_the_scale_factors_only_where_there_are_several():
    """The reference measured one scale factor: its time chart has a row per mode and no column per SF (a run
    with the JIT block at SF 10 beside the versions' SF 1 gets one)."""
    from pglab.studies.ssb import report as ssb_report

    times = ssb_report.charts(Tables("default", ROOT / "data" / "derived"))[0].to_dict()
    assert "column" not in times["facet"] and times["facet"]["row"]["field"] == "mode", times["facet"]
    assert {r["data"] for r in next(iter(times["datasets"].values()))} == {"SSB SF 1"}


def test_source_titles_render_without_a_cjk_font():
    """S2's and S5's titles are Japanese: the report gives them in English (a machine without a CJK font draws
    Japanese as empty boxes) and says where the originals are."""
    from pglab import studies

    cjk = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")
    for study in studies.studies():
        text = sections.sources_markdown(study)
        assert not cjk.search(text), text
    assert "in Japanese" in sections.SOURCES["S2"] and "in Japanese" in sections.SOURCES["S5"]
    assert cjk.search((ROOT / "docs" / "studies.md").read_text())  # the originals are kept there

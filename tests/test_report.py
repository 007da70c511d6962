"""`make report PARAMS=params/quick.yaml` end to end: every notebook executed through papermill on the
real servers, environment data derived, nothing left running. The pass is the session's one (the quick_pass
fixture of tests/conftest.py, in build/test/quick/<session>): every test that needs a quick run reads that one."""

import json
import os
import subprocess
import sys

import polars as pl
from conftest import ROOT, postmasters, unbuildable_params

from pglab.core import derived
from pglab.core.installs.installs import discover


def test_quick_report_end_to_end(quick_pass):
    assert quick_pass.returncode == 0, quick_pass.output
    print(
        f"quick report: {quick_pass.elapsed_s:.1f} s"
    )  # a figure for the notes, not a timed assertion (busy machines)

    # every cell of every notebook ran, none with an error (the check nbval-lax made on a second execution)
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for nb in notebooks:
        executed = json.loads((quick_pass.report / nb.name).read_text())
        code = [c for c in executed["cells"] if c["cell_type"] == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{nb.name}: a cell did not run"
        errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{nb.name}: {errors}"

    servers = derived.read_table("environment_servers", "quick", root=quick_pass.data / "derived")
    assert sorted(servers["server"]) == sorted(i.name for i in discover())
    assert set(servers["data_checksums"]) == {"off"}
    timing = derived.read_table("environment_timing", "quick", root=quick_pass.data / "derived")
    assert timing.height == servers.height and (timing["per_loop_ns"] > 0).all()
    settings = derived.read_table("environment_settings", "quick", root=quick_pass.data / "derived")
    sb = settings.filter(pl.col("name") == "shared_buffers")
    assert sb.height == servers.height
    assert derived.verify("quick", root=quick_pass.data / "derived") == []
    # the run is complete and recorded its environment in the raw store
    runs = [p for p in (quick_pass.data / "raw").iterdir() if p.is_dir()]
    assert any((r / "COMPLETE").exists() and (r / "environment.json").exists() for r in runs)
    # and how long each notebook took, for the next run's time left
    learnt = json.loads((quick_pass.state / "pace" / "quick.json").read_text())
    assert sorted(learnt) == [nb.name for nb in notebooks]
    raw = quick_pass.data / "raw"
    assert all(r["took_s"] > 0 and (raw / r["run_id"] / "COMPLETE").exists() for r in learnt.values())
    # nothing of the kit was left running when the driver exited (looked at then: other tests start these
    # clusters again later), nor is now
    assert quick_pass.left_running == []
    for cdir in (quick_pass.state / "clusters").iterdir():
        assert postmasters(cdir / "data") == [], cdir


def _outputs(nb_path):
    return [c.get("outputs", []) for c in json.loads(nb_path.read_text())["cells"]]


def test_report_notebook_alone_reproduces_and_writes_self_contained_html(quick_pass):
    """After the quick pass: the report notebook re-rendered alone (no server, no new run) gives the same
    outputs byte for byte, and its HTML opens without the network. (This is the check of the quick pass's report
    notebook re-run; nbval re-runs only the measuring notebooks, tests/test_report_nbval.py.)"""
    from pglab.report.html_export import external_references

    quick_pass.require()
    first = quick_pass.report / "99_report.ipynb"
    # relative, as a user may give them: from the project root, for the driver and the kernels (in notebooks/) alike
    rel = quick_pass.home.relative_to(ROOT)
    env = os.environ | {"PGLAB_DATA_DIR": str(rel / "data"), "PGLAB_STATE_DIR": str(rel / "state")}
    raw_before = sorted(p.name for p in (quick_pass.data / "raw").iterdir())
    again = quick_pass.home / "report-again"

    def report_alone(params: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "pglab.report", "--params", params, "--out", str(again), "--only", "99"]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    run = report_alone("params/quick.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in (quick_pass.data / "raw").iterdir()) == raw_before, "the report started a run"
    assert _outputs(again / "99_report.ipynb") == _outputs(first)
    html = (again / "report.html").read_text()
    assert external_references(html) == []
    assert html.count('data-mime-type="image/svg+xml"') >= 2 and "Findings at a glance" in html
    assert (again / "report.html").read_bytes() == (quick_pass.report / "report.html").read_bytes()
    # nor does it build params' source installs (the default's pg18llvm took 9 minutes so): one that cannot be
    # built, and must be, would stop a measuring run before any server
    run = report_alone(str(unbuildable_params(quick_pass.home)))
    assert run.returncode == 0, run.stdout + run.stderr


# -- the report's summary, evidence and appendix, on small tables (no server) ----------------------------------------


def _findings(rows):
    from pglab.core.stats import findings

    base = {
        "claim": "B halves the time",
        "evidence": "Our `x`.",
        "study_value": None,
        "our_value": None,
        "our_low": None,
        "our_high": None,
        "interval": None,
    }
    return findings.table([base | r for r in rows])


def test_summary_one_row_per_claim_with_numbers_and_strip():
    from pglab.core.stats import verdicts
    from pglab.report import summary as rs

    f = _findings(
        [
            {
                "study": "S1",
                "finding": "a",
                "server": "pg15",
                "verdict": "supported",
                "study_value": 0.5,
                "our_value": 0.55,
                "our_low": 0.5,
                "our_high": 0.6,
                "interval": "95 % bootstrap over 12 rounds",
            },
            {
                "study": "S1",
                "finding": "a",
                "server": "pg18",
                "verdict": "direction only",
                "study_value": 0.5,
                "our_value": 0.8,
                "our_low": 0.75,
                "our_high": 0.85,
                "interval": "min–max, n=5",
            },
            {"study": "S2", "finding": "b", "server": "all", "verdict": "not testable here"},
            {"study": "S2", "finding": "c", "server": "pg18", "verdict": "not run"},
        ]
    )
    c = rs.claims(f)
    assert c.select("study", "finding", "verdict").rows() == [
        ("S1", "a", "direction only"),  # both servers decided the claimed way, one within the tolerance
        ("S2", "b", "not testable here"),
        ("S2", "c", "not run"),
    ]
    html = rs.summary_html(f)
    assert html.count("<tr>") == 4 and html.count('class="ratio-strip"') == 1  # no mark without numbers
    assert "pg15 0.55× [0.50–0.60]" in html and "0.50×" in html and "<details>" in html
    t = verdicts.tally(c)
    assert t.filter(study="all").select("tested", "not testable here", "not run").row(0) == (1, 1, 1)
    assert "**3 claims**" in rs.headline(t) and "**1 tested here**" in rs.headline(t)


def test_evidence_folds_one_details_per_claim_and_escapes():
    from pglab.report import evidence as ev

    f = _findings(
        [{"study": "S5", "finding": "x", "server": "pg18", "verdict": "supported", "claim": "a <b>bold</b> claim"}]
    )
    html = ev.findings_html(f)
    assert html.count("<details") == 1 and 'id="claim-S5-x"' in html and "&lt;b&gt;" in html
    assert "<code>x</code>" in html  # the evidence's Markdown rendered
    assert "No A/A control in this run" in ev.noise_markdown(None)


def test_appendix_names_runs_and_revisions_and_flags_dirty(tmp_path):
    import json

    from pglab.core import derived
    from pglab.report import appendix as report_appendix

    derived.write_table(
        pl.DataFrame({"key": ["pglab_revision"], "value": ["abc123def4567890+dirty"]}),
        "environment_machine",
        "p",
        root=tmp_path,
    )
    m = json.loads((tmp_path / "p" / "MANIFEST.json").read_text())
    m["environment_machine.csv"] |= {"run_id": "p-20250101-000000", "derived_by": "fedcba9876543210"}
    (tmp_path / "p" / "MANIFEST.json").write_text(json.dumps(m))
    prov = report_appendix.provenance_markdown("p", tmp_path)
    assert "`abc123def456` **+dirty**" in prov and "`fedcba987654`" in prov and "p-20250101-000000" in prov
    assert "uncommitted changes" in prov
    inv = report_appendix.inventory_markdown("p", tmp_path)
    assert "| `environment_machine` | 1 | 2 |" in inv and "| table | rows |" in inv


def test_a_section_lists_the_servers_its_notebooks_skipped(tmp_path):
    from pglab.core import derived
    from pglab.core.derived import Tables
    from pglab.report import sections as report_sections
    from pglab.studies import by_name

    pgbench, ssb = by_name("pgbench"), by_name("ssb")
    assert report_sections.skipped_markdown(pgbench, Tables("p", tmp_path)) is None
    skips = pl.DataFrame(
        {
            "server": ["lab"],
            "experiment": ["pgbench_init"],
            "reason": ["external server without allow_destructive: true"],
        }
    )
    derived.write_table(skips, "pgbench_skipped", "p", root=tmp_path)
    text = report_sections.skipped_markdown(pgbench, Tables("p", tmp_path))
    assert "lab, pgbench_init: external server without allow_destructive" in text
    assert report_sections.skipped_markdown(ssb, Tables("p", tmp_path)) is None


def test_plain_answer_words():
    from pglab.core.stats import findings as fnd

    assert fnd.change(0.97) == "3 % faster" and fnd.change(1.53) == "53 % slower"
    assert fnd.change(2.4) == "2.4× slower" and fnd.change(0.4) == "2.5× faster" and fnd.change(1.001) == "no different"
    assert fnd.change(1.02, "more") == "2 % more"
    assert fnd.span([1.81, 1.79]) == "1.8" and fnd.span([1.6, 1.7]) == "1.6–1.7"


def test_the_first_screen_says_what_the_intervals_rest_on():
    from pglab.report.summary import resting

    pooled = "fast mode, n=5; pooled: 95 % across {k} clusters × {n} rounds, between-cluster sd 1.5 %"
    ours = [
        {"interval": pooled.format(k=2, n=5)},
        {"interval": pooled.format(k=3, n="3–4")},  # as between_runs writes a range
        {"interval": "min–max, n=5"},
        {"interval": None},
    ]
    assert resting(ours) == "Intervals are across runs: 2–3 fresh clusters × 3–5 rounds per server (2 of 4 figures)."
    assert resting(ours[:1]) == "Intervals are across runs: 2 fresh clusters × 5 rounds per server (1 of 1 figure)."
    assert resting(ours[2:]) == ""  # nothing pooled: nothing to say
    floored = pooled.format(k=2, n=5) + ", no narrower than the figure's spread over 3 archived runs (sd 2.4 %)"
    assert resting([{"interval": floored}, *ours[:1]]) == (
        "Intervals are across runs: 2 fresh clusters × 5 rounds per server, 1 of them no narrower than its figure "
        "moved over 3 archived runs (2 of 2 figures)."
    )
    fewer = floored.replace("over 3 archived", "over 5 archived")  # a later design's quantity: 3, the rest 5
    assert resting([{"interval": floored}, {"interval": fewer}]) == (
        "Intervals are across runs: 2 fresh clusters × 5 rounds per server, none narrower than its figure moved "
        "over 3–5 archived runs (2 of 2 figures)."
    )
    assert resting([{"interval": floored}]) == (
        "Intervals are across runs: 2 fresh clusters × 5 rounds per server, none narrower than its figure moved "
        "over 3 archived runs (1 of 1 figure)."
    )

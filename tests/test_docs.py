"""The README and docs/ name the committed reference run (the one MANIFEST.json says every table came from), and
nothing else as the reference: a stale run id sends a reader to the wrong archive."""

import json
import re

from conftest import ROOT

RUN_ID = re.compile(r"\bdefault-\d{8}-\d{6}\b")


def _reference() -> str:
    manifest = json.loads((ROOT / "data" / "derived" / "default" / "MANIFEST.json").read_text())
    runs = {e["run_id"] for e in manifest.values() if isinstance(e, dict) and e.get("run_id")}
    assert len(runs) == 1, runs
    return runs.pop()


def test_readme_names_the_reference_run_and_no_other():
    ref = _reference()
    named = set(RUN_ID.findall((ROOT / "README.md").read_text()))
    assert named == {ref}, f"README names {sorted(named)}; MANIFEST.json's reference is {ref}"
    assert (ROOT / "data" / "raw-archive" / f"{ref}.tar.xz").is_file(), "the reference's raw archive is committed"


def test_docs_name_the_reference_run():
    ref = _reference()
    verdicts = (ROOT / "docs" / "verdicts.md").read_text()
    assert ref in verdicts
    # where the docs call a run "the reference", it is this one
    for m in re.finditer(r"`(default-\d{8}-\d{6})`, the reference", verdicts):
        assert m.group(1) == ref, m.group(0)


def _tally_sentence(text: str, start: str) -> str:
    """The sentence stating the reference's tally: from `start` to the first 'not run.' after it."""
    i = text.index(start)
    return text[i : text.index("not run.", i)] + "not run."


def test_readme_and_docs_state_the_reference_tally():
    """The claim counts the README and docs/verdicts.md quote are the committed reference's, under today's rule."""
    from pglab.core.stats.verdicts import VERDICTS, claim_verdicts, tally
    from pglab.report.sections import all_findings

    t = tally(claim_verdicts(all_findings("default", ROOT / "data" / "derived"))).filter(study="all").row(0, named=True)
    sentences = {
        "README.md": _tally_sentence((ROOT / "README.md").read_text(), "re-derives every"),
        "docs/verdicts.md": _tally_sentence((ROOT / "docs" / "verdicts.md").read_text(), "re-scored under this rule"),
    }
    for name, text in sentences.items():
        text = " ".join(text.split())
        for verdict in VERDICTS:
            said = re.findall(rf"(\d+) {verdict}\b", text)
            assert said == ([str(t[verdict])] if t[verdict] else []), (name, verdict, said, t[verdict])


def test_readme_reads_in_two_minutes_and_links_the_rest():
    """A DBA's first page: at most 150 lines; the quick pass, the experiment recipe with an external server and
    `make results`, and every page it sends the reader to exists."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for needed in ("make report PARAMS=params/quick.yaml", "make experiment PARAMS=", "external:", "make results SQL="):
        assert needed in text, needed
    linked = set(re.findall(r"`(docs/[\w-]+\.md)`", text))
    assert {"docs/running.md", "docs/developing.md", "docs/experiments.md"} <= linked
    assert [p for p in linked if not (ROOT / p).is_file()] == []

"""The project cites its source studies inside itself (docs/studies.md), never a path outside the repository."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ("lib", "notebooks", "report", "tools", "docs", "README.md")
OUTSIDE = ("../shared", "shared/reference", "shared/seeds")
STUDIES = ("S1", "S2", "S3", "S4", "S5")


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *SCOPE], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_points_outside_the_project():
    files = tracked_files()
    assert any(f.name == "studies.md" for f in files), "docs/studies.md is not tracked"
    found = []
    for f in files:
        if not f.is_file():  # deleted in the work tree
            continue
        text = f.read_bytes().decode("utf-8", errors="replace")
        found += [f"{f.relative_to(ROOT)}: {needle}" for needle in OUTSIDE if needle in text]
    assert not found, "paths outside the project:\n" + "\n".join(found)


def test_every_study_has_a_citation():
    text = (ROOT / "docs" / "studies.md").read_text(encoding="utf-8")
    for study in STUDIES:
        assert re.search(rf"^## {study} · ", text, re.M), f"docs/studies.md has no section for {study}"
        assert re.search(rf"^\*\*Citation\.\*\* {study}: \S", text, re.M), f"docs/studies.md: no citation for {study}"


def test_report_sections_cite_known_studies():
    from pglab import studies
    from pglab.report import sections as report_sections

    assert set(report_sections.SOURCES) == set(STUDIES)
    for study in studies.studies():
        assert set(study.section.sources) <= set(STUDIES), study.name
        assert "docs/studies.md" in report_sections.sources_markdown(study)

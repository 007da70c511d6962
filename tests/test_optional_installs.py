"""Installs params keep to some studies (`servers.installs[].studies`) and source builds a machine may lack the
tools for (`optional`): the default profile's source-built 18 with LLVM is both. Where it cannot be built the run
goes on without it, and S1's JIT claims say on its row why and what would make them testable."""

from __future__ import annotations

import shutil
from dataclasses import replace

import polars as pl
import pytest

from pglab import params
from pglab.core import derived, paths
from pglab.core.installs import installs
from pglab.core.servers.servers import for_study, select
from pglab.core.stats import verdicts as v
from pglab.studies import STUDIES


def _params(tmp_path, installs_yaml: str, name: str = "p.yaml"):
    f = tmp_path / name
    f.write_text(f"profile: optional-test\nservers:\n  installs:\n{installs_yaml}")
    return params.load(f, check_servers=False)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("    - {name: a, bin_dir: /x, optional: true}\n", "optional only with source"),
        ("    - {name: a, bin_dir: /x, studies: [nosuch]}\n", "studies nosuch unknown"),
        ("    - {name: a, bin_dir: /x, studies: []}\n", "at least one study"),
    ],
)
def test_bad_entries_are_refused_with_what_was_expected(tmp_path, entry, expected):
    with pytest.raises(params.ParamsError, match=expected):
        _params(tmp_path, entry)


def test_an_install_kept_to_one_study_joins_that_study_only(tmp_path):
    emb = installs.discover()[0]  # the wheel's server: a real install, here under a second name
    p = _params(tmp_path, f"    - {{name: mine, bin_dir: {emb.bin_dir}, studies: [auto_explain]}}\n")
    base = select(p, [emb, replace(emb, name="mine")])
    for study in ("auto_explain", "jit_operators", "parallel_index", "partitioning"):
        names = {s.name for s in for_study(p, study, base)}
        assert (study == "auto_explain") == ("mine" in names), study
        assert emb.name in names  # an install params do not scope takes part in every study
    # the environment records every server of the run, this one too
    assert "mine" in {s.name for s in for_study(p, None, base)}


def test_an_optional_build_that_cannot_be_made_is_left_out_with_why(tmp_path):
    # a git source whose repository is not there: the build fails before compiling anything, on any machine
    entry = "    - {name: gone, source: {git: ./no-such-repo, ref: main}, studies: [ssb], optional: true}\n"
    p = _params(tmp_path, entry)
    found = installs.from_params(p.servers)
    assert "gone" not in found
    why = installs.unbuilt(p.servers, "ssb")["gone"]
    assert why.startswith("not built on this machine") and "no-such-repo" in why
    assert installs.unbuilt(p.servers, "auto_explain") == {}  # kept to ssb: no other study names it
    # each study the install was for records it as a skip of its stage (Study.run), with the reason
    from pglab.core.run import outcomes
    from pglab.core.run.session import Session
    from pglab.core.store import RunStore

    store = RunStore("unbuilt", root=tmp_path / "raw")
    for study in STUDIES:
        if hasattr(study, "_record_unbuilt"):  # the studies, not the environment's stage
            study._record_unbuilt(Session(params=p, store=store))
    rec = outcomes.skipped(store, ["ssb", "auto_explain"])
    assert rec.select("server", "experiment").rows() == [("gone", "ssb")] and rec["reason"][0] == why
    # the same entry without optional stops the run, naming the cause
    strict = _params(tmp_path, entry.replace(", optional: true", ""), "strict.yaml")
    with pytest.raises(installs.InstallError, match="no-such-repo"):
        installs.from_params(strict.servers)


def test_s1_jit_claims_name_the_build_the_machine_could_not_make(tmp_path):
    root = tmp_path / "derived"
    shutil.copytree(paths.ROOT / "data" / "derived" / "default", root / "default")
    why = "not built on this machine (servers.installs: optional): clang missing (Debian package clang)"
    skipped = pl.DataFrame({"server": ["pg17llvm"], "experiment": ["ssb"], "reason": [why]})
    derived.write({"ssb_skipped": skipped}, "default", root)
    ssb = next(s for s in STUDIES if s.name == "ssb")
    found = ssb.judge(derived.Tables("default", root))
    rows = found.filter(pl.col("server") == "pg17llvm")
    assert set(rows["finding"]) == {"jit_q1", "jit_q3.1", "jit_q4.3", "jit_per_query"}
    assert set(rows["verdict"]) == {v.NOT_TESTABLE}
    assert all("clang missing" in e and "build-essential" in e for e in rows["evidence"])
    # the measured JIT server keeps its own verdicts: the claim is decided by what was measured
    assert (found.filter(pl.col("server") == "pg15", pl.col("finding") == "jit_q1")["verdict"] != v.NOT_TESTABLE).all()

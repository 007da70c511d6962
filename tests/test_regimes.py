"""A claim is scored only at a size where its mechanism works as in the study (methodology rule 11): below its
study's declared regime it reads *not testable here*, saying why and the size it needs."""

from __future__ import annotations

import polars as pl
import pytest

from pglab.core import derived
from pglab.core.stats import findings as fnd
from pglab.core.stats import verdicts as v
from pglab.studies import STUDIES
from pglab.studies.base import Study

STUDY_REGIMES = [s for s in STUDIES if isinstance(s, Study) and s.regimes]


def _finding(finding: str, server: str, verdict: str, value: float | None = 1.1) -> dict:
    return {
        "study": "S1",
        "finding": finding,
        "claim": "a claim",
        "server": server,
        "verdict": verdict,
        "evidence": "Our 1.10× [1.05–1.15] (min–max, n=5)",
        "study_value": 0.7,
        "our_value": value,
        "our_low": value,
        "our_high": value,
        "interval": "min–max, n=5",
    }


def test_below_the_regime_a_claim_is_not_testable_with_what_it_needs(tmp_path):
    derived.write({"ssb_load": pl.DataFrame({"server": ["pg15", "pg18"], "sf": [0.05, 10.0]})}, "p", tmp_path)
    tables = derived.Tables("p", tmp_path)
    regimes = (v.Regime(("jit_*",), "ssb_load", "sf", 10, "SF", "JIT does not inline below it"),)
    f = fnd.table(
        [
            _finding("jit_q1", "pg15", v.CONTRADICTED),
            _finding("jit_q1", "pg18", v.SUPPORTED),
            _finding("answers_right", "pg15", v.SUPPORTED),
            _finding("jit_q4.3", "pg15", v.NOT_RUN, None),
        ]
    )
    out = v.apply_regimes(f, regimes, tables)
    by = {(r["finding"], r["server"]): r for r in out.iter_rows(named=True)}
    low = by[("jit_q1", "pg15")]
    assert low["verdict"] == v.NOT_TESTABLE
    assert low["evidence"].startswith("Measured at SF 0.05: JIT does not inline below it.")
    assert "contradicted, our 1.10×" in low["evidence"] and low["evidence"].endswith("(needs SF ≥ 10)")
    assert low["our_value"] is None
    assert by[("jit_q1", "pg18")]["verdict"] == v.SUPPORTED  # at its regime: scored as measured
    assert by[("answers_right", "pg15")]["verdict"] == v.SUPPORTED  # not covered by the regime
    assert by[("jit_q4.3", "pg15")]["verdict"] == v.NOT_RUN  # not run stays not run
    assert v.claim_verdicts(out).filter(pl.col("finding") == "jit_q1")["verdict"][0] == v.SUPPORTED
    assert out.schema == f.schema


def test_a_mode_that_answers_the_regime_scores_the_claim_at_any_size(tmp_path):
    """SSB's JIT claims at SF 1: a server whose JIT was measured with inlining and optimisation forced and judged
    net of its compile (the regime's two reasons answered) is scored; one without that mode is not testable."""
    from pglab.studies.ssb import STUDY as SSB
    from pglab.studies.ssb.paired_tables import JIT_CLAIM_MODES

    (jit,) = [r for r in SSB.regimes if r.covers("jit_q1")]
    assert jit.met_by == ("ssb_paired", "mode", (JIT_CLAIM_MODES[0],))
    paired = pl.DataFrame(
        {"server": ["pg15", "pg15", "pg18llvm"], "mode": [JIT_CLAIM_MODES[0], "parallel", "parallel_jit"]}
    )
    derived.write(
        {"ssb_load": pl.DataFrame({"server": ["pg15", "pg18llvm"], "sf": [1.0, 1.0]}), "ssb_paired": paired},
        "p",
        tmp_path,
    )
    f = fnd.table([_finding("jit_q1", "pg15", v.SUPPORTED), _finding("jit_q1", "pg18llvm", v.SUPPORTED)])
    by = {
        r["server"]: r["verdict"]
        for r in v.apply_regimes(f, (jit,), derived.Tables("p", tmp_path)).iter_rows(named=True)
    }
    assert by == {"pg15": v.SUPPORTED, "pg18llvm": v.NOT_TESTABLE}


def test_a_size_not_recorded_leaves_the_verdict_to_the_study(tmp_path):
    derived.write({"other": pl.DataFrame({"x": [1]})}, "p", tmp_path)
    regimes = (v.Regime(("*",), "ssb_load", "sf", 10, "SF", "why"),)
    f = fnd.table([_finding("jit_q1", "pg15", v.CONTRADICTED)])
    assert v.apply_regimes(f, regimes, derived.Tables("p", tmp_path)).equals(f)


@pytest.mark.parametrize("study", STUDY_REGIMES, ids=lambda s: s.name)
def test_every_regime_reads_a_size_the_reference_run_records(study, committed_copy):
    """A regime naming a table or column no run writes would silently score every claim at any size."""
    tables = derived.Tables("default", committed_copy)
    registered = {t for s in STUDIES for t in s.tables}
    for r in study.regimes:
        assert r.table in registered, f"{study.name}: regime reads {r.table}, which no stage writes"
        sizes = r.sizes(tables)
        assert sizes, f"{study.name}: the reference records no {r.table}.{r.column}"
        assert all(x > 0 for x in sizes.values())


def test_the_reference_scores_no_claim_below_its_regime(committed_copy):
    from pglab.report.sections import all_findings

    f = all_findings("default", committed_copy)
    tables = derived.Tables("default", committed_copy)
    # the SSB JIT claims scored only where the JIT block measured them (inlining and optimisation forced, as the
    # study's SF 70 made them), on the servers with JIT; not run on the others
    jit = f.filter(pl.col("finding").str.starts_with("jit_q"))
    scored = set(jit.filter(pl.col("verdict").is_in([v.NOT_TESTABLE, v.NOT_RUN]).not_())["server"])
    paired = tables["ssb_paired"]
    forced = set(paired.filter(pl.col("mode").str.starts_with("parallel_jit_forced"))["server"].unique().to_list())
    assert scored and scored <= forced, (scored, forced)
    for study in STUDY_REGIMES:
        for r in study.regimes:
            sizes, met = r.sizes(tables), r.met(tables)  # met: within the regime whatever the size (forced JIT)
            for row in f.iter_rows(named=True):
                size = sizes.get(row["server"], sizes.get("all"))
                below = size is not None and size < r.minimum and row["server"] not in met
                if r.covers(row["finding"]) and below:
                    assert row["verdict"] in (v.NOT_TESTABLE, v.NOT_RUN), (row["finding"], row["server"])

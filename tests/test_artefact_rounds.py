"""Artefact rounds (methodology rule 18, `pglab.core.stats.artefacts`): flagged by the rule fixed in advance, measured
again once by the schedule, kept in raw and left out of every paired estimate."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pglab.core import raw_archive
from pglab.core.run import measurements
from pglab.core.run.schedule import plan, run_steps
from pglab.core.stats import artefacts, paired
from pglab.core.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def _rounds(values: dict[str, list[float]]) -> pl.DataFrame:
    return pl.DataFrame(
        [(c, r, v) for c, vs in values.items() for r, v in enumerate(vs)],
        schema={"condition": pl.String, "round": pl.Int64, "value": pl.Float64},
        orient="row",
    )


def test_the_rule_flags_only_rounds_beyond_half_or_twice_their_cells_other_rounds():
    rv = _rounds(
        {
            "low": [0.104, 0.109, 0.037, 0.106, 0.105],  # 0.35× the others: an artefact
            "high": [1.0, 1.02, 0.98, 2.8, 1.01],  # 2.8×
            "slow_but_inside": [1.0, 1.02, 0.98, 2.1, 1.01],  # the machine's ~2× slow mode is not an artefact
            "slow_majority": [2.0, 2.02, 1.98, 1.0, 1.01],  # nor are unslowed rounds among slowed ones
            "few": [1.0, 0.1, 1.0],  # three rounds: no reference to judge one by
        }
    )
    f = artefacts.flagged(rv, ["condition"])
    assert f.select("condition", "round").rows() == [("high", 3), ("low", 2)]
    assert f.filter(pl.col("condition") == "low")["others"][0] == pytest.approx(0.1055)
    assert artefacts.drop(rv, ["condition"]).height == rv.height - 2


def test_the_v5_reference_runs_one_artefact_is_the_auto_explain_round_that_moved_a_first_screen_sentence(tmp_path):
    """A field case, from the committed archive of the v5 design's reference (default-20261129-001216): its one
    artefact round (0.037 ms against 0.104-0.109 in the cell's other rounds) once drove a first-screen sentence."""
    run = "default-20261129-001216"
    raw_archive.unpack(run, raw_root=tmp_path, archive=ROOT / "data" / "raw-archive" / f"{run}.tar.xz")
    m = measurements.table(RunStore(run, root=tmp_path), "auto_explain", ["auto_explain"])
    m = m.filter(~pl.col("warmup"))
    cell = ["server", "condition", "item", "metric"]
    f = artefacts.flagged(paired.round_values(m, cell, artefacts=False), cell)
    assert f.select(*cell, "round").rows() == [("pg15_c2", "analyze_logged", "limit", "time", 2)]
    # and no estimate uses it: the paired rounds of that cell lose round 2
    kept = paired.round_values(m, cell).filter(
        (pl.col("server") == "pg15_c2") & (pl.col("condition") == "analyze_logged") & (pl.col("item") == "limit")
    )
    assert 2 not in kept["round"].to_list() and kept.height >= 4


def _executions(ratio_by_round: dict[int, float], rounds: int = 8, per_round: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for r in range(rounds):
        for _k in range(per_round):
            base = 10.0 * float(np.exp(rng.normal(0, 0.02)))
            rows.append(("A", r, base))
            rows.append(("B", r, base * 1.10 * ratio_by_round.get(r, 1.0)))
    return pl.DataFrame(rows, schema={"condition": pl.String, "round": pl.Int64, "value": pl.Float64}, orient="row")


@pytest.mark.parametrize("compare", [paired.paired_compare, paired.fast_compare])
def test_paired_and_fast_estimates_leave_an_artefact_round_out(compare):
    clean = compare(_executions({}), [], "condition", "A")
    broken = _executions({5: 0.3})  # round 5 of B took 0.3 of its usual time
    kept = compare(broken, [], "condition", "A")
    kept_all = compare(broken, [], "condition", "A", artefacts=False)
    assert kept["n_rounds"][0] == 7 and kept_all["n_rounds"][0] == 8
    assert kept["ratio"][0] == pytest.approx(clean["ratio"][0], rel=0.02)
    assert abs(kept_all["ratio"][0] - 1.1) > abs(kept["ratio"][0] - 1.1)


def test_the_schedule_measures_an_artefact_round_again_once_and_keeps_the_original(tmp_path):
    store = RunStore("artefacts-test", root=tmp_path)
    cells = [("pg", c, i) for c in ("a", "b") for i in ("q1", "q2")]
    steps = plan(cells, repetitions=5, warmups=1, shuffle_seed=1)
    calls = []

    def measure(step):  # a stand-in for a timed statement: q1 under condition b is 0.3× in round 3 (1 warm-up first)
        calls.append(step)
        slow = step.item == "q1" and step.condition == "b" and step.round == 3
        return {"value": 0.3 if slow else 1.0 + 0.01 * step.repetition, "unit": "s"}

    ran = run_steps(steps, store, "exp", measure, remeasure=True)
    extra = calls[len(steps) :]
    assert ran == len(steps) + 2  # one extra round of q1's two cells (both conditions, so it pairs)
    assert {(s.condition, s.item) for s in extra} == {("a", "q1"), ("b", "q1")}
    assert all(s.round == max(x.round for x in steps) + 1 and not s.warmup for s in extra)
    rec = store.records("exp")
    assert rec.filter(pl.col("value") == 0.3).height == 1  # the artefact stays in raw
    assert rec.filter(pl.col("remeasured") == True).height == 2  # noqa: E712 (a null column elsewhere)
    saved = store.load_json(f"artefact_rounds/exp.round{extra[0].round}.json")
    assert [(r["condition"], r["item"], r["round"]) for r in saved["rounds"]] == [("b", "q1", 3)]
    # a resumed run asks for nothing more: the re-measurement is computed from the plan's own rounds
    assert run_steps(steps, RunStore("artefacts-test", root=tmp_path), "exp", measure, remeasure=True) == 0
    # and without the rule, nothing is re-measured
    other = RunStore("artefacts-off", root=tmp_path)
    assert run_steps(steps, other, "exp", measure) == len(steps)

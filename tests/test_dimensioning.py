"""report.dimensioning: the variance components recovered from a synthetic nested data set of known components,
and the Kalibera–Jones allocation on worked examples (no archived run, no server)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pglab.report import dimensioning as dim

SD = {"kind": 0.10, "run": 0.05, "cluster": 0.03, "round": 0.04, "execution": 0.08}


def nested(seed: int, runs=(3, 5), clusters=2, rounds=5, executions=6, cells=150, sd=SD) -> pl.DataFrame:
    """Executions of `cells` cells: kinds × runs (per kind) × clusters × rounds × executions, each level a normal
    draw of its sd (log scale), every cell its own draws and its own mean."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell in range(cells):
        mu = rng.normal(0, 1)
        for k, n_runs in enumerate(runs):
            yk = mu + rng.normal(0, sd["kind"])
            for r in range(n_runs):
                yr = yk + rng.normal(0, sd["run"])
                for c in range(clusters):
                    yc = yr + rng.normal(0, sd["cluster"])
                    for o in range(rounds):
                        yo = yc + rng.normal(0, sd["round"])
                        y = yo + rng.normal(0, sd["execution"], executions)
                        rows.append((f"q{cell}", f"k{k}", f"r{r}", f"c{c}", o, list(range(executions)), list(y)))
    return pl.DataFrame(
        rows, schema=["cell", "kind", "run", "cluster", "round", "execution", "y"], orient="row"
    ).explode("execution", "y")


@pytest.mark.parametrize("seed", [1, 2])
def test_components_recover_the_sds(seed):
    t2 = dim.components(nested(seed))
    for level, sd in SD.items():
        # over 40 other seeds each sd's relative error had an sd of 6.4 % (kind: 150 df) or less (run 3.5 %,
        # cluster 3.2 %, round 1.3 %): 25 % is about four of them for the kind, more for the rest
        assert math.sqrt(t2[level]) == pytest.approx(sd, rel=0.25), level


def test_one_execution_a_round_has_no_component_of_its_own():
    """With one execution a round the execution level is None and the round's T² holds both."""
    t2 = dim.components(nested(3, executions=1))
    assert t2["execution"] is None
    assert math.sqrt(t2["round"]) == pytest.approx(math.hypot(SD["round"], SD["execution"]), rel=0.2)
    assert math.sqrt(t2["cluster"]) == pytest.approx(SD["cluster"], rel=0.3)


def test_a_level_without_variance_reads_zero_not_negative():
    t2 = dim.components(nested(4, sd=SD | {"cluster": 0.0}))
    assert 0.0 <= t2["cluster"] < 0.015**2  # 40 other seeds: at most 0.0073


def test_allocation_two_levels_textbook():
    """Rounds a cluster: sqrt(c_cluster / c_round · T²_round / T²_cluster) = sqrt(100 / 4 · 4 / 1) = 10."""
    t2 = {"kind": None, "run": 1.0, "cluster": 1.0, "round": 4.0, "execution": None}
    cost = {"run": 1000.0, "cluster": 100.0, "round": 4.0, "execution": None}
    r = dim.allocate(t2, cost)
    assert r["execution"] == 1.0
    assert r["round"] == pytest.approx(10.0)
    # clusters a run, given 10 rounds: sqrt(1000 / (100 + 10·4) · (1 + 4/10) / 1) = sqrt(10)
    assert r["cluster"] == pytest.approx(math.sqrt(10.0))


def test_allocation_three_levels_is_kalibera_jones():
    """r_1 = sqrt(c_2/c_1 · T²_1/T²_2) = sqrt(9 · 4) = 6 executions; at that optimum the rounds given the
    executions equal K&J's r_2 = sqrt(c_3/c_2 · T²_2/T²_3) = sqrt(135/9 · 1/0.5) = sqrt(30)."""
    t2 = {"kind": None, "run": 0.0, "cluster": 0.5, "round": 1.0, "execution": 4.0}
    cost = {"run": 1e4, "cluster": 135.0, "round": 9.0, "execution": 1.0}
    r = dim.allocate(t2, cost)
    assert r["execution"] == pytest.approx(6.0)
    assert r["round"] == pytest.approx(math.sqrt(30.0))
    assert r["cluster"] == math.inf  # no run variance: never worth a re-run

    # and it is the optimum: at the same cost, any other executions a round leave more variance
    def var(e, budget=135.0 + 6 * (9 + 6 * 1)):
        rounds = (budget - 135.0) / (9 + e)
        return 0.5 + 1.0 / rounds + 4.0 / (rounds * e)

    assert all(var(6) < var(e) for e in (3, 4, 5, 7, 8, 12))


def test_a_free_round_puts_every_execution_in_its_own_round():
    t2 = {"kind": None, "run": 0.01, "cluster": 0.0, "round": 0.002, "execution": 0.014}
    cost = {"run": 6000.0, "cluster": 8.5, "round": 0.0, "execution": 4.0, "servers": 1}
    assert dim.allocate(t2, cost)["execution"] == 0.0
    cheap = dim.cheapest(t2, cost, (2, 5, 6))
    assert cheap[2] == 1 and dim.design_seconds(cost, cheap) < dim.design_seconds(cost, (2, 5, 6))
    assert dim.within_variance(t2, cheap) <= dim.within_variance(t2, (2, 5, 6))
    same = dim.most_precise(t2, cost, (2, 5, 6))
    assert same == (2, 30, 1)


def test_the_table_has_a_row_per_study():
    t2 = {"kind": 0.01, "run": 0.002, "cluster": 0.001, "round": 0.01, "execution": None}
    cost = {"run": 3000.0, "cluster": 26.0, "round": 15.0, "execution": None, "servers": 2}
    now = (2, 5, 1)
    row = {"study": "X", "quantity": "q", "t2": t2, "cost": cost, "kj": dim.allocate(t2, cost), "now": now}
    row |= {k: f(t2, cost, now) for k, f in (("cheap", dim.cheapest), ("precise", dim.most_precise),
                                               ("next", dim.next_step))}  # fmt: skip
    text = dim.table([row])
    assert text.count("\n") == 2 and "| X | q | 10.0 / 4.5 / 3.2 / 10.0 / — |" in text
    assert "2 × 5 × 1, 3.9 %, 6.7 min" in text


def test_paired_ratios_leave_out_what_a_cluster_and_round_share(seed=5):
    """A shift common to a cluster's (or a round's) conditions is in the times' components, not in their ratios."""
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(6):
        for c in range(2):
            shift = rng.normal(0, 0.3)  # the cluster's, on both conditions
            for o in range(5):
                common = shift + rng.normal(0, 0.1)  # the round's, on both
                for cond, effect in (("base", 0.0), ("new", 0.3)):
                    rows.append(("k", f"r{run}", f"c{c}", o, 0, f"{cond}|x", effect + common + rng.normal(0, 0.02)))
    times = pl.DataFrame(rows, schema=["kind", "run", "cluster", "round", "execution", "cell", "y"], orient="row")
    assert math.sqrt(dim.components(times)["cluster"]) > 0.08
    ratios = pl.concat(dim.paired(g, "base") for _, g in times.group_by("run", maintain_order=True))
    t2 = dim.components(ratios)
    assert ratios["y"].mean() == pytest.approx(0.3, abs=0.02)
    # the ratio's round sd: two executions' 0.02 each; what is left of the clusters' 0.3 is estimation noise only
    assert math.sqrt(t2["cluster"]) < 0.03 and math.sqrt(t2["round"]) == pytest.approx(0.02 * math.sqrt(2), rel=0.35)

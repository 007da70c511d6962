"""Every interval's label states what it covers: simulated studies with a known true ratio, for each method at the
round counts the profiles use (quick 2, the SSB sweep and S4's test B 5, S2 and the JIT operators 10, SSB 15)."""

import numpy as np
import polars as pl
import pytest

from pglab.core.stats import paired

DELTA = 0.9  # B takes 90 % of A's time, in every execution's distribution (so in its 10 % quantile too)


def _fast_study(rng, n: int, seed: int) -> dict:
    shared = rng.normal(0, 0.02, n)  # a round's shared slowdown
    a = np.exp(shared[:, None] + rng.normal(0, 0.05, (n, 3)))
    b = DELTA * np.exp(shared[:, None] + rng.normal(0, 0.05, (n, 3)))
    df = pl.DataFrame(
        {
            "cond": ["a"] * a.size + ["b"] * b.size,
            "round": list(np.repeat(np.arange(n), 3)) * 2,
            "value": [*a.ravel(), *b.ravel()],
        }
    )
    return paired.fast_compare(df, [], "cond", "a", "round", seed=seed).row(0, named=True)


@pytest.mark.parametrize(("n", "studies"), [(2, 600), (5, 2000), (10, 600), (15, 600)])
def test_the_fast_mode_covers_what_its_label_says(n, studies):
    rng = np.random.default_rng(1000 + n)
    rows = [_fast_study(rng, n, s) for s in range(studies)]
    covered = np.mean([r["low"] <= DELTA <= r["high"] for r in rows])
    label = rows[0]["coverage"]
    print(f"\nfast mode, {n} rounds: covers {covered:.1%}, labelled {label:.0%}: {rows[0]['method']}")
    assert abs(covered - label) <= 0.03, (covered, label)  # a standard error of 0.7-1 point
    assert f"{label:.0%}".replace("%", " %") in rows[0]["method"]


@pytest.mark.parametrize("n", [3, 5, 10, 15])
def test_round_by_round_covers_what_its_label_says(n):
    """min–max below 10 rounds (covers the median of the round ratios: 1 - 2^(1-n)), the expanded bootstrap of the
    mean from 10: both checked against a known log-normal truth."""
    rng = np.random.default_rng(2000 + n)
    logs = rng.normal(np.log(DELTA), 0.03, (1000, n))
    hits, label = 0, None
    for row in logs:
        r = paired.log_ratio_interval(row, n_boot=2000, seed=1)
        hits += r["low"] <= DELTA <= r["high"]
        label = r["coverage"]
    covered = hits / len(logs)
    print(f"\nround by round, {n} rounds: covers {covered:.1%}, labelled {label:.1%}")
    assert abs(covered - label) <= 0.035, (covered, label)

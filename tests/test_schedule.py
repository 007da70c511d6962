"""The measurement order (`pglab.core.run.schedule`): blocked rounds keep one server's item together, every
condition `executions` times per round, keys unique for the raw store."""

from collections import Counter

import polars as pl
import pytest

from pglab.core.run.schedule import plan, plan_blocked
from pglab.studies.jit_operators.verdicts import timed

CELLS = [(s, c, i) for s in ("pgA", "pgB") for c in ("off", "on", "off_aa") for i in ("avg", "sum", "max")]


def test_blocked_rounds_keep_each_block_together_and_run_every_condition_k_times():
    steps = plan_blocked(CELLS, repetitions=4, warmups=1, shuffle_seed=7, executions=3)
    warm, timed_steps = [s for s in steps if s.warmup], [s for s in steps if not s.warmup]
    assert Counter((s.server, s.condition, s.item) for s in warm) == Counter(CELLS)  # warm-up: every cell once
    assert len(timed_steps) == len(CELLS) * 4 * 3
    keys = [(s.server, s.condition, s.item, s.repetition, s.warmup) for s in steps]
    assert len(set(keys)) == len(keys)  # the store's key: no execution overwrites another
    for rnd in {s.round for s in timed_steps}:
        r = [s for s in timed_steps if s.round == rnd]
        blocks = [(s.server, s.item) for s in r]
        runs = [b for k, b in enumerate(blocks) if k == 0 or blocks[k - 1] != b]
        assert len(runs) == len(set(blocks)) == 6  # each block contiguous, once per round
        assert Counter((s.server, s.condition, s.item) for s in r) == Counter({c: 3 for c in CELLS})
    # passes within a block are shuffled on their own, and the same seed gives the same plan
    assert plan_blocked(CELLS, 4, 1, 7, 3) == steps
    orders = {tuple(s.condition for s in timed_steps[k : k + 3]) for k in range(0, len(timed_steps), 3)}
    assert len(orders) > 1


def test_spread_over_the_round_puts_a_cells_executions_a_whole_pass_apart():
    steps = plan_blocked(CELLS, repetitions=4, warmups=1, shuffle_seed=7, executions=3, spread="round")
    timed_steps = [s for s in steps if not s.warmup]
    keys = [(s.server, s.condition, s.item, s.repetition, s.warmup) for s in steps]
    assert len(set(keys)) == len(keys) and len(timed_steps) == len(CELLS) * 4 * 3
    per_pass = len(CELLS)  # one pass over every block of the round
    for rnd in {s.round for s in timed_steps}:
        r = [s for s in timed_steps if s.round == rnd]
        assert Counter((s.server, s.condition, s.item) for s in r) == Counter({c: 3 for c in CELLS})
        for k in range(3):
            chunk = r[k * per_pass : (k + 1) * per_pass]
            assert Counter((s.server, s.condition, s.item) for s in chunk) == Counter(CELLS)  # pass k: each cell once
            assert {s.repetition % 3 for s in chunk} == {k}
            blocks = [(s.server, s.item) for s in chunk]
            assert len([b for j, b in enumerate(blocks) if j == 0 or blocks[j - 1] != b]) == 6  # blocks together
    assert plan_blocked(CELLS, 4, 1, 7, 3, "round") == steps
    with pytest.raises(ValueError, match="spread must be"):
        plan_blocked(CELLS, 3, 0, None, 2, "operator")


def test_one_execution_is_plan_with_blocks_and_bad_counts_are_refused():
    one = plan_blocked(CELLS, 3, 0, None, 1)
    assert Counter((s.server, s.condition, s.item, s.repetition) for s in one) == Counter(
        (s.server, s.condition, s.item, s.repetition) for s in plan(CELLS, 3, 0, None)
    )
    with pytest.raises(ValueError, match="executions must be ≥ 1"):
        plan_blocked(CELLS, 3, 0, None, 0)


def test_the_rounds_value_is_its_fastest_execution_or_median():
    # one round, three executions of off: a burst made one of them 1.6x slower
    runs = pl.DataFrame(
        {
            "server": ["pgA"] * 3,
            "condition": ["off"] * 3,
            "operator": ["avg"] * 3,
            "warmup": [False] * 3,
            "error": [None] * 3,
            "round": [1] * 3,
            "ms": [200.0, 320.0, 210.0],
            "cpu_ms": [199.0, 318.0, 209.0],
        },
        schema_overrides={"error": pl.String},
    )
    assert timed(runs, "wall", "min")["value"].to_list() == [200.0]
    assert timed(runs, "wall", "median")["value"].to_list() == [210.0]
    assert timed(runs, "cpu", "min")["value"].to_list() == [199.0]

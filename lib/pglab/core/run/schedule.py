"""The order measurements are taken in (methodology §2, §3).

A cell is one (server, condition, item): servers are interleaved like conditions, since a comparison of
versions run one block after the other puts any drift of the machine on one side. Warm-up first:
`warmups` runs of every cell, recorded with warmup=True. Then round robin: repetition r of every cell
runs before repetition r+1 of any, so that drift (clock scaling, a neighbour's load) spreads over all
cells. Within a round the order can be shuffled with a seed that is recorded with the data.

`plan_blocked` keeps the cells of one block (e.g. one server's query under every condition) together within
a round and runs each block's conditions `executions` times over, each pass in its own shuffled order: paired
runs are then seconds apart, not a round apart, and a short burst of a neighbour's load rarely covers every
execution of one condition but none of the other's (the round's value of a cell is then its fastest or median
execution, which the study chooses).

`run_steps` executes a plan against the raw store: steps already recorded (an interrupted run started
again) are skipped, the rest run under a progress bar and are recorded as they finish. With `remeasure`, a plan's
artefact rounds (`core.artefacts`: a cell's round under 0.4× or over 2.5× its other rounds) are measured again
once: one extra round of every cell of the items concerned (all servers and conditions, so it pairs like any
round), after the plan; the artefact stays in raw, derive leaves it out and the run lists it
(`artefact_rounds/<experiment>.round<n>.json`)."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

import polars as pl

from ..progress import bar as tqdm
from ..stats import artefacts
from ..store import RunStore


@dataclass(frozen=True)
class Step:
    server: str
    condition: str
    item: str
    repetition: int  # warm-ups count from 0 too; `warmup` tells them apart
    warmup: bool
    round: int  # position in the overall order of rounds (warm-up rounds first)


def shuffler(seed: int | None) -> Callable[[Iterable], list]:
    """A list of the items, shuffled by one generator seeded once per plan (unshuffled without a seed)."""
    rng = random.Random(seed) if seed is not None else None

    def shuffled(xs: Iterable) -> list:
        xs = list(xs)
        if rng is not None:
            rng.shuffle(xs)
        return xs

    return shuffled


def _rounds(warmups: int, repetitions: int) -> list[tuple[int, bool]]:
    """(round, is warm-up) in run order: the warm-up rounds first."""
    return [(r, True) for r in range(warmups)] + [(r, False) for r in range(repetitions)]


def plan(
    cells: Iterable[tuple[Hashable, Hashable, Hashable]],
    repetitions: int,
    warmups: int = 1,
    shuffle_seed: int | None = None,
) -> list[Step]:
    """Steps for every (server, condition, item) cell, warm-up rounds first, then interleaved rounds."""
    cells = [(str(s), str(c), str(i)) for s, c, i in cells]
    shuffled = shuffler(shuffle_seed)
    return [
        Step(s, c, i, rep, warm, n)
        for n, (rep, warm) in enumerate(_rounds(warmups, repetitions))
        for s, c, i in shuffled(cells)
    ]


def plan_blocked(
    cells: Iterable[tuple[Hashable, Hashable, Hashable]],
    repetitions: int,
    warmups: int = 1,
    shuffle_seed: int | None = None,
    executions: int = 1,
    spread: Literal["block", "round"] = "block",
) -> list[Step]:
    """Like `plan`, but per round the cells are grouped into blocks of one (server, item), blocks in shuffled
    order, and each block's conditions run `executions` times (each pass shuffled). spread "block": a block's
    passes back to back; "round": each pass goes over every block of the round, so one cell's executions are
    a whole pass apart (a burst of load seconds long then rarely covers all of them) while a block's
    conditions stay together within each pass. Timed executions get repetition = timed round × executions +
    pass (unique keys for the store); all carry the round. Warm-up rounds run every cell once."""
    if executions < 1:
        raise ValueError(f"executions must be ≥ 1, not {executions}")
    if spread not in ("block", "round"):
        raise ValueError(f"spread must be 'block' or 'round', not {spread!r}")
    cells = [(str(s), str(c), str(i)) for s, c, i in cells]
    blocks: dict[tuple[str, str], list[str]] = {}
    for s, c, i in cells:
        blocks.setdefault((s, i), []).append(c)
    shuffled = shuffler(shuffle_seed)
    steps: list[Step] = []
    for n, (rep, warm) in enumerate(_rounds(warmups, repetitions)):
        passes = 1 if warm else executions
        order = shuffled(blocks)
        # (block, pass) in run order: a block's passes together, or pass k over every block before pass k+1
        visits = (
            [(b, k) for b in order for k in range(passes)]
            if spread == "block"
            else [(b, k) for k in range(passes) for b in (order if k == 0 else shuffled(blocks))]
        )
        for (s, i), k in visits:
            steps += [Step(s, c, i, rep if warm else rep * executions + k, warm, n) for c in shuffled(blocks[(s, i)])]
    return steps


def grouped(steps: list[Step], key: Callable[[Step], Hashable]) -> list[Step]:
    """Within each round, the steps of one `key` (a server configuration) together, the round's order kept inside a
    group; the groups' sorted order rotates by one place a round (two groups: reversed every other round), so that
    no group always runs first after a restart, and a server switches configuration once per round, not per step."""
    out: list[Step] = []
    for n in sorted({st.round for st in steps}):
        group = [st for st in steps if st.round == n]
        keys = sorted({key(st) for st in group})
        order = {gk: i for i, gk in enumerate(keys[n % len(keys) :] + keys[: n % len(keys)])}
        out += sorted(group, key=lambda st: order[key(st)])
    return out


def run_steps(
    steps: list[Step],
    store: RunStore,
    experiment: str,
    measure: Callable[[Step], dict],
    desc: str | None = None,
    remeasure: bool = False,
) -> int:
    """Run every step not yet recorded. `measure(step)` returns the record's fields: at least `value` and
    `unit` (value None plus `error=` for a failure, which is recorded, never retried). With `remeasure`, then the
    plan's artefact rounds once more (`remeasure_steps`). Returns how many steps ran now."""
    ran = _run(steps, store, experiment, measure, desc)
    if remeasure:
        extra = remeasure_steps(steps, store, experiment)
        ran += _run(extra, store, experiment, measure, f"{desc or experiment} (re-measured)", remeasured=True)
    return ran


def _timed_rounds(steps: list[Step], store: RunStore, experiment: str) -> pl.DataFrame:
    """One value per (server, condition, item, round) of the plan's timed steps: the median of the round's positive
    values as recorded."""
    keys = ["server", "condition", "item", "round"]
    plan_rounds = pl.DataFrame(
        [(s.server, s.condition, s.item, s.round) for s in steps if not s.warmup], schema=keys, orient="row"
    ).unique()
    rec = store.records(experiment)
    if rec.is_empty() or "round" not in rec.columns:
        return plan_rounds.with_columns(value=pl.lit(None, pl.Float64)).clear()
    v = pl.col("value").cast(pl.Float64, strict=False)
    return (
        rec.filter(~pl.col("warmup").cast(pl.Boolean) & v.is_finite() & (v > 0))
        .with_columns(pl.col("server", "condition", "item").cast(pl.String), pl.col("round").cast(pl.Int64))
        .join(plan_rounds, on=keys, how="semi")
        .group_by(keys)
        .agg(v.median().alias("value"))
        .sort(keys)
    )


def remeasure_steps(steps: list[Step], store: RunStore, experiment: str) -> list[Step]:
    """The steps that measure a plan's artefact rounds again: one extra round (after the plan's last) of every
    timed cell whose item had an artefact round, each cell as many executions as it had in a round, cells in an
    order shuffled by a seed of the experiment's name. Computed from the plan's own rounds only, so a resumed run
    asks for the same steps (those already recorded are skipped). Also saves what was flagged, once."""
    timed = [s for s in steps if not s.warmup]
    if not timed:
        return []
    bad = artefacts.flagged(_timed_rounds(steps, store, experiment), ["server", "condition", "item"], "round")
    if bad.is_empty():
        return []
    items = set(bad["item"])
    extra_round = max(s.round for s in steps) + 1
    store.save_json(
        f"artefact_rounds/{experiment}.round{extra_round}.json",
        {"rule": artefacts.RULE, "rounds": bad.to_dicts(), "remeasured_items": sorted(items)},
    )
    executions = max(Counter((s.server, s.condition, s.item, s.round) for s in timed).values())  # a cell's in a round
    cells = sorted({(s.server, s.condition, s.item) for s in timed if s.item in items})
    first_rep = max(s.repetition for s in timed) + 1
    shuffled = shuffler(zlib.crc32(experiment.encode()))
    return [
        Step(srv, cond, item, first_rep + k, False, extra_round)
        for k in range(executions)
        for srv, cond, item in shuffled(cells)
    ]


def pending(steps: list[Step], store: RunStore, experiment: str) -> list[Step]:
    """The steps the raw store does not hold yet (all of them for a new run; the rest of an interrupted one)."""
    return [s for s in steps if not store.done(s.server, experiment, s.condition, s.item, s.repetition, s.warmup)]


def fresh_base(store: RunStore, base: str) -> str:
    """`base`, or `base.attempt<n>` where an interrupted step left its output (`<base>.stdout.txt`) but no record:
    the step runs again (`pending`), and both outputs are kept."""
    out, n = base, 1
    while store.has_artifact(f"{out}.stdout.txt"):
        n += 1
        out = f"{base}.attempt{n}"
    return out


def _run(
    steps: list[Step],
    store: RunStore,
    experiment: str,
    measure: Callable[[Step], dict],
    desc: str | None,
    remeasured: bool = False,
) -> int:
    todo = pending(steps, store, experiment)
    if not todo:
        return 0
    bar = tqdm(todo, desc=desc or experiment, unit="run", leave=True)
    for step in bar:
        bar.set_postfix_str(f"{step.server} {step.condition} {step.item}", refresh=False)
        fields = measure(step)
        store.record(
            step.server,
            experiment,
            step.condition,
            step.item,
            step.repetition,
            warmup=step.warmup,
            round=step.round,
            **fields,
            **({"remeasured": True} if remeasured else {}),  # an artefact round's re-measurement (raw says so)
        )
    return len(todo)

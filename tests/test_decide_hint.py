"""What an undetermined verdict says would decide it (methodology rule 16, `verdicts.decide`): more rounds where the
rounds' spread sets the interval, more clusters where the clusters' disagreement does, more runs where the re-run
floor does (or nothing on this machine, where even ten runs would not do), with the minutes the stage took. Pure
functions on made-up evidence: no server."""

from __future__ import annotations

import math

import polars as pl
import pytest

from pglab.core.stats import between_runs as br
from pglab.core.stats import verdicts as vd

# 25 % less time, ×/÷ 1.5: supported for 0.65×-0.83×, on the log scale edges at 0.096, 0.192 and 0.432
CLAIM = vd.Claim("B takes 25 % less time", vd.LOWER, 0.75)
X = 0.25  # our oriented log ratio (0.78×): 0.058 inside supported's lower edge, the nearest
NEED = X - math.log(0.75) / -1.5  # the half-width that would decide it
# the made-up intervals cover what the verdict decides on (`vd.DECISION`), so that NEED is their own scale's; an
# interval covering more is read narrowed (`vd.decision_interval`): test_a_95_interval_is_counted_on_its_own_scale
COVER = vd.DECISION


def rounds_only(half: float, n: int = 5) -> vd.Evidence:
    """One cluster's interval over n rounds, ±half (log) around 0.78×."""
    r = math.exp(-X)
    return vd.Evidence(r, r * math.exp(-half), r * math.exp(half), n, COVER, f"min–max, n={n}")


def pooled(within: float, cluster_sd: float, floor_sd: float = 0.0, k: int = 2, n: int = 5) -> vd.Evidence:
    """A pooled row as `between_runs.pool_clusters` makes it: the rounds' half-width `within`, the clusters' sd
    (df 7), and a re-run floor of `floor_sd` (df 40) where the interval is narrower than it allows."""
    t_c, t_f = 2.365, 2.021  # t(0.975) at 7 and 40 df
    half = max(math.sqrt(within**2 + (t_c * cluster_sd) ** 2 / k), t_f * floor_sd)
    r = math.exp(-X)
    return vd.Evidence(
        r,
        r * math.exp(-half),
        r * math.exp(half),
        n * k,
        COVER,
        f"min–max, n={n}; pooled: 95 % across {k} clusters × {n} rounds",
        n_clusters=k,
        within_low=r * math.exp(-within),
        within_high=r * math.exp(within),
        cluster_sd=cluster_sd,
        cluster_df=7.0,
        floor_sd=floor_sd or None,
        floor_df=40.0 if floor_sd else None,
    )


def needs(ev: vd.Evidence, cost: vd.StageCost | None = None) -> str:
    """The hint of a verdict across supported's edge: direction only while the interval stays past a third (the
    size open), undetermined once it reaches below it; both say what would decide it."""
    with vd.costs(cost):
        v = vd.verdict(CLAIM, ev)
    lo = -math.log(ev.high)  # oriented: the end nearest no effect, on the interval as given (a bound, not decided)
    assert v.label in (vd.UNDETERMINED, vd.DIRECTION_ONLY), v.text()
    assert v.label == vd.DIRECTION_ONLY or lo < -math.log(0.75) / 3, v.text()
    assert v.needs.startswith(vd.SIZE_OPEN) == (v.label == vd.DIRECTION_ONLY), v.text()
    return v.needs.removeprefix(vd.SIZE_OPEN)


def test_rounds_limited_asks_for_more_rounds_with_a_count():
    # ±0.10 where ±0.058 would decide: (0.10 / 0.058)² ≈ 2.97 times the rounds, 15 for 5
    assert needs(rounds_only(0.10)) == "more rounds: about 15 instead of 5"
    # pooled, the clusters agreeing and the floor far inside: rounds per cluster
    hint = needs(pooled(0.09, 0.002, floor_sd=0.01))
    assert hint.startswith("more rounds: about ") and hint.endswith(" per cluster instead of 5"), hint
    assert 11 <= int(hint.split()[3]) <= 13, hint  # 5 × (0.09 / ~0.058)² ≈ 12, the clusters' small term aside


def test_floor_limited_asks_for_more_runs_and_never_for_rounds():
    # the floor's ±t·5 % = ±0.101 alone is wider than the ±0.058 needed: no number of rounds narrows it
    ev = pooled(0.01, 0.002, floor_sd=0.05)
    hint = needs(ev)
    assert hint.startswith("more runs: about 4 runs of this stage pooled;"), hint  # (0.101 / 0.058)² ≈ 3.03
    assert "its re-run spread ±10.6 % is wider than the ±6.0 % the claim needs" in hint, hint
    assert "rounds" not in hint and "clusters" not in hint


def test_runs_as_measured_too_many_but_the_floors_few_ask_for_runs_with_more_rounds():
    # the floor ±0.0606 needs 2 runs for ±0.058; the interval as measured, ±0.25, would need 19
    hint = needs(pooled(0.24, 0.02, floor_sd=0.03), vd.StageCost(minutes=30.0, rounds=5, clusters=2))
    assert hint == (
        "more runs, each with more rounds or clusters: its re-run spread ±6.3 % alone needs about 2 runs pooled to "
        "come within the ±6.0 % the claim needs, at least ≈ 30 min more"
    ), hint


def test_a_floor_beyond_ten_runs_decides_nothing_on_this_machine():
    hint = needs(pooled(0.01, 0.002, floor_sd=0.15))  # ±0.30 against ±0.058: 27 runs
    assert hint.startswith("nothing on this machine decides it: its re-run spread ±35.4 %"), hint
    assert "over 10 runs pooled" in hint and "±6.0 % the claim needs" in hint


def test_cluster_limited_asks_for_more_clusters():
    # the clusters' term ±2.365 · 6 % / √2 = ±0.100 alone exceeds ±0.058: more rounds cannot do it
    hint = needs(pooled(0.02, 0.06))
    assert hint.startswith("more clusters: about ") and hint.endswith(" per server instead of 2"), hint
    assert int(hint.split()[3]) == math.ceil(2 * (0.02**2 + (2.365 * 0.06) ** 2 / 2) / NEED**2)


def test_minutes_appear_when_the_stage_cost_is_set():
    cost = vd.StageCost(minutes=30.0, rounds=5, clusters=2)
    assert needs(rounds_only(0.10), cost) == "more rounds: about 15 instead of 5, ≈ 60 min more"  # 10 × 30 / 5
    assert ", ≈ 90 min more;" in needs(pooled(0.01, 0.002, floor_sd=0.05), cost)  # 3 more runs of 30 min
    hint = needs(pooled(0.02, 0.06), cost)
    k = int(hint.split()[3])
    assert hint.endswith(f", ≈ {(k - 2) * 15:.0f} min more"), hint  # a cluster: half the stage
    assert needs(rounds_only(0.10), vd.StageCost(minutes=600.0, rounds=5)).endswith(", ≈ 20.0 h more")
    assert "min" not in needs(rounds_only(0.10))  # no cost set: counts only


def test_a_figure_on_a_zones_edge_promises_nothing():
    r = 0.75 ** (1 / 1.5) * 1.0005  # a hair off supported's edge at 0.83×
    ev = vd.Evidence(r, r * 0.9, r / 0.9, 5, COVER, "min–max, n=5")
    assert needs(ev).startswith("nothing can be promised: our 0.826× is too near its zone's edge at 0.825×")
    # near an edge with a re-run floor wider than the distance: the floor's reason, not the edge's
    near = vd.Evidence(r, r * math.exp(-0.15), r * math.exp(0.15), 10, COVER, "x", n_clusters=2, floor_sd=0.07)
    assert needs(near) == (
        "nothing on this machine decides it: its re-run spread ±14.7 % would need over 10 runs pooled to come "
        "within the ±0.05 % the claim needs"
    )


def test_every_undetermined_site_says_what_would_decide_it():
    # no change within ±5 %: 1.03× ± 4 % reaches past 1.05×
    same = vd.Claim("no change", vd.SAME, margin=0.05)
    ev = vd.Evidence(1.03, 1.03 / 1.04, 1.03 * 1.04, 5, COVER, "min–max, n=5")
    assert vd.verdict(same, ev).needs.startswith("more rounds: about ")
    # a claim without a size: 1.05× ± 4 % across a noticeable 5 %
    unsized = vd.Claim("B is slower", vd.HIGHER)
    ev = vd.Evidence(1.06, 1.06 / 1.04, 1.06 * 1.04, 5, COVER, "min–max, n=5")
    v = vd.verdict(unsized, ev)  # past no effect: the direction shown, the size open
    assert v.label == vd.DIRECTION_ONLY and v.needs.startswith("its size: more rounds: about "), v.text()
    # a scale-free quantity, on its log: 20 ns per row against 15.7 (10.5-23.6), floor-limited by its method's text
    quantity = vd.Claim("15.7 ns per row", vd.HIGHER, 15.7, quantity="ns per row")
    method = (
        "min–max, n=5; pooled: 95 % across 2 clusters × 5 rounds, between-cluster sd of the quantities 0.8 % (df 6: "
        "this run's 1.3 % with the prior 0.7 % of 5 archived runs), no narrower than the figure's spread over 5 "
        "archived runs (sd 10.4 %)"
    )
    ev = vd.Evidence(20.3, 16.4, 25.1, 10, COVER, method, unit="ns per row")
    v = vd.verdict(quantity, ev)  # wholly past a third of 15.7: the direction shown, the size open
    assert v.label == vd.DIRECTION_ONLY and v.needs.startswith("its size: more runs: about 3 runs of this stage")
    assert all("narrow it" not in (v.needs or "") for v in [vd.verdict(quantity, ev), vd.verdict(CLAIM, ev)])


def test_evidence_built_by_hand_from_a_pooled_row_reads_its_components_from_the_method():
    """auto_explain builds its evidence from a pooled row's ratio, interval and method alone: the method says
    the floor (`pool_clusters` writes it), so a floor-limited row asks for runs, not rounds."""
    method = (
        "min–max, n=5; pooled: 95 % across 2 clusters × 5 rounds, between-cluster sd 0.2 % (df 7: this run's 0.0 % "
        "with the prior 0.2 % of 6 archived runs), no narrower than the figure's spread over 5 archived runs "
        "(sd 5.0 %)"
    )
    full = pooled(0.01, 0.002, floor_sd=0.05)
    by_hand = vd.Evidence(full.ratio, full.low, full.high, full.n_rounds, full.coverage, method)
    assert needs(by_hand).startswith("more runs: about 4 runs of this stage pooled")


def test_pool_clusters_writes_the_components_and_from_row_reads_them():
    rows = []
    for item, shift in enumerate((0.0, 0.01, -0.01, 0.02, -0.02)):
        for server, c in (("pg18", 0.0), ("pg18_c2", 0.004)):
            r = math.exp(-X + shift + c)
            rows.append(
                {"server": server, "item": item, "ratio": r, "low": r / 1.03, "high": r * 1.03}
                | {"n_rounds": 5, "coverage": 0.94, "method": "min–max, n=5"}
            )
    prior = br.Prior(0.002, 6, 0.05, 40, 5)  # a re-run spread of 5 % over 5 archived runs
    out = br.pool_clusters(pl.DataFrame(rows), ["item"], priors={"pg18": prior})
    assert set(br.POOLED_COLUMNS) <= set(out.columns)
    row = out.filter(pl.col("item") == 0).row(0, named=True)
    assert (row["floor_sd"], row["floor_df"], row["cluster_df"]) == (0.05, 40.0, 7.0) and row["run_sd"] is None
    ev = vd.Evidence.from_row(row)
    assert (ev.n_clusters, ev.floor_sd, ev.floor_df) == (2, 0.05, 40.0)
    # the pooled row covers 95 %: the floor's ±10.1 % against the 95 % half-width that decides, NEED / 0.839: 2.1
    # times the runs' measurement, 3 runs
    assert ev.coverage == 0.95
    assert needs(ev).startswith("more runs: about 3 runs of this stage pooled")


def test_stage_cost_from_the_runs_tables():
    machine = pl.DataFrame({"attempt": [1, 1, 1, 2, 2], "t_s": [1.0, 900.0, 1800.0, 1.0, 600.0]})
    meas = pl.DataFrame(
        {
            "server": ["pg18", "pg18_c2"] * 7,
            "round": [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, None, None],
            "warmup": [True, True] + [False] * 12,
            "experiment": ["s"] * 14,
        }
    )
    cost = vd.stage_cost({"s_machine": machine, "s_measurements": meas}, "s")
    assert cost == vd.StageCost(minutes=40.0, rounds=5, clusters=2)  # (1800 + 600) s; rounds 1-5; pg18 twice
    assert vd.stage_cost({"s_measurements": meas}, "s") is None


@pytest.mark.parametrize("half", [0.07, 0.2, 0.5])
def test_the_count_would_decide_it_at_the_same_point(half):
    """The rounds asked for narrow a rounds-only interval (1 / sqrt(rounds)) to within the need."""
    n = int(needs(rounds_only(half)).split()[3])
    assert half * math.sqrt(5 / n) <= NEED < half * math.sqrt(5 / (n - 1))


def test_a_95_interval_is_decided_on_its_90_interval():
    """Each zone edge a one-sided 5 % test: a 95 % interval that reaches just past supported's edge at 0.825×
    while its 90 % interval does not reads supported, and says which interval decided."""
    r = 0.78
    half = 1.05 * math.log(0.825 / r)  # the 95 % interval's high end a hair past 0.825×
    ev = vd.Evidence(r, r * math.exp(-half), r * math.exp(half), 10, 0.95, "pooled")
    assert ev.high > 0.825
    lo, hi = vd.decision_interval(ev)
    assert hi < 0.825 and math.log(hi / r) == pytest.approx(0.8394 * half, rel=1e-3)
    v = vd.verdict(CLAIM, ev)
    assert v.label == vd.SUPPORTED and "at 90 %, which decides" in v.reason, v.text()
    # the same interval said to cover only 90 %: no narrowing, across supported's edge: the size open
    assert vd.verdict(CLAIM, vd.Evidence(r, ev.low, ev.high, 10, vd.DECISION, "pooled")).label == vd.DIRECTION_ONLY


def test_a_95_interval_is_counted_on_its_own_scale():
    """What would decide a 95 % interval: rounds enough that its 90 % interval clears the edge."""
    ev = rounds_only(0.10)
    wide = vd.Evidence(ev.ratio, ev.low, ev.high, 5, 0.95, "min–max, n=5")
    n = int(needs(wide).split()[3])
    s = vd.decision_scale(0.95)
    assert 0.10 * s * math.sqrt(5 / n) <= NEED < 0.10 * s * math.sqrt(5 / (n - 1))

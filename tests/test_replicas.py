"""Replica clusters (params `servers.clusters`, issue 30) end to end on real servers: a tiny JIT-per-operator run
with `clusters: 2` on the install with JIT starts two clusters of it (own data directory, port and table),
measures both interleaved, pools the paired table to one row per base server and comparison with an interval no
narrower than the rounds' own, and stops both however the run ends. Without servers: the names, the params key's
errors, and a notebook's server override that names a server and gets its replicas."""

import re
import uuid

import polars as pl
import pytest
import yaml
from conftest import postmasters

from pglab import params
from pglab.core import replicas
from pglab.core.derived import Tables
from pglab.core.run import session
from pglab.core.servers import servers
from pglab.core.stats import paired
from pglab.params import ParamsError
from pglab.studies.auto_explain import verdicts as auto_explain_verdicts
from pglab.studies.jit_operators import verdicts as jv
from pglab.studies.jit_operators.derive import tables as stage_tables
from pglab.studies.jit_operators.params import OPERATORS
from pglab.studies.jit_operators.run import run_stage

ROWS, REPS = 20000, 3


def _params_file(path, servers_section, name="pytest-replicas"):
    doc = {
        "profile": name,
        "servers": servers_section,
        "settings": {"shared_buffers": "128MB", "jit": False},
        "jit_operators": {"rows": ROWS, "repetitions": REPS, "warmups": 1, "executions": 2},
    }
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


def test_names_map_back_to_their_base_server():
    assert replicas.replica_name("pg17", 1) == "pg17" and replicas.replica_name("pg17", 2) == "pg17_c2"
    assert replicas.split_name("pg17_c2") == ("pg17", 2) and replicas.split_name("pg17") == ("pg17", 1)
    assert replicas.split_name("pg16.14_c12") == ("pg16.14", 12)
    assert replicas.split_name("a_c1") == ("a_c1", 1) and replicas.split_name("a_c01") == ("a_c01", 1)
    assert replicas.base_names(["pg17", "pg17_c2", "lab_c2"]) == {"pg17": "pg17", "pg17_c2": "pg17", "lab_c2": "lab_c2"}


@pytest.mark.parametrize(
    "section, says",
    [
        ({"clusters": 0}, "servers.clusters: expected a whole number of clusters per server from 1"),
        ({"clusters": 9}, "to 8"),
        ({"clusters": "2"}, "got '2'"),
        ({"clusters": True}, "got True"),
        (
            {"clusters": 2, "external": [{"name": "lab_c2", "dsn": "host=x"}]},
            "servers.external[0].name: with servers.clusters: 2, expected a name that does not end in _c<number>",
        ),
    ],
)
def test_params_errors(tmp_path, section, says):
    with pytest.raises(ParamsError, match=None) as e:
        params.load(_params_file(tmp_path, section), check_servers=False)
    assert says in str(e.value)


def test_one_cluster_is_the_default_and_a_name_stands_for_its_replicas(tmp_path, installs):
    one = params.load(_params_file(tmp_path, {}), check_servers=False)
    assert one.servers.clusters == 1
    assert [s.name for s in servers.for_study(one, "jit_operators")] == [i.name for i in installs]
    two = params.load(_params_file(tmp_path, {"clusters": 2}, "pytest-replicas-2"), check_servers=False)
    got = servers.for_study(two, "jit_operators")
    assert [s.name for s in got] == [n for i in installs for n in (i.name, f"{i.name}_c2")]
    assert len({s.cluster.name for s in got}) == len(got)  # a folder of its own each
    s = session.Session(params=two, store=None, servers=got)
    s.override(servers=[installs[0].name])
    assert [x.name for x in s.servers] == [installs[0].name, f"{installs[0].name}_c2"]


def test_a_study_section_may_keep_fewer_clusters(tmp_path, installs):
    """auto_explain.clusters: 1 under servers.clusters: 2: that study on one cluster per server, the others on two."""
    f = _params_file(tmp_path, {"clusters": 2}, "pytest-replicas-own")
    f.write_text(yaml.safe_dump(yaml.safe_load(f.read_text()) | {"auto_explain": {"clusters": 1}}))
    p = params.load(f, check_servers=False)
    assert [s.name for s in servers.for_study(p, "auto_explain")] == [i.name for i in installs]
    assert len(servers.for_study(p, "jit_operators")) == 2 * len(installs)


def test_ssb_jit_only_servers_keep_jit_clusters(tmp_path, installs):
    """ssb.jit_clusters: the servers added for their JIT only (not among ssb.versions) come on that many of the
    run's clusters; the versions on all of them."""
    jit, plain = [i for i in installs if i.jit], [i for i in installs if not i.jit]
    if not jit or not plain or any(i.major == plain[0].major for i in jit):
        pytest.skip("needs an install with llvmjit and one of another major without (Debian's 15, the wheel's 18)")
    f = _params_file(tmp_path, {"clusters": 2}, "pytest-replicas-jit")
    doc = yaml.safe_load(f.read_text()) | {"ssb": {"versions": [plain[0].major], "jit_sf": 1, "jit_clusters": 1}}
    f.write_text(yaml.safe_dump(doc))
    got = [s.name for s in servers.for_study(params.load(f, check_servers=False), "ssb")]
    assert got[:2] == [plain[0].name, f"{plain[0].name}_c2"]
    assert {i.name for i in jit} <= set(got) and not any(n.endswith("_c2") for n in got[2:]), got


@pytest.fixture(scope="module")
def run(tmp_path_factory, installs):
    jit = [i for i in installs if i.jit]
    if not jit:
        pytest.skip("no install with llvmjit on this machine")
    d = tmp_path_factory.mktemp("replicas")
    f = _params_file(d, {"use": [jit[0].name], "clusters": 2})
    s = session.begin(params.load(str(f)), run_id=f"pytest-replicas-{uuid.uuid4().hex[:8]}")
    seen = {}
    try:
        s.start()
        seen["running"] = {x.name: (x.cluster.port, x.cluster.data) for x in s.servers if x.cluster.running}
        result = run_stage(s)
    finally:
        s.close()
    tables = stage_tables(s.store, s.params.jit_operators, result.seen["setup"])
    return s, jit[0].name, seen, result, tables


def test_two_clusters_started_and_both_measured(run):
    s, base, seen, result, tables = run
    names = [base, f"{base}_c2"]
    assert [x.name for x in s.servers] == names
    assert sorted(seen["running"]) == sorted(names)
    (p1, d1), (p2, d2) = seen["running"][names[0]], seen["running"][names[1]]
    assert p1 != p2 and d1 != d2
    assert sorted(result.servers) == sorted(names)
    r = tables["jit_operators_runs"]
    n = r.filter(~pl.col("warmup")).group_by("server").len()
    conds = len(s.params.jit_operators.measured_conditions())
    assert dict(n.iter_rows()) == dict.fromkeys(names, REPS * 2 * conds * len(OPERATORS))  # rounds × passes × cells
    # each cluster loaded its own table: both have it, each its own size record
    setup = result.seen["setup"]
    assert sorted(setup["server"]) == sorted(names) and setup["table_bytes"].null_count() == 0


def test_pooled_table_one_row_per_base_server_and_comparison(run):
    s, base, _, _, tables = run
    pair = tables["jit_operators_paired"]
    assert pair["server"].unique().to_list() == [base]
    assert pair.group_by("metric", "operator", "condition").len()["len"].to_list() == [1] * pair.height
    # every condition but the baseline (the A/A copy too) against it
    assert pair.height == len(OPERATORS) * (len(s.params.jit_operators.measured_conditions()) - 1)
    assert (pair["n_clusters"] == 2).all() and (pair["n_rounds"] == 2 * REPS).all()
    ok = pair.filter(pl.col("low").is_not_null())
    assert ok.height == pair.height
    assert (ok["low"] <= ok["within_low"]).all() and (ok["high"] >= ok["within_high"]).all()
    assert all("pooled: " in m and f"across 2 clusters × {REPS} rounds" in m for m in pair["method"])
    over = tables["jit_operators_overall"]
    assert set(over["server"]) == {base} and set(over["n_clusters"]) == {2}
    noise = tables["jit_operators_noise"]
    # an A/A pair per operator, pooled over the two clusters as the comparisons are (`noise.pool_aa`)
    assert noise["server"].to_list() == [base] and noise["n_pairs"].to_list() == [len(OPERATORS)]
    f = jv.findings_from(
        tables["jit_operators_setup"], pair, over, noise, jv.study_condition(tables["jit_operators_conditions"])
    )
    assert f["server"].unique().to_list() == [base] and f.height == len(OPERATORS) + 1
    assert all("on 2 clusters" in e for e in f["evidence"] if "fast mode" in e)


def test_every_cluster_stopped_afterwards(run):
    s, _, seen, _, _ = run
    assert not any(x.cluster.running for x in s.servers)
    for _, data in seen["running"].values():
        assert postmasters(data) == [], data


def test_derive_and_report_section_say_what_the_intervals_rest_on(run, tmp_path):
    from pglab.core import derived
    from pglab.studies.jit_operators import STUDY, report

    s, base, _, _, _ = run
    out = STUDY.derive(s.store, s.params)
    derived.write(out, s.profile, root=tmp_path)
    text = report.method(Tables(s.profile, tmp_path))
    assert "- **Clusters**: every server measured on several independently made" in text
    assert f"{base}: 2 clusters × {REPS} rounds" in text
    for chart in report.charts(Tables(s.profile, tmp_path)):
        chart.to_dict()
    f = report.findings(Tables(s.profile, tmp_path))
    assert f["server"].unique().to_list() == [base]


# -- SSB's paired tables with replica clusters (synthetic executions, as tests/test_ssb_paired.py) ------------------


def _ssb_replicated(seed=0):
    import numpy as np
    from test_ssb_paired import FACTS, _execs

    e = _execs()
    rng = np.random.default_rng(seed)
    parts = [e]
    for server in ("pg16", "pg17"):
        effect = {q: float(np.exp(rng.normal(0, 0.02))) for q in e["query"].unique()}  # this cluster's own
        parts.append(
            e.filter(pl.col("server") == server).with_columns(
                server=pl.lit(f"{server}_c2"),
                seconds=pl.col("seconds") * pl.col("query").replace_strict(effect) * (1 + rng.normal(0, 0.002)),
            )
        )
    facts = FACTS | {"servers": FACTS["servers"] | {"pg16_c2": {"major": 16}, "pg17_c2": {"major": 17}}}
    return e, pl.concat(parts), facts


@pytest.mark.parametrize("estimate", ["fast", "round"])
def test_ssb_paired_tables_pool_replica_clusters(estimate):
    from test_ssb_paired import FACTS

    from pglab.studies.ssb import paired_tables as pt

    def derive(execs, facts):
        return {
            "ssb_paired": pt.mode_comparisons(execs, estimate),
            "ssb_versions_paired": pt.version_comparisons(execs, facts, estimate),
            "ssb_noise": pt.noise_table(execs, estimate=estimate)[1],
        }

    one, both, facts = _ssb_replicated()
    plain, got = derive(one, FACTS), derive(both, facts)
    modes, plain_modes = got["ssb_paired"], plain["ssb_paired"]
    assert sorted(modes["server"].unique()) == ["pg16", "pg17"]
    assert modes.height == plain_modes.height and (modes["n_clusters"] == 2).all()
    assert (modes["low"] <= modes["within_low"]).all() and (modes["high"] >= modes["within_high"]).all()
    assert all("across 2 clusters" in m for m in modes["method"])
    assert paired.is_fast(modes["method"]) == (estimate == "fast")
    versions = got["ssb_versions_paired"]
    # 17 over 16 on each cluster pair, pooled: one row per mode and query, named as without replicas
    assert versions.select("server", "baseline").unique().rows() == [("pg17", "pg16")]
    assert versions.height == plain["ssb_versions_paired"].height and (versions["n_clusters"] == 2).all()
    noise = got["ssb_noise"]
    assert sorted(noise["server"]) == ["all", "pg16", "pg17"]
    assert (noise.filter(pl.col("server") != "all")["n_pairs"] == len(set(one["query"]))).all()  # pooled pairs


def test_ssb_paired_tables_without_replicas_unchanged():
    from test_ssb_paired import FACTS

    from pglab.studies.ssb import paired_tables as pt

    one, _, _ = _ssb_replicated()
    assert "n_clusters" not in pt.mode_comparisons(one).columns
    assert "n_clusters" not in pt.version_comparisons(one, FACTS).columns


# -- auto_explain's derivation with replica clusters (synthetic runs, as tests/test_auto_explain_verdicts.py) -------


def _ae_replicated(estimate: str, seed: int = 0, rounds: int = 5, effect_sd: float = 0.03, truth=None):
    """Runs of pg15 and pg18 on one cluster (`one`) and the same with a second cluster each (`both`: pg15_c2,
    pg18_c2, measured apart, each cell moved by its own cluster effect of `effect_sd`), the `seen` tables
    `auto_explain.derive.analyse` reads, and in the fast mode the runs' transactions."""
    import numpy as np
    from test_auto_explain_verdicts import _runs, _small

    truth = truth or _small()
    one = _runs(truth, rounds=rounds, servers=("pg15", "pg18"), seed=seed)
    rng = np.random.default_rng(seed + 100)
    parts = [one]
    for k, server in enumerate(("pg15", "pg18")):
        other = _runs(truth, rounds=rounds, servers=(server,), seed=seed + 10 + k)
        cells = other.select("condition", "item").unique(maintain_order=True)
        effect = cells.with_columns(_e=pl.Series(np.exp(rng.normal(0, effect_sd, cells.height))))
        parts.append(
            other.join(effect, on=["condition", "item"])
            .with_columns(server=pl.lit(f"{server}_c2"), value=pl.col("value") * pl.col("_e"))
            .drop("_e")
        )
    both = pl.concat(parts)

    def seen(runs):
        names = sorted(runs["server"].unique())
        plans = pl.DataFrame(
            [
                {
                    "server": s,
                    "item": i,
                    "nodes": "Aggregate > Seq Scan",
                    "rows_processed": 100_001.0,
                    "node_calls": 200_002.0,
                    "processes": 3 if i == "count" else 1,
                }
                for s in names
                for i in ("limit", "count", "count_serial")
            ]
        )
        timer = pl.DataFrame({"server": names, "per_loop_ns": [20.0] * len(names)})
        return {"runs": runs, "plans": plans, "timer": timer, "servers": pl.DataFrame({"server": names})}

    def txns(runs):  # 40 transactions a run around its value
        if estimate != "fast":
            return None
        r = runs.select("server", "condition", "item", "round", "value")
        noise = pl.Series(np.exp(rng.normal(0, 0.01, r.height * 40)))
        return r.select(pl.all().repeat_by(40).explode()).with_columns(value=pl.col("value") * noise)

    return (seen(one), txns(one)), (seen(both), txns(both))


@pytest.mark.parametrize("estimate", ["fast", "round"])
def test_auto_explain_pools_replica_clusters(estimate):
    """auto_explain's comparisons with two clusters per server: one row per base server and comparison, its
    interval no narrower than the rounds' or than either cluster's own; the A/A floor of a base server over both
    clusters' pairs; findings per base server, pooled, saying so; the per-cluster tables keep their clusters."""
    from test_auto_explain_verdicts import SMALL

    from pglab.studies.auto_explain import derive as aer
    from pglab.studies.auto_explain import verdicts as av

    (seen1, tx1), (seen2, tx2) = _ae_replicated(estimate)
    plain, got = aer.analyse(seen1, SMALL, cores=2, txns=tx1), aer.analyse(seen2, SMALL, cores=2, txns=tx2)
    ratios, plain_ratios = got["auto_explain_ratios"], plain["auto_explain_ratios"]
    assert sorted(ratios["server"].unique()) == ["pg15", "pg18"]
    assert ratios.height == plain_ratios.height and (ratios.group_by("server", *aer.RATIO_KEYS).len()["len"] == 1).all()
    assert ratios.columns[: plain_ratios.width] == plain_ratios.columns and (ratios["n_clusters"] == 2).all()
    assert (ratios["n_rounds"] == 2 * plain_ratios["n_rounds"]).all()
    assert (ratios["ci_low"] <= ratios["within_low"]).all() and (ratios["ci_high"] >= ratios["within_high"]).all()
    assert all("across 2 clusters × 5 rounds" in m for m in ratios["method"])
    assert paired.is_fast(ratios["method"]) == (estimate == "fast")
    # a cluster effect of 3 % per cell: the pooled interval is wider than either cluster's rounds give
    own = aer.ratios(seen2["runs"], SMALL, tx2, pool=False)
    width = (pl.col("ci_high") / pl.col("ci_low")).log()
    for replica in (False, True):
        mine = own.filter(pl.col("server").str.ends_with("_c2") == replica).select(
            pl.col("server").str.strip_suffix("_c2"), *aer.RATIO_KEYS, width.alias("own_width")
        )
        j = ratios.with_columns(width.alias("width")).join(mine, on=["server", *aer.RATIO_KEYS])
        assert j.height == ratios.height and (j["width"] >= j["own_width"]).all()
    # one interval per comparison: the pooled one, no unpaired verdict beside it
    assert "verdict" not in ratios.columns and "verdict" not in got["auto_explain_study"].columns
    # medians over both clusters' runs, the study's table per base server
    assert sorted(got["auto_explain_study"]["server"].unique()) == ["pg15", "pg18"]
    # the noise floor per base server over its A/A pairs pooled over both clusters (one per item)
    noise = got["auto_explain_noise"]
    assert sorted(noise["server"].unique()) == ["all", "pg15", "pg18"]
    per_item = noise.filter((pl.col("server") != "all") & (pl.col("metric") != "latency, all items"))
    assert per_item.height == 2 * 3 and (per_item["n_pairs"] == 1).all()
    every = noise.filter(pl.col("server") == "all")
    assert every.filter(pl.col("metric") == "latency, all items")["n_pairs"].to_list() == [6]
    # per item over both servers: what an item with too few pairs of its own falls back to first
    assert every.filter(pl.col("metric") != "latency, all items")["n_pairs"].to_list() == [2, 2, 2]
    # findings named by base server only, each pooled over both clusters and saying on what
    f = auto_explain_verdicts.judge(got["auto_explain_evidence"])
    assert sorted(f["server"].unique()) == ["pg15", "pg18"] and f.height == 2 * len(av.specs(SMALL))
    assert not any("_c2" in e for e in f["evidence"])
    assert all("across 2 clusters × 5 rounds" in e for e in f["evidence"]), f["evidence"].to_list()
    quantity = {s.key for s in av.specs(SMALL) if s.quantity}
    for r in f.iter_rows(named=True):
        assert ("between-cluster sd of the quantities" in r["evidence"]) == (r["finding"] in quantity), r
    # a ratio claim's figure is its pooled comparison's
    loading = f.filter((pl.col("finding") == "loading") & (pl.col("server") == "pg15")).row(0, named=True)
    row = ratios.filter(
        (pl.col("server") == "pg15") & (pl.col("condition") == "not_loaded") & (pl.col("baseline") == "loaded_disabled")
    )
    # the study's loading claim is the baseline over "not loaded": the table's comparison the other way round
    assert loading["our_value"] == pytest.approx(1 / row["ratio"][0], rel=1e-9)
    assert loading["our_low"] == pytest.approx(1 / row["ci_high"][0], rel=1e-3)  # the fast mode: its own bootstrap
    # what is measured per cluster keeps its clusters
    for name in ("auto_explain_latencies", "auto_explain_summary", "auto_explain_timer", "auto_explain_drift"):
        assert sorted(got[name]["server"].unique()) == ["pg15", "pg15_c2", "pg18", "pg18_c2"], name


def test_auto_explain_pooled_quantity_without_interval_says_over_how_many_rounds():
    """ANALYZE's overhead on the parallel count within the runs' noise: some round of some cluster without one
    leaves the scale-free quantities of the base server without an interval, counted over both clusters."""
    from test_auto_explain_verdicts import SMALL, _truth

    from pglab.core.stats import verdicts as v
    from pglab.studies.auto_explain import verdicts as av

    truth = _truth(analyze_count=1.001, analyze_no_timing_count=1.0005)
    _, (seen2, _) = _ae_replicated("round", truth=truth)
    f = av.findings(seen2["runs"], seen2["plans"], av.noise_table(av.measured(seen2["runs"]), SMALL), SMALL)
    got = f.filter(pl.col("finding") == "analyze_count")
    assert sorted(got["server"]) == ["pg15", "pg18"] and set(got["verdict"]) == {v.UNDETERMINED}
    assert all(re.fullmatch(r"per round, \d+ of 10 not positive over 2 clusters", i) for i in got["interval"])


def test_auto_explain_without_replicas_unchanged():
    from test_auto_explain_verdicts import SMALL

    from pglab.studies.auto_explain import derive as aer

    (seen1, _), _ = _ae_replicated("round")
    per_cluster = aer.ratios(seen1["runs"], SMALL, pool=False)
    assert aer.pool_ratios(per_cluster, aer.measured(seen1["runs"]), SMALL) is per_cluster
    t = aer.analyse(seen1, SMALL, cores=2)
    assert "n_clusters" not in t["auto_explain_ratios"].columns
    assert t["auto_explain_ratios"].equals(per_cluster)
    assert sorted(auto_explain_verdicts.judge(t["auto_explain_evidence"])["server"].unique()) == ["pg15", "pg18"]


def test_auto_explain_report_says_what_pooled_figures_rest_on():
    from test_auto_explain_verdicts import SMALL

    from pglab.studies.auto_explain import derive as aer
    from pglab.studies.auto_explain import report

    (seen1, _), (seen2, _) = _ae_replicated("round")
    plain, got = aer.analyse(seen1, SMALL, cores=2), aer.analyse(seen2, SMALL, cores=2)
    assert report.clusters_markdown(plain["auto_explain_ratios"], plain["auto_explain_noise"]) is None
    text = report.clusters_markdown(got["auto_explain_ratios"], got["auto_explain_noise"])
    assert text.startswith("- **Clusters**: every server measured on several independently made")
    assert "pg15: 2 clusters × 5 rounds, between-cluster sd " in text and "pg18: 2 clusters × 5 rounds" in text
    assert "(A/A pairs: pg15 3; pg18 3)" in text and "each pooled over its clusters" in text
    version = {"pg15": "PostgreSQL 15.10", "pg15_c2": "PostgreSQL 15.10", "pg18": "PostgreSQL 18.1"}
    assert report._servers_text(seen2["servers"], version) == (
        "pg15 = PostgreSQL 15.10 (2 clusters: pg15, pg15_c2); pg18 = PostgreSQL 18.1 (2 clusters: pg18, pg18_c2)"
    )
    assert report._servers_text(seen1["servers"], version) == "pg15 = PostgreSQL 15.10; pg18 = PostgreSQL 18.1"

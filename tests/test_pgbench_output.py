"""pgbench output parsing against real pgbench 15 / 18 output and hand-written older formats."""

from pathlib import Path

import polars as pl
import pytest

from pglab.pgtools.pgbench_output import (
    AGGREGATE_LOG_COLUMNS,
    PgbenchOutputError,
    parse_aggregate_log,
    parse_pgbench_init_output,
    parse_pgbench_output,
)

FIX = Path(__file__).parent / "fixtures" / "pgbench"
RUN_OUTPUTS = sorted(p.name for p in FIX.glob("*.stdout") if "truncated" not in p.name)


def run(name: str) -> dict:
    return parse_pgbench_output((FIX / name).read_text())


@pytest.mark.parametrize("name", RUN_OUTPUTS)
def test_every_fixture_parses_completely(name):
    rec = run(name)
    assert rec["tps"] > 0
    assert rec["clients"] >= 1 and rec["transactions_processed"] > 0
    assert rec["unrecognized_lines"] == [], "a line of this version's output is not understood"
    assert rec["errors"] == [] and rec["aborted"] is False


def test_same_keys_for_every_version():
    keys = {tuple(run(n)) for n in RUN_OUTPUTS}
    assert len(keys) == 1


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_select_only_duration(version):
    rec = run(f"{version}_select_only_T2.stdout")
    assert rec["transaction_type"] == "<builtin: select only>"
    assert rec["scaling_factor"] == 1 and rec["query_mode"] == "simple"
    assert (rec["clients"], rec["threads"], rec["max_tries"], rec["duration_s"]) == (2, 1, 1, 2)
    assert rec["transactions_per_client"] is None and rec["transactions_expected"] is None
    assert rec["failed_transactions"] == 0
    assert rec["tps_kind"] == "without initial connection time"
    assert rec["tps_including_connections"] is None
    assert rec["latency_stddev_ms"] is None  # only printed with -P / -R / -L


def test_pg18_exact_figures():
    rec = run("pg18_select_only_T2.stdout")
    assert rec["pgbench_version"] == "18.6" and rec["server_version"] is None
    assert rec["transactions_processed"] == 124844
    assert rec["latency_avg_ms"] == 0.032
    assert rec["initial_connection_ms"] == 2.717
    assert rec["tps"] == 62505.069237


def test_version_line_with_distro_suffix_and_other_server():
    assert run("pg15_tpcb_t100.stdout")["pgbench_version"] == "15.18 (Debian 15.18-0+deb12u1)"
    rec = run("pg18client_pg15server_select_only_T2.stdout")
    assert rec["pgbench_version"] == "18.6"
    assert rec["server_version"] == "15.18 (Debian 15.18-0+deb12u1)"


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_tpcb_fixed_transactions(version):
    rec = run(f"{version}_tpcb_t100.stdout")
    assert rec["transaction_type"] == "<builtin: TPC-B (sort of)>"
    assert rec["transactions_per_client"] == 100 and rec["duration_s"] is None
    assert (rec["transactions_processed"], rec["transactions_expected"]) == (200, 200)
    assert run(f"{version}_tpcb_n_t100.stdout")["threads"] == 2


def test_pg13_reports_both_tps_lines_and_excluding_is_comparable():
    rec = run("handmade_pg13_tpcb_t1000.stdout")
    assert rec["pgbench_version"] is None and rec["initial_connection_ms"] is None
    assert rec["tps"] == 8125.440831
    assert rec["tps_kind"] == "excluding connections establishing"
    assert rec["tps_including_connections"] == 8103.726512
    assert rec["max_tries"] is None and rec["failed_transactions"] is None


def test_connect_mode_tps_across_versions():
    for name in ("pg15_connect_C_t50.stdout", "pg18_connect_C_t50.stdout"):
        rec = run(name)
        assert rec["tps_kind"] == "including reconnection times"
        assert rec["tps"] == rec["tps_including_connections"]
        assert rec["connection_time_avg_ms"] > 0 and rec["initial_connection_ms"] is None
    old = run("handmade_pg13_connect_C_t50.stdout")
    assert old["tps_including_connections"] == 425.341198  # the figure comparable with 14+ -C
    assert old["tps"] == 1987.004410


def test_old_latency_spellings():
    rec = run("handmade_pg95_tpcb_P_t10.stdout")
    assert (rec["latency_avg_ms"], rec["latency_stddev_ms"]) == (2.557, 0.312)
    assert rec["transaction_type"] == "TPC-B (sort of)"
    rec = run("handmade_pg93_tpcb_r_t10.stdout")
    assert rec["latency_avg_ms"] is None and rec["tps"] == 86.422905
    assert len(rec["statement_latencies"]) == 14
    assert rec["statement_latencies"][-1] == (1, "END;", 9.086226)
    assert rec["statement_failures"] == []


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_per_statement_latencies(version):
    rec = run(f"{version}_tpcb_r_T2.stdout")
    stmts = rec["statement_latencies"]
    assert len(stmts) == 11 and all(s[0] == 1 for s in stmts)
    assert stmts[0][1] == r"\set aid random(1, 100000 * :scale)"
    assert stmts[5][1].startswith("UPDATE pgbench_accounts SET abalance")
    assert all(isinstance(s[2], float) for s in stmts)
    assert [f[2] for f in rec["statement_failures"]] == [0] * 11
    assert all(f[3] is None for f in rec["statement_failures"])


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_per_statement_failures_and_retries(version):
    rec = run(f"{version}_retries_r_T2.stdout")
    update = rec["statement_failures"][2]
    assert update[1].startswith("UPDATE pgbench_branches")
    assert update[2] == rec["failed_transactions"] > 0
    assert update[3] > 0
    assert rec["latency_includes_failures"] is True


def test_pg14_statement_latencies_single_column():
    rec = run("handmade_pg14_tpcb_r_T60.stdout")
    assert rec["pgbench_version"] == "14.11 (Ubuntu 14.11-1.pgdg22.04+1)"
    assert rec["initial_connection_ms"] == 12.34 and rec["max_tries"] is None
    assert rec["statement_latencies"][8] == (
        1,
        "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
        0.804,
    )


def test_weighted_scripts_pg15_pg18_and_pg13():
    for name in (
        "pg15_scripts_weighted_r_T2.stdout",
        "pg18_scripts_weighted_r_T2.stdout",
        "handmade_pg13_scripts_weighted_r_T60.stdout",
    ):
        rec = run(name)
        assert rec["transaction_type"] == "multiple scripts"
        a, b = rec["scripts"]
        assert (a["script"], a["weight"], a["weight_pct"]) == (1, 3, 75.0)
        assert (b["script"], b["weight"], b["weight_pct"]) == (2, 1, 25.0)
        assert a["name"].endswith("a.sql") and b["name"].endswith("b.sql")
        assert a["tps"] > b["tps"] > 0
        assert a["transactions"] + b["transactions"] == rec["transactions_processed"]
        assert a["latency_stddev_ms"] is not None
        scripts = [s[0] for s in rec["statement_latencies"]]
        assert scripts == [1, 1, 2, 2, 2, 2, 2, 2]
    pg18 = run("pg18_scripts_weighted_T2.stdout")["scripts"][0]
    assert pg18["transactions_processed"] == 33077 and pg18["tps"] == 16559.588636
    pg15 = run("pg15_scripts_weighted_T2.stdout")["scripts"][0]
    assert pg15["transactions_processed"] is None and pg15["tps"] == 18404.997007


def test_builtin_mix():
    names = [s["name"] for s in run("pg18_builtin_mix_T2.stdout")["scripts"]]
    assert names == ["<builtin: select only>", "<builtin: simple update>"]


@pytest.mark.parametrize(
    "name", ["pg15_rate_latlimit_T2.stdout", "pg18_rate_latlimit_T2.stdout", "handmade_pg13_rate_latlimit_T10.stdout"]
)
def test_rate_limit_and_latency_limit(name):
    rec = run(name)
    assert rec["latency_limit_ms"] == 5.0
    assert rec["late_transactions"] is not None and rec["skipped_transactions"] is not None
    assert rec["lag_avg_ms"] is not None and rec["lag_max_ms"] >= rec["lag_avg_ms"]
    assert rec["latency_stddev_ms"] is not None


def test_retry_counters():
    rec = run("pg18_retries_detailed_T2.stdout")
    assert rec["max_tries"] == 2
    assert (rec["failed_transactions"], rec["serialization_failures"], rec["deadlock_failures"]) == (7301, 7301, 0)
    assert (rec["retried_transactions"], rec["total_retries"]) == (7974, 7974)
    assert run("pg15_unlimited_tries_T2.stdout")["max_tries"] is None  # --max-tries=0 prints no line


def test_partitions_and_prepared_mode():
    rec = run("pg18_partitions_S_T2.stdout")
    assert (rec["partition_method"], rec["partitions"]) == ("range", 2)
    assert run("pg15_prepared_S_T2.stdout")["query_mode"] == "prepared"


def test_interleaved_stderr_is_tolerated():
    text = (FIX / "pg15_progress_T3.stderr").read_text() + (FIX / "pg15_progress_T3.stdout").read_text()
    rec = parse_pgbench_output(text)
    assert rec["tps"] == 58670.026366 and rec["unrecognized_lines"] == []


def test_abort_is_reported():
    text = (FIX / "pg18_select_only_T2.stdout").read_text()
    rec = parse_pgbench_output(text + "pgbench: error: Run was aborted; the above results are incomplete.\n")
    assert rec["aborted"] is True and len(rec["errors"]) == 1


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("handmade_garbage.txt", "no 'tps = ' line found"),
        ("handmade_truncated.stdout", "no 'tps = ' line found"),
    ],
)
def test_garbage_raises(name, fragment):
    with pytest.raises(PgbenchOutputError, match=fragment):
        run(name)


def test_empty_and_error_only_output_raise_with_the_error():
    with pytest.raises(PgbenchOutputError, match="no 'tps = ' line found"):
        parse_pgbench_output("")
    with pytest.raises(PgbenchOutputError, match="no_such_db"):
        parse_pgbench_output((FIX / "pg18_nodb_error.stderr").read_text())


def test_missing_clients_line_is_named():
    text = (FIX / "pg18_tpcb_t100.stdout").read_text().replace("number of clients: 2\n", "")
    with pytest.raises(PgbenchOutputError, match="number of clients"):
        parse_pgbench_output(text)


def test_two_runs_in_one_text_raise():
    text = (FIX / "pg18_tpcb_t100.stdout").read_text()
    with pytest.raises(PgbenchOutputError, match="2 pgbench summaries"):
        parse_pgbench_output(text + text)


@pytest.mark.parametrize("version", ["pg15", "pg18"])
def test_init_breakdown(version):
    out = parse_pgbench_init_output((FIX / f"{version}_init_s1.stderr").read_text())
    assert out["total_s"] > 0
    assert list(out["steps_s"]) == ["drop_tables", "create_tables", "client_side_generate", "vacuum", "primary_keys"]
    assert out["generation"] == "client-side" and out["tuples_generated"] == 100000
    server = parse_pgbench_init_output((FIX / f"{version}_init_steps_dtGvp.stderr").read_text())
    assert "server_side_generate" in server["steps_s"] and server["tuples_generated"] is None
    parts = parse_pgbench_init_output((FIX / f"{version}_init_partitions.stderr").read_text())
    assert parts["partitions"] == 2


def test_init_exact_and_foreign_keys():
    out = parse_pgbench_init_output((FIX / "pg18_init_foreign_keys.stderr").read_text())
    assert out["total_s"] == 0.14
    assert out["steps_s"]["foreign_keys"] == 0.01 and out["steps_s"]["client_side_generate"] == 0.07


@pytest.mark.parametrize("name", ["handmade_pg12_init.stderr", "handmade_pg95_init.stderr"])
def test_init_old_versions_have_no_total(name):
    out = parse_pgbench_init_output((FIX / name).read_text())
    assert out["total_s"] is None and out["steps_s"] == {}
    assert out["tuples_generated"] in (100000, 1000000)


@pytest.mark.parametrize("name", ["handmade_init_failed.stderr", "pg18_nodb_error.stderr"])
def test_init_failure_raises(name):
    with pytest.raises(PgbenchOutputError, match="no 'done' line"):
        parse_pgbench_init_output((FIX / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("pg1*_aggregate_*.log")))
def test_aggregate_logs_pg15_pg18(name):
    df = parse_aggregate_log((FIX / name).read_text())
    assert df.columns == AGGREGATE_LOG_COLUMNS and df.height >= 2
    assert df["interval_start"].diff().drop_nulls().to_list() == [1] * (df.height - 1)
    assert (df["min_latency"] <= df["max_latency"]).all()
    assert df["other_sql_failures"].null_count() == df.height  # column appears only in 19devel
    assert df["skipped"].null_count() == 0  # 15+ always writes every column


def test_aggregate_log_columns_filled_per_options():
    rate = parse_aggregate_log((FIX / "pg18_aggregate_ratedet.log").read_text())
    assert (rate["sum_lag"] > 0).all() and rate["retried"].sum() > 0
    assert rate["serialization_failures"].sum() > 0
    plain = parse_aggregate_log((FIX / "pg18_aggregate_T3.log").read_text())
    assert plain.row(0)[:6] == (1795302009, 37549, 1579185.0, 78734851.0, 19, 2430)
    assert plain["sum_lag"].sum() == 0


def test_aggregate_log_older_and_newer_widths():
    old = parse_aggregate_log((FIX / "handmade_pg13_aggregate.log").read_text())
    assert old["sum_lag"].null_count() == 2 and old["num_transactions"].to_list() == [23484, 61112]
    lat = parse_aggregate_log((FIX / "handmade_pg13_aggregate_rate_latlimit.log").read_text())
    assert lat["skipped"].to_list() == [0, 1] and lat["retried"].null_count() == 2
    new = parse_aggregate_log((FIX / "handmade_pg19devel_aggregate.log").read_text())
    assert new["other_sql_failures"].to_list() == [2]


def test_aggregate_log_errors_and_empty():
    with pytest.raises(PgbenchOutputError, match="7 fields"):
        parse_aggregate_log("1 2 3 4 5 6 7\n")
    with pytest.raises(PgbenchOutputError, match="non-numeric"):
        parse_aggregate_log("1 2 3 4 5 x\n")
    with pytest.raises(PgbenchOutputError, match="after 6-field"):
        parse_aggregate_log("1 2 3 4 5 6\n1 2 3 4 5 6 7 8 9 10\n")
    empty = parse_aggregate_log("")
    assert empty.height == 0 and empty.columns == AGGREGATE_LOG_COLUMNS
    assert empty.schema["interval_start"] == pl.Int64


def test_a_zero_latency_in_the_transaction_log_is_no_measurement(tmp_path):
    """pgbench logs 0 µs for a transaction whose result it found in the same pass that started it (its clock is
    read lazily, once a pass): the S2 runs' medians and the fast mode leave such entries out. Lines as pgbench 18
    wrote them for three 1 ms count(*) transactions on this VM (the cause of a flaky S2 test)."""
    from pglab.pgtools import pgbench

    (tmp_path / "txn.4242").write_text(
        "0 0 0 0 1764139200 120001\n0 1 688 0 1764139200 120689\n"
        "0 2 0 0 1764139200 120689\n0 3 skipped 0 1764139200 120690\n"
    )
    logged = pgbench.transaction_latencies_us(tmp_path)
    assert logged == [0, 688, 0]  # the raw artefact keeps what pgbench wrote
    assert pgbench.timed(logged) == [688]


def test_latency_percentiles_are_exact_on_a_known_log(tmp_path):
    """1 … 1000 µs once each (and a 0 µs entry pgbench may log): p50 500.5 µs, p95 950.05, p99 990.01, max 1 ms,
    numpy's linear percentiles on the values themselves; over two rounds an interval from the rounds' own."""
    from pglab.pgtools import pgbench

    us = [0, *range(1, 1001)]
    (tmp_path / "txn.1").write_text("".join(f"0 {i} {v} 0 1764139200 {i}\n" for i, v in enumerate(us)))
    got = pgbench.latency_percentiles(pgbench.transaction_latencies_us(tmp_path))
    assert (got["n"], got["p50_ms"], got["p95_ms"], got["p99_ms"], got["max_ms"]) == (
        1000,
        0.5005,
        0.95005,
        0.99001,
        1.0,
    )
    assert got["p50_low_ms"] is None  # one round: no interval
    two = pgbench.latency_percentiles(list(range(1, 1001)), rounds=[i % 2 for i in range(1000)])
    assert two["p50_low_ms"] < two["p50_ms"] < two["p50_high_ms"]

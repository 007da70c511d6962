"""pg_test_timing parsing against real 15 / 18 output and the 19devel format from its documentation."""

from pathlib import Path

import pytest

from pglab.pgtools.timing_output import TimingOutputError, parse_pg_test_timing

FIX = Path(__file__).parent / "fixtures" / "timing"


def parsed(name: str) -> dict:
    return parse_pg_test_timing((FIX / name).read_text())


@pytest.mark.parametrize("name", ["pg15_d1.stdout", "pg18_d1.stdout"])
def test_microsecond_format(name):
    out = parsed(name)
    assert out["duration_s"] == 1 and out["histogram_unit"] == "us"
    assert 1 < out["per_loop_ns"] < 10_000
    bounds = [b for b, _, _ in out["histogram"]]
    assert bounds[:3] == [1000, 2000, 4000]  # "< 1 us", "< 2 us", ... as exclusive ns bounds
    assert sum(p for _, _, p in out["histogram"]) == pytest.approx(100, abs=0.01)
    assert out["observed"] == [] and out["clock_source"] is None
    assert len(out["blocks"]) == 1


def test_pg18_exact_values():
    out = parsed("pg18_d1.stdout")
    assert out["per_loop_ns"] == 42.02
    assert out["histogram"][0] == (1000, 22814018, 95.85590)
    assert out["histogram"][-1] == (128000, 1, 0.0)


def test_nanosecond_format_19devel():
    out = parsed("handmade_pg19devel_d3.stdout")
    assert out["duration_s"] == 3 and out["per_loop_ns"] == 16.40 and out["histogram_unit"] == "ns"
    assert out["histogram"][0] == (1, 0, 0.0)  # "<= 0 ns"
    assert out["histogram"][5] == (32, 174581501, 95.4527)  # "<= 31 ns"
    assert len(out["histogram"]) == 17
    assert out["observed_cutoff_pct"] == 99.99
    assert out["observed"][1] == (16, 106773354, 58.3785)
    assert out["observed"][-1] == (38051, 1, 0.0)  # the largest duration, after "..."


def test_one_block_per_clock_source():
    out = parsed("handmade_tsc_two_clock_sources.stdout")
    assert [b["clock_source"] for b in out["blocks"]] == ["clock_gettime (CLOCK_MONOTONIC)", "RDTSCP"]
    assert [b["per_loop_ns"] for b in out["blocks"]] == [44.67, 37.32]
    assert out["per_loop_ns"] == 44.67 and out["clock_source"] == "clock_gettime (CLOCK_MONOTONIC)"
    assert out["blocks"][0]["observed"][-1] == (29657159, 1, 0.0)
    assert out["blocks"][1]["histogram"][-1] == (1024, 17, 0.0001)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\nmore garbage\n",
        (FIX / "handmade_clock_backwards.stdout").read_text(),
        "Testing timing overhead for 1 second.\nPer loop time including overhead: 42.57 ns\n",
    ],
)
def test_unrecognised_output_raises(text):
    with pytest.raises(TimingOutputError, match="not recognised"):
        parse_pg_test_timing(text)

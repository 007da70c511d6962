"""Build identity: every server's compiler, optimisation, LLVM, assertions, block and WAL segment size and
checksums recorded by the environment capture, and the gate that calls a version comparison between servers
built otherwise *not comparable*, naming the difference."""

import pytest
from conftest import captured_identities

from pglab.core.stats import builds


@pytest.fixture(scope="module")
def identities(installs):
    return captured_identities(installs, "builds")


def test_every_server_records_its_build(identities):
    for r in identities:
        assert r["build_compiler"] and r["build_opt"] and r["debug_assertions"] in ("on", "off"), r
        assert r["wal_segment_size"] and (r["build_llvm"] == "none" or r["build_llvm"].startswith("LLVM")), r
        assert r["build_llvm"] != "none" or not r["jit_available"], r  # JIT works only where LLVM was built in
        assert r["build"].startswith(r["build_compiler"] + ", " + r["build_opt"]), r["build"]


def test_servers_built_otherwise_are_not_comparable_with_the_difference_named(identities):
    if len(identities) < 2:
        pytest.skip("one install here: no two builds to compare")
    a, b = identities[:2]
    same = dict(b, server="copy")
    assert builds.difference(a, dict(a, server="twin")) is None
    diff = builds.difference(a, b)
    if a["build_compiler"] != b["build_compiler"]:
        assert diff.startswith("builds differ: compiler ") and f"({a['server']})" in diff, diff
    assert builds.difference(b, same) is None
    assert builds.difference(a, dict(a, server="Os", build_opt="-Os")) == (
        f"builds differ: optimisation {a['build_opt']} ({a['server']}) vs -Os (Os)"
    )
    assert builds.difference(a, {"server": "old"}) == "build of old not recorded"

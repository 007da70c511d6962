"""What `make report` prints: one progress line with the time left (estimated per notebook from the params and
the servers each study runs on), the notebooks' bars mirrored onto it (and kept out of the executed notebooks),
and kernels on IPC sockets (no TCP warning per notebook)."""

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pglab import params
from pglab.core import paths
from pglab.core.installs.installs import Install
from pglab.core.run.estimate import stand_in
from pglab.core.servers.servers import for_study
from pglab.report.estimate import estimate_s, estimates
from pglab.report.progress import RunProgress
from pglab.studies.pgbench import estimate as pgbench_estimate


def test_a_bar_run_by_make_report_writes_its_latest_line_to_the_driver_file(tmp_path):
    code = textwrap.dedent("""
        import time
        from pglab.core.progress import bar
        for _ in bar(range(3), desc="loading", mininterval=0):
            time.sleep(0.01)
    """)
    target = tmp_path / "progress"
    env = {"PGLAB_PROGRESS_FILE": str(target), "PATH": "/usr/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stderr == "", "a mirrored bar must leave nothing in the notebook's output"
    line = target.read_text()
    assert line.startswith("loading") and "3/3" in line and "\n" not in line


def test_the_time_left_follows_how_the_finished_notebooks_went():
    p = RunProgress(["a", "b", "c"], {"a": 100.0, "b": 100.0, "c": 200.0}, out=io.StringIO())
    assert p.left_s() == 400
    p.start("a")
    p.t_current -= 200  # a took twice its estimate
    p.finish("a")
    assert 590 < p.left_s() < 610  # b and c are expected to take twice theirs too
    assert p.line().startswith("[1/3]")


# Measured on the reference machine (2 cores, a host whose clock reads cost ~21 ns; the wheel's 18, Debian's 15 and a
# source-built 18 with JIT, downloads 10 … 17 without, two clusters of each): seconds per notebook of the three
# fresh default runs of design v4 (low, high), and of two whole quick runs (2026-11-24).
MEASURED_DEFAULT = {  # default-20261128-092635, -115426 and -144556, clean clones of e2f158e, 3baec91 and 2a0ba30
    "00": (43, 52),
    "10": (540, 575),
    "20": (3580, 3957),
    "30": (780, 792),
    "40": (814, 927),
    "50": (269, 287),
    "60": (176, 194),
    "70": (48, 53),
    "99": (7, 9),
}
MEASURED_DEFAULT_TOTAL = (6265, 6791)
MEASURED_QUICK_TOTAL = (153, 166)
NOTEBOOKS = [
    "00_environment.ipynb",
    "10_ssb_load.ipynb",
    "20_ssb.ipynb",
    "30_pgbench.ipynb",
    "40_auto_explain.ipynb",
    "50_jit_operators.ipynb",
    "60_parallel_index.ipynb",
    "70_partitioning.ipynb",
    "99_report.ipynb",
]  # 80_experiments runs nothing by default (~3 s): a notebook's fixed cost


@pytest.fixture
def machine(monkeypatch):
    """The reference machine's servers and cores, whatever machine the test runs on; nothing may be downloaded."""
    from pglab.core.servers import servers

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(servers, "downloaded", lambda spec: pytest.fail(f"the estimate downloaded {spec}"))

    def install(name, major, jit, source):
        d = Path("/nonexistent") / name
        return Install(
            name=name,
            source=source,
            bin_dir=d / "bin",
            lib_dir=d / "lib",
            share_dir=d / "share",
            version="",
            major=major,
            minor="0",
            jit=jit,
        )

    installs = [
        install("pg18", 18, False, "embedded"),
        install("pg15", 15, True, "debian"),
        install("pg18llvm", 18, True, "build"),
    ]
    return lambda p: servers.select(p, installs)


def _load(name):
    return params.load(paths.PARAMS / f"{name}.yaml", check_servers=False)


def _measured_params():
    """The params the measured default runs ran with (their raw archive's params.json): the model is checked against
    the design that was measured, whatever params/default.yaml says now. The archive keeps no servers section (it
    may hold connection strings); the runs had params/default.yaml's, two clusters of each server."""
    import json
    import tarfile

    from pglab.params import Params

    run = "default-20261128-115426"  # the tests' data folder is their own: the committed archive by its path
    with tarfile.open(Path(__file__).parent.parent / "data" / "raw-archive" / f"{run}.tar.xz") as tar:
        doc = json.loads(tar.extractfile(f"{run}/params.json").read())
    doc.pop("file", None)
    doc["servers"] = _load("default").servers.model_dump(mode="json")
    return Params.model_validate(doc)


def test_the_studies_servers_are_counted_as_the_studies_choose_them(machine):
    # the measured runs' params and today's default: two clusters of each server, every version a download (18's
    # named beside the machine's), the JIT install on two clusters at SF 10
    for p in (_measured_params(), _load("default")):
        base = machine(p)
        assert len(for_study(p, "pgbench", base, fetch=stand_in)) == 2 * len(p.pgbench.versions)
        ssb = sorted(s.name for s in for_study(p, "ssb", base, fetch=stand_in))
        assert ssb == ["pg15", "pg15_c2", "pg16", "pg16_c2", "pg17", "pg17_c2", "pg18llvm", "pg18llvm_c2"], ssb


def test_the_default_estimate_is_near_the_measured_runs(machine):
    p = _measured_params()
    est = estimates(NOTEBOOKS, p, machine(p))
    # pgbench's buffers experiment alone: about 1.5 minutes
    assert 60 < pgbench_estimate.buffers_s(p, for_study(p, "pgbench", machine(p), fetch=stand_in)) < 120
    for nb in NOTEBOOKS:
        low, high = MEASURED_DEFAULT[nb[:2]]
        assert 0.85 * low <= est[nb] <= 1.15 * high, (nb, est[nb])
    low, high = MEASURED_DEFAULT_TOTAL
    assert 0.85 * low <= sum(est.values()) <= 1.15 * high


def test_the_quick_estimate_is_near_the_measured_runs(machine):
    p = _load("quick")
    low, high = MEASURED_QUICK_TOTAL
    assert 0.7 * low <= sum(estimates(NOTEBOOKS, p, machine(p)).values()) <= 1.3 * high


def test_estimates_grow_with_the_params_sizes(machine):
    quick, default = _load("quick"), _load("default")
    q, d = estimates(NOTEBOOKS, quick, machine(quick)), estimates(NOTEBOOKS, default, machine(default))
    for nb in NOTEBOOKS[1:-1]:
        assert q[nb] < d[nb], nb

    def with_(p, section, **changes):
        return p.model_copy(update={section: getattr(p, section).model_copy(update=changes)})

    def est(p, nb):
        return estimate_s(nb, p, machine(p))

    fewer = with_(default, "pgbench", versions=[16, 17, 18])  # more versions: more servers
    assert est(fewer, "30_pgbench.ipynb") < est(default, "30_pgbench.ipynb")
    assert est(fewer, "00_environment.ipynb") < est(default, "00_environment.ipynb")
    for section, rounds, nb in [
        ("ssb", "repetitions", "20_ssb.ipynb"),
        ("jit_operators", "repetitions", "50_jit_operators.ipynb"),
        ("parallel_index", "repetitions", "60_parallel_index.ipynb"),
        ("partitioning", "repetitions", "70_partitioning.ipynb"),
    ]:
        more = with_(default, section, **{rounds: getattr(getattr(default, section), rounds) + 2})
        assert est(more, nb) > est(default, nb), nb
    ae_run = default.auto_explain.run
    more = with_(default, "auto_explain", run=ae_run.model_copy(update={"repetitions": ae_run.repetitions + 2}))
    assert est(more, "40_auto_explain.ipynb") > est(default, "40_auto_explain.ipynb")
    longer = with_(default, "pgbench", series=default.pgbench.series.model_copy(update={"runs": 6}))
    assert est(longer, "30_pgbench.ipynb") > est(default, "30_pgbench.ipynb")
    bigger = with_(default, "ssb", sf=2.0)
    for nb in ("10_ssb_load.ipynb", "20_ssb.ipynb", "60_parallel_index.ipynb"):
        assert est(bigger, nb) > est(default, nb), nb


def test_report_kernels_run_without_the_tcp_warning(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)")]
    nb.metadata["kernelspec"] = {"name": "pglab", "display_name": "pglab (.venv)", "language": "python"}
    nbformat.write(nb, tmp_path / "in.ipynb")
    code = textwrap.dedent(f"""
        import io, papermill
        from pglab.report.progress import RunProgress
        with RunProgress(["in"], {{"in": 1.0}}, out=io.StringIO()) as p:
            papermill.execute_notebook({str(tmp_path / "in.ipynb")!r}, {str(tmp_path / "out.ipynb")!r},
                                       kernel_name="pglab", progress_bar=False,
                                       kernel_manager_class=p.kernel_manager_class)
            folder = p.folder
        assert not folder.exists()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "without encryption" not in out.stderr + out.stdout
    assert nbformat.read(tmp_path / "out.ipynb", 4).cells[0].outputs[0]["text"] == "42\n"


def test_a_known_pace_scales_the_time_left_from_the_start():
    p = RunProgress(["a", "b"], {"a": 100.0, "b": 100.0}, out=io.StringIO(), paces={"a": 2.0, "b": 3.0})
    assert p.left_s() == 500
    p.start("a")
    p.t_current -= 200  # a took what its pace said
    p.finish("a")
    assert 295 < p.left_s() < 305  # so b is still expected at its own pace, not corrected


def test_each_fresh_notebook_teaches_the_next_run_its_pace(tmp_path, monkeypatch, capsys):
    from pglab.report import pace

    monkeypatch.setenv("PGLAB_STATE_DIR", str(tmp_path / "state"))
    names = ["00_a.ipynb", "10_b.ipynb", "99_report.ipynb"]
    assert pace.paces("default", names) == dict.fromkeys(names, 1.0)
    assert pace.described("default", dict.fromkeys(names, 1.0), dict.fromkeys(names, 10.0)) is None
    pace.record("default", "00_a.ipynb", 100.0, 250.0, "default-1")
    pace.record("default", "99_report.ipynb", 2.0, 9.0, "default-1")  # too short to tell: the overall pace
    pace.record("quick", "00_a.ipynb", 100.0, 100.0, "quick-1")  # another profile's record stays apart
    got = pace.paces("default", names)
    overall = (250 + 9) / (100 + 2)
    assert got == {"00_a.ipynb": 2.5, "10_b.ipynb": overall, "99_report.ipynb": overall}
    assert pace.paces("quick", names)["00_a.ipynb"] == 1.0
    assert "×2.52" in pace.described("default", got, {"00_a.ipynb": 100.0, "10_b.ipynb": 100.0})
    pace.record("default", "00_a.ipynb", 100.0, 150.0, "default-2")  # the newest run replaces it
    assert pace.paces("default", names)["00_a.ipynb"] == 1.5

    # a file someone else wrote: what is malformed is no prior, and the next record still goes in
    file = tmp_path / "state" / "pace" / "default.json"
    file.write_text('{"00_a.ipynb": {"estimate_s": "x", "took_s": 3}, "10_b.ipynb": [1, 2]}')
    assert pace.paces("default", names) == dict.fromkeys(names, 1.0)
    file.write_text("[]")
    pace.record("default", "10_b.ipynb", 100.0, 300.0, "default-3")
    assert pace.paces("default", names)["10_b.ipynb"] == 3.0

    # a state folder that cannot be written costs the prior, never the run
    monkeypatch.setenv("PGLAB_STATE_DIR", str(file))  # a file where the folder should be
    pace.record("default", "00_a.ipynb", 100.0, 150.0, "default-4")
    assert "pace not kept" in capsys.readouterr().out


def test_a_kernels_stderr_reaches_the_terminal_until_the_run_stops_then_the_runs_folder(tmp_path, capfd):
    """What a kernel writes to its own stderr is relayed line by line; once Ctrl-C or SIGTERM has printed its one
    line (`quiet`), the rest (a kernel cut short prints asyncio's complaints) goes to the run's file instead."""
    after = tmp_path / "kernel-stderr-after-stop.log"
    script = (
        "import sys; print('before', file=sys.stderr, flush=True); sys.stdin.readline(); "
        "print('after', file=sys.stderr)"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    with RunProgress(["a.ipynb"], {"a.ipynb": 1.0}, out=io.StringIO(), after_stop=after) as progress:
        progress._relay(child.stderr)
        for _ in range(100):
            if "before" in capfd.readouterr().err:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the kernel's first line never reached stderr")
        progress.quiet()
        child.stdin.write(b"\n")  # not communicate(): it would read the stderr the relay reads
        child.stdin.close()
        child.wait(timeout=10)
        for _ in range(100):
            if after.is_file() and after.read_text() == "after\n":
                break
            time.sleep(0.05)
    assert after.read_text() == "after\n"
    assert "after" not in capfd.readouterr().err

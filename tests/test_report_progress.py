"""What `make report` prints: one progress line with the time left, the notebooks' bars mirrored onto it
(and kept out of the executed notebooks), and kernels on IPC sockets (no TCP warning per notebook)."""

import io
import subprocess
import sys
import textwrap

from pglab import params
from pglab.core import paths
from pglab.report.progress import RunProgress, estimate_s


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


def test_estimates_grow_with_the_params_sizes():
    quick = params.load(paths.PARAMS / "quick.yaml", check_servers=False)
    default = params.load(paths.PARAMS / "default.yaml", check_servers=False)
    for nb in ("10_ssb_load", "20_ssb", "30_pgbench", "40_auto_explain", "70_partitioning"):
        assert estimate_s(nb, quick, 2) < estimate_s(nb, default, 2)
    assert estimate_s("20_ssb", default, 4) == 2 * estimate_s("20_ssb", default, 2)


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

"""What `make report` shows in the terminal while it runs, and how its kernels talk to it.

- One progress line for the whole run: notebook k of n, elapsed, and an estimate of the time left. The
  estimate starts from each notebook's modelled time (pglab.report.estimate: the params' sizes and the
  servers each study will run on), scaled by how this machine's last run of the profile went
  (pglab.report.pace), and is corrected by how fast the notebooks done so far went compared with that.
- The notebooks' own progress bars (pglab.core.progress) are mirrored onto that line: the driver points
  `PGLAB_PROGRESS_FILE` at a file, the kernel's bars write their latest state there instead of into the
  notebook's output, and a thread here shows it.
- Kernels run over IPC sockets in a private temporary folder, not TCP on localhost: nothing to encrypt,
  and no "running over TCP without encryption" warning per notebook.
- Kernels start in a session of their own (jupyter_client's launcher), so a Ctrl-C or a `kill` reaches the driver
  alone: `interrupt_kernels` passes it on to the kernel running a notebook. What a kernel writes to its own stderr
  (not a cell's output: that is the notebook's) is relayed to the terminal; once the run is stopping, to
  `after_stop` (the run's folder) instead, so that the one line saying what stopped stays the last (a kernel cut
  short prints asyncio's "Task was destroyed but it is pending!").
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jupyter_client.manager import KernelManager
from traitlets import default

from ..core.progress import PROGRESS_ENV


def ipc_kernel_manager(folder: Path, started: list | None = None, relay=None) -> type[KernelManager]:
    """A KernelManager class whose kernels listen on IPC sockets inside `folder` (which must be private); each
    manager made is appended to `started`; `relay(pipe)`, when given, is handed each kernel's stderr."""

    class IpcKernelManager(KernelManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if started is not None:
                started.append(self)

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if relay is not None:
                kw["stderr"] = subprocess.PIPE
            await super()._async_launch_kernel(kernel_cmd, **kw)
            if relay is not None:
                relay(self.provisioner.process.stderr)

        @default("transport")
        def _transport_default(self):
            return "ipc"

        @default("ip")
        def _ip_default(self):
            return str(folder / "kernel")

    return IpcKernelManager


def _clock(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class RunProgress:
    """The one progress line of a report run. Use as a context manager around the notebook loop."""

    def __init__(
        self,
        notebooks: list[str],
        estimates: dict[str, float],
        out=sys.stdout,
        paces: dict[str, float] | None = None,
        after_stop: Path | None = None,
    ):
        self.notebooks, self.estimates, self.out = notebooks, estimates, out
        self.paces = paces or {}  # notebook: times its estimate it took on this machine last time
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.folder = Path(tempfile.mkdtemp(prefix="pglab-run-"))
        self.file = self.folder / "progress"
        self.kernels: list[KernelManager] = []
        self.kernel_manager_class = ipc_kernel_manager(self.folder, self.kernels, self._relay)
        self.after_stop = after_stop  # where a kernel's stderr goes once the run is stopping (None: dropped)
        self.stopping = False
        self.t0 = time.monotonic()
        self.done: dict[str, tuple[float, float]] = {}  # notebook: (estimate, took)
        self.current: str | None = None
        self.t_current = self.t0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._last_print = 0.0

    def __enter__(self):
        os.environ[PROGRESS_ENV] = str(self.file)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        os.environ.pop(PROGRESS_ENV, None)
        self._clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def quiet(self) -> None:
        """No more progress lines, nor kernels' stderr (Ctrl-C: the terminal is left to the one line that says what
        happened)."""
        self.stopping = True
        self._stop.set()
        self._clear()

    def _relay(self, pipe) -> None:
        """A kernel's stderr, line by line, to the terminal until the run is stopping, then to `after_stop`."""

        def copy():
            try:
                for line in iter(pipe.readline, b""):
                    if not self.stopping:
                        sys.stderr.write(line.decode(errors="replace"))
                        sys.stderr.flush()
                    elif self.after_stop is not None:
                        with self.after_stop.open("ab") as f:
                            f.write(line)
            except (OSError, ValueError):  # the pipe closed under us as the kernel was reaped
                pass

        threading.Thread(target=copy, daemon=True, name="kernel-stderr").start()

    def interrupt_kernels(self) -> int:
        """SIGINT to every kernel still running: its cell stops at once (KeyboardInterrupt) instead of measuring on
        until the driver's shutdown request times out, and the shutdown then stops its servers (`lifecycle`'s exit
        hook). How many were running. The kernel's pid alone, not its process group: the kit stops its postmasters
        and pgbench, the signal does not."""
        n = 0
        for km in self.kernels:
            proc = getattr(getattr(km, "provisioner", None), "process", None)
            if proc is not None and proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGINT)
                    n += 1
                except ProcessLookupError:  # ended meanwhile
                    pass
        return n

    def start(self, notebook: str) -> None:
        self.current, self.t_current = notebook, time.monotonic()
        self.file.unlink(missing_ok=True)
        self._show(force=True)

    def finish(self, notebook: str) -> float:
        took = time.monotonic() - self.t_current
        self.done[notebook] = (self.estimates[notebook], took)
        self.current = None
        self._clear()
        return took

    def expected_s(self, notebook: str) -> float:
        """A notebook's estimate at this machine's known pace."""
        return self.estimates[notebook] * self.paces.get(notebook, 1.0)

    def left_s(self) -> float:
        """Time left: the remaining expected times, scaled by how the finished notebooks went against theirs."""
        expected_done = sum(self.expected_s(n) for n in self.done)
        took_done = sum(t for _, t in self.done.values())
        pace = took_done / expected_done if expected_done > 30 else 1.0
        todo = [n for n in self.notebooks if n not in self.done]
        left = sum(self.expected_s(n) for n in todo) * pace
        if self.current:
            left -= min(time.monotonic() - self.t_current, self.expected_s(self.current) * pace * 0.95)
        return max(left, 0.0)

    def line(self) -> str:
        k = len(self.done) + (1 if self.current else 0)
        head = f"[{k}/{len(self.notebooks)}] {self.current or ''}".rstrip()
        text = f"{head}  {_clock(time.monotonic() - self.t0)} elapsed, ~{_clock(self.left_s())} left"
        try:
            bar = self.file.read_text().strip()
        except OSError:
            bar = ""
        return f"{text}  | {bar}" if bar and self.current else text

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self._show()

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            width = shutil.get_terminal_size((120, 20)).columns - 1
            self.out.write("\r\x1b[2K" + self.line()[:width])
            self.out.flush()
        elif force or now - self._last_print >= 30:  # a log file: a line every half minute
            self._last_print = now
            print(self.line(), file=self.out, flush=True)

    def _clear(self) -> None:
        if self.tty:
            self.out.write("\r\x1b[2K")
            self.out.flush()

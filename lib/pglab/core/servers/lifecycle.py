"""No orphans: every server the kit starts is stopped on every exit path.

- normal end and exceptions: an atexit hook stops what is still running;
- SIGTERM / SIGHUP: the handler stops the servers, then exits as the signal would;
- SIGINT in a script becomes KeyboardInterrupt and ends at the atexit hook (in a Jupyter kernel it only
  interrupts the cell: the servers stay up until the kernel stops);
- a process that dies without running any of that (SIGKILL, a crashed kernel): the postmaster is started
  with a parent-death signal (see cluster.py), so it shuts itself down;
- and should one still survive, the next run finds it through its stale owner file and stops it first
  (`cluster.sweep_orphans`)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref

log = logging.getLogger(__name__)

_running: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_lock = threading.Lock()
_installed = False


def register(cluster) -> None:
    _install_hooks()
    with _lock:
        _running[id(cluster)] = cluster


def unregister(cluster) -> None:
    with _lock:
        _running.pop(id(cluster), None)


def stop_all() -> None:
    with _lock:
        clusters = list(_running.values())
    for c in clusters:
        try:
            c.stop()
        except Exception as e:  # keep stopping the others
            log.warning("could not stop %s: %s", c, e)


def _on_signal(signum, frame):
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_hooks() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        # leave a handler someone else installed alone (a Jupyter kernel has its own)
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_signal)

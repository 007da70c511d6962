"""The machine while a measurement runs: CPU (user, system, iowait, steal), context switches, run queue, memory
and disk I/O sampled from /proc about once a second, in a thread, for the span of a `with` block.

    with SystemSampler() as s:
        run_the_measurement()
    s.table()      # one row per interval: the rates over it
    s.summary()    # the span's means and maxima, and a flag where steal or iowait was high

A figure measured while the hypervisor took the CPU away (steal) or the disk made everything wait (iowait) is not
the machine's own: `summary()` flags it, and the study shows the flag beside the figure. Linux only: elsewhere
the sampler records nothing and says so (`available`). Its own cost is measured by `make bench-sampler`."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import polars as pl

PROC = Path("/proc")
STEAL_HIGH, IOWAIT_HIGH = 0.05, 0.10  # shares of CPU time over the span that make a figure suspect
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
SCHEMA = {
    "t_s": pl.Float64,
    "cpu_user": pl.Float64,
    "cpu_system": pl.Float64,
    "cpu_iowait": pl.Float64,
    "cpu_steal": pl.Float64,
    "cpu_idle": pl.Float64,
    "ctxt_per_s": pl.Float64,
    "procs_running": pl.Int64,
    "mem_available_mib": pl.Float64,
    "read_mib_per_s": pl.Float64,
    "write_mib_per_s": pl.Float64,
}


def _proc_text(name: str) -> str:
    return (PROC / name).read_text()


def _disks() -> set[str]:
    """Whole physical disks: a partition's sectors are counted by its disk too, and loop, RAM, device-mapper and
    md devices stand on other disks (counting them would count the same I/O twice)."""
    try:
        names = set(os.listdir("/sys/block"))
    except OSError:
        return set()
    return {n for n in names if not n.startswith(("loop", "ram", "dm-", "md", "zram"))}


def snapshot() -> dict:
    """Counters at one instant: cumulative CPU ticks, context switches and sectors, and the gauges."""
    snap: dict = {"t": time.monotonic()}
    for line in _proc_text("stat").splitlines():
        f = line.split()
        if f[0] == "cpu":
            snap |= dict(zip(_CPU_FIELDS, map(int, f[1:9]), strict=False))
        elif f[0] == "ctxt":
            snap["ctxt"] = int(f[1])
        elif f[0] == "procs_running":
            snap["procs_running"] = int(f[1])
    for line in _proc_text("meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            snap["mem_available_kib"] = int(line.split()[1])
    read = write = 0
    disks = _disks()
    for line in _proc_text("diskstats").splitlines():
        f = line.split()
        if len(f) >= 10 and f[2] in disks:
            read, write = read + int(f[5]), write + int(f[9])
    snap["read_sectors"], snap["write_sectors"] = read, write
    return snap


def rates(a: dict, b: dict) -> dict:
    """What happened between two snapshots: CPU shares, rates per second, the gauges at the end."""
    dt = max(b["t"] - a["t"], 1e-9)
    ticks = {k: b[k] - a[k] for k in _CPU_FIELDS if k in a and k in b}
    # two snapshots within one clock tick (the last loop sample and the one at exit) have no CPU time between
    # them: their shares are unknown (null), not 0
    total = sum(ticks.values()) or None
    share = (lambda n: n / total) if total else (lambda n: None)
    return {
        "cpu_user": share(ticks.get("user", 0) + ticks.get("nice", 0)),
        "cpu_system": share(ticks.get("system", 0) + ticks.get("irq", 0) + ticks.get("softirq", 0)),
        "cpu_iowait": share(ticks.get("iowait", 0)),
        "cpu_steal": share(ticks.get("steal", 0)),
        "cpu_idle": share(ticks.get("idle", 0)),
        "ctxt_per_s": (b["ctxt"] - a["ctxt"]) / dt,
        "procs_running": b.get("procs_running"),
        "mem_available_mib": b.get("mem_available_kib", 0) / 1024,
        "read_mib_per_s": (b["read_sectors"] - a["read_sectors"]) * 512 / 2**20 / dt,
        "write_mib_per_s": (b["write_sectors"] - a["write_sectors"]) * 512 / 2**20 / dt,
    }


class SystemSampler:
    """Samples /proc every `interval_s` in a daemon thread between __enter__ and __exit__ (and once at each end,
    so even a span shorter than the interval has one row)."""

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self.available = (PROC / "stat").is_file() and os.name == "posix"
        self._snaps: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="pglab-system-sampler")

    @classmethod
    def from_snapshots(cls, snapshots: list[dict], interval_s: float = 1.0) -> SystemSampler:
        """A sampler holding snapshots recorded earlier (`snapshots`): its table and summary again, from the raw
        store alone, on any machine."""
        s = cls(interval_s)
        s._snaps = list(snapshots)
        return s

    @property
    def snapshots(self) -> list[dict]:
        """The raw counters taken (cumulative, with a monotonic `t`): what a run keeps to derive from later."""
        return list(self._snaps)

    def __enter__(self) -> SystemSampler:
        if self.available:
            self._snaps.append(snapshot())
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.available:
            self._stop.set()
            self._thread.join(5)
            self._snaps.append(snapshot())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._snaps.append(snapshot())

    def table(self) -> pl.DataFrame:
        """One row per interval between snapshots: t_s (its end, from the start) and the rates over it."""
        snaps = list(self._snaps)
        if len(snaps) < 2:
            return pl.DataFrame(schema=SCHEMA)
        rows = [{"t_s": b["t"] - snaps[0]["t"], **rates(a, b)} for a, b in zip(snaps, snaps[1:], strict=False)]
        return pl.from_dicts(rows, schema=SCHEMA)

    def summary(self) -> dict:
        """The whole span: mean CPU shares (over the span, not the mean of intervals), maxima, and `flag`: why
        a figure measured in it is suspect (high steal or iowait), else None."""
        if len(self._snaps) < 2:
            return {"flag": None if self.available else "no /proc: the machine was not sampled"}
        whole = rates(self._snaps[0], self._snaps[-1])
        t = self.table()
        out = {f"{k}_mean": whole[k] for k in ("cpu_user", "cpu_system", "cpu_iowait", "cpu_steal", "cpu_idle")}
        out |= {
            "span_s": self._snaps[-1]["t"] - self._snaps[0]["t"],
            "samples": t.height,
            "procs_running_max": int(t["procs_running"].max()),
            "mem_available_mib_min": t["mem_available_mib"].min(),
            "read_mib_per_s_mean": whole["read_mib_per_s"],
            "write_mib_per_s_mean": whole["write_mib_per_s"],
        }
        flags = []
        if (whole["cpu_steal"] or 0) > STEAL_HIGH:
            flags.append(f"steal {whole['cpu_steal']:.0%} of CPU time (the hypervisor ran others)")
        if (whole["cpu_iowait"] or 0) > IOWAIT_HIGH:
            flags.append(f"iowait {whole['cpu_iowait']:.0%} of CPU time")
        return out | {"flag": "; ".join(flags).replace("%", " %") or None}


# -- a study's whole stage: sampled by Study.run, kept in the raw store, derived into <study>_machine -----------------

STAGE_FOLDER = "system"


def save_stage(sampler: SystemSampler, store, study: str, started_at: float) -> None:
    """Keep a stage's snapshots as system/<study>-<start>.json (one file per attempt: a resumed stage adds one)."""
    if sampler.snapshots:
        payload = {"study": study, "started_at": started_at, "interval_s": sampler.interval_s}
        store.save_json(f"{STAGE_FOLDER}/{study}-{started_at:.0f}.json", payload | {"snapshots": sampler.snapshots})


STAGE_SCHEMA = {"attempt": pl.Int64, "time": pl.Datetime("ms", "UTC")} | SCHEMA | {"flag": pl.String}


def stage_table(store, study: str) -> pl.DataFrame:
    """Every attempt's intervals (attempt 1, 2, ... in start order), each row with its wall-clock end (`time`,
    to set beside a round's timestamp) and the attempt's flag (high steal or iowait over it), from raw alone."""
    folder = store.artifact_path(STAGE_FOLDER)
    files = sorted(folder.glob(f"{study}-*.json"), key=lambda f: json.loads(f.read_text())["started_at"])
    frames = []
    for i, f in enumerate(files, start=1):
        raw = json.loads(f.read_text())
        sampler = SystemSampler.from_snapshots(raw["snapshots"], raw["interval_s"])
        t = sampler.table()
        if t.is_empty():
            continue
        ms = ((raw["started_at"] + pl.col("t_s")) * 1000).round().cast(pl.Int64)  # t_s: from the first snapshot
        frames.append(
            t.with_columns(
                attempt=pl.lit(i, pl.Int64),
                time=pl.from_epoch(ms, time_unit="ms").dt.replace_time_zone("UTC"),
                flag=pl.lit(sampler.summary()["flag"], pl.String),
            ).select(list(STAGE_SCHEMA))
        )
    return pl.concat(frames) if frames else pl.DataFrame(schema=STAGE_SCHEMA)


def stage_markdown(t: pl.DataFrame) -> str | None:
    """One line for a report section: the machine while the study ran (CPU shares, steal, iowait, the flag)."""
    if t is None or t.is_empty():
        return None
    m = {c: t[c].mean() for c in ("cpu_user", "cpu_system", "cpu_iowait", "cpu_steal")}
    flags = sorted({f for f in t["flag"].drop_nulls()})
    span = t["t_s"].max() if t["attempt"].n_unique() == 1 else None
    text = (
        f"**The machine while it ran** (sampled from /proc about once a second{f', {span:.0f} s' if span else ''}): "
        f"CPU user {m['cpu_user']:.0%}, system {m['cpu_system']:.0%}, iowait {m['cpu_iowait']:.1%}, "
        f"steal {m['cpu_steal']:.1%} (max {t['cpu_steal'].max():.0%} over a second)"
    )
    text += f". Flagged: {'; '.join(flags)}." if flags else "; nothing flagged."
    return text.replace("%", " %")


def bench(seconds: float = 10.0, interval_s: float = 1.0) -> dict:
    """The sampler's own cost: CPU time of this process while it samples and does nothing else, per sample and
    as a share of one core."""
    c0, t0 = time.process_time(), time.monotonic()
    with SystemSampler(interval_s) as s:
        time.sleep(seconds)
    cpu, wall = time.process_time() - c0, time.monotonic() - t0
    n = max(len(s._snaps), 1)
    return {"samples": n, "cpu_ms_per_sample": 1000 * cpu / n, "share_of_one_core": cpu / wall}


if __name__ == "__main__":
    r = bench()
    print(
        f"system sampler at 1 Hz: {r['samples']} samples, {r['cpu_ms_per_sample']:.2f} ms CPU per sample, "
        f"{r['share_of_one_core']:.3%} of one core"
    )

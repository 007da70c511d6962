"""The checks of params that need the machine, run by `params.load` before any server starts.

- every `servers.installs[].bin_dir` holds a PostgreSQL server, every `source` is built (or found built in the
  install cache: pg_build), and no install takes a name another one has;
- `servers.use` names servers that exist;
- every PostgreSQL setting in params (top-level `settings` and each study's) is one that each selected
  install accepts, with its value: one `postgres -C` per install with all of them, in a throwaway folder;
- what the run will write fits in the free space of the state folder;
- every external server answers (its password never shown).

Each failure is a `ParamsError` naming the file, the key and what was expected."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote, quote_plus

from .. import paths
from ..config import CommonParams, ParamsError
from ..paramtypes import version_major


def check_machine(params: CommonParams, shown) -> None:
    """Quick local checks first; the dsns last, as an unreachable server costs its whole connect timeout."""
    selected = selected_installs(params, shown)
    # versions are fetched only when the servers are chosen (installs.discover(versions=...)): their settings
    # are checked by the cluster when it starts; their clusters count for the disk, as new ones
    s = params.servers
    fetched = [f"version-{v}" for v in s.versions if s.use == "all" or f"pg{version_major(v)}" in s.use]
    _check_locale(params, shown)
    check_settings(params, shown, selected)
    check_disk(params, shown, [i.name for i in selected] + fetched)
    _check_dsns(params, shown)


# -- installs and names ---------------------------------------------------------------------------------------


def selected_installs(params: CommonParams, shown) -> list:
    """The installs the run will make clusters of (found ones and params' own), checked."""
    from ..installs.installs import InstallError, build_entry, discover, probe, unbuilt

    own, given = {}, {}
    for i, inst in enumerate(params.servers.installs):
        if inst.source:  # built here, before any server starts: a missing tool or a failed build stops the run
            try:
                made = build_entry(inst, params.servers.build)
            except InstallError as e:
                raise ParamsError(
                    f"{shown}: servers.installs[{i}].source: expected PostgreSQL to build from it; {e}"
                ) from None
            if made is None:  # left out: the studies it was for record why (installs.unbuilt)
                why = unbuilt(params.servers)[inst.name]
                print(f"note: servers.installs[{i}] {inst.name} is left out: {why}", file=sys.stderr)
                continue
            given[inst.name], own[made.bin_dir] = made, i
            continue
        try:
            own[probe(inst.bin_dir, "params", inst.name).bin_dir] = i
        except (InstallError, OSError, subprocess.SubprocessError) as e:
            raise ParamsError(
                f"{shown}: servers.installs[{i}].bin_dir: expected a folder with PostgreSQL's postgres, "
                f"initdb and pg_ctl; got {inst.bin_dir!r} ({e})"
            ) from None
        given[inst.name] = inst.bin_dir
    installs = discover(given)
    found = {i.name: i for i in installs}
    # a params install that discover renamed (a found one has its name), then an external server named like one
    taken = [
        (f"installs[{i}]", params.servers.installs[i].name)
        for x in installs
        if (i := own.get(x.bin_dir)) is not None and x.name != params.servers.installs[i].name
    ]
    taken += [(f"external[{i}]", e.name) for i, e in enumerate(params.servers.external) if e.name in found]
    if taken:
        key, name = taken[0]
        raise ParamsError(
            f"{shown}: servers.{key}.name: expected a name no other server has; "
            f"{name!r} is the install found in {found[name].bin_dir}"
        )
    if params.servers.use == "all":
        return installs
    # versions are fetched only when the servers are chosen; by then they are named pg<major>, or
    # pg<major>-download beside an install of that major (installs.downloaded)
    fetched = {f"pg{v}{suffix}" for v in map(version_major, params.servers.versions) for suffix in ("", "-download")}
    known = set(found) | {e.name for e in params.servers.external} | fetched
    unknown = [n for n in params.servers.use if n not in known]
    if unknown:
        raise ParamsError(f"{shown}: servers.use: expected 'all' or names among {sorted(known)}; got unknown {unknown}")
    return [i for i in installs if i.name in params.servers.use]


def _locale_key(name: str) -> str:
    # glibc names the codeset both ways: en_US.UTF-8 is en_US.utf8
    lang, _, codeset = name.partition(".")
    return lang + ("." + re.sub(r"[^a-z0-9]", "", codeset.lower()) if codeset else "")


def _check_locale(params: CommonParams, shown) -> None:
    """initdb --locale must name a locale this machine has (C and POSIX always exist)."""
    wanted = params.initdb.locale
    if wanted in ("C", "POSIX"):
        return
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return  # no way to list them here: initdb will say
    have = sorted(out.stdout.split())
    if out.returncode == 0 and _locale_key(wanted) not in {_locale_key(x) for x in have}:
        raise ParamsError(
            f"{shown}: initdb.locale: expected a locale this machine has ({', '.join(have[:20])}"
            f"{', ...' if len(have) > 20 else ''}); got {wanted!r}"
        )


# -- settings --------------------------------------------------------------------------------------------------


def _setting_arg(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def check_settings(params: CommonParams, shown, installs: list) -> None:
    """Every setting in params against each install's own rules, with `postgres -C` (names, types, ranges,
    enum values). Settings of extensions (auto_explain.*) are only placeholders to it, any value passes:
    their own checks are in the study's params. A server is never started for this."""
    from ..servers import osuser, reach

    dicts = params.setting_dicts()
    entries = [(f"{where}.{name}", name, value) for where, d in dicts.items() for name, value in d.items()]
    if not entries or not installs:
        return
    run_as = osuser.server_user()
    folder = config_folder(run_as)
    try:
        for inst in installs:
            try:  # as root: the binaries the service user can run (a copy in the cache if it cannot reach these)
                runnable = reach.server_install(inst, run_as)
            except reach.ReachError as e:
                raise ParamsError(f"{shown}: servers: cannot run {inst.name} as OS user {run_as.name}: {e}") from None
            reason = postgres_c(runnable, folder, run_as, entries)
            if reason is None:
                continue
            key, value = _culprit(runnable, folder, run_as, entries, reason)
            if key is None:
                raise ParamsError(
                    f"{shown}: settings: could not check them with {inst.tool('postgres')} "
                    f"({inst.name}) as OS user {run_as.name}: {reason}"
                )
            raise ParamsError(
                f"{shown}: {key}: expected a setting and value that {inst.name} (PostgreSQL "
                f"{inst.major}.{inst.minor}) accepts; got {value!r}: {reason}"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _check_session_contexts(params, shown, installs, run_as)


# settings a connection may set at its start (the kit connects as a superuser): not postmaster, sighup, internal
SESSION_CONTEXTS = frozenset({"user", "superuser", "backend", "superuser-backend"})


def _check_session_contexts(params: CommonParams, shown, installs: list, run_as) -> None:
    """Session settings (conditions, items) go into the connection's options: a server-wide one there would
    only fail when the connection is made, after the servers started. Contexts from `postgres --describe-config`;
    extension settings (not listed) are left to the extension."""
    from ..servers import reach

    session = [(f"{w}.{n}", n) for w, d in params.session_setting_dicts().items() for n in d]
    if not session:
        return
    for inst in installs:
        runnable = reach.server_install(inst, run_as)  # reachable: check_settings ran it a moment ago
        out = subprocess.run(
            [str(runnable.tool("postgres")), "--describe-config"],
            capture_output=True,
            text=True,
            timeout=30,
            **run_as.popen_kwargs(),
        )
        contexts = dict(line.split("\t")[:2] for line in out.stdout.splitlines() if line.count("\t") >= 2)
        for key, name in session:
            context = contexts.get(name.lower())
            if context is not None and context not in SESSION_CONTEXTS:
                raise ParamsError(
                    f"{shown}: {key}: expected a setting a session can set; {name} is a {context} "
                    f"setting on {inst.name} (server-wide: put it in the section's server settings)"
                )


def config_folder(run_as) -> Path:
    """A throwaway folder with an empty postgresql.conf, owned by the server's OS user: `postgres -C` needs a
    config file to start from, and as root the binaries run as that user (PostgreSQL refuses root)."""
    folder = Path(tempfile.mkdtemp(prefix="pglab-settings-"))
    if not run_as.is_self and not run_as.can_access(folder.parent, "x"):  # a TMPDIR only we can enter
        folder.rmdir()
        folder = Path(tempfile.mkdtemp(prefix="pglab-settings-", dir="/tmp"))
    for f in ("postgresql.conf", "postgresql.auto.conf"):  # auto.conf too: else it logs that it is missing
        (folder / f).write_text("")
    if not run_as.is_self:
        for p in (folder, folder / "postgresql.conf", folder / "postgresql.auto.conf"):
            os.chown(p, run_as.uid, run_as.gid, follow_symlinks=False)
    return folder


def postgres_c(inst, folder: Path, run_as, entries) -> str | None:
    """None if the install accepts every (key, name, value), else PostgreSQL's reason."""
    cmd = [str(inst.tool("postgres")), "-D", str(folder), "-C", "server_version"]
    for _, name, value in entries:
        cmd += ["-c", f"{name}={_setting_arg(value)}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, **run_as.popen_kwargs())
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if out.returncode == 0:
        return None
    # the FATAL line and its hint ('Available values: ...'), without the log line prefix
    lines = re.findall(r"(?:FATAL|ERROR|HINT|DETAIL):\s+(.*)", out.stderr)
    return " ".join(lines) or " ".join(out.stderr.split())[-300:] or f"exit code {out.returncode}"


def _culprit(inst, folder: Path, run_as, entries, reason: str) -> tuple[str | None, object]:
    """The (key, value) PostgreSQL refused: each entry of the named setting alone (several keys may set it).
    (None, None) when it refuses to start at all, whatever the settings."""
    if postgres_c(inst, folder, run_as, []) is not None:
        return None, None
    m = re.search(r'parameter "([^"]+)"', reason)
    named = [e for e in entries if m and e[1].lower() == m.group(1).lower()]
    for key, name, value in named or entries:
        if postgres_c(inst, folder, run_as, [(key, name, value)]) is not None:
            return key, value
    return None, None


# -- disk space ------------------------------------------------------------------------------------------------

# Sizes on disk (pg_database_size), the same on PostgreSQL 15 and 18. SSB as the kit loads it (COPY FREEZE,
# VACUUM ANALYZE, no indexes), measured in test servers: 41.9 MB at SF 0.05, 678.8 MB at SF 1, an empty
# database 7.6 MB; the largest parallel_index build (4 key columns on lineorder, one index at a time) 9.5 MB
# at SF 0.05, 189.2 MB at SF 1. From the committed default run (data/derived/default): pgbench -i 23.5 MB at
# scale 1, 164.6 MB at scale 10; jit_operators' two int columns 36.3 B a row (3 M rows: 108.8 MB), as
# auto_explain's one (header and alignment dominate); partitioning's rows 84.5 B (3 M rows: 253.4 MB).
MB = 1_000_000
EMPTY_DB = 7.6 * MB
SSB_PER_SF = 671.2 * MB
SSB_INDEX_PER_SF = 189.2 * MB
PGBENCH_PER_SCALE = 15.7 * MB
INT_ROW = 36.3
WIDE_ROW = 44  # two 8-byte (or small numeric) columns: 24 B header + 16 + a 4 B line pointer
PARTITION_ROW = 84.5
# initdb's files and WAL: the default run's data folder held 431 MB beyond its databases, 419 MB of it WAL
CLUSTER_OVERHEAD = 500 * MB


def estimate_bytes(params: CommonParams) -> dict[str, float]:
    """What one kit server will hold after a full run, by the params key that decides it: each study section's
    `disk_bytes()` (sizes from the table above), in the order of params.SECTIONS."""
    return {"(each cluster: initdb and WAL)": CLUSTER_OVERHEAD} | _sections_bytes(params, "disk_bytes")


def run_bytes(params: CommonParams) -> dict[str, float]:
    """What a run writes beyond every server's share, by the params key that decides it (`run_disk_bytes()`)."""
    return _sections_bytes(params, "run_disk_bytes")


def _sections_bytes(params: CommonParams, method: str) -> dict[str, float]:
    """Each study section's `method()` (sizes by key), keys prefixed with the section, in params.SECTIONS' order."""
    out = {}
    for section in type(params).SECTIONS:
        own = getattr(getattr(params, section), method, dict)()
        out |= {f"{section}.{k}": v for k, v in own.items()}
    return out


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass  # gone meanwhile
    return total


def human_size(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1e6:.2f} MB"


def free_space(folder: Path) -> tuple[Path, int]:
    """(`folder`, or its nearest existing parent where it is not made yet; the bytes free on that disk)."""
    while not folder.exists():
        folder = folder.parent
    return folder, shutil.disk_usage(folder).free


def clusters_folder() -> Path:
    """Where the kit's clusters are: the state folder's, or the stand-in for it when the service user cannot
    reach it (reach.py), found without creating either."""
    from ..servers import osuser, reach

    wanted = paths.clusters_dir()
    used = reach.stand_in(wanted)
    if used is None and not reach.reachable(wanted, osuser.server_user()):
        used = paths.machine_state_dir()
    return used or wanted


def check_disk(params: CommonParams, shown, servers: list[str]) -> None:
    """Refuse a run whose data would not fit into the free space where the kit's clusters go. What a server's
    cluster already holds (a resumed run, a later notebook of the same run) counts as there."""
    if not servers:
        return  # external servers only: their data is on their own disks
    parts = estimate_bytes(params)
    per_server = sum(parts.values())
    clusters = clusters_folder()
    need = sum(max(0.0, per_server - _folder_bytes(clusters / name)) for name in servers)
    once = run_bytes(params)  # a section's data on some servers only (ssb.jit_sf), once per run
    need += sum(once.values())
    folder, free = free_space(clusters)
    if need > free:
        from ..servers import reach

        reach.sweep_orphans()
        free = shutil.disk_usage(folder).free
    if need <= free:
        return
    n = len(servers)
    biggest = max((k for k in parts | once if not k.startswith("(")), key=(parts | once).get)
    detail = ", ".join(f"{k} {human_size(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v >= MB)
    detail += "".join(f"; once: {k} {human_size(v)}" for k, v in once.items())
    raise ParamsError(
        f"{shown}: {biggest}: expected a run that fits on disk; these params would write about {human_size(need)} "
        f"({n} kit server{'s' if n != 1 else ''} x {human_size(per_server)}: {detail}) but "
        f"{folder} has {human_size(free)} free{_others_on(folder)}"
    )


def _others_on(folder: Path) -> str:
    """The part of a full disk's message naming other checkouts' clusters on the same file system (as root they
    share /var/lib/pglab, and a finished checkout's clusters stay until it is cleaned or deleted)."""
    from ..servers import reach

    dev, others = folder.stat().st_dev, []
    for d, origin in reach.stand_ins_elsewhere(paths.ROOT, paths.state_dir()):
        try:
            if d.stat().st_dev == dev and (size := _folder_bytes(d)) >= MB:
                others.append((d, origin, size))
        except OSError:
            continue  # removed meanwhile by another run's sweep
    if not others:
        return ""
    total = sum(b for _, _, b in others)
    each = ", ".join(f"{d} for {o} ({human_size(b)})" for d, o, b in others)
    return (
        f"; other checkouts' clusters hold {human_size(total)} of that disk: {each}; `make clean` in a checkout "
        "frees its clusters, and deleting a checkout frees them at the next run"
    )


# -- external servers ------------------------------------------------------------------------------------------


def _without_password(text: str, dsn: str) -> str:
    """`text` with the dsn and every piece of its password (quoted, URL-encoded, each word of it) blanked."""
    from psycopg.conninfo import conninfo_to_dict

    from ..servers.db import redact

    text = text.replace(dsn, redact(dsn))
    password = conninfo_to_dict(dsn).get("password") or ""
    pieces = {password, quote(password), quote_plus(password), *password.split()}
    for piece in sorted((p for p in pieces if len(p) >= 3 or p == password), key=len, reverse=True):
        if piece:
            text = text.replace(piece, "***")
    return text


def _check_dsns(params: CommonParams, shown) -> None:
    from ..servers.db import connect, redact

    for i, ext in enumerate(params.servers.external):
        try:
            connect(ext.dsn, connect_timeout=max(1, round(params.servers.connect_timeout_s))).close()
        except Exception as e:
            lines = _without_password(str(e), ext.dsn).strip().splitlines()
            reason = lines[0] if lines else type(e).__name__
            raise ParamsError(
                f"{shown}: servers.external[{i}].dsn: expected a server answering within "
                f"{params.servers.connect_timeout_s:g}s; {redact(ext.dsn)!r} did not ({reason})"
            ) from None

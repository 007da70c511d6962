"""PostgreSQL built from source into the install cache: a release tarball, a Debian source package or a git ref,
each built with the one set of flags of `servers.build`, so that two builds differ in their source alone.

A build is `<cache>/postgres/build-<key>/{bin,lib,share}` with `pglab-build.json` (source, flags, compiler,
PostgreSQL version, when, how long) and its log beside it, `build-<key>.log`. The key is a digest of the source's
identity (a tarball's sha256, a Debian package and version, a git commit), the flags and the compiler: the same
source built alike is built once; a branch that moved is built anew. Only what the kit's servers use is built:
the backend and its data files, plpgsql, libpq, initdb, pg_ctl, psql, pgbench, pg_test_timing, pg_config and
contrib's auto_explain, pg_prewarm and pg_stat_statements (no docs, no tests).

As in pg_download, the build happens in a temporary folder beside its final place and is renamed into it under a
per-key lock: an interrupted build leaves nothing that counts and the next run starts it over; two runs wanting
one build share it. When ccache is installed it keeps the object files (`<cache>/postgres/.ccache`), so a
patched tree recompiles only what the patch touches; the objects are the compiler's own.

`python -m pglab.core.installs.pg_build --list` shows the builds in the cache; `--debian postgresql-15` (or `--git REPO
--ref REF`, `--tarball FILE --sha256 HEX`) builds one; `--bench` times a cold and a warm build in a fresh cache."""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from .. import paths, progress
from ..config import GIT_URL, BuildParam, SourceParam
from . import fetch
from .errors import BuildError
from .pg_download import cache_lock, make_dirs

log = logging.getLogger(__name__)

RECORD = "pglab-build.json"
RECIPE = 2  # what is built and how (TARGETS, configure_args): a change makes every key new
PREFIX = "build-"
# none of these touch what the kit measures (psql's line editing, pg_dump's compression, ICU collations where the
# kit's clusters use locale C), and without them a build needs no -dev library; servers.build.configure overrides
DEFAULT_CONFIGURE = ("--without-readline", "--without-zlib", "--without-icu")
# made and installed in this order (`make -C <dir> install`): the backend first, whose generated headers the
# others need; the data files initdb and the server read come with timezone, conversion_procs and snowball
TARGETS = (
    "src/backend",
    "src/timezone",
    "src/backend/utils/mb/conversion_procs",
    "src/backend/snowball",
    "src/pl/plpgsql",
    "src/interfaces/libpq",
    "src/bin/initdb",
    "src/bin/pg_ctl",
    "src/bin/psql",
    "src/bin/pgbench",
    "src/bin/pg_test_timing",
    "src/bin/pg_config",
    "contrib/auto_explain",
    "contrib/pg_prewarm",
    "contrib/pg_stat_statements",
)
CATALOG_TARGET = "src/include/catalog"
LLVM_TARGET = "src/backend/jit/llvm"  # llvmjit.so: JIT (PostgreSQL 11 on)
# a tool a build needs -> the Debian package that has it
TOOLS = {"make": "make", "bison": "bison", "flex": "flex", "perl": "perl", "pkg-config": "pkg-config"}
SOURCE_TOOLS = {"tarball": {}, "debian": {"apt-get": "apt", "dpkg-source": "dpkg-dev"}, "git": {"git": "git"}}
# the environment a build must not inherit: the params are its only flags (and an outer make's jobserver is gone)
UNSET = (
    "CC",
    "CPP",
    "CFLAGS",
    "CPPFLAGS",
    "CXX",
    "CXXFLAGS",
    "LDFLAGS",
    "LDFLAGS_EX",
    "LDFLAGS_SL",
    "LIBS",
    "BISON",
    "FLEX",
    "PERL",
    "PYTHON",
    "LLVM_CONFIG",
    "CLANG",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "ICU_CFLAGS",
    "ICU_LIBS",
    "XML2_CONFIG",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "MAKEOVERRIDES",
    "GNUMAKEFLAGS",
    "DESTDIR",
)
TIMEOUT_S = 30


@dataclass(frozen=True)
class Flags:
    """servers.build resolved on this machine: what configure gets, and the compiler that goes with it."""

    cflags: str
    configure: tuple[str, ...]
    cc: str  # what configure compiles with: CC= of the options, else gcc, else cc (configure's own order)
    compiler: str  # its `--version`, first line
    llvm_config: str | None = None  # e.g. /usr/bin/llvm-config-14: its major shows in the build's identity
    clang: str | None = None
    llvm: str | None = None  # e.g. "LLVM 14.0.6"

    def identity(self) -> dict:
        return {"cflags": self.cflags, "configure": list(self.configure), "compiler": self.compiler, "llvm": self.llvm}

    def described(self) -> str:
        return " ".join([f"CFLAGS={self.cflags}", *self.configure, f"with {self.llvm}" if self.llvm else "no LLVM"])


@dataclass(frozen=True)
class Source:
    kind: str  # tarball | debian | git
    given: str  # as params say it: the tarball's file or URL, the package, the repository
    identity: str  # the tarball's sha256, <package>=<version>, the commit
    ref: str = ""  # git: the ref as given
    fetch_ref: str = ""  # git, a repository elsewhere: the ref to fetch (its full name, or the commit)

    def label(self) -> str:
        """Short, for progress bars: the ref, the Debian version or the tarball's name."""
        if self.kind == "git":
            return f"{self.ref} ({self.identity[:8]})"
        return self.identity if self.kind == "debian" else self.given.rsplit("/", 1)[-1]

    def described(self) -> str:
        if self.kind == "git":
            return f"git {self.given} {self.ref} ({self.identity[:12]})"
        if self.kind == "debian":
            return f"Debian source {self.identity.replace('=', ' ')}"
        return f"tarball {self.given.rsplit('/', 1)[-1]} (sha256 {self.identity[:12]})"


def first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""


def find_llvm() -> tuple[str, str, str] | None:
    """(llvm-config, clang, LLVM version) when both are installed, the versioned names preferred (Debian's
    llvm-config-14): configure records the path, and the build's identity reads the major from it."""
    plain = shutil.which("llvm-config")
    version = first_line([plain, "--version"]) if plain else ""
    major = version.split(".")[0]
    config = (shutil.which(f"llvm-config-{major}") or plain) if major else None
    clang = (shutil.which(f"clang-{major}") or shutil.which("clang")) if major else None
    return (config, clang, f"LLVM {version}") if config and clang else None


def flags_of(build: BuildParam | None = None) -> Flags:
    """servers.build with its defaults applied and its compiler and LLVM looked up here."""
    build = build or BuildParam()
    configure = tuple(build.configure if build.configure is not None else DEFAULT_CONFIGURE)
    given_cc = next((o.split("=", 1)[1] for o in configure if o.startswith("CC=")), None)
    cc = given_cc or ("gcc" if shutil.which("gcc") else "cc")
    compiler = first_line([*cc.split(), "--version"]) if shutil.which(cc.split()[0]) else ""
    llvm = find_llvm() if build.llvm is not False else None
    if build.llvm is True and llvm is None:
        raise BuildError("servers.build.llvm is true, but " + _missing_text(_missing_llvm()))
    return Flags(build.cflags, configure, cc, compiler, *(llvm or (None, None, None)))


def _missing_llvm() -> list[tuple[str, str]]:
    return [(t, p) for t, p in (("llvm-config", "llvm-dev"), ("clang", "clang")) if not shutil.which(t)]


def missing_tools(kind: str, flags: Flags) -> list[tuple[str, str]]:
    """(tool, Debian package) of each tool a build of this kind of source lacks here."""
    cc = flags.cc.split()[0]
    need = {cc: "clang" if "clang" in cc else "gcc"} | TOOLS | SOURCE_TOOLS[kind]
    if flags.llvm_config:  # llvmjit has C++ parts
        need["g++"] = "g++"
    return [(t, p) for t, p in need.items() if not shutil.which(t)]


def _missing_text(missing: list[tuple[str, str]]) -> str:
    tools = ", ".join(f"{t} (Debian package {p})" for t, p in missing)
    packages = " ".join(dict.fromkeys(p for _, p in missing))
    return f"{tools} {'is' if len(missing) == 1 else 'are'} missing; install with: apt-get install {packages}"


def check_tools(kind: str, flags: Flags) -> None:
    missing = missing_tools(kind, flags)
    if missing:
        raise BuildError(f"cannot build PostgreSQL from source here: {_missing_text(missing)}")


# -- the source's identity, without fetching it -----------------------------------------------------------------


def _run(cmd: list[str], what: str, cwd: Path | None = None, timeout: float = 120) -> str:
    try:
        out = subprocess.run(
            cmd,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=os.environ | {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"{what}: {e}") from e
    if out.returncode != 0:
        said = "; ".join([x.strip() for x in out.stderr.splitlines() if x.strip()][:2]) or f"exit {out.returncode}"
        raise BuildError(f"{what}: {said}")
    return out.stdout


def _is_local(repo: str) -> bool:
    return not GIT_URL.fullmatch(repo)


def resolve(param: SourceParam) -> Source:
    """What the source is, exactly: for git the commit the ref names now, for Debian the version apt would fetch."""
    if param.kind == "tarball":
        if not re.match(r"https?://", param.tarball) and not Path(param.tarball).is_file():
            raise BuildError(f"tarball {param.tarball}: no such file")
        return Source("tarball", param.tarball, param.sha256)
    if param.kind == "debian":
        return _resolve_debian(param.debian)
    return _resolve_git(param.git, param.ref)


def _resolve_debian(spec: str) -> Source:
    # from apt's local lists: no network; the .dsc's name is <package>_<version without epoch>.dsc
    what = f"apt-get source --print-uris {spec}"
    try:
        out = _run(["apt-get", "source", "--print-uris", "-qq", spec], what, timeout=60)
    except BuildError as e:
        raise BuildError(
            f"{e} (a Debian source package needs a deb-src entry for a release that has it, e.g. "
            f"bookworm for postgresql-15, trixie for postgresql-17, in /etc/apt/sources.list.d/, then "
            f"apt-get update)"
        ) from None
    dsc = next((m[1] for m in re.finditer(r"^'\S+' (\S+\.dsc) ", out, re.M)), None)
    if not dsc:
        raise BuildError(f"{what} named no .dsc file: {out.strip()[:200]!r}")
    package, version = dsc.removesuffix(".dsc").split("_", 1)
    return Source("debian", spec, f"{package}={version}")


def _resolve_git(repo: str, ref: str) -> Source:
    if _is_local(repo):
        if not Path(repo).is_dir():
            raise BuildError(f"git repository {repo}: no such folder")
        sha = _run(
            ["git", "-C", repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
            f"git: {repo} has no commit {ref!r}",
        ).strip()
        return Source("git", repo, sha, ref)
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        return Source("git", repo, ref, ref, ref)
    out = _run(["git", "ls-remote", "--", repo, ref], f"git ls-remote {repo} {ref}", timeout=120)
    refs = dict(reversed(line.split("\t", 1)) for line in out.splitlines() if "\t" in line)
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in refs:  # an annotated tag's commit (^{}) before the tag object itself
            return Source("git", repo, refs[name], ref, name.removesuffix("^{}"))
    raise BuildError(f"git: {repo} has no branch or tag {ref!r} (a commit must be given in full, 40 hex digits)")


def key_of(source: Source, flags: Flags) -> str:
    ident = {"recipe": RECIPE, "source": {"kind": source.kind, "identity": source.identity}} | flags.identity()
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


# -- the cache ----------------------------------------------------------------------------------------------------


def _complete(d: Path) -> bool:
    # postgres.bki: initdb's catalog, which a recipe that missed an install target left out (RECIPE 1 for 16 on)
    return (d / RECORD).is_file() and (d / "bin" / "postgres").exists() and (d / "share" / "postgres.bki").exists()


def cached_builds(cache_dir: Path | None = None) -> list[tuple[Path, dict]]:
    """(folder, record) of every complete build in the cache, oldest first."""
    cache = cache_dir or paths.postgres_cache_dir()
    out = []
    for d in cache.glob(f"{PREFIX}*") if cache.is_dir() else []:
        if d.is_dir() and _complete(d):
            try:
                out.append((d, json.loads((d / RECORD).read_text())))
            except (OSError, ValueError):
                continue
    return sorted(out, key=lambda dr: dr[1].get("built_at", ""))


def ensure_build(
    param: SourceParam,
    build: BuildParam | None = None,
    cache_dir: Path | None = None,
    show_progress: bool | None = None,
) -> Path:
    """The install folder of PostgreSQL built from `param` with `build`'s flags, built now unless cached."""
    cache = cache_dir or paths.postgres_cache_dir()
    flags = flags_of(build)
    if any(not shutil.which(t) for t in SOURCE_TOOLS[param.kind]):  # apt-get or git tell what the source is
        check_tools(param.kind, flags)
    try:
        source = resolve(param)
    except BuildError as e:
        if param.kind != "git" or _is_local(param.git):
            raise
        return _offline(param, flags, cache, e)  # the repository cannot be reached: its newest build here
    key = key_of(source, flags)
    dest = cache / f"{PREFIX}{key}"
    if _complete(dest):
        return dest
    check_tools(param.kind, flags)
    make_dirs(cache)
    with cache_lock(cache, f"{PREFIX}{key}"):
        if _complete(dest):  # another process built it while we waited
            return dest
        for stale in [*cache.glob(f".{PREFIX}{key}.work-*"), *([dest] if dest.exists() else [])]:
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed process, or an install with files removed
        work = Path(tempfile.mkdtemp(dir=cache, prefix=f".{PREFIX}{key}.work-"))
        log_path = cache / f"{PREFIX}{key}.log"
        log.info(
            "building PostgreSQL from %s (%s) into %s; log: %s", source.described(), flags.described(), dest, log_path
        )
        try:
            with open(log_path, "w") as log_file:
                staged = _build(source, flags, key, dest, work, log_file, log_path, cache, show_progress)
            os.rename(staged, dest)  # atomic: the install is there complete, or not at all
            log.info("PostgreSQL built in %s", dest)
            return dest
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _offline(param: SourceParam, flags: Flags, cache: Path, cause: BuildError) -> Path:
    like = [
        (d, r)
        for d, r in cached_builds(cache)
        if r["source"]["given"] == param.git and r["source"]["ref"] == param.ref and r["flags"] == flags.identity()
    ]
    if not like:
        raise cause
    d, r = like[-1]
    log.warning("%s; using the build of %s from %s", cause, r["source"]["described"], r["built_at"])
    return d


# -- building -------------------------------------------------------------------------------------------------------


def _build(
    source: Source,
    flags: Flags,
    key: str,
    dest: Path,
    work: Path,
    log_file: IO[str],
    log_path: Path,
    cache: Path,
    show_progress: bool | None,
) -> Path:
    """Fetch, configure, make and install into `work`; returns the staged install folder, record written."""
    t0 = time.monotonic()
    out = _Output(log_file, log_path, show_progress)
    tree = _fetch(source, work, out)
    version = _version_of(tree)
    major = int(re.match(r"\d+", version)[0])
    env, ccache = _environment(work, flags, cache)
    args = configure_args(flags, major)
    out.run(
        [["./configure", *args]],
        tree,
        env,
        f"{source.label()}: configure",
        _count_checks(tree),
        re.compile(r"^checking "),
    )
    # from 16 on initdb's catalog (postgres.bki, system_constraints.sql) is installed from src/include/catalog
    targets = TARGETS + (CATALOG_TARGET,) * (major >= 16) + ((LLVM_TARGET,) if "--with-llvm" in args else ())
    stage = work / "stage"
    jobs = len(os.sched_getaffinity(0))
    # the prefix is the final folder, given to make (not configure: it would write it into pg_config.h, which every
    # file includes, and ccache could not match one build's objects to another's without preprocessing them): libpq's
    # rpath and the relative paths the server finds its files by are right after the rename (the path holds
    # "postgres", so Debian's per-version-dirs patch keeps lib/ and share/ as they are)
    prefix = f"prefix={dest}"
    # first what the top-level make does first (it builds one folder at a time): the generated headers, then the
    # libraries every program links; make -j in a subfolder would start compiling or linking before they are there
    make = [["make", "-C", "src/backend", "generated-headers", prefix]]
    make += [["make", f"-j{jobs}", "-C", d, "all", prefix] for d in ("src/common", "src/port")]
    make += [["make", f"-j{jobs}", "-C", t, "install", prefix, f"DESTDIR={stage}"] for t in targets]
    out.run(
        make,
        tree,
        env,
        f"{source.label()}: compile",
        _count_compiles(tree, "--with-llvm" in args),
        re.compile(r"(?:^|\s)-c(?:\s|$)"),
    )
    staged = stage / dest.relative_to(dest.anchor)
    fetch.readable(staged)
    record = {
        "key": key,
        "recipe": RECIPE,
        "postgres_version": version,
        "source": asdict(source) | {"described": source.described()},
        "flags": flags.identity(),
        "configure_args": args,
        "ccache": ccache,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_seconds": round(time.monotonic() - t0, 1),
        "log": log_path.name,
    }
    (staged / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    os.chmod(staged / RECORD, 0o644)
    return staged


def configure_args(flags: Flags, major: int) -> list[str]:
    args = list(flags.configure)
    if flags.llvm_config and major >= 11:  # 10 has no JIT
        args += ["--with-llvm", f"LLVM_CONFIG={flags.llvm_config}", f"CLANG={flags.clang}"]
    return [*args, f"CFLAGS={flags.cflags}"]


def _environment(work: Path, flags: Flags, cache: Path) -> tuple[dict, str | None]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET} | {"LC_ALL": "C"}
    ccache = shutil.which("ccache")
    cc = flags.cc.split()[0]
    if not ccache or "/" in cc:
        return env, None
    # ccache by the compiler's name, first on PATH: configure and pg_config still say `gcc`
    shim = work / "ccache-bin"
    shim.mkdir()
    (shim / cc).symlink_to(ccache)
    env |= {
        "PATH": f"{shim}{os.pathsep}{env.get('PATH', '')}",
        "CCACHE_DIR": str(cache / ".ccache"),
        # every build runs in a folder of its own: paths below it are made relative, and the folder (which
        # debug info would name, then deleted) is left out of the hash, so builds share their objects
        "CCACHE_BASEDIR": str(work),
        "CCACHE_NOHASHDIR": "true",
    }
    return env, first_line([ccache, "--version"])


def _version_of(tree: Path) -> str:
    m = re.search(r"^PACKAGE_VERSION='([^']+)'", (tree / "configure").read_text(errors="replace"), re.M)
    if not m:
        raise BuildError(f"{tree}/configure names no PACKAGE_VERSION: not a PostgreSQL source tree")
    return m[1]


def _count_checks(tree: Path) -> int:
    text = (tree / "configure").read_text(errors="replace")
    return len(re.findall(r'echo_n "checking |printf %s "checking ', text)) or 400


def _count_compiles(tree: Path, llvm: bool) -> int:
    """About how many compiler runs the targets take (the bar's total): src/port and src/common compile each file
    for the backend, the clients and libpq; with LLVM each backend file is compiled to bitcode as well."""

    def c_files(d: str) -> int:
        return sum(1 for _ in (tree / d).rglob("*.c"))

    backend = c_files("src/backend")
    shared = c_files("src/port") + c_files("src/common")
    rest = sum(c_files(t) for t in TARGETS if not t.startswith("src/backend")) + c_files("src/fe_utils")
    return backend * (2 if llvm else 1) + 2 * shared + rest


class _Output:
    """Runs the build's commands: their output to the log, a progress bar counting the lines that mark progress,
    and on failure a BuildError with the last lines and the log's path."""

    def __init__(self, log_file: IO[str], log_path: Path, show_progress: bool | None):
        self.log_file, self.log_path, self.show_progress = log_file, log_path, show_progress

    def run(
        self,
        cmds: list[list[str]],
        cwd: Path,
        env: dict | None,
        desc: str,
        total: int | None = None,
        marks: re.Pattern | None = None,
    ) -> None:
        if not total:
            log.info("%s", desc)
        with progress.bar(
            total=total, desc=desc, unit=" steps", disable=self.show_progress is False or not total
        ) as bar:
            for cmd in cmds:
                self._one(cmd, cwd, env, desc, bar, marks)
            if total:
                bar.update(max(0, total - bar.n))  # the estimate was high: the step is done all the same

    def _one(self, cmd: list[str], cwd: Path, env: dict | None, desc: str, bar, marks) -> None:
        self.log_file.write(f"$ {' '.join(cmd)}\n")
        self.log_file.flush()
        last = collections.deque(maxlen=12)
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
            )
        except OSError as e:
            raise BuildError(f"{desc}: {cmd[0]}: {e}") from e
        try:
            for line in proc.stdout:
                self.log_file.write(line)
                last.append(line.rstrip())
                if marks is not None and marks.search(line) and (bar.total is None or bar.n < bar.total - 1):
                    bar.update(1)
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted: the compilers stop with us
                proc.terminate()
                proc.wait()
            self.log_file.flush()
        if rc != 0:
            tail = "\n  ".join(x for x in last if x)
            raise BuildError(
                f"{desc} failed ({' '.join(cmd[:4])}{' ...' if len(cmd) > 4 else ''}: exit {rc}); "
                f"the whole log is {self.log_path}; its last lines:\n  {tail}"
            )


# -- fetching the source ----------------------------------------------------------------------------------------


def fetch_source(param: SourceParam, into: Path, show_progress: bool | None = None) -> Path:
    """The source tree of `param`, unpacked in the existing folder `into` (its log goes to `into/fetch.log`)."""
    source = resolve(param)
    with open(into / "fetch.log", "w") as f:
        return _fetch(source, into, _Output(f, into / "fetch.log", show_progress))


def _fetch(source: Source, work: Path, out: _Output) -> Path:
    src = work / "src"
    src.mkdir()
    if source.kind == "debian":
        out.run([["apt-get", "source", "-qq", source.identity]], src, None, f"apt-get source {source.identity}")
    elif source.kind == "git":
        _fetch_git(source, src, out)
    else:
        tarball = _tarball(source, work, out.show_progress)
        fetch.extract(tarball, src, source.given, BuildError)
    trees = [p.parent for p in src.glob("*/configure")] + ([src] if (src / "configure").is_file() else [])
    if len(trees) != 1:
        raise BuildError(
            f"{source.described()}: expected one PostgreSQL source tree (a folder with configure); found {len(trees)}"
        )
    return trees[0]


def _fetch_git(source: Source, src: Path, out: _Output) -> None:
    repo, commit = source.given, source.identity
    if not _is_local(repo):
        bare = src.parent / "git"
        _run(["git", "init", "-q", "--bare", str(bare)], "git init")
        _run(
            ["git", "-C", str(bare), "fetch", "-q", "--depth", "1", "--", repo, source.fetch_ref],
            f"git fetch {repo} {source.ref}",
            timeout=1800,
        )
        got = _run(["git", "-C", str(bare), "rev-parse", "FETCH_HEAD^{commit}"], "git rev-parse").strip()
        if got != commit:
            raise BuildError(f"git: {repo} {source.ref} moved to {got[:12]} while building {commit[:12]}; run again")
        repo = str(bare)
    cmd = ["git", "-C", repo, "archive", "--format=tar", commit]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        fetch.extract(proc.stdout, src, f"git archive {commit[:12]}", BuildError)
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        if proc.wait() != 0:
            raise BuildError(f"git archive {commit} in {repo}: {err}")


def _tarball(source: Source, work: Path, show_progress: bool | None) -> Path:
    """The tarball as a local file, its sha256 checked against params."""
    if re.match(r"https?://", source.given):
        path, name = work / "source.tar.part", source.given.rsplit("/", 1)[-1]
        digest = fetch.download(source.given, path, "sha256", name, show_progress, BuildError).hexdigest()
    else:
        path = Path(source.given)
        digest = fetch.digest_of(path, "sha256").hexdigest()
    if digest != source.identity:
        raise BuildError(f"tarball {source.given}: its SHA-256 is {digest}, params say {source.identity}")
    return path


# -- command line -----------------------------------------------------------------------------------------------


def listing(cache_dir: Path | None = None) -> Iterator[str]:
    cache = cache_dir or paths.postgres_cache_dir()
    builds = cached_builds(cache)
    if not builds:
        yield f"no PostgreSQL built from source in {cache}"
    for d, r in builds:
        f = r["flags"]
        flags = " ".join([f"CFLAGS={f['cflags']}", *f["configure"], f["llvm"] or "no LLVM"])
        yield (
            f"{d.name}  PostgreSQL {r['postgres_version']:8} {r['source']['described']}\n"
            f"    {flags}; {f['compiler']}\n"
            f"    built {r['built_at']} in {r['build_seconds']:.0f} s, {fetch.size_of(d) / 1e6:.0f} MB"
        )
    ccache = cache / ".ccache"
    if ccache.is_dir():
        yield f"ccache's object files: {ccache}, {fetch.size_of(ccache) / 1e6:.0f} MB"


def bench(param: SourceParam, build: BuildParam) -> tuple[float, float, dict]:
    """A build into a fresh temporary cache (ccache's too: nothing compiled before), then the same again."""
    tmp = Path(tempfile.mkdtemp(prefix="pglab-build-bench-"))
    try:
        t0 = time.perf_counter()
        first = ensure_build(param, build, tmp / "postgres", show_progress=True)
        t1 = time.perf_counter()
        again = ensure_build(param, build, tmp / "postgres")
        t2 = time.perf_counter()
        if again != first:
            raise BuildError(f"the second build went to {again}, not to the first's {first}")
        return t1 - t0, t2 - t1, json.loads((first / RECORD).read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pglab.core.installs.pg_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="the builds in the cache: source, flags, when, size")
    src = ap.add_argument_group("what to build (as a servers.installs[].source entry of params)")
    src.add_argument("--debian", help="a Debian source package, e.g. postgresql-15")
    src.add_argument("--git", help="a repository (folder or URL), with --ref")
    src.add_argument("--ref", help="a branch, tag or commit of --git")
    src.add_argument("--tarball", help="a release tarball (file or URL), with --sha256")
    src.add_argument("--sha256", help="the tarball's SHA-256")
    how = ap.add_argument_group("how (servers.build of params; default: the kit's)")
    how.add_argument("--cflags", help="default -O2; flags start with a dash, so write --cflags=-O0")
    how.add_argument(
        "--configure",
        action="append",
        help="a configure option (repeat it); replaces the defaults: " + " ".join(DEFAULT_CONFIGURE),
    )
    how.add_argument("--llvm", choices=["auto", "true", "false"], help="default auto")
    ap.add_argument("--bench", action="store_true", help="time a cold and a warm build in a fresh temporary cache")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.list or not (args.debian or args.git or args.tarball):
        for line in listing():
            print(line)
        return 0
    try:
        given = {k: getattr(args, k) for k in ("debian", "git", "ref", "tarball", "sha256") if getattr(args, k)}
        param = SourceParam.model_validate(given, context={"params_dir": Path.cwd()})
        how = {
            "cflags": args.cflags,
            "configure": args.configure,
            "llvm": {"true": True, "false": False}.get(args.llvm, args.llvm),
        }
        build = BuildParam.model_validate({k: v for k, v in how.items() if v is not None})
    except ValidationError as e:
        print("error: " + "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors()), file=sys.stderr)
        return 2
    try:
        if args.bench:
            cold, warm, record = bench(param, build)
            print(
                f"{'PostgreSQL built from':44} {'cold s':>7} {'cached s':>8}  flags\n"
                f"{record['source']['described']:44} {cold:7.1f} {warm:8.2f}  {flags_of(build).described()}"
            )
        else:
            print(ensure_build(param, build, show_progress=True))
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # ensure_build removed the unfinished build
        print("\ninterrupted: nothing of the unfinished build was kept; run the same command again", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

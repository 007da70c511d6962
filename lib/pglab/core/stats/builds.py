"""Whether two servers are built alike in all but their version: the gate of a claim that compares servers.

A version curve whose binaries come from different compilers, optimisation levels or assertion settings
measures the builds as much as the versions, so such a comparison is named *not comparable* with the difference
(the figure still shown). The identity comes from the environment capture (`pgtools.environment.build_identity`).

What counts as a difference: what is held equal (HELD_EQUAL) and recorded for either server. Not counted: the
version itself and what follows it — the compiler's patch level (a release series is built by the same
compiler's point releases), the configure options (a newer version gains options, e.g. --with-lz4 or
--with-zstd, distributions enable features that do not touch the measured paths) and PostgreSQL's own
compiler flags (warnings, -fwrapv, -fexcess-precision, -fvisibility=hidden: each version sets its own); of the
flags only the code-generation ones a builder chooses count (CODEGEN). LLVM counts only where JIT is compared.

A study declares which of its findings compare servers (`Comparison`, in `Study.comparisons`); `Study.judge`
applies the gate after the regimes (`apply_comparability`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from . import verdicts as V

# (column, how the reader reads it): held equal between the servers of a version comparison. The compiler counts by
# name and major.minor; configure options are not held equal (distributions enable features that do not touch
# the measured paths), LLVM only where JIT is what is compared.
HELD_EQUAL = (
    ("build_compiler", "compiler"),
    ("build_opt", "optimisation"),
    ("build_codegen", "code generation"),
    ("debug_assertions", "assertions"),
    ("block_size", "block size"),
    ("wal_segment_size", "WAL segment size"),
    ("data_checksums", "checksums"),
)
JIT = (("build_llvm", "LLVM"),)
# compiler flags a builder chooses that change the generated code (not PostgreSQL's own flags of a version)
CODEGEN = re.compile(
    r"(?<!\S)(?:-m(?:arch|tune|cpu)=\S+|-flto\S*|-fprofile-use\S*|-f(?:no-)?omit-frame-pointer|-fstack-protector\S*"
    r"|-fstack-clash-protection|-fcf-protection\S*|-ffast-math|-funroll-loops|-fno-plt)(?!\S)"
)
_COMPILER = re.compile(r"compiled by (\S+)[^,]*?(\d+\.\d+)(?:\.\d+)*")


def compiler(version_string: str | None) -> str | None:
    """'gcc 7.5' from "PostgreSQL 14.17 on x86_64-pc-linux-gnu, compiled by gcc (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0,
    64-bit": name and major.minor (the patch level follows the version's own release)."""
    m = _COMPILER.search(version_string or "")
    return f"{m.group(1)} {m.group(2)}" if m else None


def codegen(cflags: str | None) -> str | None:
    """The code-generation flags of a CFLAGS line ("none" when it has none), None when CFLAGS were not recorded."""
    if cflags is None:
        return None
    return " ".join(sorted(dict.fromkeys(CODEGEN.findall(cflags)))) or "none"


def identity(row: Mapping) -> dict:
    """A server's build identity from its environment_servers row. A run captured before the build identity (no
    build_compiler column) has its compiler read from version_string; what it did not record stays None."""
    out = dict(row)
    if not out.get("build_compiler"):
        out["build_compiler"] = compiler(out.get("version_string"))
    if "build_codegen" not in out:
        out["build_codegen"] = codegen(out.get("build_cflags"))
    return out


def _recorded(x) -> bool:
    return x is not None and x != ""


def unrecorded(a: Mapping, b: Mapping, jit: bool = False) -> list[str]:
    """What is held equal but recorded for neither server (a run captured before the build identity)."""
    return [
        label
        for col, label in HELD_EQUAL + (JIT if jit else ())
        if not (_recorded(a.get(col)) or _recorded(b.get(col)))
    ]


def difference(a: Mapping, b: Mapping, jit: bool = False) -> str | None:
    """None when servers a and b (environment_servers rows, or their `identity`) are built alike in what is held
    equal; else what differs, e.g. "builds differ: compiler gcc 4.4 (pg10) vs gcc 7.5 (pg11)". The compiler must
    be known for both; any other field counts where either server recorded it (one side only: a difference)."""
    a, b = identity(a), identity(b)
    names = (a.get("server", "A"), b.get("server", "B"))
    missing = [n for n, r in zip(names, (a, b), strict=True) if not r.get("build_compiler")]
    if missing:
        return f"build of {' and '.join(missing)} not recorded"

    def shown(x) -> str:
        return str(x) if _recorded(x) else "not recorded"

    diffs = [
        f"{label} {shown(a.get(col))} ({names[0]}) vs {shown(b.get(col))} ({names[1]})"
        for col, label in HELD_EQUAL + (JIT if jit else ())
        if (_recorded(a.get(col)) or _recorded(b.get(col))) and a.get(col) != b.get(col)
    ]
    return "builds differ: " + "; ".join(diffs) if diffs else None


def brief(row: Mapping, jit: bool = False) -> str:
    """A build in a few words: "gcc 12.2 -O2", with what departs from the usual ("assertions on", code generation,
    LLVM where JIT is compared)."""
    r = identity(row)
    flags = r.get("build_codegen")
    parts = [r.get("build_compiler") or "compiler not recorded", r.get("build_opt"), None if flags == "none" else flags]
    if r.get("debug_assertions") == "on":
        parts.append("assertions on")
    if jit:
        parts.append(r.get("build_llvm"))
    return " ".join(str(p) for p in parts if _recorded(p))


# -- the gate, declared with each study -------------------------------------------------------------------------------

IDENTITY_TABLE = "environment_servers"
_VS = re.compile(r"^\s*(\S+)\s+vs\.?\s+(\S+)\s*$")


@dataclass(frozen=True)
class Comparison:
    """Findings that compare servers (`findings`: fnmatch patterns of their ids), and how a findings row names
    the pair: baseline None — the server column reads "pgA vs pgB"; baseline (table, column) — the row's server
    against the server that table's `column` names on the row's server's rows (e.g. pgbench_paired.baseline).
    jit: the comparison is of JIT, so LLVM is held equal too. Declared with the study (`Study.comparisons`)."""

    findings: tuple[str, ...]
    baseline: tuple[str, str] | None = None
    jit: bool = False

    def covers(self, finding: str) -> bool:
        return any(fnmatch.fnmatchcase(finding, f) for f in self.findings)

    def pairs(self, server: str, tables) -> list[tuple[str, str]]:
        """The (server, the one it is compared with) pairs of a findings row; [] where the row names none."""
        if self.baseline is None:
            m = _VS.match(server or "")
            return [(m.group(1), m.group(2))] if m else []
        table, column = self.baseline
        if table not in tables or server in (None, "all"):
            return []
        t = tables[table]
        if not {"server", column} <= set(t.columns):
            return []
        others = sorted(set(t.filter(pl.col("server") == server)[column].drop_nulls().cast(pl.String)) - {server})
        return [(server, o) for o in others]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def apply_comparability(findings: pl.DataFrame, comparisons: Sequence[Comparison], tables) -> pl.DataFrame:
    """Findings with every scored row that compares servers built otherwise turned *not comparable*: the
    difference named, what it gave kept in the evidence and in the numbers. A comparable row's evidence names both
    builds; a row not scored (not testable here) keeps its verdict and gets the builds' note too. Without an
    environment_servers table (no environment captured) the findings stay as they are."""
    if findings.is_empty() or not comparisons or IDENTITY_TABLE not in tables:
        return findings
    env = {r["server"]: identity(r) for r in tables[IDENTITY_TABLE].iter_rows(named=True)}
    rows = []
    for row in findings.iter_rows(named=True):
        c = next((c for c in comparisons if c.covers(row["finding"])), None)
        pairs = c.pairs(row["server"], tables) if c is not None and row["verdict"] != V.NOT_RUN else []
        if not pairs:
            rows.append(row)
            continue
        diffs, alike = [], []
        for a, b in pairs:
            ia, ib = env.get(a, {"server": a}), env.get(b, {"server": b})
            d = difference(ia, ib, c.jit)
            if d is not None:
                diffs.append(d)
            else:
                gaps = unrecorded(ia, ib, c.jit)
                gap = f"; {', '.join(gaps)} not recorded in this run" if gaps else ""
                alike.append(f"{a} and {b} built alike ({brief(ia, c.jit)}{gap})")
        evidence = row["evidence"].rstrip()
        if diffs and row["verdict"] in V.TESTED:
            names = " and ".join(dict.fromkeys(s for p in pairs for s in p))
            v = V.Verdict(
                V.NOT_COMPARABLE,
                f"{'; '.join(diffs)}. Measured all the same: {row['verdict']}, {_lower_first(evidence)}",
                f"needs {names} built alike",
            )
            row = row | {"verdict": v.label, "evidence": v.text()[:1].upper() + v.text()[1:]}
        else:
            note = "; ".join([d[:1].upper() + d[1:] for d in diffs] + alike)
            row = row | {"evidence": f"{evidence}{'' if evidence.endswith('.') else '.'} {note}."}
        rows.append(row)
    return pl.from_dicts(rows, schema=findings.schema)

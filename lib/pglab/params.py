"""Run parameters: `params/*.yaml`, validated before any server starts.

Every problem is reported as one message naming the file, the key and what was expected, e.g.
`params/quick.yaml: servers.installs[0].bin_dir: expected a folder with PostgreSQL's postgres, initdb and
pg_ctl; got '/opt/nope'`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from . import paths
from .auto_explain_study import AutoExplainParams
from .jit_operators_study import JitOperatorsParams
from .parallel_index_study import ParallelIndexParams
from .paramtypes import SettingValue, Strict
from .partitioning_study import PartitioningParams
from .pgbench_study import PgbenchParams
from .ssb.params import SsbParams


class ParamsError(Exception):
    pass


class InstallParam(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    bin_dir: str


class ExternalServer(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    dsn: str = Field(repr=False)  # may hold a password: never printed or stored
    allow_destructive: bool = False


class Servers(Strict):
    use: Literal["all"] | list[str] = "all"
    installs: list[InstallParam] = []
    external: list[ExternalServer] = []
    connect_timeout_s: float = Field(default=5, gt=0, le=60)


class Initdb(Strict):
    encoding: str = "UTF8"
    locale: str = "C"
    data_checksums: bool = False


class Environment(Strict):
    pg_test_timing_seconds: int = Field(default=1, ge=1, le=60)


class Params(Strict):
    profile: str = Field(default="default", pattern=r"^[A-Za-z0-9_-]+$")
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    servers: Servers = Servers()
    initdb: Initdb = Initdb()
    settings: dict[str, SettingValue] = {}
    environment: Environment = Environment()
    ssb: SsbParams = SsbParams()
    pgbench: PgbenchParams = PgbenchParams()
    auto_explain: AutoExplainParams = AutoExplainParams()
    jit_operators: JitOperatorsParams = JitOperatorsParams()
    parallel_index: ParallelIndexParams = ParallelIndexParams()
    partitioning: PartitioningParams = PartitioningParams()
    source: str = Field(default="", exclude=True)  # the file these came from

    @field_validator("settings")
    @classmethod
    def _setting_names(cls, v: dict) -> dict:
        for name in v:
            if not name.replace(".", "_").replace("_", "a").isalnum():
                raise ValueError(f"{name!r} is not a PostgreSQL setting name")
        return v


_UNION_TAGS = {"str", "int", "float", "bool"}


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _explain(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "missing":
        return "required key is missing"
    return f"{err['msg'].removeprefix('Value error, ')}; got {err.get('input')!r}"


def load(path: str | Path, check_servers: bool = True) -> Params:
    """Read and validate a params file; ParamsError with file, key and expectation on any problem."""
    path = paths.resolve(path)
    shown = path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ParamsError(f"{shown}: no such params file") from None
    except yaml.YAMLError as e:
        raise ParamsError(f"{shown}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{shown}: expected a mapping of keys at the top level; got {type(raw).__name__}")
    try:
        params = Params(**raw, source=str(shown))
    except ValidationError as e:
        msgs: list[str] = []
        for err in e.errors():
            loc = err["loc"]
            if loc and loc[-1] in _UNION_TAGS:  # one message for a value matching no member of a union
                msg = f"{shown}: {_where(loc[:-1])}: expected text, a number or true/false; got {err.get('input')!r}"
            else:
                msg = f"{shown}: {_where(loc)}: {_explain(err)}"
            if msg not in msgs:
                msgs.append(msg)
        raise ParamsError("\n".join(msgs)) from None
    if check_servers:
        _check_servers(params, shown)
    return params


def _check_servers(params: Params, shown) -> None:
    """The checks that need the machine: bin_dirs hold a server, dsns answer, names are known."""
    from .db import connect, redact
    from .installs import InstallError, probe

    for i, inst in enumerate(params.servers.installs):
        try:
            probe(paths.resolve(inst.bin_dir), "params", inst.name)
        except (InstallError, OSError) as e:
            raise ParamsError(
                f"{shown}: servers.installs[{i}].bin_dir: expected a folder with PostgreSQL's postgres, "
                f"initdb and pg_ctl; got {inst.bin_dir!r} ({e})"
            ) from None
    for i, ext in enumerate(params.servers.external):
        try:
            connect(ext.dsn, connect_timeout=max(1, round(params.servers.connect_timeout_s))).close()
        except Exception as e:
            # the driver's message can quote the dsn: show only the redacted form
            reason = str(e).replace(ext.dsn, redact(ext.dsn)).strip().splitlines()[0]
            raise ParamsError(
                f"{shown}: servers.external[{i}].dsn: expected a server answering within "
                f"{params.servers.connect_timeout_s:g}s; {redact(ext.dsn)!r} did not ({reason})"
            ) from None
    if params.servers.use != "all":
        from .installs import discover

        known = {i.name for i in discover({p.name: p.bin_dir for p in params.servers.installs})}
        known |= {e.name for e in params.servers.external}
        unknown = [n for n in params.servers.use if n not in known]
        if unknown:
            raise ParamsError(
                f"{shown}: servers.use: expected 'all' or names among {sorted(known)}; got unknown {unknown}"
            )

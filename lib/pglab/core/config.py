"""The params types every layer may use: the keys every run has (CommonParams: profile, run_id, servers,
initdb, settings, environment), the server entries, ParamsError, reading a params file's YAML and the
error messages. pglab.params assembles the study sections on top of CommonParams and loads a file."""

from __future__ import annotations

import os
import re
import types
import typing
from pathlib import Path
from typing import ClassVar, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from . import paths
from .paramtypes import SAFE_NAME_RULE, SafeName, Settings, Strict, check_versions, is_safe_name, version_major


class ParamsError(Exception):
    pass


def _from_params_dir(v: str, info: ValidationInfo) -> str:
    # resolved once here: papermill runs the notebooks in notebooks/, the command line elsewhere
    base = (info.context or {}).get("params_dir", paths.ROOT)
    return os.path.normpath(Path(base) / Path(v).expanduser())


# what a git repository may be: a URL of these schemes, scp-like `user@host:path`, or a folder (git's `ext::`
# transport runs commands, and a leading '-' would be read as an option)
GIT_URL = re.compile(r"(https?|ssh|git|file)://\S+|[\w.-]+@[\w.-]+:\S+")
_DEBIAN_SOURCE = re.compile(r"postgresql-\d+(=[0-9][A-Za-z0-9.+~-]*|/[a-z0-9-]+)?")


class SourceParam(Strict):
    """What a source build (core.pg_build) is built from: exactly one of a release tarball with its sha256, a
    Debian source package (fetched with `apt-get source`), or a git repository and a ref."""

    tarball: str | None = None  # a file (relative: to the params file's folder) or an http(s) URL
    sha256: str | None = None
    debian: str | None = None  # postgresql-17, postgresql-17=17.5-1 or postgresql-17/trixie, as apt-get takes it
    git: str | None = None  # a folder or a URL
    ref: str | None = None  # branch, tag or commit

    @field_validator("tarball")
    @classmethod
    def _tarball(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        return v if re.match(r"https?://", v) else _from_params_dir(v, info)

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, v: str | None) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        if not re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError("expected the tarball's SHA-256: 64 hex digits")
        return v.lower()

    @field_validator("debian")
    @classmethod
    def _debian(cls, v: str | None) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        if not _DEBIAN_SOURCE.fullmatch(v):
            raise ValueError(
                "expected a Debian PostgreSQL source package, e.g. postgresql-17, optionally with "
                "=<version> or /<release> as apt-get source takes it"
            )
        return v

    @field_validator("git")
    @classmethod
    def _git(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        if v.startswith("-") or "::" in v:
            raise ValueError("expected a git repository: a folder, or a URL (https, ssh, git, file or user@host:path)")
        return v if GIT_URL.fullmatch(v) else _from_params_dir(v, info)

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        if not re.fullmatch(r"[A-Za-z0-9_./^~@{}+-]+", v) or v.startswith("-"):
            raise ValueError("expected a branch, tag or commit of the repository (no spaces, not starting with '-')")
        return v

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("tarball", "debian", "git") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "expected exactly one of tarball (with sha256), debian or git (with ref); "
                + (f"got {' and '.join(given)}" if given else "got none")
            )
        if (self.tarball is None) != (self.sha256 is None):
            raise ValueError("expected sha256 (the tarball's SHA-256, 64 hex digits) with tarball, and only with it")
        if (self.git is None) != (self.ref is None):
            raise ValueError("expected ref (a branch, tag or commit) with git, and only with it")
        return self

    @property
    def kind(self) -> str:
        return "tarball" if self.tarball else "debian" if self.debian else "git"


class InstallParam(Strict):
    """An install of the user's: a folder of binaries (`bin_dir`), or PostgreSQL built from `source`."""

    name: SafeName
    bin_dir: str | None = None  # made absolute when loaded: a relative one is taken from the params file's folder
    source: SourceParam | None = None
    # only these studies run on it (params section names, e.g. [ssb]); None: every study that takes installs
    studies: list[str] | None = None
    # a source build this machine cannot make (no compiler, no source package) is left out and the studies it
    # was for say why, instead of stopping the run; false: the run stops before measuring, naming what is missing
    optional: bool = False

    @field_validator("bin_dir")
    @classmethod
    def _absolute(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:  # a dump's explicit null: as if not given
            return v
        return _from_params_dir(v, info)

    @model_validator(mode="after")
    def _bin_dir_or_source(self):
        if (self.bin_dir is None) == (self.source is None):
            raise ValueError(
                "expected either bin_dir (a folder with PostgreSQL's binaries) or source (a tarball, a "
                "Debian source package or a git ref to build from)" + (", not both" if self.bin_dir else "")
            )
        if self.optional and self.source is None:
            raise ValueError("expected optional only with source: a folder of binaries is there or it is not")
        if self.studies is not None and not self.studies:
            raise ValueError("expected studies to name at least one study (or leave it out: every study)")
        return self


# configure options the kit decides: where the build goes, and what servers.build says in its own keys
_KIT_CONFIGURE = re.compile(
    r"--(prefix|exec-prefix|bindir|sbindir|libdir|libexecdir|datadir|datarootdir|"
    r"sysconfdir|includedir|docdir|mandir|with-llvm|without-llvm)(=|$)|CFLAGS=|LLVM_CONFIG=|"
    r"CLANG="
)


class BuildParam(Strict):
    """How every source build is built (core.pg_build): one set of flags, so that builds compare."""

    cflags: str = "-O2"
    # None: the kit's minimal set (pg_build.DEFAULT_CONFIGURE); a list replaces it (VAR=value entries, e.g.
    # CC=clang, are passed to configure as well)
    configure: list[str] | None = None
    llvm: Literal["auto"] | bool = "auto"  # auto: --with-llvm when llvm-config and clang are found

    @field_validator("llvm", mode="before")
    @classmethod
    def _llvm(cls, v):
        if v != "auto" and not isinstance(v, bool):
            raise ValueError("expected auto (with LLVM when llvm-config and clang are found), true or false")
        return v

    @field_validator("cflags")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if any(c in v for c in "\n\r\0"):
            raise ValueError("expected compiler flags on one line")
        return v

    @field_validator("configure")
    @classmethod
    def _options(cls, v: list[str] | None) -> list[str] | None:
        if v is None:  # `configure:` left empty: no options of one's own, as when the key is absent
            return v
        for o in v:
            if not re.fullmatch(r"--[a-z][a-z0-9-]*(=\S.*)?|[A-Z_][A-Z0-9_]*=.*", o) or any(c in o for c in "\n\r\0"):
                raise ValueError(f"expected configure options (--with-x, --enable-x=y) or VAR=value; {o!r} is neither")
            if _KIT_CONFIGURE.match(o):
                raise ValueError(
                    f"expected options the kit does not set itself; {o!r} is set by the kit (the "
                    f"install folder; cflags and llvm are keys of servers.build)"
                )
        if len(set(v)) != len(v):
            raise ValueError("expected each option once")
        return v


class ExternalServer(Strict):
    name: SafeName
    dsn: str = Field(repr=False)  # may hold a password: never printed or stored
    allow_destructive: bool = False
    # databases the kit creates there (allow_destructive) are dropped when the run ends, unless this keeps them
    keep_created: bool = False

    @field_validator("dsn")
    @classmethod
    def _parses(cls, v: str) -> str:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(v)
        except ProgrammingError:
            # not the driver's reason: it quotes the text around the fault, which may be the password
            raise ValueError(
                "expected a libpq connection string (key=value pairs, a value with spaces in single "
                "quotes) or a postgresql:// URI; it does not parse (not shown: it may hold a password)"
            ) from None
        return v

    @model_validator(mode="after")
    def _keeps_only_what_it_may_create(self):
        if self.keep_created and not self.allow_destructive:
            raise ValueError(
                "keep_created: true needs allow_destructive: true (without it the kit creates nothing there to keep)"
            )
        return self


class Servers(Strict):
    use: Literal["all"] | list[str] = "all"
    installs: list[InstallParam] = []
    build: BuildParam = BuildParam()  # the flags of every install built from source
    external: list[ExternalServer] = []
    # more PostgreSQL versions, fetched into the per-user cache: majors (16) or exact versions ("16.14")
    versions: list[int | str] = []
    connect_timeout_s: float = Field(default=5, gt=0, le=60)
    # every kit server started as this many independently made and loaded clusters (pg17, pg17_c2, ...): the
    # intervals then hold across re-runs (core.replicas, between_runs.pool_clusters; cost: params/default.yaml)
    clusters: int = 1

    @field_validator("clusters", mode="before")
    @classmethod
    def _clusters(cls, v):
        from .replicas import MAX_CLUSTERS

        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CLUSTERS:
            raise ValueError(
                f"expected a whole number of clusters per server from 1 (one cluster each, the default) to "
                f"{MAX_CLUSTERS}; 2 measures every server on two independently made and loaded clusters"
            )
        return v

    @field_validator("use", mode="before")
    @classmethod
    def _use(cls, v):
        if v == "all":
            return v
        if not isinstance(v, list) or not v:
            raise ValueError("expected 'all' or a non-empty list of server names, e.g. [pg18, pg15]")
        bad = [n for n in v if not is_safe_name(n)]
        if bad:
            raise ValueError(f"expected server names of {SAFE_NAME_RULE}; {bad} not")
        if len(set(v)) != len(v):
            raise ValueError("expected each server once")
        return v

    @field_validator("versions", mode="before")
    @classmethod
    def _versions(cls, v):
        return check_versions(v)


# the server encodings initdb accepts (PostgreSQL's pg_enc2name_tbl less the client-only ones)
SERVER_ENCODINGS = (
    "SQL_ASCII EUC_JP EUC_CN EUC_KR EUC_TW EUC_JIS_2004 UTF8 MULE_INTERNAL LATIN1 LATIN2 LATIN3 LATIN4 LATIN5 "
    "LATIN6 LATIN7 LATIN8 LATIN9 LATIN10 WIN1256 WIN1258 WIN866 WIN874 KOI8R WIN1251 WIN1252 ISO_8859_5 "
    "ISO_8859_6 ISO_8859_7 ISO_8859_8 WIN1250 WIN1253 WIN1254 WIN1255 WIN1257 KOI8U"
).split()


def _encoding_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())  # as PostgreSQL compares them: 'utf-8' is UTF8


class Initdb(Strict):
    encoding: str = "UTF8"
    locale: str = "C"  # checked against the machine's locales (params_checks)
    data_checksums: bool = False

    @field_validator("encoding")
    @classmethod
    def _server_encoding(cls, v: str) -> str:
        if _encoding_key(v) not in {_encoding_key(e) for e in SERVER_ENCODINGS}:
            raise ValueError(f"expected a server encoding: {', '.join(SERVER_ENCODINGS)}")
        return v


class Environment(Strict):
    pg_test_timing_seconds: int = Field(default=1, ge=1, le=60)


class CommonParams(Strict):
    """The keys every run has; pglab.params.Params adds the study sections (SECTIONS names them, in order).
    `source` sits last here and is excluded from dumps, so a subclass's sections follow `environment` in
    params.json exactly as before."""

    SECTIONS: ClassVar[tuple[str, ...]] = ()

    profile: str = "default"  # names data/derived/<profile>/
    run_id: SafeName | None = None
    servers: Servers = Servers()
    initdb: Initdb = Initdb()
    settings: Settings = {}
    environment: Environment = Environment()
    # true: this file may write profile default, the committed reference (params/default.yaml always may)
    reference: bool = Field(default=False, exclude=True)
    source: str = Field(default="", exclude=True)  # the file these came from

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v):
            raise ValueError("expected a profile name of letters, digits, '_' and '-' (at most 64)")
        return v

    @model_validator(mode="after")
    def _install_studies(self):
        known = type(self).SECTIONS
        for i in self.servers.installs:
            unknown = [s for s in i.studies or [] if s not in known] if known else []
            if unknown:
                raise ValueError(
                    f"servers.installs {i.name}: studies {', '.join(unknown)} unknown; expected some of "
                    + ", ".join(known)
                )
        return self

    def setting_dicts(self) -> dict[str, dict]:
        """Every dict of PostgreSQL settings in params, by its key (`settings`, `ssb.stage_settings`, ...)."""
        return {"settings": self.settings} | self._section_dicts("setting_dicts")

    def session_setting_dicts(self) -> dict[str, dict]:
        """The settings dicts among those that go with a connection, not into the server's configuration."""
        return self._section_dicts("session_setting_dicts")

    def _section_dicts(self, method: str) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for section in type(self).SECTIONS:
            own = getattr(getattr(self, section), method, dict)()
            out |= {f"{section}.{k}" if k else section: d for k, d in own.items()}
        return out


# -- reading the file -----------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error, not the last one winning."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` merges: keys given beside it override them, as YAML means
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first
                except TypeError:
                    continue  # an unhashable key: the base class says so
                if seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first given at line {first[key] + 1})", key_node.start_mark
                    )
                first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def read_yaml(path: Path, shown) -> dict:
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError:
        raise ParamsError(f"{shown}: no such params file") from None
    except IsADirectoryError:
        raise ParamsError(f"{shown}: a folder, not a params file") from None
    except UnicodeDecodeError as e:
        raise ParamsError(f"{shown}: expected UTF-8 text; byte {e.start} is not") from None
    except yaml.MarkedYAMLError as e:
        # built from the parts, not str(e): that quotes the line, which may hold a dsn's password
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = "; ".join(x for x in (e.context, e.problem) if x)
        raise ParamsError(f"{shown}: {where}not valid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise ParamsError(f"{shown}: not valid YAML: {type(e).__name__}") from None
    if raw is None or raw == {}:
        raise ParamsError(f"{shown}: empty params file; expected at least `profile: <name>` (see params/default.yaml)")
    if not isinstance(raw, dict):
        raise ParamsError(f"{shown}: expected a mapping of keys at the top level; got {type(raw).__name__}")
    return raw


# -- error messages ---------------------------------------------------------------------------------------------

_UNION_TAGS = {"str", "int", "float", "bool"}


def _where(loc: tuple, raw: object = None) -> str:
    """'experiments[1] (second).workload.pgbench.clients': an experiment is named after its index (read from the
    file's own values, `raw`), so the user finds it among several without counting."""
    out = ""
    node = raw if loc and loc[0] == "experiments" else None
    for part in loc:
        if part == "[key]":  # pydantic's marker for a dict key that failed, after the key itself
            continue
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            out += f"[{part}]" + (f" ({name})" if isinstance(name, str) and name else "")
        else:
            node = node.get(part) if isinstance(node, dict) else None
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _inner(tp, part):
    """The type found at `part` (a field name, list index or dict key) inside type `tp`, if any."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part) if isinstance(part, str) else None
        return field.annotation if field else None
    if origin is list and isinstance(part, int):
        return args[0]
    if origin is dict:
        return args[1]
    if origin in (typing.Union, types.UnionType):
        return next((t for t in (_inner(a, part) for a in args) if t is not None), None)
    return None


def valid_keys(loc: tuple, model: type[BaseModel]) -> list[str]:
    """The keys a params file of `model` (pglab.params.Params) may give at `loc` (the mapping that holds them)."""
    tp = model
    for part in loc:
        tp = _inner(tp, part)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next((a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    if not (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return []
    return [k for k, f in tp.model_fields.items() if not f.exclude]


def _explain(err: dict, model: type[BaseModel]) -> str:
    loc = err["loc"]
    if err["type"] == "extra_forbidden":
        keys = valid_keys(loc[:-1], model)
        return "unknown key" + (f"; expected one of: {', '.join(keys)}" if keys else "")
    if err["type"] == "missing":
        return "required key is missing"
    msg = err["msg"].removeprefix("Value error, ")
    if loc[:2] == ("servers", "external") or isinstance(err.get("input"), dict):
        return msg  # the input may hold a dsn's password; a whole mapping says nothing the key does not
    return f"{msg}; got {err.get('input')!r}"


def messages(e: ValidationError, shown, model: type[BaseModel], raw: object = None) -> list[str]:
    """One line per problem: file, where (`_where`; `raw`: the file's values, to name list items), what was
    expected."""
    msgs: list[str] = []
    for err in e.errors():
        loc = err["loc"]
        if loc and loc[-1] in _UNION_TAGS:  # one message for a value matching no member of a union
            msg = f"{shown}: {_where(loc[:-1], raw)}: expected text, a number or true/false; got {err.get('input')!r}"
        else:
            msg = f"{shown}: {_where(loc, raw)}: {_explain(err, model)}"
        if msg not in msgs:
            msgs.append(msg)
    return msgs


REFERENCE_PROFILE = "default"  # its report is report/ and its tables data/derived/default/: both committed


def check_reference(params: CommonParams) -> None:
    """Only params/default.yaml, or a file that says `reference: true`, writes the committed reference: a copy
    that kept `profile: default` (or names no profile) would overwrite it with other settings. Checked where a
    run begins (`make report`, a notebook's session), before any server."""
    path = paths.resolve(params.source) if params.source else None
    if params.profile != REFERENCE_PROFILE or params.reference or path == paths.PARAMS / "default.yaml":
        return
    said = "profile: default" if "profile" in params.model_fields_set else "profile: not set, so 'default'"
    raise ParamsError(
        f"{params.source or 'params'}: {said}: that profile writes the committed reference (report/ and "
        f"data/derived/default/), and only params/default.yaml does; give this file its own name, e.g. "
        f"`profile: mine` (its report goes to build/report-mine/), or add `reference: true` to replace the "
        f"reference on purpose"
    )


def check_server_names(params: CommonParams, shown) -> None:
    """Two servers of one name: one would be dropped, or both would record their data under that name."""
    s = params.servers
    named = [(f"servers.installs[{i}].name", x.name) for i, x in enumerate(s.installs)]
    named += [(f"servers.external[{i}].name", x.name) for i, x in enumerate(s.external)]
    # a version is named pg<major> when fetched (installs.downloaded); an install of that name is renamed, not
    # dropped, but an external server of that name would hide it
    named += [(f"servers.versions[{i}]", f"pg{version_major(v)}") for i, v in enumerate(s.versions)]
    if s.clusters > 1:  # a name that reads as a replica's would be pooled with another server's data
        from .replicas import looks_like_replica, replica_name

        for key, name in named:
            if looks_like_replica(name) or not is_safe_name(replica_name(name, s.clusters)):
                raise ParamsError(
                    f"{shown}: {key}: with servers.clusters: {s.clusters}, expected a name that does not end in "
                    f"_c<number> (the replicas' names: {replica_name('pg17', 2)}) and leaves room for that suffix "
                    f"(at most 61 characters); {name!r} does not"
                )
    first: dict[str, str] = {}
    for key, name in named:
        if name in first and not (key.startswith("servers.versions") and first[name].startswith("servers.installs")):
            raise ParamsError(f"{shown}: {key}: expected a name no other server has; {name!r} is also {first[name]}")
        first.setdefault(name, key)

"""Building blocks of the params schema, shared by params.py and the experiment modules that define
their own section of it (ssb, pgbench, auto_explain, ...): strict models, safe names, setting dicts.

Imports nothing of the kit: the study modules import it, and params imports them."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a params file must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# -- names that become folder names (servers' clusters, run ids under data/raw) -----------------------------

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SAFE_NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, without '..', at most 64"


def is_safe_name(name: object) -> bool:
    """Whether `name` can be a folder name under the kit's own folders: never '.', '..' or a path."""
    return isinstance(name, str) and bool(SAFE_NAME.fullmatch(name)) and ".." not in name


def run_id_arg(text: str) -> str:
    """argparse's `type` for --run-id, which names a folder under data/raw/ (`make report RUN_ID=...` passes it):
    refused like a bad params key, before anything starts (argparse exits with 2)."""
    if not is_safe_name(text):
        import argparse

        raise argparse.ArgumentTypeError(f"expected {SAFE_NAME_RULE}; got {text!r}")
    return text


def _safe_name(v: str) -> str:
    if not is_safe_name(v):
        raise ValueError(f"expected a name of {SAFE_NAME_RULE}")
    return v


SafeName = Annotated[str, AfterValidator(_safe_name)]


# -- PostgreSQL settings --------------------------------------------------------------------------------------

# What the kit sets itself on every cluster it starts (cluster.py `_base_settings`, kept in step by a test),
# the files and folders it decides, and the config-file directives that would read another file: a params
# file must not move the server off 127.0.0.1 and its private socket, or away from the log the kit reads.
KIT_OWNED_SETTINGS = frozenset(
    {
        "listen_addresses",
        "port",
        "unix_socket_directories",
        "logging_collector",
        "log_destination",
        "log_directory",
        "log_filename",
        "data_directory",
        "config_file",
        "hba_file",
        "ident_file",
        "include",
        "include_dir",
        "include_if_exists",
    }
)
# A setting's name as PostgreSQL's configuration file reads it (guc-file.l: a name, or prefix.name for an
# extension's; each part a letter or _, then letters, digits and _; case-insensitive). Server settings go into the
# cluster's pglab.conf, and `postgres -C -c ...` (params_checks) would pass names that only SET and -c take
# ('x.a$b', 'a.b.c'): the file then stops the server at start with a syntax error. One rule for every setting.
SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
SETTING_NAME_RULE = (
    "letters, digits and _, not starting with a digit, optionally after an extension's prefix "
    "and a dot, as in auto_explain.log_analyze"
)


def is_setting_name(name: object) -> bool:
    """Whether `name` is a PostgreSQL setting name by `SETTING_NAME` (every settings dict in params is checked so)."""
    return isinstance(name, str) and bool(SETTING_NAME.fullmatch(name))


def setting_name_problem(name: str) -> str | None:
    """What is wrong with `name` as a setting in params (None: nothing)."""
    if not is_setting_name(name):
        return f"expected a PostgreSQL setting name: {SETTING_NAME_RULE}"
    if name.lower() in KIT_OWNED_SETTINGS:
        return f"expected a setting the kit does not set itself; it owns {', '.join(sorted(KIT_OWNED_SETTINGS))}"
    return None


def _setting_name(v: str) -> str:
    problem = setting_name_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _setting_value(v):
    # the value is written into the cluster's config file: a line break or NUL there would start a new line
    if isinstance(v, str) and any(c in v for c in "\n\r\0"):
        raise ValueError("expected a value on one line (no line breaks or NUL)")
    return v


SettingName = Annotated[str, AfterValidator(_setting_name)]
SettingValue = Annotated[str | int | float | bool, AfterValidator(_setting_value)]
Settings = dict[SettingName, SettingValue]


# -- PostgreSQL versions a run compares (downloaded when the machine lacks them) ------------------------------

MAJORS = range(10, 19)  # what a `versions` list can fetch: PostgreSQL 10 … 18
_EXACT_VERSION = re.compile(r"(\d+)\.(\d+)")


def check_version(v):
    """A major as an int (16, or "16"), or an exact version as text ("16.14")."""
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    m = _EXACT_VERSION.fullmatch(v.strip()) if isinstance(v, str) else None
    if (isinstance(v, int) and not isinstance(v, bool) and v in MAJORS) or (m and int(m.group(1)) in MAJORS):
        return v.strip() if isinstance(v, str) else v
    raise ValueError(
        f"expected PostgreSQL majors {', '.join(map(str, MAJORS))} or exact versions such as '16.14'; {v!r} is neither"
    )


def check_versions(v, allow_none: bool = False):
    if v is None and allow_none:
        return v
    if not isinstance(v, list) or (allow_none and not v):
        raise ValueError("expected a list of versions, e.g. [16, '15.8']" + (", or null" if allow_none else ""))
    out = [check_version(x) for x in v]
    if len(set(map(str, out))) != len(out):
        raise ValueError("expected each version once")
    return out


def version_major(v: int | str) -> int:
    return v if isinstance(v, int) else int(str(v).split(".")[0])


def key_error(model: type, key: str, value, expected: str):
    """A validation error at `key` of a params section (not at the section itself, as a model validator's
    ValueError is), so that the params error names it: `ssb.sf: expected ...; got 1.5`."""
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    return ValidationError.from_exception_data(
        model.__name__,
        [InitErrorDetails(type=PydanticCustomError("section_key", expected), loc=(key,), input=value)],
    )

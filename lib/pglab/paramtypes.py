"""Building blocks of the params schema, shared by params.py and the experiment modules that define
their own section of it (ssb, pgbench, auto_explain)."""

from pydantic import BaseModel, ConfigDict

SettingValue = str | int | float | bool


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a params file must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

"""What a study's stage returns when it has measured (`Study.run`): one shape for every study."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StageResult:
    steps_run: int  # timed or warm-up runs executed now (0 when resuming a finished run)
    wall_s: float
    servers: list[str]  # the servers measured (the others were skipped, with their reasons in the raw store)
    # what the stage saw beside its raw records, by name (a setup table, the servers' states, log problems):
    # the notebook shows it; derive reads the raw store, never this
    seen: dict[str, Any] = field(default_factory=dict)

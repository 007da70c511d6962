"""What loading the SSB data set needs to know, as a Protocol: the `ssb:` params section of a study
(studies.ssb.params.SsbParams) has these fields, so it satisfies it without this package importing a study."""

from __future__ import annotations

from typing import Protocol


class SsbDataset(Protocol):
    sf: float  # scale factor
    seed: int  # the generator's seed (flavor spec; dbgen's streams are fixed)
    flavor: str  # the generator's flavor: "dbgen" or "spec" (flavors.FLAVORS)
    prewarm: bool  # pg_prewarm every table after loading
    load_method: str  # "copy_freeze" or "copy"
    stage_settings: dict  # server settings while the SSB stages run (wal_level, ...)

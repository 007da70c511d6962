"""Study S4 test C
(parallel B-tree index build on SSB lineorder): CREATE INDEX on 1-4 key columns vs max_parallel_maintenance_workers:
the `parallel_index:` section of params and the study's reference numbers.

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

from .paramtypes import Strict

EXPERIMENT = "parallel_index"


class ParallelIndexParams(Strict):
    """The `parallel_index:` section of params (stub: the study's fields go here)."""

"""Study S5
(hash partitioning and Parallel Append): count(*), avg(x) over a hash-partitioned table, serial vs parallel:
the `partitioning:` section of params and the study's reference numbers.

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

from .paramtypes import Strict

EXPERIMENT = "partitioning"


class PartitioningParams(Strict):
    """The `partitioning:` section of params (stub: the study's fields go here)."""

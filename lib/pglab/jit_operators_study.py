"""Study S4 test 1
(JIT per operator): a generated numeric table, SELECT <agg>(col) per operator, JIT off vs on:
the `jit_operators:` section of params and the study's reference numbers.

This module is imported by `pglab.params`, so it imports nothing of the kit that imports params.
"""

from __future__ import annotations

from .paramtypes import Strict

EXPERIMENT = "jit_operators"


class JitOperatorsParams(Strict):
    """The `jit_operators:` section of params (stub: the study's fields go here)."""

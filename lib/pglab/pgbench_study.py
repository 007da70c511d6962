"""(being written)"""

from .paramtypes import Strict


class PgbenchParams(Strict):
    """The `pgbench:` section of params."""

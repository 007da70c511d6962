"""(being written)"""

from .paramtypes import Strict


class AutoExplainParams(Strict):
    """The `auto_explain:` section of params."""

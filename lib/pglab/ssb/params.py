"""The `ssb:` section of params."""

from ..paramtypes import Strict


class SsbParams(Strict):
    """The `ssb:` section of params."""

"""The one exception the EXPLAIN parsers raise."""


class ExplainParseError(ValueError):
    """Input that is not a whole, well-formed EXPLAIN plan. The message names the line (text) or the
    position / node path (JSON) where parsing stopped: a plan is never half-parsed silently."""

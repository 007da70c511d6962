"""`python -m pglab <command> [options]`: the kit's commands that are not a module of their own.

derive   every derived table of a run again, from its raw data alone (python -m pglab derive --help)"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {"derive": "pglab.derive"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""The parts of dbgen's dists.dss (and its fixed tables) that SSB's columns draw from, in its order.

Every list SSB picks from has equal weights, so dbgen's weighted pick is a uniform index: only the order
matters. Most lists are in the order words.py already has; the containers are not (PACK before PKG).
"""

import datetime as dt

import numpy as np

from .. import words

COLORS = words.COLORS
PART_TYPES = words.PART_TYPES
CONTAINERS = tuple(
    f"{a} {b}" for a in words.CONTAINER_SYLLABLE_1 for b in ("CASE", "BOX", "BAG", "JAR", "PACK", "PKG", "CAN", "DRUM")
)
NATION_NAMES = words.NATION_NAMES
MARKET_SEGMENTS = words.MARKET_SEGMENTS
ORDER_PRIORITIES = words.ORDER_PRIORITIES
SHIP_MODES = words.SHIP_MODES
# a_rnd's 64 symbols, picked by 6 bits of a draw at a time
ALPHA_NUM = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ,", dtype=np.uint8)

FIRST_DAY = dt.date(1992, 1, 1)
CALENDAR_DAYS = 2557  # 1992-01-01 .. 1998-12-31
ORDER_DAYS = CALENDAR_DAYS - 151  # order dates stop 121 ship + 30 receipt days before the end
COMMIT_LAG = (30, 90)

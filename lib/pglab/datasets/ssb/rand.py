"""Per-chunk random streams whose output depends only on (seed, table, chunk), never on the machine.

Rows are built from raw PCG64 outputs seeded through SeedSequence -- both fixed, documented algorithms --
with our own mapping to integer ranges, because NumPy does not promise that Generator.integers keeps its
stream across releases. Raw words are read as little-endian explicitly so big-endian machines agree.
"""

import numpy as np
from numpy.random import PCG64, SeedSequence

# Table ids mixed into the seed so tables never share a stream (and stay stable if TABLES is reordered).
TABLE_IDS = {"part": 1, "supplier": 2, "customer": 3, "date": 4, "lineorder": 5}

_SHIFT32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFF_FFFF)
# Up to this span a 32-bit draw suffices: multiply-shift bias <= span / 2^32 per value (< 2e-5 relative).
_SMALL_SPAN = 1 << 16


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


class ChunkRandom:
    """Uniform integer draws for one chunk of one table."""

    def __init__(self, seed: int, table: str, chunk_index: int):
        self._bits = PCG64(SeedSequence([check_seed(seed), TABLE_IDS[table], chunk_index]))

    def ints(self, low: int, high: int, n: int, dtype=np.int32) -> np.ndarray:
        """n independent uniform integers in [low, high] (both inclusive)."""
        span = high - low + 1
        if span < 1 or span > 1 << 32:
            raise ValueError(f"cannot draw from [{low}, {high}]")
        if span <= _SMALL_SPAN:
            drawn = self._small(span, n)
        else:
            drawn = self._large(span, n)
        out = drawn.astype(dtype)
        if low:
            out += low
        return out

    def _raw(self, n: int) -> np.ndarray:
        return self._bits.random_raw(n).astype("<u8", copy=False)

    def _small(self, span: int, n: int) -> np.ndarray:
        # Each 64-bit word gives two 32-bit draws, mapped to [0, span) by multiply-shift (no rejection).
        words = self._raw((n + 1) // 2).view("<u4")[:n].astype(np.uint64)
        words *= np.uint64(span)
        words >>= _SHIFT32
        return words

    def _large(self, span: int, n: int) -> np.ndarray:
        # floor(word * span / 2^64) computed exactly from the word's two halves: bias <= span / 2^64.
        words = self._raw(n)
        low = words & _LOW32
        low *= np.uint64(span)
        low >>= _SHIFT32
        words >>= _SHIFT32
        words *= np.uint64(span)
        words += low
        words >>= _SHIFT32
        return words

"""dbgen's random streams: Park & Miller's "minimal standard" generator, x' = 16807 x mod (2^31 - 1).

Each column has its own stream with a fixed start value, and every row of a table moves a stream on by a
fixed number of draws (dbgen's per-row "boundary"), used or not. So the draw a row needs sits at a known
position, and draw p of a stream is start * 16807^(p + 1) mod (2^31 - 1): any row of any chunk can be made
without making the rows before it. Arrays here hold values below 2^31 in uint64, so a product of two fits.
"""

from functools import cache

import numpy as np

MODULUS = 2**31 - 1
MULTIPLIER = 16807
_M = np.uint64(MODULUS)
_SHIFT = np.uint64(31)
_DM = float(MODULUS)

# Start values of the streams SSB's columns use, by dbgen's stream number (rnd.h's Seed table).
START = {
    "P_MFG": 1,
    "P_BRND": 46831694,
    "P_TYPE": 1841581359,
    "P_SIZE": 1193163244,
    "P_CNTR": 727633698,
    "C_ADDR": 881155353,
    "C_NTRG": 1489529863,
    "C_PHNE": 1521138112,
    "C_MSEG": 1140279430,
    "S_ADDR": 706178559,
    "S_NTRG": 110356601,
    "P_NAME": 709314158,
    "O_ODATE": 1066728069,
    "O_CKEY": 851767375,
    "O_PRIO": 591449447,
    "O_LCNT": 1434868289,
    "L_QTY": 209208115,
    "L_DCNT": 554590007,
    "L_TAX": 721958466,
    "L_SMODE": 675466456,
    "L_PKEY": 1808217256,
    "L_SKEY": 2095021727,
    "L_CDTE": 904914315,
    "P_CAT": 637858759,
    "P_CITY": 1495190827,
}


def start_of(stream: str, position: int) -> int:
    """The value draw number `position` (0-based) of `stream` gives, as a Python int."""
    return START[stream] * pow(MULTIPLIER, position + 1, MODULUS) % MODULUS


def mulmod(x: np.ndarray, y) -> np.ndarray:
    """x * y mod (2^31 - 1) for values below 2^31 (uint64), by the Mersenne-prime fold."""
    t = x * (y if isinstance(y, np.ndarray) else np.uint64(y))
    r = t & _M
    t >>= _SHIFT
    r += t
    # r < 2 M: subtract M where r >= M (r - M wraps around to a huge number where r < M)
    return np.minimum(r, r - _M, out=r)


@cache
def _powers(n: int) -> np.ndarray:
    out = np.ones(n, dtype=np.uint64)
    filled = 1
    while filled < n:  # doubling: out[k:2k] = out[:k] * 16807^k
        step = min(filled, n - filled)
        out[filled : filled + step] = mulmod(out[:step], pow(MULTIPLIER, filled, MODULUS))
        filled += step
    out.setflags(write=False)
    return out


def powers(n: int) -> np.ndarray:
    """16807^j mod (2^31 - 1) for j = 0 .. n-1 (cached; rounded up so chunks share tables)."""
    size = 1 << max(10, (n - 1).bit_length())
    return _powers(size)[:n]


def draws(stream: str, first: int, count: int) -> np.ndarray:
    """Draws first .. first + count - 1 of a stream (uint64)."""
    return mulmod(powers(count), start_of(stream, first))


def draws_at(stream: str, first: int, offsets: np.ndarray) -> np.ndarray:
    """Draws first + offsets (offsets >= 0, int array) of a stream."""
    return mulmod(powers(int(offsets.max()) + 1 if len(offsets) else 1)[offsets], start_of(stream, first))


def uniform(values: np.ndarray, low: int, high: int, dtype=np.int32) -> np.ndarray:
    """dbgen's UnifInt: low + (long)((value / M) * (high - low + 1)), in the same double arithmetic."""
    scaled = values / _DM
    scaled *= float(high - low + 1)
    out = scaled.astype(dtype)
    if low:
        out += low
    return out


def keep_freed_memory() -> None:
    """glibc: serve the chunks' multi-megabyte arrays from the heap and keep it, instead of mapping and
    unmapping fresh pages for each one; that page-fault traffic cost about a fifth of lineorder's time."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    for option, value in ((-3, 64 << 20), (-1, 256 << 20), (-2, 64 << 20)):  # mmap / trim threshold, top pad
        libc.mallopt(option, value)

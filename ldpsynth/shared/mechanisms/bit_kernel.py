"""Column counts of packed bitmaps in one pass (numba, optional): Harley-Seal carry-save counters.

For uint64 rows ``w[i, j]`` the count of bit p of word j over the rows is kept as bit-sliced
counters ``ones, twos, fours, eights`` (one word each per j) plus byte-lane counters of 16s:
each group of 16 rows goes through 15 carry-save adders (a full adder on 64 lanes:
``sum = a ^ b ^ c``, ``carry = (a & b) | ((a ^ b) & c)``), which leave the group's 16s in one word
``s``; ``(s >> b) & 0x0101...`` adds them to eight byte-lane words per j, emptied into the int64
counts every 255 groups (a byte lane then holds at most 255). The loop over j is vectorised by
LLVM; every row word is read once. Exact integer arithmetic; ``counts`` is added to, not set.

numba is optional (:mod:`ldpsynth.shared.jit`): without it :data:`KERNEL` is None and
:func:`ldpsynth.shared.mechanisms.bits.column_counts` takes its numpy path (the same counts).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpsynth.shared.jit import compiled, numba

__all__ = ["KERNEL"]

_LOW_BITS = np.uint64(0x0101010101010101)
#: Groups of 16 rows whose 16s the byte lanes hold before they are emptied (255 fits a byte).
_SPILLS = 255


def _csa(a: np.uint64, b: np.uint64, c: np.uint64) -> tuple[np.uint64, np.uint64]:  # pragma: no cover - numba
    """A carry-save adder on 64 lanes: (carry, sum) of a + b + c."""
    u = a ^ b
    return (a & b) | (u & c), u ^ c


_csa = compiled(_csa, inline=True)


def _eight_rows(w: np.ndarray, i: int, j: int, o: np.uint64, t: np.uint64, f: np.uint64
                ) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:  # pragma: no cover - numba
    """Rows ``i .. i + 7`` of word j added to the ones, twos and fours counters by 7 carry-save adders:
    (the carry of weight 8, ones, twos, fours)."""
    ta, o = _csa(o, w[i, j], w[i + 1, j])
    tb, o = _csa(o, w[i + 2, j], w[i + 3, j])
    fa, t = _csa(t, ta, tb)
    ta, o = _csa(o, w[i + 4, j], w[i + 5, j])
    tb, o = _csa(o, w[i + 6, j], w[i + 7, j])
    fb, t = _csa(t, ta, tb)
    e, f = _csa(f, fa, fb)
    return e, o, t, f


_eight_rows = compiled(_eight_rows, inline=True)


@compiled
def _empty_lanes(lanes: np.ndarray, weight: int, counts: np.ndarray) -> None:  # pragma: no cover - numba
    """Add ``weight`` times the byte-lane counters ``lanes[b, j]`` (bit ``8 m + b`` of word j in byte m)
    to ``counts`` and zero them."""
    for j in range(lanes.shape[1]):
        for b in range(8):
            x = lanes[b, j]
            for m in range(8):
                counts[64 * j + 8 * m + b] += weight * np.int64((x >> np.uint64(8 * m)) & np.uint64(255))
            lanes[b, j] = 0


@compiled
def _add_words(words: np.ndarray, weight: int, counts: np.ndarray) -> None:  # pragma: no cover - numba
    """Add ``weight`` times the bits of one row of words to ``counts``."""
    for j in range(words.shape[0]):
        x = words[j]
        for p in range(64):
            counts[64 * j + p] += weight * np.int64((x >> np.uint64(p)) & np.uint64(1))


@compiled
def _column_counts(w: np.ndarray, counts: np.ndarray) -> None:  # pragma: no cover - compiled by numba
    """``counts[64 j + p] +=`` the number of rows of ``w`` (n, W) uint64 with bit p of word j set."""
    n, width = w.shape
    ones = np.zeros(width, np.uint64)
    twos = np.zeros(width, np.uint64)
    fours = np.zeros(width, np.uint64)
    eights = np.zeros(width, np.uint64)
    lanes = np.zeros((8, width), np.uint64)
    spills, i = 0, 0
    while i + 16 <= n:
        for j in range(width):
            ea, o, t, f = _eight_rows(w, i, j, ones[j], twos[j], fours[j])
            eb, o, t, f = _eight_rows(w, i + 8, j, o, t, f)
            s, e = _csa(eights[j], ea, eb)
            ones[j], twos[j], fours[j], eights[j] = o, t, f, e
            for b in range(8):
                lanes[b, j] += (s >> np.uint64(b)) & _LOW_BITS
        spills += 1
        if spills == _SPILLS:
            _empty_lanes(lanes, 16, counts)
            spills = 0
        i += 16
    _empty_lanes(lanes, 16, counts)
    for r in range(i, n):
        _add_words(w[r], 1, counts)
    _add_words(ones, 1, counts)
    _add_words(twos, 2, counts)
    _add_words(fours, 4, counts)
    _add_words(eights, 8, counts)


#: The compiled kernel ``(w, counts) -> None``, or None without numba.
KERNEL: Callable[[np.ndarray, np.ndarray], None] | None = None if numba is None else _column_counts

"""The Walsh-Hadamard transform in place (numba, optional): cache-sized blocks first, then radix-4 passes.

The butterflies :math:`(x_j, x_{j+h}) \\to (x_j + x_{j+h}, x_j - x_{j+h})` of every level h < ``_BLOCK`` stay
within aligned blocks of ``_BLOCK`` entries, so each block runs all of them while it sits in cache; the levels
from ``_BLOCK`` up go two at a time over the whole vector (radix 4, as
:func:`~ldpsynth.shared.mechanisms.bits.walsh_hadamard`'s numpy passes). Integer adds only, no temporary arrays:
exact (the caller picks int32 only when no partial sum can leave it), so the same transform as the numpy passes.

numba is optional (:mod:`ldpsynth.shared.jit`): without it :data:`KERNEL` is None and the numpy passes run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpsynth.shared.jit import compiled, numba

__all__ = ["KERNEL"]

#: Entries of a block whose low levels run together (64 KiB of int32: within a core's L2).
_BLOCK = 1 << 14


def _levels(x: np.ndarray, lo: int, hi: int, h: int, top: int) -> None:  # pragma: no cover - numba
    """The levels h, 2h, ... below ``top`` of ``x[lo:hi]`` (its length a multiple of ``top``): two at a time
    (radix 4: :math:`(a+b)+(c+d), (a-b)+(c-d), (a+b)-(c+d), (a-b)-(c-d)`), the last alone when their number is odd."""
    while 4 * h <= top:
        for i in range(lo, hi, 4 * h):
            for j in range(i, i + h):
                a, b, c, d = x[j], x[j + h], x[j + 2 * h], x[j + 3 * h]
                s01, d01, s23, d23 = a + b, a - b, c + d, c - d
                x[j], x[j + h], x[j + 2 * h], x[j + 3 * h] = s01 + s23, d01 + d23, s01 - s23, d01 - d23
        h *= 4
    if h < top:
        for i in range(lo, hi, 2 * h):
            for j in range(i, i + h):
                a, b = x[j], x[j + h]
                x[j], x[j + h] = a + b, a - b


_levels = compiled(_levels, inline=True)


@compiled
def _transform(out: np.ndarray) -> None:  # pragma: no cover - compiled by numba
    """Each row of ``out`` ``(rows, 2^t)`` (int32 or int64, C order) replaced by its Walsh-Hadamard transform."""
    rows, size = out.shape
    block = min(size, _BLOCK)
    for r in range(rows):
        x = out[r]
        for lo in range(0, size, block):
            _levels(x, lo, lo + block, 1, block)
        _levels(x, 0, size, block, size)


#: The compiled kernel ``(out) -> None`` (in place), or None without numba.
KERNEL: Callable[[np.ndarray], None] | None = None if numba is None else _transform

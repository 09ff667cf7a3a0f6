"""Bit-level kernels shared by the oracles: packed bitmaps, the Walsh-Hadamard transform, GF(2)-linear maps.

All exact integer arithmetic (int64 / uint64), vectorized over rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "pack_rows",
    "column_counts",
    "grouped_column_counts",
    "row_popcounts",
    "parity",
    "walsh_hadamard",
    "LinearMap",
]

#: Rows summed at once by :func:`_lane_counts`: a byte lane of a uint64 then counts at most 255 ones.
_LANE_ROWS = 255
_LOW_BITS = np.uint64(0x0101010101010101)
#: Words of bitmaps per chunk of :func:`_lane_counts` (512 KiB: each of its eight passes stays in cache).
_CHUNK_WORDS = 1 << 16
#: :math:`2^{31}`: a Walsh-Hadamard transform whose inputs' absolute sum is below it runs on int32.
_INT32 = 1 << 31


def pack_rows(bits: np.ndarray) -> np.ndarray:
    """Boolean rows ``(n, k)`` as bitmaps ``(n, ceil(k/8))`` uint8: value v is bit ``v % 8`` of byte
    ``v // 8`` (little bit order)."""
    return np.packbits(bits, axis=1, bitorder="little")


def _kernel() -> Callable[[np.ndarray, np.ndarray], None] | None:
    """The compiled column-count kernel (:mod:`ldpsynth.shared.mechanisms.bit_kernel`), or None without numba.
    Imported on first use: ``import ldpsynth`` loads no numba (nor the scipy numba loads)."""
    from . import bit_kernel

    return bit_kernel.KERNEL


def _words(bitmaps: np.ndarray) -> np.ndarray:
    """The bitmaps ``(n, B)`` as uint64 words ``(n, ceil(B/8))``: a view, or a zero-padded copy."""
    n, width = bitmaps.shape
    if width % 8 == 0 and bitmaps.flags.c_contiguous:
        return bitmaps.view(np.uint64)
    padded = np.zeros((n, -(-width // 8) * 8), np.uint8)
    padded[:, :width] = bitmaps
    return padded.view(np.uint64)


def column_counts(bitmaps: np.ndarray, size: int) -> np.ndarray:
    """How many rows of the bitmaps ``(n, B)`` (:func:`pack_rows`) have each of the first ``size`` bits set.

    With numba, one pass of carry-save counters (:mod:`ldpsynth.shared.mechanisms.bit_kernel`);
    otherwise :func:`_lane_counts`."""
    w = _words(bitmaps)
    counts = np.zeros(w.shape[1] * 64, np.int64)
    (_kernel() or _lane_counts)(w, counts)
    return counts[:size]


def _lane_counts(w: np.ndarray, counts: np.ndarray) -> None:
    """``counts[64 j + p] +=`` the rows of the words ``w`` (n, W) with bit p of word j set, in numpy.

    SWAR over 64-bit words: for each of the 8 bit positions of a byte, ``(word >> b) & 0x0101...``
    holds one 0/1 per byte lane, and up to 255 such words add without carrying from lane to lane. A
    chunk of 255 M rows is viewed as 255 rows of M row-words each (rows i, i + M, ... share a lane),
    so every sum runs along contiguous memory. Eight passes over the packed bytes, no unpacked copy.
    """
    n, words = w.shape
    by_bit = counts.reshape(words * 8, 8)   # [byte index, bit within the byte]
    group = max(1, _CHUNK_WORDS // (_LANE_ROWS * words))
    step = _LANE_ROWS * group
    whole = n - n % step
    parts = [w[start:start + step].reshape(_LANE_ROWS, group * words) for start in range(0, whole, step)]
    parts += [w[start:min(start + _LANE_ROWS, n)] for start in range(whole, n, _LANE_ROWS)]
    for part in parts:
        for bit in range(8):
            lanes = ((part >> np.uint64(bit)) & _LOW_BITS).sum(axis=0, dtype=np.uint64)
            by_bit[:, bit] += lanes.view(np.uint8).reshape(-1, words * 8).sum(axis=0, dtype=np.int64)


def grouped_column_counts(bitmaps: np.ndarray, groups: np.ndarray, count: int, size: int) -> np.ndarray:
    """:func:`column_counts` of the rows of each group: ``(count, size)`` int64, row i in group ``groups[i]``.

    One group is :func:`column_counts` itself; otherwise the rows are sorted by group and each group's
    run of rows is counted by the kernel (with numba), or unpacked a chunk at a time and summed
    (``np.add.reduceat``)."""
    if count == 1:
        return column_counts(bitmaps, size)[None, :]
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    kernel = _kernel()
    if kernel is not None and len(order):
        w = _words(bitmaps)[order]
        out = np.zeros((count, w.shape[1] * 64), np.int64)
        runs = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))).tolist()
        for begin, end in zip(runs, [*runs[1:], len(order)], strict=True):
            kernel(w[begin:end], out[ordered[begin]])
        return np.ascontiguousarray(out[:, :size])
    out = np.zeros((count, size), np.int64)
    rows = max(1, _CHUNK_WORDS * 8 // max(size, 1))
    for start in range(0, len(order), rows):
        part, labels = order[start:start + rows], ordered[start:start + rows]
        bits = np.unpackbits(bitmaps[part], axis=1, count=size, bitorder="little")
        firsts = np.flatnonzero(np.concatenate(([True], labels[1:] != labels[:-1])))
        out[labels[firsts]] += np.add.reduceat(bits, firsts, axis=0, dtype=np.int64)
    return out


def row_popcounts(bitmaps: np.ndarray) -> np.ndarray:
    """The number of set bits of each bitmap row, int64."""
    return np.bitwise_count(bitmaps).sum(axis=1, dtype=np.int64)


def parity(words: np.ndarray) -> np.ndarray:
    """The parity (0/1, uint64) of the set bits of each uint64."""
    return np.bitwise_count(words).astype(np.uint64) & np.uint64(1)


def walsh_hadamard(values: np.ndarray) -> np.ndarray:
    """The Walsh-Hadamard transform :math:`\\hat f(v) = \\sum_u f(u) (-1)^{|u \\wedge v|}` of int64
    vectors of length :math:`2^t` along the last axis (a new array; exact). Two of the t passes of butterflies
    at a time (radix 4: :math:`(a+b)+(c+d), (a-b)+(c-d), (a+b)-(c+d), (a-b)-(c-d)`), the last alone when t is odd:
    half the passes over memory. Every partial sum is at most :math:`\\sum_u |f(u)|` in size, so when that is
    below :math:`2^{31}` (as for a tally of reports) the passes run on int32: half the memory, still exact. With numba,
    :mod:`~ldpsynth.shared.mechanisms.wht_kernel` runs the same butterflies in place, a cache-sized block at a time."""
    values = np.asarray(values, dtype=np.int64)
    narrow = values.size > 0 and -_INT32 < values.min() and values.max() < _INT32 and bool(
        (np.abs(values).sum(axis=-1) < _INT32).all())
    out = values.astype(np.int32) if narrow else values.copy()
    from . import wht_kernel  # on first use: ``import ldpsynth`` loads no numba

    kernel = wht_kernel.KERNEL
    if kernel is not None and out.size:            # in place, cache-blocked (the same transform)
        kernel(out.reshape(-1, out.shape[-1]))
        return out.astype(np.int64, copy=False)
    size, half = out.shape[-1], 1
    lead = out.shape[:-1]
    while 4 * half <= size:
        quads = out.reshape(*lead, -1, 4, half)
        a, b, c, d = (quads[..., i, :] for i in range(4))
        s01, d01, s23, d23 = a + b, a - b, c + d, c - d
        np.add(s01, s23, out=a)
        np.add(d01, d23, out=b)
        np.subtract(s01, s23, out=c)
        np.subtract(d01, d23, out=d)
        half *= 4
    if half < size:
        pairs = out.reshape(*lead, -1, 2, half)
        low = pairs[..., 0, :].copy()
        pairs[..., 0, :] += pairs[..., 1, :]
        np.subtract(low, pairs[..., 1, :], out=pairs[..., 1, :])
    return out.astype(np.int64, copy=False)


class LinearMap:
    """A GF(2)-linear map of t-bit words to t-bit words, applied to uint64 arrays by byte tables.

    ``columns[m]`` is the image of the word with only bit m set; the map of x is the XOR of the
    columns of x's set bits, looked up a byte at a time.
    """

    def __init__(self, columns: list[int]):
        self.bits = len(columns)
        self._tables = []
        for start in range(0, self.bits, 8):
            table = np.zeros(256, np.uint64)
            for m, column in enumerate(columns[start:start + 8]):
                table[np.bitwise_and(np.arange(256), 1 << m) != 0] ^= np.uint64(column)
            self._tables.append(table)

    @property
    def tables(self) -> np.ndarray:
        """The byte tables, ``(ceil(bits/8), 256)`` uint64: the map of x is the XOR over i of
        ``tables[i, byte i of x]``."""
        return np.stack(self._tables)

    def __call__(self, words: np.ndarray) -> np.ndarray:
        out = np.zeros(words.shape, np.uint64)
        for i, table in enumerate(self._tables):
            out ^= table[((words >> np.uint64(8 * i)) & np.uint64(255)).astype(np.intp)]
        return out

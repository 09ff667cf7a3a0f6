"""Strings as fixed-length byte codes: UTF-8, at most ``max_bytes`` bytes, padded with 0x00.

A value v is encoded as :math:`\\mathrm{code}(v) = \\mathrm{utf8}(v)[:m'] \\,\\|\\, 0^{m - m'}` where m is
``max_bytes`` and m' the largest length ≤ m that ends on a character boundary (truncation never splits a
character, so every code decodes). The padding byte 0x00 never occurs in UTF-8 except as U+0000, which is
refused, so a code decodes back by stripping its trailing zeros. Read as a big-endian bit string of 8m
bits, a code's first b bits are its *prefix* of b bits: the prefix-extension protocol discovers codes
b bits at a time (:mod:`~ldpsynth.shared.heavy_hitters.rounds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_int

__all__ = ["PAD", "MAX_BYTES", "StringEncoding", "truncate_utf8", "prefix_bytes", "bit_fragment"]

#: The padding byte.
PAD = 0
#: The largest ``max_bytes`` (a code of 512 bits).
MAX_BYTES = 64
#: Widest fragment :func:`bit_fragment` extracts.
MAX_FRAGMENT_BITS = 32


def truncate_utf8(data: bytes, max_bytes: int) -> bytes:
    """The longest prefix of the UTF-8 ``data`` of at most ``max_bytes`` bytes that ends on a character
    boundary (a continuation byte ``0b10xxxxxx`` never starts a character).

    >>> truncate_utf8("héllo".encode(), 2)
    b'h'
    """
    if len(data) <= max_bytes:
        return data
    end = max_bytes
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[:end]


@dataclass(frozen=True)
class StringEncoding:
    """Strings to codes of ``max_bytes`` bytes and back (module docstring).

    >>> enc = StringEncoding(4)
    >>> codes = enc.encode(["ab", "été!"])
    >>> codes.tolist()
    [[97, 98, 0, 0], [195, 169, 116, 0]]
    >>> enc.decode(codes)
    ['ab', 'ét']
    """

    max_bytes: int

    def __post_init__(self) -> None:
        check_int(self.max_bytes, "max_bytes", 1, MAX_BYTES)

    @property
    def bits(self) -> int:
        """Bits of a code, 8m."""
        return 8 * self.max_bytes

    def encode_one(self, value: str, position: int | None = None) -> bytes:
        """The code of one string (``max_bytes`` bytes), refusing a non-string, U+0000 and text with no UTF-8
        form (lone surrogates); the error names ``values`` and never shows the value."""
        legal = "strings of Unicode scalar values without U+0000 (UTF-8, truncated to whole characters)"
        if not isinstance(value, str):
            raise ValidationError("values", legal, f"got a {type(value).__name__}", position)
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("values", legal, "a lone surrogate", position) from None
        if PAD in data:
            raise ValidationError("values", legal, "contains U+0000 (the padding byte)", position)
        return truncate_utf8(data, self.max_bytes).ljust(self.max_bytes, b"\x00")

    def encode(self, values: Sequence[str]) -> np.ndarray:
        """The codes of ``values``: uint8 ``(n, max_bytes)``."""
        joined = b"".join(self.encode_one(v, i) for i, v in enumerate(values))
        return np.frombuffer(joined, np.uint8).reshape(len(values), self.max_bytes).copy()

    def check_codes(self, codes: npt.ArrayLike) -> np.ndarray:
        """``codes`` as uint8 ``(n, max_bytes)``, or a ValidationError naming ``codes``."""
        arr = np.asarray(codes)
        if arr.ndim != 2 or arr.shape[1] != self.max_bytes or arr.dtype != np.uint8:
            raise ValidationError("codes", f"a uint8 array of shape (n, {self.max_bytes})",
                                  f"got shape {arr.shape}, dtype {arr.dtype}")
        return arr

    def decode(self, codes: npt.ArrayLike) -> list[str]:
        """The strings of ``codes`` (trailing padding stripped; a byte sequence cut inside a character,
        as a prefix can be, decodes with U+FFFD in its place)."""
        arr = self.check_codes(codes)
        return [bytes(row).rstrip(b"\x00").decode("utf-8", errors="replace") for row in arr]


def prefix_bytes(codes: np.ndarray, bits: int) -> np.ndarray:
    """The first ``bits`` bits of each code as ``(n, ceil(bits/8))`` uint8, the bits after them zeroed."""
    width = -(-bits // 8)
    out = np.ascontiguousarray(codes[:, :width])
    if bits % 8:
        out = out.copy()
        out[:, -1] &= np.uint8((0xFF << (8 - bits % 8)) & 0xFF)
    return out


def bit_fragment(codes: np.ndarray, start: int, width: int) -> np.ndarray:
    """Bits ``[start, start + width)`` of each code (big-endian bit order) as int64 in ``[0, 2^width)``.

    >>> bit_fragment(np.array([[0b10110000, 0xFF]], np.uint8), 1, 4).tolist()
    [6]
    """
    check_int(width, "width", 1, MAX_FRAGMENT_BITS)
    first, last = start // 8, (start + width - 1) // 8
    word = np.zeros(len(codes), np.uint64)
    for column in range(first, last + 1):
        word = (word << np.uint64(8)) | codes[:, column].astype(np.uint64)
    shift = 8 * (last + 1) - (start + width)
    return ((word >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)

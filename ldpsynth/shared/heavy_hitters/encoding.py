"""Strings as fixed-length codes: UTF-8 bytes or a declared alphabet's symbols, padded with symbol 0.

A value is a sequence of at most ``max_length`` symbols of s bits, then the padding symbol 0 up to
``max_length``; the code is the big-endian bit string of the :math:`B = s\\cdot\\texttt{max\\_length}`
bits, in :math:`\\lceil B/8 \\rceil` bytes (bits after B zero). Read from the left, a code's first b bits
are its *prefix* of b bits: the prefix-extension protocol discovers codes b bits at a time
(:mod:`~ldpsynth.shared.heavy_hitters.rounds`).

* ``alphabet`` None (UTF-8): a symbol is a byte (s = 8) of :math:`\\mathrm{utf8}(v)[:m']`, m' the largest
  length ≤ ``max_length`` bytes that ends on a character boundary (truncation never splits a
  character, so every code decodes). 0x00 occurs in UTF-8 only as U+0000, which is refused, so the
  padding is unambiguous.
* ``alphabet`` a string of A distinct characters: symbol i + 1 is its i-th character,
  :math:`s = \\lceil \\log_2 (A + 1) \\rceil`; a value is truncated to its first ``max_length``
  characters; a character outside the alphabet is refused.

The server knows which codes can occur (:meth:`StringEncoding.valid_prefixes`): every symbol is legal
(an alphabet index ≤ A; a byte that occurs in UTF-8, not 0xC0, 0xC1, 0xF5-0xFF) and no symbol but 0
follows a 0. Cells whose prefix breaks this rule are never a candidate.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_int

__all__ = ["PAD", "MAX_LENGTH", "MAX_BITS", "StringEncoding", "truncate_utf8", "prefix_bytes", "bit_fragment"]

#: The padding byte.
PAD = 0
#: The largest ``max_length`` (bytes or characters).
MAX_LENGTH = 64
#: The largest code, in bits.
MAX_BITS = 512
#: Bytes that never occur in UTF-8.
_NOT_UTF8 = [0xC0, 0xC1, *range(0xF5, 0x100)]
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
    """Strings to codes and back (module docstring).

    >>> enc = StringEncoding(4)
    >>> codes = enc.encode(["ab", "été!"])
    >>> codes.tolist()
    [[97, 98, 0, 0], [195, 169, 116, 0]]
    >>> enc.decode(codes)
    ['ab', 'ét']
    >>> letters = StringEncoding(3, "abc")
    >>> letters.symbol_bits, letters.encode(["ca", "b"]).tolist(), letters.decode(letters.encode(["cab"]))
    (2, [[208], [128]], ['cab'])
    """

    max_length: int
    alphabet: str | None = None

    def __post_init__(self) -> None:
        check_int(self.max_length, "max_length", 1, MAX_LENGTH)
        if self.alphabet is not None:
            a = self.alphabet
            if not isinstance(a, str) or not a or len(set(a)) != len(a) or len(a) > 255:
                raise ValidationError("alphabet", "a string of 1 to 255 distinct characters", "got another value")
            if self.bits > MAX_BITS:
                raise ValidationError("max_length", f"at most {MAX_BITS // self.symbol_bits} characters for this "
                                      "alphabet", f"got {self.max_length}")

    @property
    def symbol_bits(self) -> int:
        """s: 8 (UTF-8), or :math:`\\lceil \\log_2(A + 1) \\rceil`."""
        return 8 if self.alphabet is None else len(self.alphabet).bit_length()

    @property
    def bits(self) -> int:
        """B, the bits of a code."""
        return self.symbol_bits * self.max_length

    @property
    def code_bytes(self) -> int:
        """Bytes of a code, :math:`\\lceil B/8 \\rceil`."""
        return -(-self.bits // 8)

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {ch: i + 1 for i, ch in enumerate(self.alphabet or "")}

    def symbols_of(self, value: object, position: int | None = None) -> bytes:
        """The symbols of one string (``max_length`` of them, padded), refusing a non-string and, for UTF-8,
        U+0000 and text with no UTF-8 form (lone surrogates), for an alphabet, a character outside it; the
        error names ``values`` and never shows the value."""
        if self.alphabet is not None:
            legal = f"strings over the collection's alphabet of {len(self.alphabet)} characters"
            if not isinstance(value, str):
                raise ValidationError("values", legal, f"got a {type(value).__name__}", position)
            try:
                return bytes(self._index[ch] for ch in value[:self.max_length]).ljust(self.max_length, b"\x00")
            except KeyError:
                raise ValidationError("values", legal, "a character outside the alphabet", position) from None
        legal = "strings of Unicode scalar values without U+0000 (UTF-8, truncated to whole characters)"
        if not isinstance(value, str):
            raise ValidationError("values", legal, f"got a {type(value).__name__}", position)
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("values", legal, "a lone surrogate", position) from None
        if PAD in data:
            raise ValidationError("values", legal, "contains U+0000 (the padding byte)", position)
        return truncate_utf8(data, self.max_length).ljust(self.max_length, b"\x00")

    def _pack(self, symbols: np.ndarray) -> np.ndarray:
        if self.alphabet is None:
            return symbols
        s = self.symbol_bits
        bits = (symbols[:, :, None] >> np.arange(s - 1, -1, -1, dtype=np.uint8)) & 1
        return np.packbits(bits.reshape(len(symbols), -1), axis=1)

    def _unpack(self, codes: np.ndarray) -> np.ndarray:
        if self.alphabet is None:
            return codes
        bits = np.unpackbits(codes, axis=1, count=self.bits).reshape(len(codes), self.max_length, self.symbol_bits)
        return (bits.astype(np.uint8) << np.arange(self.symbol_bits - 1, -1, -1, dtype=np.uint8)).sum(
            axis=2, dtype=np.uint8)

    def encode_one(self, value: str, position: int | None = None) -> np.ndarray:
        """The code of one string: uint8 ``(code_bytes,)``."""
        return self._pack(np.frombuffer(self.symbols_of(value, position), np.uint8)[None, :])[0]

    def encode(self, values: Sequence[str]) -> np.ndarray:
        """The codes of ``values``: uint8 ``(n, code_bytes)``."""
        joined = b"".join(self.symbols_of(v, i) for i, v in enumerate(values))
        return self._pack(np.frombuffer(joined, np.uint8).reshape(len(values), self.max_length))

    def check_codes(self, codes: npt.ArrayLike) -> np.ndarray:
        """``codes`` as uint8 ``(n, code_bytes)``, or a ValidationError naming ``codes``."""
        arr = np.asarray(codes)
        if arr.ndim != 2 or arr.shape[1] != self.code_bytes or arr.dtype != np.uint8:
            raise ValidationError("codes", f"a uint8 array of shape (n, {self.code_bytes})",
                                  f"got shape {arr.shape}, dtype {arr.dtype}")
        return arr

    def decode(self, codes: npt.ArrayLike) -> list[str]:
        """The strings of ``codes`` up to their first padding symbol (a UTF-8 sequence cut inside a character,
        or a symbol outside the alphabet, decodes as U+FFFD)."""
        symbols = self._unpack(self.check_codes(codes))
        if self.alphabet is None:
            return [bytes(row).split(b"\x00")[0].decode("utf-8", errors="replace") for row in symbols]
        table = ["", *self.alphabet] + ["\ufffd"] * (256 - len(self.alphabet) - 1)
        return ["".join(table[v] for v in bytes(row).split(b"\x00")[0]) for row in symbols]

    @functools.cached_property
    def _legal_symbols(self) -> np.ndarray:
        legal = np.zeros(1 << self.symbol_bits, bool)
        if self.alphabet is None:
            legal[:] = True
            legal[_NOT_UTF8] = False
        else:
            legal[:len(self.alphabet) + 1] = True
        return legal

    def complete(self, prefixes: np.ndarray, bits: int) -> np.ndarray:
        """Whether each prefix of ``bits`` bits holds a whole padding symbol, so that the one code it begins is
        itself followed by padding: bool (m,).

        >>> StringEncoding(3, "ab").complete(np.array([[0b01000100], [0b01100000]], np.uint8), 4)
        array([ True, False])
        """
        s = self.symbol_bits
        done = np.zeros(len(prefixes), bool)
        for j in range(min(bits, self.bits) // s):
            done |= bit_fragment(prefixes, j * s, s) == 0
        return done

    def valid_prefixes(self, prefixes: np.ndarray, bits: int) -> np.ndarray:
        """Whether each prefix of ``bits`` bits (uint8 rows) begins some code (module docstring): bool (m,).

        >>> StringEncoding(2, "ab").valid_prefixes(np.array([[0b01100000], [0b11000000], [0b00010000]], np.uint8), 4)
        array([ True, False, False])
        """
        return self._scan(np.ones(len(prefixes), bool), np.zeros(len(prefixes), bool), bits,
                          lambda start, width: bit_fragment(prefixes, start, width))

    def valid_extensions(self, parents: np.ndarray, start_bits: int, width_bits: int, cells: np.ndarray) -> np.ndarray:
        """:meth:`valid_prefixes` of the prefixes :math:`P_i \\| f` of cells :math:`i\\,2^w + f`
        (:func:`~ldpsynth.shared.heavy_hitters.candidates.extend_prefixes`) without building them: the symbols
        within the ``start_bits`` bits of the parents are scanned once per parent, the rest from the cells'
        fragments (bits of a symbol straddling both are joined): bool (len(cells),). A cell's answer depends on its
        parent only through the parent's *state* (valid so far, padded so far, the bits of the straddling symbol);
        when the states times :math:`2^w` are fewer than the cells, each (state, fragment) is scanned once and the
        cells look theirs up.

        >>> StringEncoding(2, "ab").valid_extensions(np.array([[0b01000000]], np.uint8), 2, 2, np.arange(4))
        array([ True,  True,  True, False])
        """
        s, end, low = self.symbol_bits, start_bits + width_bits, (1 << width_bits) - 1
        first = start_bits // s
        padded = np.zeros(len(parents), bool)
        valid = self._scan(np.ones(len(parents), bool), padded, first * s,
                           lambda start, width: bit_fragment(parents, start, width))
        lead = start_bits - first * s                 # bits of the symbol straddling the parent and the fragment
        head = bit_fragment(parents, first * s, lead) if lead else np.zeros(len(parents), np.int64)
        key = (head << 2) | (valid.astype(np.int64) << 1) | padded.astype(np.int64)
        states, state_of = np.unique(key, return_inverse=True)
        table = len(states) << width_bits < len(cells)
        pairs = np.arange(len(states) << width_bits) if table else (state_of[cells >> width_bits] << width_bits) | (
            cells & low)                              # (state, fragment) pairs: each once, or each cell's
        state, fragment = states[pairs >> width_bits], pairs & low

        def symbol_bits(lo: int, width: int) -> np.ndarray:
            """Bits [lo, lo + width) of the prefixes: the parent's below ``start_bits`` (then lo is ``first * s``:
            the straddling symbol's head), the fragment's after."""
            hi = lo + width
            tail = (fragment >> (end - hi)) & ((1 << (hi - max(lo, start_bits))) - 1)
            if lo >= start_bits:
                return tail
            return ((state >> 2) << (hi - start_bits)) | tail

        answer = self._scan((state & 2) != 0, (state & 1) != 0, end, symbol_bits, first)
        return answer[(state_of[cells >> width_bits] << width_bits) | (cells & low)] if table else answer

    def _scan(self, valid: np.ndarray, padded: np.ndarray, bits: int,
              symbol_bits: Callable[[int, int], np.ndarray], first: int = 0) -> np.ndarray:
        """Continue :meth:`valid_prefixes`'s scan (``valid``, ``padded`` updated in place) from symbol ``first``
        to ``bits`` bits, the trailing part of a symbol last; ``symbol_bits(start, width)`` reads the prefixes."""
        s = self.symbol_bits
        whole, rest = divmod(bits, s)
        for j in range(first, whole):
            symbol = symbol_bits(j * s, s)
            valid &= self._legal_symbols[symbol] & ~(padded & (symbol != 0))
            padded |= symbol == 0
        if rest:
            part = symbol_bits(whole * s, rest)
            completes: np.ndarray = np.asarray(self._legal_symbols.reshape(1 << rest, -1).any(axis=1))
            valid &= completes[part] & ~(padded & (part != 0))
        return valid


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

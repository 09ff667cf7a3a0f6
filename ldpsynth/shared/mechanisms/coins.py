"""Exact random draws for the frequency oracles' samplers: uniform integers and rational coins.

Every sampler of :mod:`ldpsynth.shared.mechanisms` is written once, against two draws:

* ``below(bound, shape)``: integers uniform on :math:`\\{0, \\dots, \\mathrm{bound}-1\\}`;
* ``bernoulli(numerator, denominator, shape)``: True with probability exactly
  ``numerator / denominator`` (integers).

:class:`Coins` makes both exactly from a source of uniform 64-bit words: a power-of-two bound
takes bits, any other bound is drawn by rejection (the words above the largest multiple of the bound
are redrawn, as :meth:`~ldpsynth.shared.mechanism.MechanismE.perturb_secure` does), and a coin of
dyadic probability :math:`a/2^m` compares the uniform m-bit integer :math:`U` with :math:`a` a byte
at a time (:math:`U < a` is decided by the top byte unless it ties, probability 1/256). So no float
ever decides an output. The device uses :func:`secure_coins` (``os.urandom``, the operating system's
CSPRNG); simulations use :func:`seeded_coins` (a numpy Generator's raw words): the same exact
algorithm, a reproducible source. :mod:`~ldpsynth.shared.mechanisms.exact` runs the same samplers
with coins that enumerate every outcome, to compute their output distribution exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..errors import ValidationError
from ..validation import check_int

__all__ = [
    "Shape",
    "CoinFlips",
    "Coins",
    "secure_words",
    "secure_coins",
    "seeded_coins",
]

#: A source of uniform words: ``count`` -> a uint64 array of ``count`` independent uniform words.
WordSource = Callable[[int], np.ndarray]
Shape = int | tuple[int, ...]


class CoinFlips(Protocol):
    """The two draws every sampler is written against (:class:`Coins`, and the enumerating coins of
    :mod:`~ldpsynth.shared.mechanisms.exact`)."""

    def below(self, bound: int, shape: Shape) -> np.ndarray:
        """int64 integers uniform on ``[0, bound)``."""
        ...

    def bernoulli(self, numerator: int, denominator: int, shape: Shape) -> np.ndarray:
        """Booleans, True with probability ``numerator / denominator``."""
        ...


def _size(shape: Shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if isinstance(shape, tuple) else int(shape)


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


class Coins:
    """Exact draws from the uniform 64-bit words of ``words`` (see the module docstring)."""

    def __init__(self, words: WordSource):
        self._words = words

    def _uint32(self, count: int) -> np.ndarray:
        return self._words((count + 1) // 2).view(np.uint32)[:count]

    def _bytes(self, count: int) -> np.ndarray:
        return self._words((count + 7) // 8).view(np.uint8)[:count]

    def below(self, bound: int, shape: Shape) -> np.ndarray:
        """int64 integers uniform on ``[0, bound)``, ``1 <= bound <= 2^63``, exactly.

        Bounds up to :math:`2^{32}` use 32-bit words, larger ones 64-bit words; a word is accepted
        below the largest multiple of ``bound`` that fits, and reduced modulo ``bound``.
        """
        bound = check_int(bound, "bound", 1, 1 << 63)
        count = _size(shape)
        if bound == 1:
            return np.zeros(shape, np.int64)
        wide = bound > 1 << 32
        if _power_of_two(bound):
            words = self._words(count) if wide else self._uint32(count)
            return (words & (bound - 1)).astype(np.int64).reshape(shape)
        span = 1 << (64 if wide else 32)
        limit = span - span % bound
        out = np.empty(count, np.int64)
        todo = np.arange(count)
        while todo.size:
            words = self._words(todo.size) if wide else self._uint32(todo.size).astype(np.uint64)
            ok = words < np.uint64(limit) if limit < 1 << 64 else np.ones(todo.size, bool)
            out[todo[ok]] = (words[ok] % np.uint64(bound)).astype(np.int64)
            todo = todo[~ok]
        return out.reshape(shape)

    def bernoulli(self, numerator: int, denominator: int, shape: Shape) -> np.ndarray:
        """Booleans, True with probability exactly ``numerator / denominator``.

        ``denominator`` in ``[1, 2^64]``, ``numerator`` in ``[0, denominator]``. A power-of-two
        denominator :math:`2^m` compares a uniform m-bit integer with the numerator byte by byte;
        any other is :meth:`below` ``(denominator) < numerator``.
        """
        den = check_int(denominator, "denominator", 1, 1 << 64)
        num = check_int(numerator, "numerator", 0, den)
        if num in (0, den):
            return np.full(shape, num == den, bool)
        if not _power_of_two(den):
            return self.below(den, shape) < num
        bits = max(den.bit_length() - 1, 8)
        num <<= bits - (den.bit_length() - 1)      # the same probability over 2^bits, bits >= 8
        top, rest_bits = num >> (bits - 8), bits - 8
        first = self._bytes(_size(shape))
        out = first < top
        ties = np.flatnonzero(first == top)
        if ties.size and rest_bits:
            rest = self._words(ties.size) >> np.uint64(64 - rest_bits)
            out[ties] = rest < np.uint64(num & ((1 << rest_bits) - 1))
        return out.reshape(shape)


def secure_words(count: int) -> np.ndarray:
    """``count`` uniform words from the operating system's CSPRNG (``os.urandom``)."""
    return np.frombuffer(os.urandom(8 * count), dtype=np.uint64)


def secure_coins() -> Coins:
    """Exact draws from ``os.urandom``: the device path."""
    return Coins(secure_words)


def seeded_coins(rng: np.random.Generator) -> Coins:
    """Exact draws from a numpy Generator's raw 64-bit output (reproducible simulations; not for devices)."""
    if not isinstance(rng, np.random.Generator):
        raise ValidationError("rng", "a numpy.random.Generator", f"got a {type(rng).__name__}")
    raw = rng.bit_generator.random_raw

    def words(count: int) -> np.ndarray:
        return np.asarray(raw(count), dtype=np.uint64)

    return Coins(words)

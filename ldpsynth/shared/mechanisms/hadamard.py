"""Hadamard response by the Hadamard mechanism: one coefficient of the value's Hadamard row, randomized.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.mechanisms.hadamard``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..privacy import delivered_epsilon
from .bits import parity, walsh_hadamard
from .coins import CoinFlips
from .oracle import FrequencyOracle
from .pure import DYADIC, PureProtocol, dyadic_split

__all__ = [
    "HadamardResponse",
]


class HadamardResponse(FrequencyOracle):
    """The Hadamard mechanism over ``domain_size`` codes at ``epsilon`` (module docstring).

    >>> hr = HadamardResponse(1.0, 1000)
    >>> hr.size, hr.report_bytes
    (1024, 2)
    """

    name = "HR"
    max_domain_size = 1 << 26

    def __init__(self, epsilon: float, domain_size: int):
        super().__init__(epsilon, domain_size)
        self.bits = max(1, (self.domain_size - 1).bit_length())
        self.size = K = 1 << self.bits
        self.big, self.small = dyadic_split(self.epsilon_requested)
        self.epsilon = delivered_epsilon(self.big, self.small)
        p, c = Fraction(self.big, DYADIC), Fraction(K // 2 - 1, K - 1)
        q = c * p + (1 - c) * (1 - p)
        pair_other = (p * (K // 4 - 1) + (1 - p) * (K // 4)) / (K - 1) if K >= 4 else q * q
        self.protocol = PureProtocol(self.name, self.domain_size, p, q, p * c, pair_other)

    @property
    def parameters(self) -> tuple[int, ...]:
        return (self.domain_size, self.big)

    @property
    def report_bytes(self) -> int:
        return -(-(self.bits + 1) // 8)

    @property
    def tally_size(self) -> int:
        return self.size

    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        n = codes.size
        rows = 1 + coins.below(self.size - 1, n)
        keep = coins.bernoulli(self.big, DYADIC, n)
        bit = parity((rows & codes).astype(np.uint64)).astype(np.int64) ^ ~keep
        return (rows << 1) | bit

    def check_reports(self, reports: npt.ArrayLike) -> np.ndarray:
        """A 1-d array of integers; :meth:`_tally` checks that each is an index ``2j + b`` in ``[2, 2K)``
        (in its count: no extra pass)."""
        return self._check_reports_array(reports, np.int64, ())

    def _tally(self, reports: np.ndarray) -> np.ndarray:
        try:
            counts = np.bincount(reports, minlength=2 * self.size)
        except ValueError:                              # a negative index
            counts = np.zeros(0, np.int64)
        if len(counts) != 2 * self.size or counts[0] or counts[1]:
            bad = (reports < 2) | (reports >= 2 * self.size)
            raise ValidationError("reports", f"HR reports: indices 2j + b in [2, {2 * self.size - 1}]",
                                  "out of range", int(np.flatnonzero(bad)[0]))
        return counts[0::2] - counts[1::2]

    def _group_tally(self, reports: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
        self._tally(reports)                            # checks every index
        cells = 2 * self.size
        counts = np.bincount(groups * cells + reports, minlength=count * cells).reshape(count, cells)
        return counts[:, 0::2] - counts[:, 1::2]

    def _support_rows(self, reports: np.ndarray) -> np.ndarray:
        self._tally(reports)                            # checks every index
        rows, bits = (reports >> 1).astype(np.uint64), (reports & 1).astype(np.uint64)
        values = np.arange(self.domain_size, dtype=np.uint64)
        return parity(rows[:, None] & values[None, :]) == bits[:, None]

    def _support(self, tally: np.ndarray, n: int | np.ndarray) -> np.ndarray:
        total = n + walsh_hadamard(tally)[..., :self.domain_size]
        if (total % 2).any():
            raise ValidationError("tally", "an HR tally of n reports (n + its transform is even)",
                                  "not a sum of HR reports")
        return total // 2

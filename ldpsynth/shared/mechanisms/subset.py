"""Subset selection (SS; YB18, WHWNXYLQ16): report a d-subset of the domain.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.mechanisms.subset``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..privacy import delivered_epsilon
from .bits import row_popcounts
from .coins import CoinFlips
from .oracle import BitSetOracle
from .pure import PureProtocol, ratio_weights

__all__ = [
    "subset_protocol",
    "SubsetSelection",
]


def subset_protocol(domain_size: int, size: int, keep_weight: int, lie_weight: int) -> PureProtocol:
    """The pure protocol of subset selection with subsets of ``size`` d and weights A, L (module docstring)."""
    k, d = domain_size, size
    p = Fraction(d * keep_weight, d * keep_weight + (k - d) * lie_weight)
    q = (p * (d - 1) + (1 - p) * d) / (k - 1)
    pair_other = (p * (d - 1) * (d - 2) + (1 - p) * d * (d - 1)) / ((k - 1) * (k - 2)) if k > 2 else q * q
    return PureProtocol("SS", k, p, q, p * (d - 1) / (k - 1), pair_other)


class SubsetSelection(BitSetOracle):
    """Subset selection over ``domain_size`` codes at ``epsilon`` (module docstring).

    >>> ss = SubsetSelection(1.0, 64)
    >>> ss.subset_size, ss.report_bytes
    (17, 8)
    """

    name = "SS"
    max_domain_size = 1 << 24

    def __init__(self, epsilon: float, domain_size: int):
        super().__init__(epsilon, domain_size)
        k = self.domain_size
        ideal = k / (math.exp(min(self.epsilon_requested, 700.0)) + 1.0)
        candidates = sorted({min(max(d, 1), k - 1) for d in (math.floor(ideal), math.ceil(ideal))})
        options = []
        for d in candidates:
            a, l = ratio_weights(self.epsilon_requested, d, k - d)
            options.append((subset_protocol(k, d, a, l), d, a, l))
        self.protocol, self.subset_size, self.keep_weight, self.lie_weight = min(
            options, key=lambda option: option[0].point_variance_factor())   # min keeps the first (smaller d) on a tie
        self.epsilon = delivered_epsilon(self.keep_weight, self.lie_weight)

    @property
    def parameters(self) -> tuple[int, ...]:
        return (self.domain_size, self.subset_size, self.keep_weight, self.lie_weight)

    def _row_width(self) -> int:
        return self.report_bytes          # a row's bitmap; its d steps are vectorized over the chunk's rows

    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        n, k, d = codes.size, self.domain_size, self.subset_size
        weight_in = d * self.keep_weight
        included = coins.bernoulli(weight_in, weight_in + (k - d) * self.lie_weight, n)
        bitmaps = np.zeros((n, self.report_bytes), np.uint8)
        rows = np.arange(n)

        def value(u: np.ndarray) -> np.ndarray:     # the u-th value other than the row's code
            return u + (u >= codes)

        others = k - 1
        for j in range(others - d, others):          # Floyd's algorithm over the k-1 other values
            u = coins.below(j + 1, n)
            position = value(u)
            taken = (bitmaps[rows, position >> 3] >> (position & 7).astype(np.uint8)) & 1
            position = np.where(taken == 1, value(np.full(n, j)), position)
            live = rows if j > others - d else np.flatnonzero(~included)   # the first step: only without x
            bitmaps[live, position[live] >> 3] |= np.left_shift(1, position[live] & 7).astype(np.uint8)
        mine = np.flatnonzero(included)
        bitmaps[mine, codes[mine] >> 3] |= np.left_shift(1, codes[mine] & 7).astype(np.uint8)
        return bitmaps

    def check_reports(self, reports: npt.ArrayLike) -> np.ndarray:
        arr = self._check_reports_array(reports, np.uint8, (self.report_bytes,))
        if arr.size:
            bad = (row_popcounts(arr) != self.subset_size) | (self._spare_bits(arr) != 0)
            if np.any(bad):
                raise ValidationError("reports", f"SS reports: bitmaps of exactly {self.subset_size} of the "
                                      f"{self.domain_size} values", "not such a subset", int(np.flatnonzero(bad)[0]))
        return arr

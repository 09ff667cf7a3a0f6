"""Subset selection (SS; YB18, WHWNXYLQ16): report a d-subset of the domain.

The user with value x reports a subset Y of D of size d with
:math:`P[Y \\mid x] \\propto e^\\epsilon` if :math:`x \\in Y` and :math:`\\propto 1` otherwise. Equivalently:
with probability :math:`P_+ = d e^\\epsilon/(d e^\\epsilon + k - d)` (the total weight of the
:math:`\\binom{k-1}{d-1}` subsets holding x against the :math:`\\binom{k-1}{d}` others, whose ratio is
:math:`d/(k-d)`), Y is x and a uniform (d-1)-subset of the other values, else a uniform d-subset of them.
The support of Y is Y.

**d.** The variance per report is smallest near :math:`d = k/(e^\\epsilon + 1)` (YB18;
WHWNXYLQ16); we take whichever of :math:`\\lfloor k/(e^\\epsilon + 1)\\rfloor` and
:math:`\\lceil k/(e^\\epsilon + 1)\\rceil` (within [1, k-1]) has the smaller exact
:math:`q^*(1-q^*)/(p^*-q^*)^2` (the smaller d on a tie). multi-freq-ldpy rounds to the nearest
integer instead; the two differ only where the variance of the other is lower.

**Exact rationals.** :math:`P_+ = dA/(dA + (k-d)L)` with :math:`A/L \\le e^\\epsilon`,
:math:`dA + (k-d)L \\le 2^{62}` (:func:`~ldpsynth.shared.mechanisms.pure.ratio_weights`); a subset
holding x but not x' has probability :math:`P_+/\\binom{k-1}{d-1}` under x and
:math:`(1-P_+)/\\binom{k-1}{d}` under x', ratio exactly :math:`A/L`: the delivered ε is
:math:`\\ln(A/L)` rounded up. The uniform subset is Floyd's algorithm over the k-1 other values:
for :math:`j = k-1-m, \\dots, k-2` draw :math:`u` uniform on :math:`[0, j]` and add u, or j if u is
taken; every m-subset comes out with probability :math:`1/\\binom{k-1}{m}`, and the last m-1 steps
alone are Floyd for m-1, so one pass serves both cases (the first step is skipped where x is in).

**Pure protocol.** :math:`p^* = P_+`,
:math:`q^* = (P_+(d-1) + (1-P_+)d)/(k-1)`, :math:`\\pi_1 = P_+(d-1)/(k-1)`,
:math:`\\pi_2 = (P_+(d-1)(d-2) + (1-P_+)d(d-1))/((k-1)(k-2))` (two given others in a uniform
m-subset of k-1: :math:`m(m-1)/((k-1)(k-2))`).

**Reports.** A bitmap of ``ceil(k/8)`` bytes, as OUE's (a sorted list of d codes is shorter only
when :math:`d \\lceil\\log_2 k\\rceil < k`, i.e. :math:`e^\\epsilon + 1 \\gtrsim \\log_2 k`); the tally is
the count of each bit, :math:`S(v)` itself. Sampling costs d steps over the rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .bits import column_counts, row_popcounts
from .coins import CoinFlips
from .oracle import FrequencyOracle
from .pure import PureProtocol, delivered_epsilon, ratio_weights


def subset_protocol(domain_size: int, size: int, keep_weight: int, lie_weight: int) -> PureProtocol:
    """The pure protocol of subset selection with subsets of ``size`` d and weights A, L (module docstring)."""
    k, d = domain_size, size
    p = Fraction(d * keep_weight, d * keep_weight + (k - d) * lie_weight)
    q = (p * (d - 1) + (1 - p) * d) / (k - 1)
    pair_other = (p * (d - 1) * (d - 2) + (1 - p) * d * (d - 1)) / ((k - 1) * (k - 2)) if k > 2 else q * q
    return PureProtocol("SS", k, p, q, p * (d - 1) / (k - 1), pair_other)


class SubsetSelection(FrequencyOracle):
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

    @property
    def report_bytes(self) -> int:
        return -(-self.domain_size // 8)

    @property
    def tally_size(self) -> int:
        return self.domain_size

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
            spare = 8 * self.report_bytes - self.domain_size
            bad = (row_popcounts(arr) != self.subset_size) | ((arr[:, -1] >> (8 - spare)) != 0 if spare else False)
            if np.any(bad):
                raise ValidationError("reports", f"SS reports: bitmaps of exactly {self.subset_size} of the "
                                      f"{self.domain_size} values", "not such a subset", int(np.flatnonzero(bad)[0]))
        return arr

    def _tally(self, reports: np.ndarray) -> np.ndarray:
        return column_counts(reports, self.domain_size)

    def _support(self, tally: np.ndarray, n: int) -> np.ndarray:
        return tally.copy()

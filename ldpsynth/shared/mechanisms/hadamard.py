"""Hadamard response by the Hadamard mechanism: one coefficient of the value's Hadamard row, randomized.

With :math:`K = 2^t \\ge k`, the user with value x draws a row index j uniformly from
:math:`\\{1, \\dots, K-1\\}` and reports ``(j, b)``, b the bit :math:`\\langle j, x\\rangle = |j \\wedge x| \\bmod 2`
(the sign of the Hadamard entry :math:`H_{jx} = (-1)^{\\langle j, x\\rangle}`) kept with probability
:math:`p = \\mathrm{big}/2^{64}` and flipped otherwise, :math:`p/(1-p) \\le e^\\epsilon`
(:func:`~ldpsynth.shared.mechanisms.pure.dyadic_split`). This is the Hadamard mechanism with one
coefficient (pure-ldp's ``HadamardMechanism``, t = 1; the binary case of OLH with the linear hash
:math:`v \\mapsto \\langle j, v\\rangle`). Support of ``(j, b)``: :math:`\\{v : \\langle j, v\\rangle = b\\}`.
The delivered ε is :math:`\\ln(\\mathrm{big}/\\mathrm{small})` rounded up (some j separates any two inputs).

**Pure protocol.** For :math:`v \\ne x`, :math:`d = v \\oplus x \\ne 0` and
:math:`P[\\langle j, d\\rangle = 0] = c = (K/2 - 1)/(K - 1)` over the non-zero j, so
:math:`p^* = p`, :math:`q^* = cp + (1-c)(1-p)`, :math:`\\pi_1 = pc`; two distinct non-zero
:math:`d_1, d_2` are independent over GF(2), so :math:`(\\langle j, d_1\\rangle, \\langle j, d_2\\rangle)`
takes (0, 0) for :math:`K/4 - 1` non-zero j and (1, 1) for :math:`K/4`:
:math:`\\pi_2 = (p(K/4 - 1) + (1-p)K/4)/(K-1)`. (Excluding j = 0, whose row is constant, gains the
factor :math:`K/(K-1)` in :math:`p^*-q^*`: at k = 2 it is binary randomized response instead of half
of it; the price is the small constant covariances :math:`\\kappa_1, \\kappa_2`.)

**Why this variant** (``benchmarks/results/oracles.md``, §4, k = 4,096, ε = 1). Acharya, Sun and
Zhang's Hadamard response (ASZ19, its high-privacy form as in pure-ldp's port of the authors' code)
reports one index of a :math:`K' = 2^{\\lceil \\log_2(k+1)\\rceil}` Hadamard matrix with the same
:math:`p^* = e^\\epsilon/(1+e^\\epsilon)` and :math:`q^* = 1/2`, so the same point variance; but its
supports (the +1 sets of rows x+1) make the indicators of u and v correlated whenever
:math:`(u+1) \\oplus (v+1) = x+1`, and its rows include ones that vanish on most of the domain: the
variance of a count over half the values came out 2.6 times ours, and its transform has size
:math:`K' = 2K` when k is a power of two. Both report :math:`\\lceil\\log_2 k\\rceil + 1` bits. The
Hadamard mechanism here has a closed-form variance (within sampling error in the same simulation).

**Decoding.** The tally is :math:`D(j) = \\#\\{i: j_i = j, b_i = 0\\} - \\#\\{i : j_i = j, b_i = 1\\}`
(one ``bincount`` over the 2K report indices), and
:math:`S(v) = \\sum_i 1[\\langle j_i, v\\rangle = b_i] = (n + \\sum_j D(j)(-1)^{\\langle j, v\\rangle})/2`:
one Walsh-Hadamard transform of size K, :math:`O(n + K\\log K)`.

**Reports.** One int64 index ``2 j + b`` in :math:`[2, 2K)`: :math:`t + 1` bits.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .bits import parity, walsh_hadamard
from .coins import CoinFlips
from .oracle import FrequencyOracle
from .pure import DYADIC, PureProtocol, delivered_epsilon, dyadic_split


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

    def _support(self, tally: np.ndarray, n: int) -> np.ndarray:
        total = n + walsh_hadamard(tally)[:self.domain_size]
        if (total % 2).any():
            raise ValidationError("tally", "an HR tally of n reports (n + its transform is even)",
                                  "not a sum of HR reports")
        return total // 2

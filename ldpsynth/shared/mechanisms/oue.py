"""Optimized unary encoding (OUE, WBLJ17 §4.3): a report is k bits, one per value.

The user with value x sends the bit vector B with :math:`B_x = 1` with probability :math:`p = 1/2`
and every other :math:`B_v = 1` with probability :math:`q`, independently; the support of B is
:math:`\\{v : B_v = 1\\}` (WBLJ17 §4.3: :math:`p = 1/2`, :math:`q = 1/(e^\\epsilon + 1)`, eq. 9 its
variance :math:`4e^\\epsilon/(e^\\epsilon-1)^2` per report).

**Exact rationals.** :math:`q = \\mathrm{small}/2^{64}` with ``small`` the least integer making
:math:`(2^{64} - \\mathrm{small})/\\mathrm{small} \\le e^\\epsilon`
(:func:`~ldpsynth.shared.mechanisms.pure.dyadic_split`), and :math:`p = 1/2` exactly, so each bit is
a dyadic coin (:class:`~ldpsynth.shared.mechanisms.coins.Coins`: one byte, 1/256 of the time one
more word). Two inputs x, x' change only bits x and x'; the worst output ratio is
:math:`\\frac{p(1-q)}{q(1-p)} = (2^{64} - \\mathrm{small})/\\mathrm{small}`, and the delivered ε is its
log rounded up to the next float.

**Pure protocol.** :math:`p^* = 1/2`, :math:`q^* = \\mathrm{small}/2^{64}`; the bits are independent,
so :math:`\\pi_1 = p^* q^*` and :math:`\\pi_2 = q^{*2}` (no covariance: the variance of a linear query
is WBLJ17 eq. 2 summed with weights :math:`w(v)^2`).

**Reports and tally.** A report is a bitmap of ``ceil(k/8)`` bytes (bit ``v % 8`` of byte
``v // 8``); the tally is the number of reports with each bit set, which is :math:`S(v)` itself.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..privacy import delivered_epsilon
from .bits import pack_rows
from .coins import CoinFlips
from .oracle import BitSetOracle
from .pure import DYADIC, PureProtocol, dyadic_split

__all__ = [
    "OUE",
]

#: The true bit's probability, exactly 1/2 (WBLJ17 §4.3).
TRUE_BIT = (1, 2)


class OUE(BitSetOracle):
    """Optimized unary encoding over ``domain_size`` codes at ``epsilon`` (module docstring).

    >>> oue = OUE(1.0, 16)
    >>> oue.epsilon <= 1.0, oue.report_bytes, oue.protocol.p
    (True, 2, Fraction(1, 2))
    """

    name = "OUE"
    max_domain_size = 1 << 24

    def __init__(self, epsilon: float, domain_size: int):
        super().__init__(epsilon, domain_size)
        self.big, self.small = dyadic_split(self.epsilon_requested)
        self.epsilon = delivered_epsilon(self.big, self.small)
        p, q = Fraction(*TRUE_BIT), Fraction(self.small, DYADIC)
        self.protocol = PureProtocol(self.name, self.domain_size, p, q, p * q, q * q)

    @property
    def parameters(self) -> tuple[int, ...]:
        return (self.domain_size, self.small)

    def _row_width(self) -> int:
        return self.domain_size

    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        n = codes.size
        bits = coins.bernoulli(self.small, DYADIC, (n, self.domain_size))
        bits[np.arange(n), codes] = coins.bernoulli(*TRUE_BIT, n)
        return pack_rows(bits)

    def check_reports(self, reports: npt.ArrayLike) -> np.ndarray:
        arr = self._check_reports_array(reports, np.uint8, (self.report_bytes,))
        high = self._spare_bits(arr)
        if high.any():
            raise ValidationError("reports", f"bitmaps with no bit set at or above {self.domain_size}",
                                  "a bit beyond the domain", int(np.flatnonzero(high)[0]))
        return arr


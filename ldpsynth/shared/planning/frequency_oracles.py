"""Frequency oracles built for large domains, OUE and OLH: their variance on any statistical query.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.frequency_oracles``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpsynth.shared.validation import check_epsilon

__all__ = [
    "PureProtocol",
    "oue",
    "olh_hash_range",
    "olh",
]


@dataclass(frozen=True)
class PureProtocol:
    """A pure LDP protocol by its support probabilities :math:`p^*` and :math:`q^*` (WBLJ17 Definition 3)."""

    name: str
    p: float
    q: float

    @property
    def a(self) -> float:
        """:math:`q^*(1-q^*)/(p^*-q^*)^2`: the variance per row of a centred weight (eq. 2, first term)."""
        return self.q * (1.0 - self.q) / (self.p - self.q) ** 2

    @property
    def b(self) -> float:
        """:math:`(1-p^*-q^*)/(p^*-q^*)`: the extra variance of a row holding the value (eq. 2, second term)."""
        return (1.0 - self.p - self.q) / (self.p - self.q)


def oue(epsilon: float) -> PureProtocol:
    """Optimized unary encoding at ε: :math:`p^* = 1/2`, :math:`q^* = 1/(e^\\epsilon+1)` (WBLJ17 §4.3)."""
    eps = check_epsilon(epsilon)
    return PureProtocol("OUE", 0.5, 1.0 / (math.exp(eps) + 1.0))


def olh_hash_range(epsilon: float) -> int:
    """The integer hash range :math:`g = \\mathrm{round}(e^\\epsilon) + 1` (WBLJ17 §4.4:
    :math:`g = e^\\epsilon + 1`)."""
    return int(round(math.exp(check_epsilon(epsilon)))) + 1


def olh(epsilon: float) -> PureProtocol:
    """Optimized local hashing at ε: :math:`p^* = e^\\epsilon/(e^\\epsilon+g-1)`, :math:`q^* = 1/g` (WBLJ17 §4.4)."""
    eps = check_epsilon(epsilon)
    g = olh_hash_range(eps)
    return PureProtocol("OLH", math.exp(eps) / (math.exp(eps) + g - 1.0), 1.0 / g)

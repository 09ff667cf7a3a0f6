"""Pure protocols (WBLJ17 Def. 3): exact support probabilities, unbiased counts, linear-query variances.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.mechanisms.pure``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..mechanism import MechanismE
from ..privacy import log_ratio_exceeds
from ..validation import check_epsilon

__all__ = [
    "DYADIC",
    "dyadic_split",
    "ratio_weights",
    "check_weights",
    "check_histogram",
    "PureProtocol",
]

#: Integer space of the rational probabilities that are not dyadic (as mechanism E's).
SPACE = 1 << 62
#: Denominator of the dyadic probabilities (one 64-bit word).
DYADIC = 1 << 64
_MARGIN = 2.0**-50


def dyadic_split(epsilon: float) -> tuple[int, int]:
    """``(big, small)``, ``big + small = 2^64``, with :math:`\\mathrm{big}/\\mathrm{small} \\le e^\\epsilon`
    exactly and ``small`` the least such integer: the coin :math:`\\mathrm{big}/2^{64}` of a binary
    randomized response, and OUE's :math:`q^* = \\mathrm{small}/2^{64} \\ge 1/(e^\\epsilon + 1)`.

    Raises :class:`~ldpsynth.shared.errors.ValidationError` when ε is below the resolution
    (:math:`\\mathrm{big} > \\mathrm{small}` needs :math:`\\epsilon \\gtrsim 2^{-62}`); above
    :math:`\\epsilon = \\ln(2^{64} - 1)` the ratio is capped at :math:`2^{64} - 1`.
    """
    eps = check_epsilon(epsilon)
    small = max(1, math.ceil(DYADIC / (1.0 + math.exp(min(eps, 45.0)))))
    while small > 1 and not log_ratio_exceeds(DYADIC - small + 1, small - 1, eps):
        small -= 1                                       # float rounding left room below
    while log_ratio_exceeds(DYADIC - small, small, eps):
        small += 1
    if small >= DYADIC // 2:
        raise ValidationError("epsilon", "a finite number >= 2^-60 (the resolution of a 64-bit coin)",
                              f"got {epsilon!r}")
    return DYADIC - small, small


def ratio_weights(epsilon: float, a_count: int, l_count: int) -> tuple[int, int]:
    """Integers ``(A, L)``, :math:`A/L \\le e^\\epsilon` exactly, ``a_count*A + l_count*L <= 2^62``, L as large
    as that allows: the weights of an output law where ``a_count`` outputs have weight A and
    ``l_count`` weight L (mechanism E's :func:`~ldpsynth.shared.mechanism.rational_weights` is
    ``a_count = 1``, ``l_count = k - 1``). The delivered ε falls short by about
    :math:`2^{-50} + 1/L` relative."""
    eps = check_epsilon(epsilon)
    growth = math.exp(min(eps, 45.0))
    lie = max(1, int(SPACE // (a_count * growth + l_count)))
    keep = min(int(lie * growth * (1.0 - _MARGIN)), (SPACE - l_count * lie) // a_count)
    while keep > lie and log_ratio_exceeds(keep, lie, eps):
        keep -= 1
    if keep <= lie:
        raise ValidationError("epsilon", f"a finite number >= {4.0 * (_MARGIN + (a_count + l_count) / SPACE):.2g} "
                              "(the resolution of the exact sampler)", f"got {epsilon!r}")
    return keep, lie


def check_weights(weights: npt.ArrayLike, domain_size: int) -> np.ndarray:
    """``weights`` as a float64 ``(queries, domain_size)`` array (a 1-d array is one query); finite."""
    w = np.asarray(weights)
    if w.ndim == 1:
        w = w[None, :]
    if w.ndim != 2 or w.shape[1] != domain_size:
        raise ValidationError("weights", f"a (queries, {domain_size}) array of finite numbers",
                              f"got shape {tuple(np.shape(w))}")
    if w.dtype.kind not in "iuf":
        raise ValidationError("weights", "finite real numbers", f"got dtype {w.dtype}")
    w = w.astype(np.float64, copy=False)
    if not np.isfinite(w).all():
        raise ValidationError("weights", "finite real numbers", "not finite",
                              int(np.flatnonzero(~np.isfinite(w.ravel()))[0]))
    return w


def check_histogram(histogram: npt.ArrayLike, domain_size: int) -> np.ndarray:
    """A histogram of true values: ``domain_size`` non-negative integer counts, as int64."""
    h = np.asarray(histogram)
    if h.shape != (domain_size,) or h.dtype.kind not in "iu":
        raise ValidationError("histogram", f"{domain_size} non-negative integer counts",
                              f"got shape {h.shape}, dtype {h.dtype}")
    if h.size and h.min() < 0:
        raise ValidationError("histogram", f"{domain_size} non-negative integer counts", "negative count",
                              int(np.flatnonzero(h < 0)[0]))
    return h.astype(np.int64, copy=False)


@dataclass(frozen=True)
class PureProtocol:
    """The exact support probabilities of a pure, pair-exchangeable oracle (module docstring).

    Attributes
    ----------
    name:
        The oracle's short name ("OUE", "OLH", ...).
    domain_size:
        k.
    p, q:
        :math:`p^*` and :math:`q^*`.
    pair_true, pair_other:
        :math:`\\pi_1` and :math:`\\pi_2`, the probabilities that the support holds x and one other
        value, and two given other values (:math:`\\pi_2` is :math:`q^{*2}` when k = 2, where no
        two other values exist).
    """

    name: str
    domain_size: int
    p: Fraction
    q: Fraction
    pair_true: Fraction
    pair_other: Fraction

    @classmethod
    def for_mechanism_e(cls, mechanism: MechanismE) -> PureProtocol:
        """Mechanism E (WYZ eq. 16): :math:`\\mathrm{Supp}(y) = \\{y\\}`, :math:`p^* = A/N`,
        :math:`q^* = L/N`, and a support never holds two values (:math:`\\pi_1 = \\pi_2 = 0`)."""
        return cls("E", mechanism.domain_size, mechanism.keep_fraction, mechanism.lie_fraction,
                   Fraction(0), Fraction(0) if mechanism.domain_size > 2 else mechanism.lie_fraction**2)

    @property
    def signal(self) -> Fraction:
        """:math:`p^* - q^*`."""
        return self.p - self.q

    def _coefficients(self) -> tuple[float, float, float, float]:
        """The variance's coefficients of :math:`n S_2`, :math:`n S_1^2`, :math:`H_2`, :math:`S_1 H_1`,
        divided by :math:`(p^* - q^*)^2` (exact, then rounded once)."""
        p, q = self.p, self.q
        k1, k2 = self.pair_true - p * q, self.pair_other - q * q
        r2 = self.signal**2
        return (float((q * (1 - q) - k2) / r2), float(k2 / r2),
                float((p * (1 - p) - q * (1 - q) - 2 * k1 + 2 * k2) / r2), float(2 * (k1 - k2) / r2))

    def centred_coefficients(self) -> tuple[float, float]:
        """``(a, b)``: the variance of a linear query whose weights sum to 0 (:math:`S_1 = 0`, e.g. centred
        per group) is :math:`a\\,n S_2 + b H_2` (module docstring)."""
        a2, _, b2, _ = self._coefficients()
        return a2, b2

    def point_coefficients(self) -> tuple[float, float]:
        """``(a, b)``: the variance of one value's count estimate :math:`\\hat c(v)` (the one-hot query,
        :math:`S_1 = S_2 = 1`) is :math:`a\\,n + b\\,c(v)` when c(v) of the n reports hold v (module
        docstring); unbiasedly estimated with :math:`\\hat c(v)` in place of c(v)."""
        a2, a1, b2, b1 = self._coefficients()
        return a2 + a1, b2 + b1

    def point_variance_factor(self) -> float:
        """:math:`q^*(1-q^*)/(p^*-q^*)^2`: the variance of a count per report when the value is rare
        (WBLJ17 eq. 4); it ranks oracles and chooses their parameters."""
        return float(self.q * (1 - self.q) / self.signal**2)

    def count_estimates(self, support_counts: npt.ArrayLike, n: int | npt.ArrayLike) -> np.ndarray:
        """:math:`\\hat c(v) = (S(v) - n q^*)/(p^* - q^*)` for every v (WBLJ17 §3), float64 (support counts of
        several groups ``(G, k)`` with their n as ``(G, 1)``: one row each)."""
        s = np.asarray(support_counts, dtype=np.float64)
        return (s - np.asarray(n, dtype=np.float64) * float(self.q)) / float(self.signal)

    def _variance(self, w: np.ndarray, first: np.ndarray, second: np.ndarray, n: float) -> np.ndarray:
        a2, a1, b2, b1 = self._coefficients()
        s1 = w.sum(axis=1)
        s2 = np.einsum("qv,qv->q", w, w)
        return n * (a2 * s2 + a1 * s1 * s1) + b2 * second + b1 * s1 * first

    def linear_variance(self, weights: npt.ArrayLike, histogram: npt.ArrayLike) -> np.ndarray:
        """The exact variance of :math:`\\sum_v w(v)\\hat c(v)` for each row w of ``weights``
        ``(queries, k)`` when the true values have ``histogram`` h (module docstring), shape (queries,)."""
        w = check_weights(weights, self.domain_size)
        h = check_histogram(histogram, self.domain_size).astype(np.float64)
        return self._variance(w, w @ h, (w * w) @ h, float(h.sum()))

    def count_covariance(self, counts: npt.ArrayLike, n: float) -> np.ndarray:
        """The covariance matrix of :math:`\\hat c` of n reports whose values have ``counts`` (the true ones:
        exact; the estimates :math:`\\hat c`: the plug-in), the matrix of :meth:`linear_variance`'s quadratic
        form :math:`w^\\top\\Sigma w`:

        .. math::  \\Sigma = n a_2 I + n a_1 \\mathbf 1\\mathbf 1^\\top + b_2\\,\\mathrm{diag}(h)
                   + \\tfrac{b_1}{2}(\\mathbf 1 h^\\top + h\\mathbf 1^\\top)

        (:math:`a_2, a_1, b_2, b_1` the coefficients of :math:`nS_2, nS_1^2, H_2, S_1H_1`)."""
        h = np.asarray(counts, dtype=np.float64)
        if h.shape != (self.domain_size,):
            raise ValidationError("counts", f"{self.domain_size} counts", f"got shape {h.shape}")
        a2, a1, b2, b1 = self._coefficients()
        ones = np.ones(self.domain_size)
        return (float(n) * (a2 * np.eye(self.domain_size) + a1 * np.outer(ones, ones)) + b2 * np.diag(h)
                + 0.5 * b1 * (np.outer(ones, h) + np.outer(h, ones)))

    def linear_variance_estimate(self, weights: npt.ArrayLike, estimates: npt.ArrayLike, n: int) -> np.ndarray:
        """The unbiased plug-in estimate of :meth:`linear_variance`: the count estimates
        :math:`\\hat c` in place of h, and the number of reports n."""
        w = check_weights(weights, self.domain_size)
        c = np.asarray(estimates, dtype=np.float64)
        if c.shape != (self.domain_size,):
            raise ValidationError("estimates", f"{self.domain_size} count estimates", f"got shape {c.shape}")
        return self._variance(w, w @ c, (w * w) @ c, float(n))


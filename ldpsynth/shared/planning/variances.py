"""The variances and standard errors of a plan from the sums of :mod:`~ldpsynth.shared.planning.moments`.

WYZ eqs. 16-17: E's estimator has variance :math:`n(A\\cdot\\mathrm{spread} + B x)/Z^2` per query, with
:math:`A = q/r^2`, :math:`B = s/r` (exact, from the mechanism's probabilities) and x the worst-case or the
prior's sum; a frequency oracle's estimator the same form with its own coefficients (WBLJ17 eq. 2).
Z is eq. 10's normaliser, 1 (sum) or n (mean).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.variances``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.estimators.formulas import Debias
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.moments import Moments
from ldpsynth.shared.queries.model import MEAN, RANGE

__all__ = ["e_coefficients", "e_coefficients_at", "normalisers", "variances", "Figures"]


def e_coefficients(mechanism: MechanismE) -> tuple[float, float]:
    """:math:`A = q/r^2` and :math:`B = s/r` of E's eq. 17 estimator, from the mechanism's exact probabilities."""
    d = Debias.of(mechanism)
    return d.q / d.r**2, d.s / d.r


def e_coefficients_at(epsilon: np.ndarray, domain_size: int) -> tuple[np.ndarray, np.ndarray]:
    """:math:`A = (e^\\epsilon + k - 1)/(e^\\epsilon - 1)^2`, :math:`B = k/(e^\\epsilon - 1)` at ideal
    probabilities (vectorised over ε; the inverse question's search)."""
    grown = np.expm1(epsilon)
    return (grown + domain_size) / grown**2, domain_size / grown


def normalisers(m: Moments, norms: np.ndarray, n: int) -> np.ndarray:
    """Z per query at n rows: :math:`n\\sum_g f_g c_g` (eq. 10), 1 (sum) or n (mean)."""
    return np.where(norms == RANGE, n * m.width, np.where(norms == MEAN, float(n), 1.0))


def variances(m: Moments, a: float | np.ndarray, b: float | np.ndarray, n: int, z: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Worst-case and prior variance at n rows for coefficients A, B: :math:`n(A\\cdot\\mathrm{spread} + B x)/Z^2`."""
    worst_term = np.where(np.asarray(b) >= 0, m.worst_high, m.worst_low)
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = n * (a * m.spread + b * worst_term) / z**2
        prior = n * (a * m.spread + b * m.prior) / z**2
    return worst, prior


@dataclass(frozen=True, eq=False)
class Figures:
    """Standard errors of one estimator per query: worst case over the private values, and under the
    prior (None without one)."""

    se_worst: np.ndarray
    se_prior: np.ndarray | None

    @classmethod
    def of(cls, worst: np.ndarray, prior: np.ndarray, with_prior: bool) -> Figures:
        return cls(np.sqrt(worst), np.sqrt(prior) if with_prior else None)

    @property
    def headline(self) -> np.ndarray:
        """The prior's figure when there is one, else the worst case."""
        return self.se_worst if self.se_prior is None else self.se_prior

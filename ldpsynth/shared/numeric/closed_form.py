"""Closed forms of the continuous mechanisms (Wang et al. 2019; Li et al. 2020): variances, HM's α, SW's b.

Per-report variance of the unbiased estimate of :math:`x \\in [-1, 1]` (Wang et al. 2019, §III):

* Duchi et al.: :math:`\\mathrm{Var} = B^2 - x^2`, :math:`B = \\frac{e^\\epsilon + 1}{e^\\epsilon - 1}`;
  worst case :math:`B^2` at x = 0.
* PM: :math:`\\mathrm{Var} = \\frac{x^2}{e^{\\epsilon/2} - 1} + \\frac{e^{\\epsilon/2} + 3}{3(e^{\\epsilon/2} - 1)^2}`;
  worst case at :math:`|x| = 1`.
* HM: :math:`\\alpha\\,\\mathrm{Var}_{PM} + (1 - \\alpha)\\,\\mathrm{Var}_{Duchi}` (both are unbiased). Wang et al.
  choose :math:`\\alpha = 1 - e^{-\\epsilon/2}` for :math:`\\epsilon > \\epsilon^*`, where the :math:`x^2` terms cancel
  (:math:`\\alpha/(e^{\\epsilon/2} - 1) = 1 - \\alpha`) and the variance is the same for every x, and
  :math:`\\alpha = 0` (Duchi) below. :math:`\\epsilon^* \\approx 0.61` is where PM's variance at x = 0 equals
  :math:`B^2` (:func:`hybrid_crossover`, solved here by bisection): below it no mixture lowers the worst case.
  ("HM uses PM above its crossover": for ε > ε* a share α of the devices runs PM; HM's worst case is
  below both PM's and Duchi's at every ε.)

Square Wave's half-width (Li et al. 2020, §4, chosen to maximise the mutual information):
:math:`b = \\frac{\\epsilon e^\\epsilon - e^\\epsilon + 1}{2 e^\\epsilon (e^\\epsilon - 1 - \\epsilon)}`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ..validation import check_choice, check_epsilon

__all__ = [
    "MECHANISMS",
    "duchi_bound",
    "hybrid_crossover",
    "hybrid_alpha",
    "square_wave_b",
    "variance",
    "worst_case_variance",
]

MECHANISMS = ("duchi", "pm", "hm")


def duchi_bound(epsilon: float) -> float:
    """:math:`B = (e^\\epsilon + 1)/(e^\\epsilon - 1)`."""
    eps = check_epsilon(epsilon)
    return 1.0 / math.tanh(eps / 2.0)


def _pm_constant(epsilon: float) -> float:
    s = math.exp(epsilon / 2.0)
    return (s + 3.0) / (3.0 * (s - 1.0) ** 2)


def hybrid_crossover() -> float:
    """:math:`\\epsilon^*`: the root of :math:`(s + 3)/(3(s - 1)^2) = B^2`, :math:`s = e^{\\epsilon/2}` (≈ 0.61)."""
    lo, hi = 0.1, 2.0          # PM's constant is above B^2 at 0.1 and below it at 2
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _pm_constant(mid) > duchi_bound(mid) ** 2:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


_CROSSOVER = hybrid_crossover()


def hybrid_alpha(epsilon: float) -> float:
    """HM's probability of PM: :math:`1 - e^{-\\epsilon/2}` above :math:`\\epsilon^*`, else 0."""
    eps = check_epsilon(epsilon)
    return -math.expm1(-eps / 2.0) if eps > _CROSSOVER else 0.0


def square_wave_b(epsilon: float) -> float:
    """SW's half-width b on [0, 1] (module docstring)."""
    eps = check_epsilon(epsilon)
    e = math.exp(eps)
    return (eps * e - e + 1.0) / (2.0 * e * (e - 1.0 - eps))


def variance(mechanism: str, epsilon: float, x: npt.ArrayLike) -> np.ndarray:
    """The per-report variance at each x (module docstring)."""
    name = check_choice(mechanism, "mechanism", MECHANISMS)
    eps = check_epsilon(epsilon)
    x2 = np.asarray(x, dtype=np.float64) ** 2
    duchi = duchi_bound(eps) ** 2 - x2
    pm = x2 / math.expm1(eps / 2.0) + _pm_constant(eps)
    if name == "duchi":
        return duchi
    if name == "pm":
        return pm
    alpha = hybrid_alpha(eps)
    return alpha * pm + (1.0 - alpha) * duchi


def worst_case_variance(mechanism: str, epsilon: float) -> float:
    """:math:`\\max_{x \\in [-1, 1]}` of :func:`variance` (at x = 0 or |x| = 1: it is quadratic in x)."""
    return float(variance(mechanism, epsilon, np.array([0.0, 1.0])).max())

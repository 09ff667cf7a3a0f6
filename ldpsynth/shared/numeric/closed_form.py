"""Closed forms of the continuous mechanisms (Wang2019ICDE; Li2020SIGMOD): variances, HM's α and ε*, SW's b.

Per-report variance of the unbiased estimate of :math:`x \\in [-1, 1]` (Wang2019ICDE §III):

* Duchi et al. (Algorithm 1, eq. 3): :math:`\\mathrm{Var} = B^2 - x^2`,
  :math:`B = \\frac{e^\\epsilon + 1}{e^\\epsilon - 1}` (eq. 4); worst case :math:`B^2` at x = 0.
* PM (Algorithm 2, eq. 5): :math:`\\mathrm{Var} = \\frac{x^2}{e^{\\epsilon/2} - 1} +
  \\frac{e^{\\epsilon/2} + 3}{3(e^{\\epsilon/2} - 1)^2}` (Lemma 1); worst case at :math:`|x| = 1`.
* HM (§III-C): :math:`\\sigma_H^2 = \\alpha\\,\\sigma_P^2 + (1 - \\alpha)\\,\\sigma_D^2` (both components are
  unbiased), with :math:`\\alpha = 1 - e^{-\\epsilon/2}` for :math:`\\epsilon > \\epsilon^*` and 0 below
  (Lemma 3, eq. 7), :math:`\\epsilon^* = \\ln\\frac{-5 + 2\\sqrt[3]{6353 - 405\\sqrt{241}}
  + 2\\sqrt[3]{6353 + 405\\sqrt{241}}}{27} \\approx 0.61` (eq. 6). Above ε* the :math:`x^2` terms cancel
  (:math:`\\alpha/(e^{\\epsilon/2} - 1) = 1 - \\alpha`), so HM's variance is the same for every x (eq. 8);
  at or below ε* HM is Duchi et al.'s solution. This is
  the crossover: "HM uses PM" (for a share α of the devices) only above ε*. ε* is also where PM's
  variance at x = 0 equals :math:`B^2`. HM's worst case is below both PM's and Duchi's above ε*
  (Corollary 1); PM alone beats Duchi in the worst case from ε ≈ 1.29 (§III-B).

Square Wave's half-width on [0, 1] (Li2020SIGMOD, chosen to maximise the mutual information between
input and output; the same formula as ``vvv214/LDP_Protocols`` ``sw.py``, whose ``w`` is 2b):
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
    """:math:`\\epsilon^*` of Wang2019ICDE eq. 6 (≈ 0.6094)."""
    root = math.sqrt(241.0)
    low, high = (6353.0 - 405.0 * root) ** (1 / 3), (6353.0 + 405.0 * root) ** (1 / 3)   # both bases > 0
    return math.log((-5.0 + 2.0 * low + 2.0 * high) / 27.0)


_CROSSOVER = hybrid_crossover()


def hybrid_alpha(epsilon: float) -> float:
    """HM's probability of PM (Wang2019ICDE eq. 7): :math:`1 - e^{-\\epsilon/2}` above :math:`\\epsilon^*`, else 0."""
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

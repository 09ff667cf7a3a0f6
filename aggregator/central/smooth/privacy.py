"""Privacy accounting for the smooth-query mechanisms (seed 003) and their private PCA.

Neighbours are *replace-one* (bounded DP, n public), the notion of seed 003 §2.

Three accountants, each exact for what it accounts:

* **Laplace, pure ε-DP.** :math:`f(D) + \\mathrm{Lap}(b)^k` with :math:`\\ell_1`-sensitivity
  :math:`\\Delta_1` is :math:`\\Delta_1/b`-DP; pure-DP steps compose by adding their ε.
* **Laplace, advanced composition** (Dwork–Rothblum–Vadhan 2010, Thm III.3): ``k`` adaptive
  :math:`\\epsilon_0`-DP steps are :math:`(\\epsilon_0\\sqrt{2k\\ln(1/\\delta)} + k\\epsilon_0(e^{\\epsilon_0}-1),
  \\delta)`-DP. :func:`laplace_epsilon` returns the smaller of this and basic composition.
* **Gaussian, via Gaussian differential privacy** (Dong, Roth, Su, JRSS-B 2022, Cor. 2.13 and
  Cor. 3.3): the Gaussian mechanism with :math:`\\ell_2`-sensitivity :math:`\\Delta_2` and noise
  :math:`N(0, \\sigma^2 I)` is :math:`\\mu`-GDP with :math:`\\mu = \\Delta_2/\\sigma`; adaptive
  compositions of :math:`\\mu_i`-GDP steps are :math:`\\sqrt{\\sum_i \\mu_i^2}`-GDP; and
  :math:`\\mu`-GDP is :math:`(\\epsilon, \\delta(\\epsilon))`-DP for every :math:`\\epsilon \\ge 0` with

  .. math::  \\delta(\\epsilon) = \\Phi\\Big(-\\frac{\\epsilon}{\\mu} + \\frac{\\mu}{2}\\Big)
             - e^{\\epsilon}\\,\\Phi\\Big(-\\frac{\\epsilon}{\\mu} - \\frac{\\mu}{2}\\Big),

  which is the exact privacy profile of the Gaussian mechanism (Balle & Wang, ICML 2018,
  Thm 8). This is tighter than the zCDP conversion :math:`\\rho + 2\\sqrt{\\rho\\ln(1/\\delta)}`
  (:math:`\\rho = \\mu^2/2`) that central-mechanisms.md §1.2 quotes; :func:`zcdp_epsilon` gives
  that conversion for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq
from scipy.special import log_ndtr

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_delta, check_epsilon, check_int

#: The neighbour notion of seed 003 (and of every guarantee stated here).
REPLACE_ONE = "replace-one (bounded DP: n public, one row replaced)"


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a release guarantees: :math:`(\\epsilon, \\delta)`-DP under :data:`REPLACE_ONE` neighbours.

    ``epsilon`` is ``math.inf`` when the release, as configured, is not differentially private
    (``statement`` says why); ``delta`` is 0 for pure ε-DP.
    """

    epsilon: float
    delta: float
    statement: str
    neighbours: str = REPLACE_ONE

    @property
    def is_private(self) -> bool:
        return math.isfinite(self.epsilon)


def check_positive(value: object, name: str) -> float:
    """A finite number > 0 (a noise scale, a sensitivity)."""
    return check_epsilon(value, name)


# ----- Laplace ---------------------------------------------------------------------------------
def laplace_epsilon(per_step: float, steps: int, delta: float = 0.0) -> float:
    """ε of ``steps`` adaptive ``per_step``-DP steps at failure probability ``delta``.

    ``delta == 0``: basic composition :math:`k\\epsilon_0`. ``delta > 0``: the smaller of basic and
    advanced composition, :math:`\\epsilon_0\\sqrt{2k\\ln(1/\\delta)} + k\\epsilon_0(e^{\\epsilon_0}-1)`.
    """
    eps0 = check_positive(per_step, "per_step")
    k = check_int(steps, "steps", 1)
    basic = k * eps0
    if delta == 0.0:
        return basic
    d = check_delta(delta)
    advanced = eps0 * math.sqrt(2.0 * k * math.log(1.0 / d)) + k * eps0 * math.expm1(eps0)
    return min(basic, advanced)


# ----- Gaussian (GDP) --------------------------------------------------------------------------
def gaussian_delta(mu: float, epsilon: float) -> float:
    """:math:`\\delta(\\epsilon)` of :math:`\\mu`-GDP (Dong–Roth–Su Cor. 2.13), computed in log space."""
    mu = check_positive(mu, "mu")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0.0:
        raise ValidationError("epsilon", "a number >= 0", f"got {epsilon!r}")
    a = log_ndtr(-epsilon / mu + mu / 2.0)
    b = epsilon + log_ndtr(-epsilon / mu - mu / 2.0)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest :math:`\\epsilon \\ge 0` with :math:`\\delta_\\mu(\\epsilon) \\le \\delta` (:math:`\\delta(\\cdot)` decreases)."""
    mu = check_positive(mu, "mu")
    delta = check_delta(delta)
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    high = 1.0
    while gaussian_delta(mu, high) > delta:
        high *= 2.0
    return float(brentq(lambda e: gaussian_delta(mu, e) - delta, 0.0, high, xtol=1e-14, rtol=1e-12))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest :math:`\\mu` with :math:`\\mu`-GDP :math:`\\Rightarrow (\\epsilon, \\delta)`-DP (:math:`\\delta_\\mu(\\epsilon)` increases in :math:`\\mu`)."""
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    low, high = 1e-12, 1.0
    while gaussian_delta(high, eps) < delta:
        high *= 2.0
    # Bisection toward the safe side: return a mu whose delta(eps) is <= delta.
    mu = brentq(lambda m: gaussian_delta(m, eps) - delta, low, high, xtol=1e-15, rtol=1e-13)
    while gaussian_delta(mu, eps) > delta:
        mu = math.nextafter(mu, 0.0)
    return float(mu)


def zcdp_epsilon(mu: float, delta: float) -> float:
    """The zCDP conversion :math:`\\rho + 2\\sqrt{\\rho\\ln(1/\\delta)}`, :math:`\\rho = \\mu^2/2` (looser than GDP)."""
    mu = check_positive(mu, "mu")
    delta = check_delta(delta)
    rho = mu * mu / 2.0
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_guarantee(mu: float, delta: float, statement: str) -> PrivacyGuarantee:
    """The :math:`(\\epsilon, \\delta)` guarantee of a :math:`\\mu`-GDP release."""
    return PrivacyGuarantee(gaussian_epsilon(mu, delta), delta, f"{statement}; mu = {mu:.6g}-GDP")

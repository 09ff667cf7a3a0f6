"""Composition and accounting of the central mechanisms: pure maps from parameters to privacy parameters.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.primitives.composition``.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr

from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.validation import check_epsilon, check_int, check_probability, check_real

#: Relative slack of a budget check (floating-point round-off of shares that sum to the budget).
BUDGET_SLACK = 1e-9


def within_budget(spent: float, budget: float) -> bool:
    """:math:`\\text{spent} \\le \\text{budget}\\,(1 + 10^{-9})` (:data:`BUDGET_SLACK`); NaN is never within."""
    return spent <= budget * (1.0 + BUDGET_SLACK)


# ----- basic and advanced composition --------------------------------------------------------
def basic_composition(epsilon0: float, k: int) -> float:
    """:math:`k \\epsilon_0`: the pure-DP budget of ``k`` ε0-DP steps."""
    return check_int(k, "k", 1) * check_epsilon(epsilon0, "epsilon0")


def advanced_composition(epsilon0: float, k: int, delta: float) -> float:
    """ε of ``k`` adaptive ε0-DP steps at failure probability ``delta`` (DRV10 Thm III.3).

    .. math::  \\epsilon_0 \\sqrt{2 k \\ln(1/\\delta)} + k \\epsilon_0 (e^{\\epsilon_0} - 1)
    """
    e0, k, d = check_epsilon(epsilon0, "epsilon0"), check_int(k, "k", 1), check_probability(delta, "delta")
    if e0 > 700.0:  # e^ε0 overflows a float; the composed ε is then larger than any float
        return math.inf
    return e0 * math.sqrt(2.0 * k * math.log(1.0 / d)) + k * e0 * math.expm1(e0)


def advanced_composition_step(epsilon: float, k: int, delta: float) -> float:
    """The largest ε0 with :func:`advanced_composition` ``(ε0, k, δ) <= epsilon`` (solved exactly).

    The composed ε is continuous and strictly increasing in ε0, so the root is unique; it is
    found by Brent's method and then nudged down until the forward map is at most ``epsilon``.
    """
    eps, k, d = check_epsilon(epsilon), check_int(k, "k", 1), check_probability(delta, "delta")
    hi = min(eps, 700.0)  # one step of ε0 = ε already composes to more than ε
    root = brentq(lambda e0: advanced_composition(e0, k, d) - eps, 1e-300, hi, xtol=1e-300, rtol=4 * 2.0**-52)
    while advanced_composition(root, k, d) > eps:
        root = math.nextafter(root, 0.0)
    return root


def advanced_composition_step_closed_form(epsilon: float, k: int, delta: float) -> float:
    """:math:`\\epsilon / (2\\sqrt{2k\\ln(1/\\delta)})`, a closed-form step for DRV10 Thm III.3.

    Composes to at most ε when ε <= 4 ln(1/δ).
    """
    eps, k, d = check_epsilon(epsilon), check_int(k, "k", 1), check_probability(delta, "delta")
    return eps / (2.0 * math.sqrt(2.0 * k * math.log(1.0 / d)))


def composed_epsilon(per_step: float, steps: int, delta: float = 0.0) -> float:
    """ε of ``steps`` adaptive ``per_step``-DP steps at failure probability ``delta``.

    ``delta == 0``: basic composition :math:`k\\epsilon_0`. ``delta > 0``: the smaller of basic and
    advanced composition, :math:`\\epsilon_0\\sqrt{2k\\ln(1/\\delta)} + k\\epsilon_0(e^{\\epsilon_0}-1)`.
    """
    basic = basic_composition(check_epsilon(per_step, "per_step"), check_int(steps, "steps", 1))
    if delta == 0.0:
        return basic
    return min(basic, advanced_composition(per_step, steps, delta))


# ----- zCDP ---------------------------------------------------------------------------------
def gaussian_zcdp(sensitivity: float, sigma: float) -> float:
    """ρ of the Gaussian mechanism: :math:`\\Delta_2^2 / (2\\sigma^2)`."""
    return check_epsilon(sensitivity, "sensitivity") ** 2 / (2.0 * check_epsilon(sigma, "sigma") ** 2)


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at ``delta`` (Bun–Steinke 2016 Prop. 1.3): :math:`\\rho + 2\\sqrt{\\rho \\ln(1/\\delta)}`."""
    r, d = check_epsilon(rho, "rho"), check_probability(delta, "delta")
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def approx_dp_to_zcdp(epsilon: float, delta: float) -> float:
    """The ρ with :func:`zcdp_to_approx_dp` ``(ρ, δ) = ε``: :math:`(\\sqrt{L + \\epsilon} - \\sqrt{L})^2`, L = ln(1/δ).

    (The positive root of the quadratic in :math:`\\sqrt\\rho`; the "two roots" of DPSCO App. C.2, proof of Thm 5.)
    """
    eps, d = check_epsilon(epsilon), check_probability(delta, "delta")
    log_term = math.log(1.0 / d)
    root = eps / (math.sqrt(log_term + eps) + math.sqrt(log_term))  # = sqrt(L + ε) - sqrt(L), no cancellation
    return root * root


def _log_cdp_delta(rho: float, epsilon: float, alpha: float) -> float:
    """ln of the CKS20 bound at order α:
    :math:`(\\alpha-1)(\\alpha\\rho-\\epsilon) + \\alpha\\ln(1-1/\\alpha) - \\ln(\\alpha-1)`."""
    return (alpha - 1.0) * (alpha * rho - epsilon) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)


def cdp_delta(rho: float, epsilon: float) -> float:
    """Smallest δ such that ρ-zCDP implies (ε, δ)-DP by Canonne–Kamath–Steinke 2020, Prop. 12.

    .. math::  \\delta = \\inf_{\\alpha > 1} \\frac{e^{(\\alpha - 1)(\\alpha\\rho - \\epsilon)}}{\\alpha - 1}
               \\left(1 - \\frac1\\alpha\\right)^{\\alpha}

    Any α gives a valid bound, so an inexact minimisation only loosens it. The minimiser is at
    least :math:`(1 + \\epsilon/\\rho)/2`; the search runs over ``[1.01, (ε+1)/(2ρ) + 2]``.
    """
    r = check_epsilon(rho, "rho")
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    hi = (epsilon + 1.0) / (2.0 * r) + 2.0
    res = minimize_scalar(lambda a: _log_cdp_delta(r, epsilon, a), bounds=(1.01, max(hi, 1.02)), method="bounded",
                          options={"xatol": 1e-12})
    return min(1.0, math.exp(res.fun))


def cdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε with :func:`cdp_delta` ``(ρ, ε) <= δ`` (CKS20 conversion, tighter than Bun–Steinke)."""
    r, d = check_epsilon(rho, "rho"), check_probability(delta, "delta")
    if cdp_delta(r, 0.0) <= d:
        return 0.0
    hi = zcdp_to_approx_dp(r, d)  # Bun–Steinke's ε is always enough
    eps = brentq(lambda e: cdp_delta(r, e) - d, 0.0, hi * (1.0 + 1e-9), xtol=1e-14)
    while cdp_delta(r, eps) > d:  # round in the safe direction
        eps = math.nextafter(eps, math.inf)
    return eps


def cdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ with :func:`cdp_epsilon` ``(ρ, δ) <= ε``."""
    eps, d = check_epsilon(epsilon), check_probability(delta, "delta")
    lo = approx_dp_to_zcdp(eps, d)  # feasible (Bun–Steinke is looser)
    hi = lo
    while cdp_delta(hi, eps) <= d:
        hi *= 2.0
    rho = brentq(lambda r: cdp_delta(r, eps) - d, lo, hi, xtol=1e-15)
    while cdp_delta(rho, eps) > d:  # round in the safe direction
        rho = math.nextafter(rho, 0.0)
    return rho


# ----- Gaussian differential privacy (DRS22) ---------------------------------------------------
def gaussian_delta(mu: float, epsilon: float) -> float:
    """:math:`\\delta(\\epsilon)` of :math:`\\mu`-GDP (DRS22 Cor. 2.13), computed in log space."""
    mu = check_epsilon(mu, "mu")
    epsilon = check_real(epsilon, "epsilon", low=0.0, finite=False)
    a = log_ndtr(-epsilon / mu + mu / 2.0)
    b = epsilon + log_ndtr(-epsilon / mu - mu / 2.0)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest :math:`\\epsilon \\ge 0` with :math:`\\delta_\\mu(\\epsilon) \\le \\delta`
    (:math:`\\delta(\\cdot)` decreases)."""
    mu = check_epsilon(mu, "mu")
    delta = check_probability(delta, "delta")
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    high = 1.0
    while gaussian_delta(mu, high) > delta:
        high *= 2.0
    return float(brentq(lambda e: gaussian_delta(mu, e) - delta, 0.0, high, xtol=1e-14, rtol=1e-12))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest :math:`\\mu` with :math:`\\mu`-GDP :math:`\\Rightarrow (\\epsilon, \\delta)`-DP
    (:math:`\\delta_\\mu(\\epsilon)` increases in :math:`\\mu`)."""
    eps = check_epsilon(epsilon)
    delta = check_probability(delta, "delta")
    low, high = 1e-12, 1.0
    while gaussian_delta(high, eps) < delta:
        high *= 2.0
    # Bisection toward the safe side: return a mu whose delta(eps) is <= delta.
    mu = brentq(lambda m: gaussian_delta(m, eps) - delta, low, high, xtol=1e-15, rtol=1e-13)
    while gaussian_delta(mu, eps) > delta:
        mu = math.nextafter(mu, 0.0)
    return float(mu)


def zcdp_epsilon(mu: float, delta: float) -> float:
    """ε of :math:`\\mu`-GDP by the zCDP route: :func:`zcdp_to_approx_dp` at :math:`\\rho = \\mu^2/2`
    (looser than GDP)."""
    mu = check_epsilon(mu, "mu")
    return zcdp_to_approx_dp(mu * mu / 2.0, delta)


def gaussian_guarantee(mu: float, delta: float, neighbours: Neighbours, statement: str) -> PrivacyGuarantee:
    """The :math:`(\\epsilon, \\delta)` guarantee of a :math:`\\mu`-GDP release (:func:`gaussian_epsilon`)."""
    return PrivacyGuarantee(gaussian_epsilon(mu, delta), delta, neighbours, f"{statement}; mu = {mu:.6g}-GDP")

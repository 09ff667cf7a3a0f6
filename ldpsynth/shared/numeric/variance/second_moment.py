"""The second moment of a numeric report given its input: :math:`E[y^2 \\mid x] = A x^2 + c` (Duchi, PM, HM).

Every report y of Duchi, PM and HM is unbiased for x (Wang2019ICDE eqs. 3, 5), so
:math:`E[y^2 \\mid x] = \\mathrm{Var}[y \\mid x] + x^2`, and the closed forms of the variance give

* **Duchi** (eq. 4, :math:`\\mathrm{Var} = B^2 - x^2`): :math:`A = 0`, :math:`c = B^2`,
  :math:`B = (e^\\epsilon + 1)/(e^\\epsilon - 1)`: every report is :math:`\\pm B`, so y² says nothing about x;
* **PM** (Lemma 1, :math:`\\mathrm{Var} = x^2/(s - 1) + (s + 3)/(3(s - 1)^2)`, :math:`s = e^{\\epsilon/2}`):
  :math:`A_{PM} = s/(s - 1)`, :math:`c_{PM} = (s + 3)/(3(s - 1)^2)`;
* **HM** (§III-C: PM with probability α, eq. 7, Duchi otherwise; both unbiased, so the second moments mix):
  :math:`A = \\alpha A_{PM}`, :math:`c = \\alpha c_{PM} + (1 - \\alpha) B^2`. Below :math:`\\epsilon^*`
  (eq. 6, ≈ 0.6094) α = 0 and A = 0: HM is Duchi.

:func:`second_moment` gives A and c **exactly on the sampler's grid** (from its grid-exact variance coefficients,
``variance_coefficients()``: :math:`A = a + 1`); :func:`closed_form_second_moment` gives the papers' continuous
forms above. They differ by the window's rounding to whole cells (O(1/M), under 0.3 % at M = 2^10), checked
in ``tests/shared/numeric_variance/test_second_moment.py`` against the second moment computed from the law's
integer weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...validation import check_choice, check_epsilon
from ..closed_form import duchi_bound, hybrid_alpha
from ..samplers import Duchi, HybridMechanism, PiecewiseMechanism

__all__ = ["SecondMoment", "second_moment", "closed_form_second_moment"]


@dataclass(frozen=True)
class SecondMoment:
    """:math:`E[y^2 \\mid x] = A x^2 + c` on the input grid (``a`` is A, the coefficient of x²)."""

    a: float
    c: float


def second_moment(sampler: Duchi | PiecewiseMechanism | HybridMechanism) -> SecondMoment:
    """The sampler's grid-exact :math:`(A, c)`: :math:`\\mathrm{Var}[y \\mid x] = a x^2 + c` gives
    :math:`A = a + 1` (0 for Duchi, whose a is −1)."""
    v = sampler.variance_coefficients()
    return SecondMoment(v.a + 1.0, v.c)


def closed_form_second_moment(mechanism: str, epsilon: float) -> SecondMoment:
    """Wang2019ICDE's continuous :math:`(A, c)` for ``mechanism`` ∈ {duchi, pm, hm} at ``epsilon`` (module
    docstring)."""
    name = check_choice(mechanism, "mechanism", ("duchi", "pm", "hm"))
    eps = check_epsilon(epsilon)
    s = math.exp(eps / 2.0)
    pm = SecondMoment(s / (s - 1.0), (s + 3.0) / (3.0 * (s - 1.0) ** 2))
    duchi = SecondMoment(0.0, duchi_bound(eps) ** 2)
    if name == "duchi":
        return duchi
    if name == "pm":
        return pm
    alpha = hybrid_alpha(eps)
    return SecondMoment(alpha * pm.a, alpha * pm.c + (1.0 - alpha) * duchi.c)

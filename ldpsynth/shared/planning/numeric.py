"""Which mechanism for a numeric attribute's mean or sum, before collecting: each one's predicted standard error.

A value v in the declared range [lo, hi] is collected as :math:`x = 2(v - lo)/(hi - lo) - 1 \\in [-1, 1]`
(:class:`~ldpsynth.shared.numeric.scale.NumericRange`). With n devices whose values have second moment
:math:`m_2 = \\frac1n \\sum_i x_i^2` on that scale:

* **Duchi, PM, HM** (Wang2019ICDE eqs. 4, Lemma 1, §III-C; the samplers' grid-exact coefficients
  :math:`\\mathrm{Var}[\\hat x \\mid x] = a x^2 + c`, :meth:`variance_coefficients`):
  :math:`\\mathrm{Var}\\,\\bar x = (a\\,m_2 + c)/n`, exactly as the estimator's own SE
  (:func:`~ldpsynth.shared.numeric.estimators.estimate_mean`); the worst case over all data takes
  :math:`m_2 \\in \\{0, 1\\}`, whichever is larger.
* **E over k levels** (WYZ eq. 16; the values bucketed at k centres :math:`u_j`, equal buckets of the range, or
  the attribute's own levels): the mean :math:`\\sum_j u_j \\hat c_j / n` has the exact variance of E's linear
  query with weights u (:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.linear_variance`, linear in the
  histogram, here at the prior's bucket shares times n), divided by :math:`n^2`; bucketing adds the bias
  :math:`\\frac1n\\sum_i (u_{j(i)} - x_i)` (zero when the values are the levels), reported apart and folded into
  the root mean squared error. Its "worst case" here is the largest variance over the data that hold one
  level only (computed up to :data:`MAX_WORST_LEVELS` levels).

Without a prior sample the values are taken uniform on the range (:math:`m_2 = 1/3`, equal bucket shares, no
bias). The standard errors are on the value scale (times :math:`(hi - lo)/2`); a sum's SE is n times the
mean's. The recommendation is the least RMSE at the prior, or without a prior the least worst-case SE, the
first of HM, PM, Duchi, E within :data:`~ldpsynth.shared.planning.choice.CLOSE` of it (HM first: above ε* its
variance does not depend on the data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..mechanism import MechanismE
from ..mechanisms.pure import PureProtocol
from ..numeric.samplers import Duchi, HybridMechanism, PiecewiseMechanism
from ..numeric.scale import NumericRange
from ..validation import check_epsilon, check_int
from .choice import CLOSE

__all__ = ["MeanChoice", "NumericPlan", "level_centres", "mean_error", "recommend_mean", "plan_mean"]

#: E's worst case is computed up to this many levels.
MAX_WORST_LEVELS = 256


@dataclass(frozen=True)
class MeanChoice:
    """One mechanism's predicted error of the mean (value scale): its SE at the prior, its bucketing bias, their
    RMSE, and its SE in the worst case (module docstring)."""

    mechanism: str
    std_error: float
    bias: float
    worst_case_std_error: float

    @property
    def rmse(self) -> float:
        return math.hypot(self.std_error, self.bias)


@dataclass(frozen=True)
class NumericPlan:
    """The predicted error of the mean of one numeric attribute per mechanism, and the recommended one."""

    epsilon: float
    devices: int
    value_range: NumericRange
    choices: tuple[MeanChoice, ...]
    recommended: str

    def sum_std_error(self, mechanism: str) -> float:
        """The SE of the sum: n times the mean's."""
        return self.devices * next(c.std_error for c in self.choices if c.mechanism == mechanism)


def level_centres(value_range: NumericRange, levels: npt.ArrayLike | int) -> np.ndarray:
    """E's centres on [−1, 1]: k equal buckets' centres, or the given values mapped onto [−1, 1]."""
    if isinstance(levels, (int, np.integer)):
        k = check_int(int(levels), "levels", 2, 1 << 20)
        return -1.0 + (2.0 * np.arange(k) + 1.0) / k
    return np.unique(value_range.to_unit(np.asarray(levels, np.float64)))


def plan_mean(epsilon: float, devices: int, value_range: NumericRange, *, prior: npt.ArrayLike | None = None,
              levels: npt.ArrayLike | int = 16) -> NumericPlan:
    """The predicted errors of the mean at ``epsilon`` with ``devices`` devices (module docstring); ``prior``: a
    sample of values (in the range), ``levels``: E's number of equal buckets or its levels (values in the range)."""
    eps = check_epsilon(epsilon)
    n = check_int(devices, "devices", 1)
    x = None if prior is None else value_range.to_unit(np.asarray(prior, np.float64).ravel())
    if x is not None and not len(x):
        raise ValidationError("prior", "at least one value", "got none")
    m2 = 1.0 / 3.0 if x is None else float(np.mean(x * x))
    scale = (value_range.hi - value_range.lo) / 2.0
    choices = []
    for name, sampler in (("HM", HybridMechanism(eps)), ("PM", PiecewiseMechanism(eps)), ("Duchi", Duchi(eps))):
        coefficients = sampler.variance_coefficients()
        a, c = coefficients.a, coefficients.c + coefficients.rounding
        worst = max(c, a + c)
        choices.append(MeanChoice(name, scale * math.sqrt((a * m2 + c) / n), 0.0, scale * math.sqrt(worst / n)))
    centres = level_centres(value_range, levels)
    protocol = PureProtocol.for_mechanism_e(MechanismE(eps, len(centres)))
    if x is None:
        shares, bias = np.full(len(centres), 1.0 / len(centres)), 0.0
    else:
        nearest = np.abs(x[:, None] - centres[None, :]).argmin(axis=1)
        shares = np.bincount(nearest, minlength=len(centres)) / len(x)
        bias = float(np.mean(centres[nearest] - x))
    weights = centres[None, :]
    variance = float(protocol.linear_variance_estimate(weights, shares * n, n)[0]) / n**2
    worst = max(float(protocol.linear_variance_estimate(weights, np.eye(len(centres))[j] * n, n)[0])
                for j in range(len(centres))) / n**2 if len(centres) <= MAX_WORST_LEVELS else math.nan
    choices.append(MeanChoice(f"E/{len(centres)}", scale * math.sqrt(variance), scale * abs(bias),
                              scale * math.sqrt(worst)))
    return NumericPlan(eps, n, value_range, tuple(choices), recommend_mean(choices, x is not None))


def mean_error(choice: MeanChoice, with_prior: bool) -> float:
    """The error a recommendation compares: the RMSE at the prior, or without one the worst-case SE."""
    return choice.rmse if with_prior else choice.worst_case_std_error


def recommend_mean(choices: Sequence[MeanChoice], with_prior: bool) -> str:
    """The first of ``choices`` whose :func:`mean_error` is within :data:`CLOSE` of the least (module docstring)."""
    least = min(mean_error(c, with_prior) for c in choices)
    return next(c.mechanism for c in choices if mean_error(c, with_prior) <= least * CLOSE)

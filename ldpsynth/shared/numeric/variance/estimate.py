"""The population variance of a numeric attribute's values: from HM/PM reports (unbiased, delta-method SE) and from
SW's EMS histogram (bootstrap SE). docs/numeric.md, "The variance".

**HM, PM.** On [−1, 1], n reports :math:`y_r` of values :math:`x_r`, :math:`\\mu = \\frac1n\\sum_r x_r`,
:math:`m_2 = \\frac1n\\sum_r x_r^2`; the estimand is :math:`\\sigma^2 = m_2 - \\mu^2`. With
:math:`E[y \\mid x] = x`, :math:`\\mathrm{Var}[y \\mid x] = a x^2 + c` and :math:`E[y^2 \\mid x] = A x^2 + c`,
:math:`A = a + 1` (:mod:`.second_moment`: Wang2019ICDE eqs. 4, 5, 7, Lemma 1), the means
:math:`\\bar y = \\frac1n\\sum_r y_r`, :math:`\\overline{y^2} = \\frac1n\\sum_r y_r^2` give

.. math::  \\hat m_2 = (\\overline{y^2} - c)/A, \\qquad
           E[\\bar y^2] = \\mu^2 + \\mathrm{Var}[\\bar y] = \\mu^2 + (a m_2 + c)/n,

so :math:`\\hat\\sigma^2 = \\hat m_2 - \\bar y^2 + (a \\hat m_2 + c)/n` is unbiased for :math:`\\sigma^2` (the last
term corrects the bias of the squared mean). It needs A > 0: where HM runs Duchi only (α = 0, ε ≤ ε* ≈ 0.6094,
eq. 6) every report is :math:`\\pm B`, y² = B² whatever x, and the variance is refused (:func:`check_answerable`).

Its standard error is the delta method: :math:`\\hat\\sigma^2 = f(\\bar y, \\overline{y^2})` with gradient
:math:`g = (-2\\bar y,\\ (1 + a/n)/A)`, and :math:`\\mathrm{Var}[(\\bar y, \\overline{y^2})] \\approx S/n`,
S the reports' empirical covariance of :math:`(y_r, y_r^2)` (``ddof = 1``): :math:`\\mathrm{SE}^2 = g S g^T / n`.
S also holds the spread of the conditional means :math:`(x_r, A x_r^2 + c)` over the rows, so for a fixed set
of rows the SE errs slightly high (by a share of about :math:`\\mathrm{Var}(x)/\\mathrm{Var}[y \\mid x]`, a few
per cent at most); it is the delta-method SE for rows drawn at random from a larger population, whose variance the
estimate also estimates. Fewer than 2 reports: SE NaN. The interval is :math:`\\hat\\sigma^2 \\pm z\\,\\mathrm{SE}`.
The input grid's random rounding (:math:`\\mathrm{Var}[x_I] \\le 1/M^2`) adds at most :math:`1/M^2`
(≈ 10⁻⁶ at M = 2^10) to :math:`E[\\hat\\sigma^2]`, on [−1, 1].

**SW.** The variance of the EMS histogram θ on K equal buckets of [−1, 1], uniform within each bucket (as its
quantiles read it): centres :math:`m_k = -1 + (2k + 1)/K`,
:math:`\\sigma^2 = \\sum_k \\theta_k m_k^2 + (2/K)^2/12 - (\\sum_k \\theta_k m_k)^2`. Its SE is the bootstrap of
the SW quantiles (:func:`~ldpsynth.shared.numeric.estimators.bootstrap_from_counts`). EMS's smoothing spreads
the fitted histogram a little, so this estimate is not unbiased (measured in docs/numeric.md).

**Scale.** The device maps [lo, hi] to [−1, 1] by an affine map of slope :math:`1/h`, h = (hi − lo)/2; a variance
maps back times :math:`h^2` (and its SE too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ...errors import ValidationError
from ...validation import check_probability
from ..closed_form import hybrid_crossover
from ..samplers import Duchi, HybridMechanism, PiecewiseMechanism
from ..scale import NumericRange
from .second_moment import second_moment

__all__ = ["VarianceEstimate", "check_answerable", "estimate_variance", "estimate_variance_from_counts",
           "histogram_variance"]

VarianceSampler = Duchi | PiecewiseMechanism | HybridMechanism


@dataclass(frozen=True)
class VarianceEstimate:
    """A population variance on the value scale with its standard error and ``level`` interval, from ``n``
    reports."""

    variance: float
    standard_error: float
    low: float
    high: float
    n: int
    level: float


def check_answerable(sampler: VarianceSampler) -> None:
    """Refuse (``epsilon``) a sampler whose reports carry no information on x²: Duchi, and HM at ε ≤ ε*."""
    if second_moment(sampler).a > 0.0:
        return
    raise ValidationError("epsilon", f"ε > ε* = {hybrid_crossover():.4f} (Wang2019ICDE eq. 6) for a variance "
                          "from HM reports, or an attribute collected by SW",
                          f"HM at ε = {sampler.epsilon_requested:g} runs Duchi only (α = 0, eq. 7): every report "
                          "is ±B, whatever the value, so the reports say nothing of its variance")


def estimate_variance(sampler: VarianceSampler, reports: npt.ArrayLike, value_range: NumericRange,
                      level: float = 0.95) -> VarianceEstimate:
    """The unbiased population variance of the reported values, its SE and ``level`` interval (module docstring)
    from the report codes ``reports``."""
    r = np.asarray(reports).reshape(-1)
    if not np.issubdtype(r.dtype, np.integer) or r.size and (r.min() < 0 or r.max() >= sampler.reports):
        raise ValidationError("reports", f"integer report codes in [0, {sampler.reports})", "a code outside")
    return estimate_variance_from_counts(sampler, np.bincount(r.astype(np.int64), minlength=sampler.reports),
                                         value_range, level)


def estimate_variance_from_counts(sampler: VarianceSampler, counts: npt.ArrayLike, value_range: NumericRange,
                                  level: float = 0.95) -> VarianceEstimate:
    """:func:`estimate_variance` from the counts of reports per code (length ``sampler.reports``; sufficient)."""
    check_answerable(sampler)
    z = NormalDist().inv_cdf((1.0 + check_probability(level, "level")) / 2.0)
    c = np.asarray(counts).reshape(-1)
    if c.size != sampler.reports or not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
        raise ValidationError("counts", f"{sampler.reports} non-negative integer report counts", "malformed")
    n = int(c.sum())
    if n == 0:
        raise ValidationError("reports", "at least one report", "got none")
    moment = second_moment(sampler)
    big_a, small_c, a = moment.a, moment.c, moment.a - 1.0
    w = c.astype(np.float64)
    y = sampler.estimates(np.arange(sampler.reports))
    y_bar = float(w @ y) / n
    y2_bar = float(w @ (y * y)) / n
    m2 = (y2_bar - small_c) / big_a
    estimate = m2 - y_bar * y_bar + (a * m2 + small_c) / n
    if n > 1:
        dy, dy2 = y - y_bar, y * y - y2_bar                  # centred, so no cancellation in the moments
        s = np.array([[w @ (dy * dy), w @ (dy * dy2)], [w @ (dy * dy2), w @ (dy2 * dy2)]]) / (n - 1)
        g = np.array([-2.0 * y_bar, (1.0 + a / n) / big_a])
        se = math.sqrt(max(float(g @ s @ g), 0.0) / n)
    else:
        se = math.nan
    scale = value_range.half_width ** 2
    centre, se = estimate * scale, se * scale
    return VarianceEstimate(centre, se, centre - z * se, centre + z * se, n, level)


def histogram_variance(theta: npt.ArrayLike, value_range: NumericRange) -> float:
    """The variance on the value scale of the histogram ``theta`` on equal buckets of the range, uniform within a
    bucket (module docstring)."""
    t = np.asarray(theta, dtype=np.float64)
    t = t / t.sum()
    k = t.size
    centres = -1.0 + (2.0 * np.arange(k) + 1.0) / k
    mean = float(t @ centres)
    return (float(t @ (centres * centres)) + (2.0 / k) ** 2 / 12.0 - mean * mean) * value_range.half_width ** 2

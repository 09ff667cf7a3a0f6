"""Estimators for numeric reports: the mean and sum (Duchi, PM, HM) with standard errors and intervals,
and Square Wave's distribution by EMS, its quantiles and their bootstrap standard errors.

**Mean.** Each report gives an unbiased :math:`\\hat x_r` (:meth:`estimates`), so
:math:`\\bar x = \\frac1n \\sum_r \\hat x_r` is unbiased for the mean of the values on [−1, 1], with

.. math::  \\mathrm{Var}[\\bar x] = \\frac{1}{n^2} \\sum_r (a x_r^2 + c) = \\frac{a\\,m_2 + c}{n},
           \\qquad m_2 = \\frac1n \\sum_r x_r^2,

:math:`a, c` the sampler's grid-exact coefficients (:meth:`variance_coefficients`; at the papers'
continuous ε they are Wang2019ICDE eq. 4, Lemma 1 and §III-C, :mod:`~ldpsynth.shared.numeric.closed_form`), plus at most
``rounding`` for values off the input grid. :math:`m_2` is estimated without bias where the reports
carry it: :math:`E[\\hat x_r^2] = (a + 1) x_r^2 + c`, so :math:`\\hat m_2 = (\\overline{\\hat x^2} - c)/(a + 1)`
(PM; HM above ε*, where a ≈ 0 so :math:`m_2` hardly matters). Duchi's reports are :math:`\\pm B`
whatever x (a = −1): there :math:`m_2 \\ge \\bar x^2` and a < 0, so :math:`\\hat m_2 = \\bar x^2` gives a
variance that is an upper bound up to the noise of :math:`\\bar x` (by :math:`\\frac1n\\sum_r (x_r - \\bar x)^2`,
at most 1, against :math:`B^2 \\ge 1.08`). :math:`\\hat m_2` is clipped to [0, 1]. The interval is
:math:`\\bar x \\pm z_{(1+\\ell)/2}\\,\\mathrm{SE}` (normal: a sum of n independent bounded reports).
The sum of the n values is :math:`n \\bar x` with SE :math:`n\\,\\mathrm{SE}` (n, the number of reports, is
public). Everything maps to the value scale by :class:`~ldpsynth.shared.numeric.scale.NumericRange`.

**Distribution (SW).** :func:`ems` is Li2020SIGMOD's EMS, as the authors' code runs it
(``vvv214/LDP_Protocols``, ``sw.py``, function ``EMS``): EM for the bucket probabilities :math:`\\theta` of
the reports' multinomial law :math:`P\\theta` (:meth:`SquareWave.transition`), a smoothing step after each
M-step (the binomial kernel (1, 2, 1)/4; at the two end buckets the kernel is cut and renormalised,
(2, 1)/3: their code does so at the bottom end only and leaves the top bucket unsmoothed, which is not followed
here, docs/numeric.md), stopped when the log-likelihood changes by less than ``tolerance`` (1e-3, theirs) or
:math:`\\theta` moves by at most 1/n in L1 (theirs), or after ``max_iterations`` (10,000, theirs).
Quantiles interpolate the fitted
histogram's CDF linearly within a bucket. Their standard error is a nonparametric bootstrap
(:func:`bootstrap_quantiles`): the report counts are redrawn as Multinomial(n, counts/n) (resampling
reports with replacement), EMS is refitted from the uniform start each time, and the SE is the standard
deviation of the refitted quantiles; the interval is the quantile ± z SE. The same bootstrap gives the SE of any
statistic of the histogram (:func:`bootstrap_from_counts`), e.g. the shares of k equal bins (:func:`bin_shares`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_int, check_probability, check_real
from .samplers import Duchi, HybridMechanism, PiecewiseMechanism, SquareWave
from .scale import NumericRange

__all__ = [
    "MeanEstimate",
    "estimate_mean",
    "estimate_mean_from_counts",
    "ems",
    "em_fit",
    "quantiles",
    "QuantileEstimate",
    "bootstrap_quantiles",
    "bin_shares",
    "bootstrap_from_counts",
    "z_value",
]

MeanSampler = Duchi | PiecewiseMechanism | HybridMechanism


@dataclass(frozen=True)
class MeanEstimate:
    """A mean on the value scale with its standard error and interval, from ``n`` reports."""

    mean: float
    standard_error: float
    low: float
    high: float
    n: int
    level: float

    @property
    def sum(self) -> float:
        """:math:`n \\bar v`: the estimated sum of the n values."""
        return self.n * self.mean

    @property
    def sum_standard_error(self) -> float:
        return self.n * self.standard_error

    @property
    def sum_interval(self) -> tuple[float, float]:
        return self.n * self.low, self.n * self.high


def z_value(level: float) -> float:
    """The normal quantile :math:`z_{(1+\\ell)/2}` of a two-sided ``level`` interval."""
    return NormalDist().inv_cdf((1.0 + check_probability(level, "level")) / 2.0)


def _reports(reports: npt.ArrayLike, size: int) -> np.ndarray:
    r = np.asarray(reports).reshape(-1)
    if r.size == 0:
        raise ValidationError("reports", "at least one report", "got none")
    if not np.issubdtype(r.dtype, np.integer) or r.min() < 0 or r.max() >= size:
        raise ValidationError("reports", f"integer report codes in [0, {size})", "a code outside")
    return r.astype(np.int64)


def estimate_mean(sampler: MeanSampler, reports: npt.ArrayLike, value_range: NumericRange,
                  level: float = 0.95) -> MeanEstimate:
    """The unbiased mean of the reported values, its SE and its ``level`` interval (module docstring)."""
    r = _reports(reports, sampler.reports)
    x = sampler.estimates(r)
    return _mean_estimate(sampler, float(x.mean()), float(np.mean(x * x)), x.size, value_range, level)


def estimate_mean_from_counts(sampler: MeanSampler, counts: npt.ArrayLike, value_range: NumericRange,
                              level: float = 0.95) -> MeanEstimate:
    """:func:`estimate_mean` of the reports whose counts per report code are ``counts`` (length
    ``sampler.reports``): :math:`\\bar x = \\frac1n \\sum_y c_y \\hat x_y`, and the same for
    :math:`\\overline{\\hat x^2}`; the counts are sufficient (what a collection's shards store)."""
    c = np.asarray(counts).reshape(-1)
    if c.size != sampler.reports or not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
        raise ValidationError("counts", f"{sampler.reports} non-negative integer report counts", "malformed")
    n = int(c.sum())
    if n == 0:
        raise ValidationError("reports", "at least one report", "got none")
    x = sampler.estimates(np.arange(sampler.reports))
    w = c.astype(np.float64)
    return _mean_estimate(sampler, float(w @ x) / n, float(w @ (x * x)) / n, n, value_range, level)


def _mean_estimate(sampler: MeanSampler, mean: float, mean_square: float, n: int, value_range: NumericRange,
                   level: float) -> MeanEstimate:
    """The estimate from :math:`\\bar x` and :math:`\\overline{\\hat x^2}` of n reports (module docstring)."""
    z = z_value(level)
    v = sampler.variance_coefficients()
    if v.a + 1.0 > 0.5:
        m2 = (mean_square - v.c) / (v.a + 1.0)
    else:
        m2 = mean * mean
    m2 = min(max(m2, 0.0), 1.0)
    per_report = max(v.a * m2 + v.c, 0.0) + v.rounding
    se = math.sqrt(per_report / n) * value_range.half_width
    centre = float(value_range.from_unit(mean))
    return MeanEstimate(centre, se, centre - z * se, centre + z * se, n, level)


def _smooth(theta: np.ndarray) -> np.ndarray:
    """The binomial kernel (1, 2, 1)/4, cut and renormalised to (2, 1)/3 at the ends; then normalised."""
    out = 2.0 * theta
    out[1:] += theta[:-1]
    out[:-1] += theta[1:]
    weights = np.full(theta.size, 4.0)
    weights[[0, -1]] = 3.0
    out /= weights
    return out / out.sum()


def ems(sampler: SquareWave, counts: npt.ArrayLike, *, tolerance: float = 1e-3,
        max_iterations: int = 10_000) -> np.ndarray:
    """Bucket probabilities fitted by EMS to the report ``counts`` (length ``sampler.reports``).

    Stops when an iteration changes the total log-likelihood by less than ``tolerance``, or moves the
    fit by at most 1/n in L1 (module docstring).
    """
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    if c.size != sampler.reports:
        raise ValidationError("counts", f"{sampler.reports} non-negative report counts, not all zero")
    return em_fit(sampler.transition(), c, smoothing=True, tolerance=tolerance, max_iterations=max_iterations)


def em_fit(transition: np.ndarray, counts: npt.ArrayLike, *, smoothing: bool, tolerance: float = 1e-3,
           max_iterations: int = 10_000) -> np.ndarray:
    """EM for the input probabilities :math:`\\theta` of the reports' multinomial law :math:`P\\theta`
    (``transition`` P of shape (reports, inputs), columns summing to 1), from the uniform start:
    :math:`\\theta \\leftarrow \\theta \\odot P^T (c / P\\theta)`, normalised, then the (1, 2, 1)/4 smoothing step
    when ``smoothing`` (EMS); stopped as :func:`ems`."""
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    if c.size != transition.shape[0] or not (c >= 0).all() or c.sum() <= 0:
        raise ValidationError("counts", f"{transition.shape[0]} non-negative report counts, not all zero")
    tol = check_real(tolerance, "tolerance", low=0.0, low_open=True)
    iterations = check_int(max_iterations, "max_iterations", 1)
    p = transition
    theta = np.full(p.shape[1], 1.0 / p.shape[1])
    previous = -math.inf
    for _ in range(iterations):
        old = theta
        theta = theta * (p.T @ (c / (p @ theta)))
        theta = theta / theta.sum()
        if smoothing:
            theta = _smooth(theta)
        likelihood = float(c @ np.log(p @ theta))
        if abs(likelihood - previous) < tol or np.abs(theta - old).sum() <= 1.0 / c.sum():
            break
        previous = likelihood
    return theta


def quantiles(theta: npt.ArrayLike, value_range: NumericRange, q: npt.ArrayLike) -> np.ndarray:
    """The ``q``-quantiles (on the value scale) of the histogram ``theta`` on equal buckets of the range,
    the CDF linear within each bucket."""
    t = np.asarray(theta, dtype=np.float64)
    probs = np.asarray(q, dtype=np.float64)
    if not ((probs >= 0) & (probs <= 1)).all():
        raise ValidationError("q", "probabilities in [0, 1]", "a value outside")
    cdf = np.concatenate([[0.0], np.cumsum(t) / t.sum()])
    edges = value_range.from_unit(np.linspace(-1.0, 1.0, t.size + 1))
    return np.interp(probs, cdf, edges)


@dataclass(frozen=True)
class QuantileEstimate:
    """Quantiles of the EMS histogram with bootstrap standard errors and ``level`` intervals."""

    q: np.ndarray
    value: np.ndarray
    standard_error: np.ndarray
    low: np.ndarray
    high: np.ndarray
    replicates: int


def bootstrap_quantiles(sampler: SquareWave, reports: npt.ArrayLike, value_range: NumericRange,
                        q: npt.ArrayLike, rng: np.random.Generator, *, replicates: int = 100,
                        level: float = 0.95, tolerance: float = 1e-3) -> QuantileEstimate:
    """EMS quantiles with bootstrap SEs (module docstring); ``rng`` draws the resamples (aggregator side)."""
    r = _reports(reports, sampler.reports)
    b = check_int(replicates, "replicates", 2)
    z = z_value(level)
    probs = np.asarray(q, dtype=np.float64).reshape(-1)
    value, se = bootstrap_from_counts(sampler, np.bincount(r, minlength=sampler.reports),
                                      lambda theta: quantiles(theta, value_range, probs), rng, replicates=b,
                                      tolerance=tolerance)
    return QuantileEstimate(probs, value, se, value - z * se, value + z * se, b)


def bin_shares(theta: npt.ArrayLike, bins: int) -> np.ndarray:
    """The shares of ``bins`` equal bins of the range under the histogram ``theta`` (on equal buckets of the same
    range), the CDF linear within each bucket as in :func:`quantiles`: :math:`F(e_{j+1}) - F(e_j)`."""
    t = np.asarray(theta, dtype=np.float64)
    k = check_int(bins, "bins", 1)
    cdf = np.concatenate([[0.0], np.cumsum(t) / t.sum()])
    return np.diff(np.interp(np.linspace(0.0, 1.0, k + 1), np.linspace(0.0, 1.0, t.size + 1), cdf))


def bootstrap_from_counts(sampler: SquareWave, counts: npt.ArrayLike,
                          statistic: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator, *,
                          replicates: int = 100, tolerance: float = 1e-3,
                          fit: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``statistic`` of the EMS histogram of the report ``counts`` and its bootstrap SE (module docstring): the
    counts redrawn ``replicates`` times as Multinomial(n, counts/n) by ``rng``, EMS refitted each time, the SE the
    standard deviation of the refitted statistic (``ddof = 1``). ``fit`` (counts to a fitted law) replaces EMS,
    e.g. the EM on declared levels (:func:`~ldpsynth.shared.numeric.levels.fit_levels`)."""
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    n = int(c.sum())
    if n == 0:
        raise ValidationError("reports", "at least one report", "got none")
    refit = fit if fit is not None else (lambda d: ems(sampler, d, tolerance=tolerance))
    value = np.asarray(statistic(refit(c)), dtype=np.float64)
    draws = rng.multinomial(n, c / n, size=check_int(replicates, "replicates", 2))
    refits = np.array([statistic(refit(d)) for d in draws])
    return value, refits.std(axis=0, ddof=1)

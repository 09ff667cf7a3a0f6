"""Quantile intervals on declared levels by inverting the CDF's intervals (the classical test-inversion interval
for a quantile, here with the CDF's bootstrap intervals).

The law is discrete on the levels :math:`v_0 < \\dots < v_N`, with CDF :math:`F(v_k) = \\sum_{i \\le k} \\theta_i` and
quantile :math:`Q(q) = \\min\\{v_k : F(v_k) \\ge q\\}`. The bands come from the **plain** EM on the levels
(:class:`~.fit.LevelModel` without smoothing), whatever smoothing the answer's fit chose: the smoothing step
biases :math:`\\hat F` by more than its bootstrap SE (it moves mass between neighbouring levels, the SE leaves the
bias out): on a 5-level law at ε = 1, n = 2,000 the bands of the smoothed fit covered the 0.1- and 0.25-quantiles
about half the time (tests/shared/numeric_levels_quantiles). From the plain fit's :math:`\\hat F` and the
bootstrap SE :math:`s_k` of :math:`\\hat F(v_k)` (the resamples of the answer's own SE, each fitted by both EMs),
at level :math:`\\ell` with :math:`z = z_{(1+\\ell)/2}`, the CDF's normal interval at each level, clipped to
[0, 1], is

.. math::  F_{lo}(v_k) = \\max(0, \\hat F(v_k) - z s_k), \\qquad F_{hi}(v_k) = \\min(1, \\hat F(v_k) + z s_k),

(:math:`F(v_N) = 1` exactly, SE 0) and the quantile's interval is

.. math::  L = \\min\\{v_k : F_{hi}(v_k) \\ge q\\}, \\qquad U = \\min\\{v_k : F_{lo}(v_k) \\ge q\\}
           \\quad (v_N \\text{ if none}),

widened to :math:`[\\min(L, \\hat Q), \\max(U, \\hat Q)]` so that it holds the answer's estimate
:math:`\\hat Q(q)` (the chosen fit's level quantile; :math:`L \\le \\hat Q \\le U` already when that fit is the
plain one, since :math:`F_{lo} \\le \\hat F \\le F_{hi}`; widening only adds coverage). It is the union of two
one-sided tests, each at :math:`(1 - \\ell)/2`:

* **lower end**: :math:`L > Q` only if :math:`F_{hi}(Q) < q \\le F(Q)`, i.e. the upper one-sided bound of
  :math:`F` at the single level :math:`Q` misses: probability :math:`(1-\\ell)/2` asymptotically, and below it
  when :math:`F(Q) > q`;
* **upper end**: :math:`U < Q` only if :math:`F_{lo}(v_j) \\ge q > F(v_j)` at some level :math:`v_j < Q`: at the
  level just below Q that is the lower one-sided bound missing, :math:`(1-\\ell)/2` at most; the levels further
  below have :math:`F` further below q and estimates positively correlated with it, so the union over them adds
  little (not bounded here beyond the union bound).

So the interval covers :math:`Q(q)` with probability at least :math:`\\ell` asymptotically (up to the union on the
upper side), and more when q lies strictly between two jumps of F (each end's test is then far from its boundary:
the interval is conservative, often the single level). When :math:`F(v_k) = q` exactly (a true quantile at a
jump) the lower test sits on its boundary: :math:`L > Q` with probability near :math:`(1-\\ell)/2`, the upper
end is :math:`v_{k+1}` in most runs, and the interval is the two levels :math:`\\{v_k, v_{k+1}\\}`, covering near
:math:`1 - (1-\\ell)/2`. Why normal and not percentile ends: the shares' normal intervals from the same bootstrap
are measured to cover (docs/numeric.md, "Declared levels"), and 100 resamples put a percentile end on the 2nd or
3rd order statistic, a noisy end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ...validation import check_probability
from ..estimators import bootstrap_from_counts
from .fit import CDF_SLACK, LevelModel

__all__ = ["QuantileIntervals", "invert_cdf", "quantile_intervals"]


@dataclass(frozen=True)
class QuantileIntervals:
    """Per probability q: the level quantile ``value``, its bootstrap SE ``se`` and the interval ``[low, high]``
    inverted from the CDF's (module docstring)."""

    value: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray


def invert_cdf(values: npt.ArrayLike, cdf_low: npt.ArrayLike, cdf_high: npt.ArrayLike, q: npt.ArrayLike
               ) -> tuple[np.ndarray, np.ndarray]:
    """:math:`(L, U)` per probability in ``q``: :math:`L = \\min\\{v_k : F_{hi}(v_k) \\ge q\\}`,
    :math:`U = \\min\\{v_k : F_{lo}(v_k) \\ge q\\}`, the last level where none (module docstring)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    probs = np.asarray(q, dtype=np.float64).reshape(-1, 1) - CDF_SLACK

    def first_at_or_above(cdf: npt.ArrayLike) -> np.ndarray:
        reached = np.asarray(cdf, dtype=np.float64).reshape(1, -1) >= probs
        return np.where(reached.any(axis=1), v[np.argmax(reached, axis=1)], v[-1])

    return first_at_or_above(cdf_high), first_at_or_above(cdf_low)


def quantile_intervals(model: LevelModel, counts: npt.ArrayLike, q: npt.ArrayLike, level: float,
                       rng: np.random.Generator, *, replicates: int) -> QuantileIntervals:
    """The quantiles ``q`` of ``model``'s fit to the report ``counts`` with their bootstrap SE, and the intervals at
    ``level`` inverted from the normal intervals of the plain EM's CDF, widened to hold the estimate where it falls
    outside (module docstring). One set of resamples
    (:func:`~ldpsynth.shared.numeric.estimators.bootstrap_from_counts`, ``replicates`` of them by ``rng``) is fitted
    by ``model`` and, when it smooths, by the plain EM too."""
    probs = np.asarray(q, dtype=np.float64).reshape(-1)
    z = NormalDist().inv_cdf((1.0 + check_probability(level, "level")) / 2.0)
    plain = replace(model, smoothing=False)
    models = (model, plain) if model.smoothing else (model,)
    size = model.levels.count

    def fit(counts: np.ndarray) -> np.ndarray:
        return np.concatenate([m.fit(counts) for m in models])

    def statistic(thetas: np.ndarray) -> np.ndarray:
        return np.concatenate([model.quantiles(thetas[:size], probs), plain.cdf(thetas[-size:])])

    value, se = bootstrap_from_counts(model.sampler, counts, statistic, rng, replicates=replicates, fit=fit)
    k = probs.size
    cdf, cdf_se = value[k:], se[k:]
    low, high = invert_cdf(model.levels.values(), np.clip(cdf - z * cdf_se, 0.0, 1.0),
                           np.clip(cdf + z * cdf_se, 0.0, 1.0), probs)
    return QuantileIntervals(value[:k], se[:k], np.minimum(low, value[:k]), np.maximum(high, value[:k]))

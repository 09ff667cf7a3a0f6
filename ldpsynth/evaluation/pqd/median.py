"""DP-PQD deciders for MEDIAN and other quantiles (DP-PQD §6): EM_med, Hist_med, exact accept probabilities.

The p-quantile of the selected tuples is the :math:`\\lceil p n' \\rceil`-th smallest value (the
median: p = 1/2). Neighbours add or remove one tuple.

* **EM_med** (§6.1, from Cormode et al.): the exponential mechanism over every value e of the
  public domain dom(A) with :math:`u(e) = -|rank(e) - p\\,n'|`, :math:`rank(e) = |\\{\\varphi \\wedge
  A < e\\}|`; :math:`\\Delta u = 1` (a new tuple moves rank(e) by 0 or 1 and :math:`p n'` by p, in
  the same direction), so :math:`\\Pr[e] \\propto e^{\\epsilon u(e)/2}`; then Algorithm 1.
* **Hist_med** (Algorithm 3): :math:`\\tilde n = n' + Lap(2/\\epsilon)` (ε/2);
  :math:`c_1 = |\\{\\varphi \\wedge A \\le l\\}| + Lap(2/\\epsilon)`, :math:`c_2 = |\\{\\varphi \\wedge
  A \\ge r\\}| + Lap(2/\\epsilon)` (disjoint tuples as τ > 0: ε/2 by parallel composition); answer 0
  if :math:`c_1 \\ge \\lceil p\\tilde n \\rceil` or :math:`c_2 \\ge \\lceil (1-p)\\tilde n \\rceil`, else
  1. For the median both thresholds are :math:`\\lceil \\tilde n/2 \\rceil` (lines 8, 10); the first
  quartile uses :math:`\\lceil \\tilde n/4 \\rceil` and :math:`\\lceil 3\\tilde n/4 \\rceil` (§6.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsynth.evaluation.pqd.access import PrivateView
from ldpsynth.evaluation.pqd.noise import laplace, laplace_cdf
from ldpsynth.evaluation.pqd.problem import Decider, DecisionProblem, generic_decider
from ldpsynth.evaluation.primitives.selection import em_probabilities, exponential_mechanism_draws


def em_median_scores(ranks: np.ndarray, selected: float, q: float) -> np.ndarray:
    """:math:`u(e) = -|rank(e) - q n'|` (§6.1; q = 1/2 for the median)."""
    return -np.abs(np.asarray(ranks, dtype=np.float64) - q * selected)


def em_median_accept_probability(candidates: np.ndarray, ranks: np.ndarray, selected: float,
                                 problem: DecisionProblem) -> float:
    """:math:`\\Pr[o=1] = \\sum_{e \\in (l, r)} \\Pr[e]` of EM_med."""
    probs = em_probabilities(em_median_scores(ranks, selected, problem.query.q), problem.epsilon, 1.0)
    l, r = problem.interval
    return float(probs[(candidates > l) & (candidates < r)].sum())


@dataclass(frozen=True)
class EMMedian(Decider):
    """EM_med (§6.1): Algorithm 1 with the exponential-mechanism quantile over dom(A)."""

    name: ClassVar[str] = "EM_med"
    aggregates: ClassVar[tuple[str, ...]] = ("median", "quantile")

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        candidates = problem.require_domain(self.name).candidates()
        with view.accountant.step("exponential mechanism over dom(A), score -|rank(e) - q n'| (sensitivity 1)",
                                  problem.epsilon):
            scores = em_median_scores(view.count_below(candidates), view.count(), problem.query.q)
        return generic_decider(candidates[exponential_mechanism_draws(scores, problem.epsilon, 1.0, rng, trials)],
                               problem)


def hist_median_accept_probability(selected: float, at_most_l: float, at_least_r: float,
                                   problem: DecisionProblem) -> float:
    """Exact :math:`\\Pr[o=1]` of Hist_med:
    :math:`E_{\\tilde n}[F(\\lceil p\\tilde n\\rceil - c_1) F(\\lceil (1-p)\\tilde n\\rceil - c_2)]`.

    The thresholds are step functions of :math:`\\tilde n`; between their breakpoints the two
    Laplace probabilities are constant, so the expectation is an exact finite sum over the cells
    (truncated at 60 noise scales, a tail mass below :math:`10^{-26}`).
    """
    scale = 2.0 / problem.epsilon
    p = problem.query.q
    lo, hi = selected - 60.0 * scale, selected + 60.0 * scale
    edges = [np.arange(math.floor(lo * w), math.ceil(hi * w) + 1) / w for w in (p, 1.0 - p)]
    cuts = np.unique(np.concatenate([[lo, hi], *edges]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    mass = np.diff(laplace_cdf(cuts - selected, scale))
    mid = (cuts[:-1] + cuts[1:]) / 2.0
    below1 = laplace_cdf(np.ceil(p * mid) - at_most_l, scale)
    below2 = laplace_cdf(np.ceil((1.0 - p) * mid) - at_least_r, scale)
    return float(np.sum(mass * below1 * below2))


@dataclass(frozen=True)
class HistMedian(Decider):
    """Hist_med (Algorithm 3) and its quantile generalisation (§6.2)."""

    name: ClassVar[str] = "Hist_med"
    aggregates: ClassVar[tuple[str, ...]] = ("median", "quantile")

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        scale = 2.0 / problem.epsilon
        p = problem.query.q
        l, r = problem.interval
        with view.accountant.step(f"noisy count n' + Lap({scale:g})", problem.epsilon / 2.0):
            noisy_n = view.count() + laplace(rng, scale, trials)
        with view.accountant.step(f"disjoint counts A <= l, A >= r, each + Lap({scale:g}) (parallel composition)",
                                  problem.epsilon / 2.0):
            c1 = view.count_at_most(np.array([l]))[0] + laplace(rng, scale, trials)
            c2 = view.count_at_least(np.array([r]))[0] + laplace(rng, scale, trials)
        below = c1 >= np.ceil(p * noisy_n)
        above = c2 >= np.ceil((1.0 - p) * noisy_n)
        return (~(below | above)).astype(np.int8)

"""DP-PQD deciders for COUNT (DP-PQD §4): LM_count, EM_count, naive EM_count, and their exact error.

* **LM_count** (§4.1): Algorithm 1 with :math:`\\tilde q = q(D) + Lap(1/\\epsilon)` (Δq = 1).
  Exact error (Prop. 4.2; its cases (1)-(2) are stated as bounds but are equalities):
  :math:`\\Pr[o=1] = \\Pr[l < q(D) + v < r] = F(r - q(D)) - F(l - q(D))`, F the Laplace CDF.
* **EM_count** (§4.2.2): the exponential mechanism on :math:`\\{0, 1\\}` with the score
  :math:`u'` of eqs. 8-10 and :math:`\\Delta u' = 1/(2\\tau)` (Prop. 4.5), so
  :math:`\\Pr[o] \\propto \\exp(\\epsilon\\tau u'(o))` and
  :math:`\\Pr[o=1] = \\sigma(\\epsilon\\tau(u'_1 - u'_0))` (computed with a stable sigmoid).
  **As sampled**, :math:`\\Pr[o=1]` is a float compared with numpy's ``random()`` (multiples of
  :math:`2^{-53}`): where :math:`\\sigma` rounds to 1, :math:`\\Pr[o=0]` becomes exactly 0 on one count
  and :math:`\\ge 2^{-53}` on its neighbour, an unbounded loss. So the probability is kept in
  :math:`[2^{-20}, 1 - 2^{-20}]` (a clamp is monotone, so it never widens a ratio) and the exponent
  uses :math:`\\epsilon - 2^{-29}`: the sampler's rounding (relative :math:`\\le 2^{-31}` of a probability
  :math:`\\ge 2^{-20}`) then keeps the realised loss below ε (tests/evaluation/test_pqd_privacy.py
  computes it exactly). The error it adds is at most :math:`2^{-20}`.
* **EM_count_legacy** reproduces the artifact: it exponentiates the raw weights and, when a
  weight overflows to infinity, replaces the NaN probability by 1 (one overflow: that outcome is
  certain; both: a fair coin), the behaviour behind the paper's rising EM_count error at large ε
  for q12 (§7.2.1). It is **not ε-DP**: once :math:`\\epsilon\\tau` exceeds about 1,419.6 two
  neighbouring counts can give :math:`\\Pr[o=0] = 1/2` and :math:`\\Pr[o=0] = 0`, an unbounded loss;
  it runs only in the evaluation mode.
* **naive EM_count** (§4.2.1, baseline): 0/1 score, :math:`\\Delta u = 1`, error
  :math:`1/(1 + e^{\\epsilon/2})` whatever τ (eqs. 6-7).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsynth.evaluation.pqd.access import PrivateView
from ldpsynth.evaluation.pqd.noise import laplace, laplace_cdf, sigmoid
from ldpsynth.evaluation.pqd.problem import Decider, DecisionProblem, generic_decider

#: EM_count's outcome probabilities as sampled stay in [2^-20, 1 - 2^-20], its exponent uses ε - 2^-29.
EM_PROBABILITY_FLOOR = 2.0**-20
EM_EPSILON_SLACK = 2.0**-29


def laplace_accept_probability(true_answer: float, l: float, r: float, scale: float) -> float:
    """:math:`\\Pr[l < q(D) + Lap(b) < r]`: the probability that Algorithm 1 with the LM answers 1."""
    return float(max(0.0, laplace_cdf(r - true_answer, scale) - laplace_cdf(l - true_answer, scale)))


def decision_error(accept_probability: float, true_answer: float, problem: DecisionProblem) -> float:
    """Error (Def. 3.2) of a decider answering 1 with ``accept_probability``."""
    return 1.0 - accept_probability if problem.satisfied(true_answer) else accept_probability


def lm_count_error(true_answer: float, problem: DecisionProblem) -> float:
    """Exact error of LM_count (Prop. 4.2): e.g.
    :math:`\\tfrac12 e^{-(q-l)\\epsilon} + \\tfrac12 e^{-(r-q)\\epsilon}` inside I."""
    l, r = problem.interval
    return decision_error(laplace_accept_probability(true_answer, l, r, 1.0 / problem.epsilon), true_answer, problem)


def em_count_scores(true_answer: float | np.ndarray, problem: DecisionProblem) -> tuple[np.ndarray, np.ndarray]:
    """The score :math:`u'(o=0), u'(o=1)` of eqs. 8-10 (vectorised over ``true_answer``)."""
    q = np.asarray(true_answer, dtype=np.float64)
    l, r = problem.interval
    tau, center = problem.tau, problem.synthetic_answer
    u1 = np.where(q <= center, (q - (l - tau)) / (2 * tau), 1.0 - (q - center) / (2 * tau))
    u1 = np.where((q <= l - tau) | (q >= r + tau), 0.0, u1)
    return 1.0 - u1, u1


def em_count_accept_probability(true_answer: float, problem: DecisionProblem, legacy_overflow: bool = False) -> float:
    """:math:`\\Pr[o = 1]` of EM_count as sampled (module docstring: clamped, ε less :math:`2^{-29}`),
    or the artifact's arithmetic."""
    u0, u1 = em_count_scores(true_answer, problem)
    if not legacy_overflow:
        scale = max(problem.epsilon - EM_EPSILON_SLACK, 0.0) * problem.tau  # (ε - slack) / (2 Δu'), Δu' = 1/(2τ)
        return float(np.clip(sigmoid(scale * (u1 - u0)), EM_PROBABILITY_FLOOR, 1.0 - EM_PROBABILITY_FLOOR))
    scale = problem.epsilon * problem.tau
    with np.errstate(over="ignore", invalid="ignore"):
        w0, w1 = np.exp(scale * u0), np.exp(scale * u1)
        p0, p1 = w0 / (w0 + w1), w1 / (w0 + w1)
    p0 = 1.0 if np.isnan(p0) else float(p0)
    p1 = 1.0 if np.isnan(p1) else float(p1)
    return p1 / (p0 + p1)


def em_count_error(true_answer: float, problem: DecisionProblem, legacy_overflow: bool = False) -> float:
    """Exact error of EM_count; at :math:`q(D) = q(D_s)` it is :math:`1/(1 + e^{\\epsilon\\tau})` (§4.2.2)."""
    return decision_error(em_count_accept_probability(true_answer, problem, legacy_overflow), true_answer, problem)


def naive_em_count_accept_probability(true_answer: float, problem: DecisionProblem) -> float:
    """:math:`\\Pr[o=1]` of naive EM_count: :math:`e^{\\epsilon/2}/(1+e^{\\epsilon/2})` inside I, else its
    complement (eqs. 6-7)."""
    inside = 1.0 if problem.satisfied(true_answer) else -1.0
    return float(sigmoid(inside * problem.epsilon / 2.0))


def naive_em_count_error(true_answer: float, problem: DecisionProblem) -> float:
    """:math:`1/(1 + e^{\\epsilon/2})` (eq. 6)."""
    return decision_error(naive_em_count_accept_probability(true_answer, problem), true_answer, problem)


@dataclass(frozen=True)
class LMCount(Decider):
    """LM_count (§4.1): Algorithm 1 with :math:`q(D) + Lap(1/\\epsilon)`."""

    name: ClassVar[str] = "LM_count"
    aggregates: ClassVar[tuple[str, ...]] = ("count",)

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        with view.accountant.step("Laplace count q(D) + Lap(1/eps)", problem.epsilon):
            estimates = view.total() + laplace(rng, 1.0 / problem.epsilon, trials)
        return generic_decider(estimates, problem)


@dataclass(frozen=True)
class BinaryEMCount(Decider):
    """EM on the outcomes {0, 1} of a COUNT: one read of :math:`q(D)`, then 1 with probability
    :meth:`accept_probability` (exact, so the evaluation uses it too)."""

    aggregates: ClassVar[tuple[str, ...]] = ("count",)
    #: The accountant's description of the step.
    step: ClassVar[str]

    @abstractmethod
    def accept_probability(self, true_answer: float, problem: DecisionProblem) -> float:
        """:math:`\\Pr[o=1]` when :math:`q(D)` = ``true_answer``."""

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        with view.accountant.step(self.step, problem.epsilon):
            p1 = self.accept_probability(view.total(), problem)
        return (rng.random(trials) < p1).astype(np.int8)


@dataclass(frozen=True)
class EMCount(BinaryEMCount):
    """EM_count (§4.2.2): EM on {0, 1} with the score u' (eqs. 8-10), :math:`\\Delta u' = 1/(2\\tau)`."""

    name: ClassVar[str] = "EM_count"
    step: ClassVar[str] = "exponential mechanism on {0,1}, score u' (sensitivity 1/(2 tau))"

    def accept_probability(self, true_answer: float, problem: DecisionProblem) -> float:
        return em_count_accept_probability(true_answer, problem)


@dataclass(frozen=True)
class LegacyEMCount(EMCount):
    """EM_count with the artifact's overflowing arithmetic (module docstring): not ε-DP, evaluation only."""

    name: ClassVar[str] = "EM_count_legacy"
    differentially_private: ClassVar[bool] = False

    def accept_probability(self, true_answer: float, problem: DecisionProblem) -> float:
        return em_count_accept_probability(true_answer, problem, legacy_overflow=True)


@dataclass(frozen=True)
class NaiveEMCount(BinaryEMCount):
    """EM_count^naive (§4.2.1): EM with the 0/1 score, :math:`\\Delta u = 1` (a baseline)."""

    name: ClassVar[str] = "EM_count_naive"
    step: ClassVar[str] = "exponential mechanism on {0,1}, 0/1 score (sensitivity 1)"

    def accept_probability(self, true_answer: float, problem: DecisionProblem) -> float:
        return naive_em_count_accept_probability(true_answer, problem)

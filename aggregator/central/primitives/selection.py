"""Private selection: the exponential mechanism (Gumbel-max) and report-noisy-max (spec §1.2).

Both pick one index per row of a score array ``(P, m)`` (``P`` independent selections, e.g.
one per sub-database), where the score :math:`u_j(D)` of every candidate moves by at most
``sensitivity`` Δ between neighbouring datasets.

* **Exponential mechanism** EM(ε, u, Δ): :math:`\\Pr[j] \\propto \\exp(\\epsilon u_j / (2\\Delta))`;
  ε-DP (McSherry–Talwar 2007) and :math:`\\epsilon^2/8`-zCDP. Sampled by the Gumbel-max trick,
  :math:`\\arg\\max_j \\epsilon u_j/(2\\Delta) + G_j` with iid standard Gumbel :math:`G_j`, entirely in
  log space (no score is exponentiated, so no overflow; spec §1.2). :func:`em_log_probabilities`
  gives the exact selection law (log-sum-exp) for tests and audits.
* **Report-noisy-max** with Laplace noise: :math:`\\arg\\max_j u_j + \\mathrm{Lap}(b)_j`. ε-DP with
  :math:`b = 2\\Delta/\\epsilon` for arbitrary scores; :math:`b = \\Delta/\\epsilon` suffices only when all
  scores move in the same direction between neighbours (Dwork–Roth Claim 3.9), which is false for
  MWEM's :math:`|q(A) - q(B)|` and DPFW's signed errors, so :func:`report_noisy_max` always uses
  :math:`2\\Delta/\\epsilon`. For two candidates the selection law is closed-form
  (:func:`rnm_two_candidate_probability`), which the tests use to show that Δ/ε is not enough.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from ldpsynth.shared.validation import check_epsilon


def em_logits(scores: npt.ArrayLike, epsilon: float, sensitivity: float) -> np.ndarray:
    """:math:`\\epsilon u / (2\\Delta)`: the log-weights of the exponential mechanism."""
    eps, delta = check_epsilon(epsilon, "epsilon"), check_epsilon(sensitivity, "sensitivity")
    return np.asarray(scores, dtype=np.float64) * (eps / (2.0 * delta))


def em_log_probabilities(scores: npt.ArrayLike, epsilon: float, sensitivity: float) -> np.ndarray:
    """Exact log selection probabilities of EM(ε, u, Δ) along the last axis (log-softmax)."""
    logits = em_logits(scores, epsilon, sensitivity)
    return logits - logsumexp(logits, axis=-1, keepdims=True)


def exponential_mechanism(scores: npt.ArrayLike, epsilon: float, sensitivity: float,
                          rng: np.random.Generator) -> np.ndarray:
    """One EM(ε, u, Δ) draw per row of ``scores`` (``(m,)`` -> scalar array, ``(P, m)`` -> ``(P,)``).

    Gumbel-max: :math:`\\arg\\max_j \\epsilon u_j/(2\\Delta) + G_j` has exactly the law
    :math:`\\mathrm{softmax}(\\epsilon u/(2\\Delta))`.
    """
    logits = em_logits(scores, epsilon, sensitivity)
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)


def rnm_scale(epsilon: float, sensitivity: float) -> float:
    """Laplace scale of ε-DP report-noisy-max for non-monotone scores: :math:`2\\Delta/\\epsilon`."""
    return 2.0 * check_epsilon(sensitivity, "sensitivity") / check_epsilon(epsilon, "epsilon")


def report_noisy_max(scores: npt.ArrayLike, epsilon: float, sensitivity: float,
                     rng: np.random.Generator) -> np.ndarray:
    """:math:`\\arg\\max_j u_j + \\mathrm{Lap}(2\\Delta/\\epsilon)_j` per row of ``scores`` (ε-DP)."""
    u = np.asarray(scores, dtype=np.float64)
    return np.argmax(u + rng.laplace(scale=rnm_scale(epsilon, sensitivity), size=u.shape), axis=-1)


def rnm_two_candidate_probability(first: float, second: float, scale: float) -> float:
    """:math:`\\Pr[u_1 + L_1 > u_2 + L_2]` for iid :math:`L_i \\sim \\mathrm{Lap}(b)` (exact).

    :math:`L_1 - L_2` has density :math:`\\frac{1}{4b}(1 + |x|/b)e^{-|x|/b}`, whose survival function at
    :math:`t \\ge 0` is :math:`\\frac12 (1 + \\frac{t}{2b}) e^{-t/b}`; here :math:`t = u_2 - u_1`.
    """
    b = check_epsilon(scale, "scale")
    t = float(second) - float(first)
    tail = 0.5 * (1.0 + abs(t) / (2.0 * b)) * math.exp(-abs(t) / b)
    return tail if t >= 0 else 1.0 - tail

"""Private selection: the exponential mechanism and report-noisy-max.

Every function takes ``(scores, epsilon, sensitivity, ...)``: scores :math:`u_j(D)` of the
candidates along the last axis, each moving by at most ``sensitivity`` Δ between neighbouring
datasets.

* **Exponential mechanism** EM(ε, u, Δ) (MT07): :math:`\\Pr[j] \\propto \\exp(\\epsilon u_j / (2\\Delta))`;
  ε-DP and :math:`\\epsilon^2/8`-zCDP (CR21). Its law is computed in log space (log-sum-exp: no
  score is exponentiated raw, so no overflow): :func:`em_log_probabilities`, :func:`em_probabilities`.
  Two samplers of that law:

  - :func:`exponential_mechanism` — Gumbel-max, one draw per row of a ``(P, m)`` array (``P``
    independent selections, e.g. one per sub-database):
    :math:`\\arg\\max_j \\epsilon u_j/(2\\Delta) + G_j` with iid standard Gumbel :math:`G_j` has
    exactly the law :math:`\\mathrm{softmax}(\\epsilon u/(2\\Delta))`;
  - :func:`exponential_mechanism_draws` — inverse CDF, ``trials`` iid draws from one score vector
    with one uniform each (the DP-PQD deciders and the DP-PQD experiment's MWEM draw this way; their
    recorded results depend on it).
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
from scipy.special import log_softmax

from ldpsynth.shared.validation import check_epsilon


def em_logits(scores: npt.ArrayLike, epsilon: float, sensitivity: float) -> np.ndarray:
    """:math:`\\epsilon u / (2\\Delta)`: the log-weights of the exponential mechanism."""
    eps, delta = check_epsilon(epsilon, "epsilon"), check_epsilon(sensitivity, "sensitivity")
    return eps * np.asarray(scores, dtype=np.float64) / (2.0 * delta)


def em_log_probabilities(scores: npt.ArrayLike, epsilon: float, sensitivity: float) -> np.ndarray:
    """Exact log selection probabilities of EM(ε, u, Δ) along the last axis (log-softmax)."""
    return log_softmax(em_logits(scores, epsilon, sensitivity), axis=-1)


def em_probabilities(scores: npt.ArrayLike, epsilon: float, sensitivity: float) -> np.ndarray:
    """Exact selection probabilities of EM(ε, u, Δ) along the last axis (softmax in log space)."""
    return np.exp(em_log_probabilities(scores, epsilon, sensitivity))


def exponential_mechanism(scores: npt.ArrayLike, epsilon: float, sensitivity: float,
                          rng: np.random.Generator) -> np.ndarray:
    """One EM(ε, u, Δ) draw per row of ``scores`` (``(m,)`` -> scalar array, ``(P, m)`` -> ``(P,)``).

    Gumbel-max: :math:`\\arg\\max_j \\epsilon u_j/(2\\Delta) + G_j` has exactly the law
    :math:`\\mathrm{softmax}(\\epsilon u/(2\\Delta))`.
    """
    logits = em_logits(scores, epsilon, sensitivity)
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)


def exponential_mechanism_draws(scores: npt.ArrayLike, epsilon: float, sensitivity: float, rng: np.random.Generator,
                                trials: int) -> np.ndarray:
    """``trials`` iid EM(ε, u, Δ) draws (indices into the 1-d ``scores``) by inverse-CDF sampling.

    With :math:`F_j = \\sum_{i \\le j} \\Pr[i]` and :math:`U \\sim U[0, 1)`, the smallest ``j`` with
    :math:`U F_m < F_j` has probability :math:`\\Pr[j]` (one uniform per draw).
    """
    cdf = np.cumsum(em_probabilities(scores, epsilon, sensitivity))
    index = np.searchsorted(cdf, rng.random(trials) * cdf[-1], side="right")
    return np.minimum(index, len(cdf) - 1)


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

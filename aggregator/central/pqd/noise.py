"""Noise primitives of the DP-PQD deciders: Laplace draws and CDF, a stable exponential mechanism.

Randomness comes from a ``numpy.random.Generator`` passed in by the caller (seeded in tests and
experiments, which say so); these are central mechanisms for the comparison/evaluation path only.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_softmax


def laplace(rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    """Draws of :math:`Lap(b)`, density :math:`e^{-|z|/b}/(2b)`."""
    return rng.laplace(0.0, scale, size)


def laplace_cdf(x: np.ndarray | float, scale: float) -> np.ndarray:
    """:math:`P[Lap(b) \\le x] = \\tfrac12 e^{x/b}` for :math:`x<0`, :math:`1 - \\tfrac12 e^{-x/b}` otherwise (eqs. 3-4)."""
    z = np.asarray(x, dtype=np.float64) / scale
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    """:math:`1/(1+e^{-x})` without overflow (scipy's expit)."""
    return expit(np.asarray(x, dtype=np.float64))


def exponential_mechanism_probabilities(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """Output probabilities of the EM, :math:`\\propto \\exp(\\epsilon u / (2\\Delta u))` (seed 004 Def. 2.10).

    Computed as a softmax in log space (scores are never exponentiated raw, cf. seed 004 §7.2).
    """
    return np.exp(log_softmax(epsilon * np.asarray(scores, dtype=np.float64) / (2.0 * sensitivity)))


def exponential_mechanism(rng: np.random.Generator, scores: np.ndarray, epsilon: float, sensitivity: float,
                          trials: int) -> np.ndarray:
    """``trials`` independent EM draws (indices into ``scores``) by inverse-CDF sampling."""
    cdf = np.cumsum(exponential_mechanism_probabilities(scores, epsilon, sensitivity))
    index = np.searchsorted(cdf, rng.random(trials) * cdf[-1], side="right")
    return np.minimum(index, len(cdf) - 1)

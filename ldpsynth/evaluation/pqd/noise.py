"""Laplace noise of the DP-PQD deciders: draws and the CDF (DP-PQD eqs. 3-4), and a stable sigmoid.

Randomness comes from a ``numpy.random.Generator`` passed in by the caller (seeded in tests and
experiments, which say so). The deciders' exponential mechanism is
:func:`~..primitives.selection.exponential_mechanism_draws`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def laplace(rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    """Draws of :math:`Lap(b)`, density :math:`e^{-|z|/b}/(2b)`."""
    return rng.laplace(0.0, scale, size)


def laplace_cdf(x: np.ndarray | float, scale: np.ndarray | float) -> np.ndarray:
    """:math:`P[Lap(b) \\le x] = \\tfrac12 e^{x/b}` for :math:`x<0`, :math:`1 - \\tfrac12 e^{-x/b}`
    otherwise (eqs. 3-4)."""
    z = np.asarray(x, dtype=np.float64) / scale
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    """:math:`1/(1+e^{-x})` without overflow (scipy's expit)."""
    return expit(np.asarray(x, dtype=np.float64))

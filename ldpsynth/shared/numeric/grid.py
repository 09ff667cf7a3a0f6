"""The exact grid under every numeric sampler: integer weights, the input grid, the exact law and its ε.

**Why a grid.** A continuous output (PM's uniform on an interval, Laplace noise) drawn with floats
leaks through the floats' uneven spacing (DP-Sniper's Laplace example). Here every sampler maps its
input to a point of a finite input grid and draws one report out of a finite set, with integer
weights over a common integer denominator :math:`W`: the report is picked by one uniform integer
:math:`U \\in [0, W)` from :class:`~ldpsynth.shared.mechanisms.coins.Coins` (the OS CSPRNG on a
device), so no float decides an output and the law :math:`P[y \\mid i] = w_{iy}/W` is known exactly
(:class:`GridLaw`). Its privacy loss :math:`\\max_{i, i', y} \\ln(w_{iy}/w_{i'y})` is compared with an ε
exactly by :func:`satisfies_epsilon_dp` (:func:`~ldpsynth.shared.privacy.log_ratio_exceeds`).

**The input grid.** A value :math:`x \\in [-1, 1]` is rounded at random to one of its two neighbours on
:math:`x_i = -1 + 2i/M`, :math:`i = 0, \\dots, M` (:func:`round_to_grid`): up with probability
:math:`t - \\lfloor t \\rfloor`, :math:`t = (x + 1) M/2`, so :math:`E[x_I] = x` and
:math:`\\mathrm{Var}[x_I] \\le 1/M^2`. The rounding is the device's own processing of its value before
the mechanism; as :math:`P[y \\mid x] = \\sum_i P[i \\mid x] P[y \\mid i]`, the ratio of two inputs'
output probabilities is at most the grid law's worst ratio, so checking the grid law checks the
device. (The up-probability is the float :math:`t - \\lfloor t \\rfloor` truncated to a multiple of
:math:`2^{-53}`: a bias below :math:`2^{-52}/M` in the mean, no effect on privacy.)

**Weights.** :func:`~ldpsynth.shared.mechanism.integer_weights` (the one function that also gives
mechanism E its weights) chooses ``(A, L)`` with :math:`A/L \\le e^{\\epsilon}` exactly and the
denominator within :math:`2^{62}`; the delivered ε is
:func:`~ldpsynth.shared.privacy.delivered_epsilon` ``(A, L)``, the least float
:math:`\\ge \\ln(A/L)`, never above the one asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..mechanisms.coins import CoinFlips
from ..privacy import ratio_within_epsilon

__all__ = [
    "round_to_grid",
    "GridLaw",
    "worst_case_ratio",
    "satisfies_epsilon_dp",
]

#: Resolution of the rounding probability.
_ROUND_BITS = 53


def round_to_grid(x: np.ndarray, points: int, coins: CoinFlips) -> np.ndarray:
    """Indices ``i`` in ``[0, points - 1]`` of :math:`x_i = -1 + 2i/(\\mathrm{points} - 1)`, rounded at random
    so that :math:`E[x_I] = x` (module docstring). ``x`` must already lie in ``[-1, 1]``."""
    steps = points - 1
    t = (np.asarray(x, dtype=np.float64) + 1.0) * (steps / 2.0)
    base = np.minimum(np.floor(t), steps - 1).astype(np.int64)
    up = np.floor((t - base) * 2.0**_ROUND_BITS).astype(np.int64)   # in [0, 2^53]
    return base + (coins.below(1 << _ROUND_BITS, base.shape) < up)


@dataclass(frozen=True)
class GridLaw:
    """The exact law of a sampler on its input grid: ``P[report y | input i] = weights[i, y] / denominator``.

    ``weights`` is an integer array (int64, or Python ints as ``object`` when they exceed 64 bits),
    one row per input grid point, one column per report code; every row sums to ``denominator``.
    """

    weights: np.ndarray
    denominator: int

    def probabilities(self) -> np.ndarray:
        """The law as float64 (for estimators and tests; never for a privacy decision)."""
        return np.asarray(self.weights.astype(object) / self.denominator, dtype=np.float64) \
            if self.weights.dtype == object else self.weights / float(self.denominator)


def worst_case_ratio(law: GridLaw) -> Fraction | None:
    """:math:`\\max_{i, i', y} w_{iy}/w_{i'y}` exactly over the reports y possible from some input; None
    (unbounded) when a report is possible from one input and impossible from another."""
    high = law.weights.max(axis=0)
    low = law.weights.min(axis=0)
    worst = Fraction(1)
    for h, lo in zip(high.tolist(), low.tolist()):
        if h == 0:
            continue
        if lo == 0:
            return None
        if h * worst.denominator > worst.numerator * lo:
            worst = Fraction(h, lo)
    return worst


def satisfies_epsilon_dp(law: GridLaw, epsilon: float) -> bool:
    """Whether :math:`\\ln` :func:`worst_case_ratio` :math:`\\le` ``epsilon`` (the float's exact value),
    decided exactly."""
    return ratio_within_epsilon(worst_case_ratio(law), epsilon)

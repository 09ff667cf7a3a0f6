"""The inverse questions of a plan: the devices, or the ε, each query needs for a target half-width H.

For the mean and eq. 10 normalisers the variance falls like 1/n, so the rows needed are
:math:`\\lceil n\\,\\mathrm{Var}(n)\\,z^2/H^2 \\rceil` (sums and dense queries: no answer). The ε needed at the
planned n solves :math:`\\mathrm{Var}(\\epsilon) = (H/z)^2` (WYZ eq. 16's A and B fall with ε) on a grid of
:data:`EPSILON_STEP` up to :data:`MAX_EPSILON`.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.inverse``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.moments import Moments
from ldpsynth.shared.planning.variances import e_coefficients, e_coefficients_at
from ldpsynth.shared.queries.model import SUM
from ldpsynth.shared.validation import check_epsilon

__all__ = ["EPSILON_STEP", "MAX_EPSILON", "Inverse", "inverse_answers"]

#: The ε answered by the inverse question is a multiple of this, rounded up.
EPSILON_STEP = 0.01
#: Largest ε the inverse question tries (E's exact sampler delivers at most about 43).
MAX_EPSILON = 40.0


@dataclass(frozen=True, eq=False)
class Inverse:
    """Answers to a target half-width: devices needed at the plan's ε, ε needed at the plan's devices.

    ``devices_*`` are NaN for queries whose half-width does not fall with more devices (sums, dense);
    ``epsilon_*`` are multiples of :data:`EPSILON_STEP`, ``inf`` beyond :data:`MAX_EPSILON`.
    """

    target_halfwidth: float
    devices_worst: np.ndarray
    devices_prior: np.ndarray | None
    epsilon_worst: np.ndarray
    epsilon_prior: np.ndarray | None


def _devices_needed(variance: np.ndarray, m: Moments, norms: np.ndarray, n: int, rows_per_device: int,
                    target_variance: float) -> np.ndarray:
    """:math:`\\lceil\\lceil n\\mathrm{Var}(n)/(H/z)^2\\rceil / R\\rceil` where Var falls like 1/n; NaN elsewhere."""
    scales = (norms != SUM) & ~m.fixed & np.isfinite(variance)
    rows = np.maximum(1.0, np.ceil(n * variance / target_variance))
    return np.where(scales, np.ceil(rows / rows_per_device), np.nan)


def _epsilon_needed(m: Moments, which: np.ndarray, n: int, z_norm: np.ndarray, k: int, target_variance: float
                    ) -> np.ndarray:
    """The smallest multiple of :data:`EPSILON_STEP` up to :data:`MAX_EPSILON` at which the variance (h-term
    ``which``) is at most the target, else inf: a binary search over that grid per query (the variance falls
    with ε) with the ideal A(ε), B(ε), then checked with E's exact probabilities at each answer (and
    raised a step where they differ in the last bits)."""
    per_unit = round(1.0 / EPSILON_STEP)
    grid = np.arange(1, round(MAX_EPSILON * per_unit) + 1)
    a_grid, b_grid = e_coefficients_at(grid / per_unit, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        budget = target_variance * z_norm**2 / n         # A(ε) spread + B(ε) which <= budget
    lo, hi = np.zeros(len(z_norm), np.int64), np.full(len(z_norm), len(grid) - 1)
    reachable = (a_grid[-1] * m.spread + b_grid[-1] * which <= budget) & (z_norm > 0)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        good = a_grid[mid] * m.spread + b_grid[mid] * which <= budget
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid + 1)
    steps = np.where(reachable, grid[lo], np.inf)
    for value in np.unique(steps[reachable]):  # a few distinct answers: E's exact probabilities at each
        sel = np.flatnonzero(steps == value)
        while value <= grid[-1]:
            a, b = e_coefficients(MechanismE(value / per_unit, k))
            over = a * m.spread[sel] + b * which[sel] > budget[sel]
            if not over.any():
                break
            sel = sel[over]
            value += 1
            steps[sel] = value if value <= grid[-1] else np.inf
    return steps / per_unit


def inverse_answers(target: float, m: Moments, norms: np.ndarray, n: int, rows_per_device: int, z_norm: np.ndarray,
                    z_level: float, k: int, worst: np.ndarray, prior: np.ndarray, with_prior: bool) -> Inverse:
    """The :class:`Inverse` of a plan of ``n`` rows for the half-width ``target`` at the normal quantile
    ``z_level``, from the plan's moments, normalisers and variances (``worst``; ``prior`` if ``with_prior``)."""
    target = check_epsilon(target, "target_halfwidth")  # a finite number > 0
    target_variance = (target / z_level) ** 2
    return Inverse(
        target,
        _devices_needed(worst, m, norms, n, rows_per_device, target_variance),
        _devices_needed(prior, m, norms, n, rows_per_device, target_variance) if with_prior else None,
        _epsilon_needed(m, m.worst_high, n, z_norm, k, target_variance),  # E's B = s/r > 0: max_v D_g
        _epsilon_needed(m, m.prior, n, z_norm, k, target_variance) if with_prior else None)

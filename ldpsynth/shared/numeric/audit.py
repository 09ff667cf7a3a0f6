"""The distinguishing game (AG24 §4, :mod:`ldpsynth.shared.audit`) against the numeric samplers.

The two inputs are the ends of the range, :math:`x = 1` and :math:`x = -1` (grid points M and 0; SW's
last and first bucket). The event S is the set of reports whose exact probability ratio
:math:`P[y \\mid x_1]/P[y \\mid x_2]` is the largest (:func:`best_event`, from the sampler's exact law):
for every sampler here that ratio is :math:`A/L = e^{\\epsilon}`, so the game's TPR/FPR is the sampler's
real :math:`e^{\\epsilon}` and a sampler that spends more ε than it claims shows as
``epsilon_lower > claimed_epsilon`` (:class:`~ldpsynth.shared.audit.AuditResult`, Clopper-Pearson one-sided
at α/2 each). Imports scipy (through :mod:`ldpsynth.shared.audit`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..audit import DEFAULT_ALPHA, AuditResult
from ..validation import check_epsilon, check_int, check_probability
from .samplers import NumericSampler

__all__ = ["best_event", "audit"]


def best_event(sampler: NumericSampler) -> np.ndarray:
    """The report codes where :math:`w_{\\mathrm{last}, y}/w_{0, y}` is largest (exact rationals); the codes
    possible from the last input only, if there are any."""
    weights = sampler.law().weights
    pairs = list(zip(weights[-1].tolist(), weights[0].tolist()))
    unbounded = [t > 0 and b == 0 for t, b in pairs]
    if any(unbounded):
        return np.array(unbounded)
    ratios = [Fraction(t, b) for t, b in pairs]
    best = max(ratios)
    return np.array([r == best for r in ratios])


def audit(sampler: NumericSampler, name: str, draws: int, claimed_epsilon: float, *,
          alpha: float = DEFAULT_ALPHA, rng: np.random.Generator | None = None) -> AuditResult:
    """Play the game: ``draws`` reports of x = 1 and of x = −1, counted in :func:`best_event`.

    ``rng`` None (default): the device path (``perturb_secure``, the OS CSPRNG); a Generator: the seeded
    simulation path (reproducible). ``v1``/``v2`` of the result are the grid indices of the two inputs.
    """
    n = check_int(draws, "draws", 1)
    claim = check_epsilon(claimed_epsilon, "claimed_epsilon")
    level = check_probability(alpha, "alpha")
    event = best_event(sampler)
    last = sampler.law().weights.shape[0] - 1

    def reports(x: float) -> np.ndarray:
        values = np.full(n, x)
        return sampler.perturb_secure(values) if rng is None else sampler.perturb(values, rng)

    tp = int(event[reports(1.0)].sum())
    fp = int(event[reports(-1.0)].sum())
    return AuditResult(name, last + 1, claim, n, level, last, 0, tp, fp)

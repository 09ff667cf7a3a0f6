"""Exact samplers for one numeric value on [−1, 1]: Duchi et al., Piecewise (PM), Hybrid (HM), Square Wave (SW).

All four draw from the exact grid of :mod:`~ldpsynth.shared.numeric.grid`: the value is rounded at random
to an input grid point i (PM, HM, Duchi: :math:`M + 1` points :math:`-1 + 2i/M`; SW: bucketed into
:math:`M` buckets), then one uniform integer :math:`U \\in [0, W)` picks the report. ``perturb_secure``
draws from the OS CSPRNG (the device), ``perturb`` from a seeded numpy Generator through the same exact
algorithm (:func:`~ldpsynth.shared.mechanisms.coins.seeded_coins`, simulations and tests); ``law()`` is the
exact law on the grid, ``estimates`` maps reports to unbiased estimates of x (not for SW).

**Duchi et al.** (one dimension; Wang2019ICDE Algorithm 1, eq. 3): report :math:`\\pm B`,
:math:`B = (e^\\epsilon + 1)/(e^\\epsilon - 1)`, :math:`P[+B \\mid x] = \\frac12 + \\frac{x}{2}
\\frac{e^\\epsilon - 1}{e^\\epsilon + 1}`. With :math:`e^\\epsilon` replaced by :math:`A/L` and
:math:`x = -1 + 2i/M`, :math:`P[+B \\mid i] = (iA + (M - i)L)/(M(A + L))`, exactly.

**The sliding window** (PM and SW). Reports are cells :math:`j = 0, \\dots, K - 1`, :math:`K = n + w - 1` for
:math:`n` input points; input i puts weight A on the w cells :math:`i \\le j < i + w` and L on the others,
:math:`W = wA + (K - w)L`, so every ratio is :math:`A/L \\le e^\\epsilon`. It is the discrete form of both:

* **PM** (Wang2019ICDE Algorithm 2, eq. 5): output density
  :math:`p = \\frac{e^\\epsilon - e^{\\epsilon/2}}{2e^{\\epsilon/2} + 2}` on :math:`[\\ell(x), r(x)]` of length
  :math:`C - 1`, :math:`p/e^\\epsilon` on the rest of :math:`[-C, C]`,
  :math:`C = \\frac{e^{\\epsilon/2} + 1}{e^{\\epsilon/2} - 1}`; the window moves by :math:`(C + 1)/M` per input step,
  so :math:`w = M (C - 1)/(C + 1) = M e^{-\\epsilon/2}` cells of width :math:`(C + 1)/M`, rounded. The cell's
  value :math:`y_j` is affine in j and chosen so that :math:`E[y_J \\mid i] = x_i` exactly (:meth:`estimates`).
* **SW** (Li2020SIGMOD): input :math:`v \\in [0, 1]`, density :math:`p = e^\\epsilon/(2be^\\epsilon + 1)` within
  b of v and :math:`q = p/e^\\epsilon` on the rest of :math:`[-b, 1 + b]`,
  :math:`b = \\frac{\\epsilon e^\\epsilon - e^\\epsilon + 1}{2e^\\epsilon(e^\\epsilon - 1 - \\epsilon)}`;
  with the input bucketed into M buckets (as Li2020SIGMOD discretise it), :math:`w = 2bM` cells, rounded.

**HM** (Wang2019ICDE §III-C, Lemma 3): with probability :math:`\\alpha` PM, else Duchi, both unbiased, so the
mixture is; :math:`\\alpha = 1 - e^{-\\epsilon/2}` for :math:`\\epsilon > \\epsilon^* \\approx 0.61`, else 0 (HM is
Duchi). :math:`\\alpha` is rounded to a multiple of :math:`2^{-32}` (that changes the variance by
:math:`< 2^{-32}`, not the privacy: each component is ε-DP, and the component is reported).
Reports: PM's cells ``0..K-1``, then Duchi's −B, +B as ``K``, ``K + 1``.

**The grid's effect on the variance.** The rounding adds at most :math:`1/M^2` to a report's variance;
the window's width is rounded to whole cells, which moves PM's variance by :math:`O(1/M)` (at
:math:`M = 2^{10}`, within 0.3 % of the closed form at ε ∈ {0.5, 1, 2, 4}: checked by
``tests/shared/numeric/test_samplers.py``); the grid-exact variance is :meth:`variance_coefficients`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..mechanism import SPACE_BITS, integer_weights
from ..mechanisms.coins import CoinFlips, secure_coins, seeded_coins
from ..privacy import delivered_epsilon
from ..validation import check_epsilon, check_int
from .closed_form import hybrid_alpha, square_wave_b
from .grid import GridLaw, round_to_grid

__all__ = [
    "DEFAULT_GRID_BITS",
    "SW_GRID_BITS",
    "NumericSampler",
    "Duchi",
    "SlidingWindow",
    "PiecewiseMechanism",
    "SquareWave",
    "HybridMechanism",
]

#: Default input grid of PM, HM and Duchi: M = 2^10 steps on [−1, 1].
DEFAULT_GRID_BITS = 10
#: Default buckets of SW: 2^8 (EMS fits 2^8 buckets in ~0.03 s and 2^10 in ~5 s at 10^5 reports, and the
#: bootstrap refits it a hundred times).
SW_GRID_BITS = 8
#: HM's α is a multiple of 2^-ALPHA_BITS.
ALPHA_BITS = 32


class NumericSampler(Protocol):
    """What every numeric sampler offers."""

    epsilon_requested: float
    epsilon: float
    reports: int

    def law(self) -> GridLaw: ...

    def perturb_secure(self, x: npt.ArrayLike) -> np.ndarray: ...

    def perturb(self, x: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray: ...


def _unit(x: npt.ArrayLike) -> np.ndarray:
    """``x`` as a flat float64 array; the caller maps and checks the range (:class:`~.scale.NumericRange`)."""
    return np.asarray(x, dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class VarianceCoefficients:
    """:math:`\\mathrm{Var}[\\hat x \\mid x] = a x^2 + c` on the grid points, plus at most ``rounding`` for a
    value off the grid (the input rounding's variance times ``a + 1``)."""

    a: float
    c: float
    rounding: float


class _Sampler(ABC):
    """Shared plumbing: the secure and the seeded paths run the same :meth:`_sample`."""

    reports: int

    @abstractmethod
    def _sample(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        """Reports of the values ``x`` (on [−1, 1]) drawn with ``coins``."""

    def perturb_secure(self, x: npt.ArrayLike) -> np.ndarray:
        """Reports (int64 codes) of values already on [−1, 1], from the OS CSPRNG (the device path)."""
        return self._sample(_unit(x), secure_coins())

    def perturb(self, x: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The same exact sampler on a seeded Generator's words (simulations and tests, not devices)."""
        return self._sample(_unit(x), seeded_coins(rng))


class Duchi(_Sampler):
    """Duchi et al.'s one-dimensional mechanism on an input grid of ``2^grid_bits + 1`` points (module docstring)."""

    def __init__(self, epsilon: float, grid_bits: int = DEFAULT_GRID_BITS, *, space_bits: int = SPACE_BITS):
        self.epsilon_requested = check_epsilon(epsilon)
        self.steps = 1 << check_int(grid_bits, "grid_bits", 1, 20)
        self.keep, self.lie = integer_weights(self.epsilon_requested, self.steps, self.steps, space_bits=space_bits)
        self.denominator = self.steps * (self.keep + self.lie)
        self.epsilon = delivered_epsilon(self.keep, self.lie)
        self.bound = (self.keep + self.lie) / (self.keep - self.lie)      # B at the delivered A/L
        self.reports = 2

    def _select(self, i: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Report 1 (+B) iff :math:`U < iA + (M - i)L`."""
        return (u < i * self.keep + (self.steps - i) * self.lie).astype(np.int64)

    def _sample(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        i = round_to_grid(x, self.steps + 1, coins)
        return self._select(i, coins.below(self.denominator, i.shape))

    def law(self) -> GridLaw:
        i = np.arange(self.steps + 1, dtype=np.int64)
        plus = i * self.keep + (self.steps - i) * self.lie
        return GridLaw(np.stack([self.denominator - plus, plus], axis=1), self.denominator)

    def estimates(self, reports: npt.ArrayLike) -> np.ndarray:
        """:math:`\\pm B` per report: unbiased for x."""
        return np.where(np.asarray(reports) == 1, self.bound, -self.bound)

    def variance_coefficients(self) -> VarianceCoefficients:
        """:math:`\\mathrm{Var}[\\pm B \\mid x] = B^2 - x^2` (a = −1: rounding adds nothing)."""
        return VarianceCoefficients(-1.0, self.bound**2, 0.0)


class SlidingWindow(_Sampler):
    """A window of ``window`` cells of weight A sliding over ``inputs`` input points (module docstring)."""

    def __init__(self, epsilon: float, inputs: int, window: int, *, space_bits: int = SPACE_BITS):
        self.epsilon_requested = check_epsilon(epsilon)
        self.inputs = check_int(inputs, "inputs", 2)
        self.window = check_int(window, "window", 1)
        self.reports = self.inputs + self.window - 1
        self.keep, self.lie = integer_weights(self.epsilon_requested, self.window, self.reports - self.window,
                                              space_bits=space_bits)
        self.denominator = self.window * self.keep + (self.reports - self.window) * self.lie
        self.epsilon = delivered_epsilon(self.keep, self.lie)

    def _select(self, i: np.ndarray, u: np.ndarray) -> np.ndarray:
        """:math:`U < wA`: cell :math:`i + \\lfloor U/A \\rfloor` of the window; else the
        :math:`\\lfloor (U - wA)/L \\rfloor`-th cell outside it."""
        inside = u < self.window * self.keep
        cell = np.where(inside, i + u // self.keep, 0)
        outside = (u - self.window * self.keep) // self.lie
        return np.where(inside, cell, np.where(outside < i, outside, outside + self.window)).astype(np.int64)

    def _index(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        return round_to_grid(x, self.inputs, coins)

    def _sample(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        i = self._index(x, coins)
        return self._select(i, coins.below(self.denominator, i.shape))

    def law(self) -> GridLaw:
        i = np.arange(self.inputs)[:, None]
        j = np.arange(self.reports)[None, :]
        inside = (j >= i) & (j < i + self.window)
        return GridLaw(np.where(inside, self.keep, self.lie).astype(np.int64), self.denominator)


class PiecewiseMechanism(SlidingWindow):
    """PM on ``2^grid_bits + 1`` input points, window :math:`\\mathrm{round}(M e^{-\\epsilon/2})` cells."""

    def __init__(self, epsilon: float, grid_bits: int = DEFAULT_GRID_BITS, *, space_bits: int = SPACE_BITS):
        eps = check_epsilon(epsilon)
        self.steps = 1 << check_int(grid_bits, "grid_bits", 1, 20)
        super().__init__(eps, self.steps + 1, max(1, round(self.steps * math.exp(-eps / 2))),
                         space_bits=space_bits)
        k, w, a, l, d = self.reports, self.window, self.keep, self.lie, self.denominator
        # E[j | i] = offset + slope i (sums over the window and over all cells)
        self._slope = (a - l) * w / d
        self._offset = (l * k * (k - 1) / 2 + (a - l) * w * (w - 1) / 2) / d

    def estimates(self, reports: npt.ArrayLike) -> np.ndarray:
        """:math:`y_j = 2(j - \\mathrm{offset})/(\\mathrm{slope}\\, M) - 1`, so that :math:`E[y_J \\mid i] = x_i`."""
        j = np.asarray(reports, dtype=np.float64)
        return 2.0 * (j - self._offset) / (self._slope * self.steps) - 1.0

    @cached_property
    def _coefficients(self) -> VarianceCoefficients:
        """Exact on the grid, from the law at x = 0 (c) and x = 1 (a + c); the law is symmetric, so
        the variance is even in x and, being quadratic in i, equal to :math:`a x^2 + c`."""
        p = self.law().probabilities()
        y = self.estimates(np.arange(self.reports))
        second = p @ (y * y)
        c = float(second[self.steps // 2])
        a = float(second[self.steps] - 1.0) - c
        return VarianceCoefficients(a, c, (a + 1.0) / self.steps**2)

    def variance_coefficients(self) -> VarianceCoefficients:
        """:math:`\\mathrm{Var}[y_J \\mid x] = a x^2 + c` on the grid, computed once from the law."""
        return self._coefficients


class SquareWave(SlidingWindow):
    """SW with the input bucketed into ``2^grid_bits`` buckets, window :math:`\\mathrm{round}(2bM)` cells.

    Bucket i holds :math:`[-1 + 2i/M, -1 + 2(i + 1)/M)` (the last one closed). The output is for
    :func:`~ldpsynth.shared.numeric.estimators.ems` (a distribution on the buckets), not an estimate of x.
    """

    def __init__(self, epsilon: float, grid_bits: int = SW_GRID_BITS, *, space_bits: int = SPACE_BITS):
        eps = check_epsilon(epsilon)
        self.buckets = 1 << check_int(grid_bits, "grid_bits", 1, 16)
        super().__init__(eps, self.buckets, max(1, round(2 * square_wave_b(eps) * self.buckets)),
                         space_bits=space_bits)

    def bucket(self, x: npt.ArrayLike) -> np.ndarray:
        """The input bucket :math:`\\min(\\lfloor (x + 1) M/2 \\rfloor, M - 1)` of values on [−1, 1]."""
        return np.minimum(np.floor((_unit(x) + 1.0) * (self.buckets / 2.0)), self.buckets - 1).astype(np.int64)

    def _index(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        return self.bucket(x)

    def transition(self) -> np.ndarray:
        """:math:`P[j \\mid i]` as float64, shape (reports, buckets): the matrix EMS inverts."""
        return self.law().probabilities().T


class HybridMechanism(_Sampler):
    """HM: PM with probability α (a multiple of :math:`2^{-32}`), Duchi otherwise (module docstring)."""

    def __init__(self, epsilon: float, grid_bits: int = DEFAULT_GRID_BITS, *, space_bits: int = SPACE_BITS):
        self.epsilon_requested = check_epsilon(epsilon)
        self.pm = PiecewiseMechanism(self.epsilon_requested, grid_bits, space_bits=space_bits)
        self.duchi = Duchi(self.epsilon_requested, grid_bits, space_bits=space_bits)
        self.alpha_weight = round(hybrid_alpha(self.epsilon_requested) * (1 << ALPHA_BITS))
        self.alpha = self.alpha_weight / (1 << ALPHA_BITS)
        self.epsilon = max(self.pm.epsilon, self.duchi.epsilon) if self.alpha_weight else self.duchi.epsilon
        self.steps = self.pm.steps
        self.reports = self.pm.reports + 2

    def _sample(self, x: np.ndarray, coins: CoinFlips) -> np.ndarray:
        """Round once (PM and Duchi share the grid), pick the component, then draw only its U."""
        i = round_to_grid(x, self.steps + 1, coins)
        use_pm = coins.bernoulli(self.alpha_weight, 1 << ALPHA_BITS, i.shape)
        out = np.empty(i.shape, np.int64)
        pm_rows, du_rows = np.flatnonzero(use_pm), np.flatnonzero(~use_pm)
        if pm_rows.size:
            out[pm_rows] = self.pm._select(i[pm_rows], coins.below(self.pm.denominator, pm_rows.size))
        if du_rows.size:
            out[du_rows] = self.pm.reports + self.duchi._select(i[du_rows],
                                                                coins.below(self.duchi.denominator, du_rows.size))
        return out

    def law(self) -> GridLaw:
        """The mixture over the common denominator :math:`2^{32} W_{PM} W_{D}` (Python ints)."""
        pm, du = self.pm.law(), self.duchi.law()
        alpha, rest = self.alpha_weight, (1 << ALPHA_BITS) - self.alpha_weight
        left = pm.weights.astype(object) * (alpha * du.denominator)
        right = du.weights.astype(object) * (rest * pm.denominator)
        return GridLaw(np.concatenate([left, right], axis=1), (1 << ALPHA_BITS) * pm.denominator * du.denominator)

    def estimates(self, reports: npt.ArrayLike) -> np.ndarray:
        """PM's value for a PM cell, :math:`\\pm B` for Duchi's reports: unbiased for x."""
        r = np.asarray(reports, dtype=np.int64)
        from_pm = r < self.pm.reports
        return np.where(from_pm, self.pm.estimates(np.where(from_pm, r, 0)),
                        self.duchi.estimates(r - self.pm.reports))

    def variance_coefficients(self) -> VarianceCoefficients:
        """:math:`\\alpha(a_{PM} x^2 + c_{PM}) + (1 - \\alpha)(B^2 - x^2)`: both components are unbiased."""
        pm, du = self.pm.variance_coefficients(), self.duchi.variance_coefficients()
        al = self.alpha
        return VarianceCoefficients(al * pm.a + (1 - al) * du.a, al * pm.c + (1 - al) * du.c, al * pm.rounding)

"""A numeric attribute's declared levels: ``step`` on ``[lo, hi]`` means the values are :math:`lo, lo + s, \\dots, hi`.

With :math:`N = (hi - lo)/s` an integer (to :data:`INTEGRAL_TOLERANCE` relative), the :math:`L = N + 1` levels are
:math:`v_k = lo + k (hi - lo)/N`, :math:`k = 0 \\dots N` (so :math:`v_N = hi` exactly). :math:`N \\le`
:data:`MAX_INTERVALS` = 255: SW buckets its input into :math:`M = 2^8` buckets (:data:`~.samplers.SW_GRID_BITS`), and
with :math:`L \\le M` levels their buckets :math:`\\lfloor (x_k + 1) M/2 \\rfloor = \\lfloor kM/N \\rfloor` are
distinct (consecutive levels lie :math:`M/N > 1` buckets apart), so each level's point mass has its own column of
SW's transition matrix and the levels' masses are identifiable (:mod:`~ldpsynth.shared.numeric.levels.fit`).
A value is on a level when :math:`|(v - lo)/s - k| \\le` :data:`LEVEL_TOLERANCE` for an integer k (decimal steps
such as 0.1 are not exact in binary), and is then replaced by :math:`v_k` exactly, so the device and the
aggregator put it in the same bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...errors import ValidationError
from ...validation import check_real

__all__ = ["MAX_INTERVALS", "INTEGRAL_TOLERANCE", "LEVEL_TOLERANCE", "NumericLevels"]

#: Most steps N = (hi - lo)/step: L = N + 1 <= 256 levels, SW's input buckets (module docstring).
MAX_INTERVALS = 255
#: How far (hi - lo)/step may be from an integer, relative to it.
INTEGRAL_TOLERANCE = 1e-9
#: How far (v - lo)/step may be from an integer for v to be on a level (in steps).
LEVEL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class NumericLevels:
    """The levels of ``[lo, hi]`` every ``step``; errors name ``field`` (e.g. ``attributes[rating].step``)."""

    lo: float
    hi: float
    step: float
    field: str = "step"

    def __post_init__(self) -> None:
        legal = f"a number > 0 with (hi - lo)/step an integer in [1, {MAX_INTERVALS}]"
        step = check_real(self.step, self.field, low=0.0, low_open=True, legal=legal)
        ratio = (self.hi - self.lo) / step
        n = round(ratio) if math.isfinite(ratio) else 0
        if not 1 <= n <= MAX_INTERVALS or abs(ratio - n) > INTEGRAL_TOLERANCE * n:
            raise ValidationError(self.field, legal, f"(hi - lo)/step = {ratio:.6g}")
        object.__setattr__(self, "step", step)

    @property
    def intervals(self) -> int:
        """:math:`N = (hi - lo)/s`."""
        return round((self.hi - self.lo) / self.step)

    @property
    def count(self) -> int:
        """:math:`L = N + 1`."""
        return self.intervals + 1

    def values(self) -> np.ndarray:
        """:math:`v_k = lo + k (hi - lo)/N`, the last one ``hi`` exactly."""
        k = np.arange(self.count, dtype=np.float64)
        v = self.lo + k * ((self.hi - self.lo) / self.intervals)
        v[-1] = self.hi
        return v

    def index(self, values: npt.ArrayLike) -> np.ndarray:
        """Each value's level k, or −1 where it is off the levels (NaN, outside the range or between two)."""
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        t = (v - self.lo) / self.step
        k = np.rint(np.nan_to_num(t, nan=-1.0, posinf=-1.0, neginf=-1.0))
        good = np.isfinite(t) & (np.abs(t - k) <= LEVEL_TOLERANCE) & (k >= 0) & (k <= self.intervals)
        return np.where(good, k, -1).astype(np.int64)

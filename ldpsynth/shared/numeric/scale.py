"""A numeric attribute's declared range [lo, hi] and the affine map onto the mechanisms' [−1, 1].

Every numeric sampler works on :math:`[-1, 1]`; a value :math:`v \\in [lo, hi]` is mapped by

.. math::  x = \\frac{2 (v - lo)}{hi - lo} - 1, \\qquad v = lo + \\frac{(x + 1)(hi - lo)}{2},

so a mean maps the same way and a standard error (or a variance's square root) scales by
:math:`(hi - lo)/2`. A value outside the declared range is refused, never clipped (a clipped value
would bias the mean without saying so); the error names the field, the position and the range,
never the value (it is private).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_real, real_range

__all__ = ["NumericRange"]


@dataclass(frozen=True)
class NumericRange:
    """The declared range ``[lo, hi]`` of a numeric attribute named ``field`` (``lo < hi``, finite)."""

    lo: float
    hi: float
    field: str = "value"

    def __post_init__(self) -> None:
        lo = check_real(self.lo, f"{self.field}.lo")
        hi = check_real(self.hi, f"{self.field}.hi", low=lo, low_open=True)
        if not math.isfinite(hi - lo):
            raise ValidationError(f"{self.field}.hi", "a range whose width hi - lo is a finite float",
                                  "hi - lo overflows")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def half_width(self) -> float:
        """:math:`(hi - lo)/2`: the factor from the unit scale's spreads to the value scale's."""
        return (self.hi - self.lo) / 2.0

    def to_unit(self, values: npt.ArrayLike) -> np.ndarray:
        """The values mapped onto :math:`[-1, 1]` (float64); raises :class:`ValidationError` naming the
        field, the first bad position and the range if a value is NaN, infinite or outside ``[lo, hi]``."""
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        bad = ~((v >= self.lo) & (v <= self.hi))      # NaN compares False: bad
        if bad.any():
            raise ValidationError(self.field, real_range(self.lo, self.hi),
                                  "a value outside the declared range", int(np.argmax(bad)))
        x = (v - self.lo) / self.half_width - 1.0
        return np.clip(x, -1.0, 1.0)                  # rounding only: the range was checked

    def from_unit(self, x: npt.ArrayLike) -> np.ndarray:
        """The inverse map, :math:`lo + (x + 1)(hi - lo)/2` (float64; for estimates, not checked)."""
        return self.lo + (np.asarray(x, dtype=np.float64) + 1.0) * self.half_width

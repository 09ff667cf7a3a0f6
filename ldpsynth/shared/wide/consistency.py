"""Consistency of a view's estimate: Norm-Sub (WLLSL20; used by CALM, ZWLHC18, and HDG, YWLCS21).

The unbiased counts :math:`\\hat c` of a view may be negative and need not sum to the view's n. Norm-Sub
subtracts one δ from every cell and clips at 0,

.. math::  \\tilde c(v) = \\max(\\hat c(v) - \\delta, 0), \\qquad \\sum_v \\tilde c(v) = n,

which is the Euclidean projection of :math:`\\hat c` onto the simplex scaled to n (the δ is found by
sorting, as in DSSC08's projection). It trades the estimator's unbiasedness for a smaller error on the
many near-zero cells of a sparse view.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_real

__all__ = ["norm_sub"]


def norm_sub(counts: npt.ArrayLike, total: float) -> np.ndarray:
    """:math:`\\max(\\hat c - \\delta, 0)` summing to ``total`` (module docstring), float64."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or not c.size or not np.isfinite(c).all():
        raise ValidationError("counts", "a non-empty 1-d array of finite numbers", f"got shape {c.shape}")
    n = check_real(total, "total", low=0.0)
    ordered = np.sort(c)[::-1]
    deltas = (np.cumsum(ordered) - n) / np.arange(1, c.size + 1)
    keep = int(np.flatnonzero(ordered - deltas > 0)[-1]) if (ordered - deltas > 0).any() else 0
    return np.maximum(c - deltas[keep], 0.0)

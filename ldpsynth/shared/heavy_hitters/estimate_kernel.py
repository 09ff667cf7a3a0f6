"""A round's population estimates and standard errors in one pass over its cells (numba, optional).

The same IEEE operations, in the same order, as the numpy expressions of
:func:`~ldpsynth.shared.heavy_hitters.server.round_estimate` (no fast-math, so no reassociation or fused
multiply-add: the same bits), per cell: :math:`\\max(a n + b \\hat c_v, 0)` the LDP variance,
:math:`f_v = \\min(\\max(\\hat c_v / n, 0), 1)`, the sampling variance
:math:`N^2 f_v (1 - f_v) / n \\cdot \\rho` (ρ the finite-population factor), then
:math:`(N/n)\\,\\hat c_v` and :math:`\\sqrt{(N/n)^2\\,\\mathrm{ldp} + \\mathrm{sampling}}`. One read of the counts
and one write of each output, in place of a dozen passes over arrays of :math:`D_r` cells.

numba is optional (:mod:`ldpsynth.shared.jit`): without it :data:`KERNEL` is None and the numpy expressions run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpsynth.shared.jit import compiled, numba

__all__ = ["KERNEL"]


@compiled
def _round_estimate(c: np.ndarray, n: float, a: float, b: float, square: float, ratio: float, scale: float,
                    scale2: float, counts: np.ndarray, std_errors: np.ndarray) -> None:  # pragma: no cover - numba
    """``counts``, ``std_errors`` of the cells' unbiased counts ``c`` (module docstring); ``square`` :math:`N^2`,
    ``ratio`` the finite-population factor :math:`(N - n)/(N - 1)`, ``scale`` :math:`N/n`, ``scale2`` its square
    (each as the numpy expressions see it)."""
    na = n * a
    for v in range(c.shape[0]):
        ldp = max(na + b * c[v], 0.0)
        f = min(max(c[v] / n, 0.0), 1.0)
        sampling = square * f * (1 - f) / n * ratio
        counts[v] = scale * c[v]
        std_errors[v] = np.sqrt(scale2 * ldp + sampling)


#: The compiled kernel ``(c, n, a, b, square, ratio, scale, scale2, counts, std_errors)``, or None without numba.
KERNEL: Callable[[np.ndarray, float, float, float, float, float, float, float, np.ndarray, np.ndarray], None] | None = (
    None if numba is None else _round_estimate)

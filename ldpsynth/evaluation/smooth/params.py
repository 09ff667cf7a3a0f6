"""Sizes of the smooth-query mechanism: degrees t, grid N, output size m, rounding grid L, basis R.

JWHZW Alg. 1 step 1 and §3.2; R from App. A.5.

For :math:`n` rows in :math:`[-1,1]^d` and smoothness order :math:`K`:

* ε-DP (Algorithm 1, step 1):

  .. math::  t = \\lceil n^{1/(2d+K)}\\rceil,\\quad N = \\lceil n^{K/(2d+K)}\\rceil,\\quad
             m = \\lceil n^{1+(K+1)/(2d+K)}\\rceil,\\quad L = \\lceil n^{(d+K)/(2d+K)}\\rceil;

* (ε, δ)-DP (§3.2), with :math:`\\ell = \\ln(1/\\delta)` and :math:`D = 3d + 2K`:

  .. math::  t = \\lceil n^{2/D}\\ell^{-1/D}\\rceil,\\quad N = \\lceil n^{2K/D}\\ell^{-K/D}\\rceil,\\quad
             m = \\lceil n^{(4d+4K+2)/D}\\ell^{-(2d+2K+1)/D}\\rceil,\\quad
             L = \\lceil n^{(2d+2K)/D}\\ell^{-(d+K)/D}\\rceil;

* practical variant (App. A.5, :math:`\\tilde C = 0.5`): :math:`R = \\lceil\\tilde C n^{d/(2d+K)}\\rceil` (ε-DP) or
  :math:`\\lceil\\tilde C n^{2d/(3d+2K)}\\rceil` ((ε, δ)-DP), at least 2 (``r = 0`` alone carries no information).
  The paper does not say how R is rounded; we round up (our choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpsynth.shared.validation import check_int, check_probability, check_real, real_range

#: The paper's constant in front of R (App. A.5).
PAPER_R_CONSTANT = 0.5


def check_smoothness(value: object) -> float:
    """The smoothness order K: a finite number > 0 (the experiments use K = s², s the kernel width)."""
    return check_real(value, "K", low=0.0, low_open=True,
                      legal=real_range(0.0, low_open=True) + " (the smoothness order)")


@dataclass(frozen=True)
class SmoothSizes:
    """t (degrees per coordinate), N (grid points per coordinate), m (output rows), L (rounding grid 1/L)."""

    t: int
    N: int
    m: int
    L: int


def _ceil(x: float) -> int:
    # Guard against x = 3.0000000000000004 from pow(): a relative slack of 1e-12 before ceil.
    return max(1, math.ceil(x * (1.0 - 1e-12)))


def smooth_sizes(n: int, d: int, K: float, delta: float | None = None) -> SmoothSizes:
    """Step 1 of Algorithm 1 (``delta`` None: ε-DP) or of its (ε, δ) variant (§3.2)."""
    n = check_int(n, "n", 1)
    d = check_int(d, "d", 1)
    k = check_smoothness(K)
    if delta is None:
        den = 2 * d + k
        return SmoothSizes(_ceil(n ** (1 / den)), _ceil(n ** (k / den)), _ceil(n ** (1 + (k + 1) / den)),
                           _ceil(n ** ((d + k) / den)))
    ell = math.log(1.0 / check_probability(delta, "delta"))
    den = 3 * d + 2 * k
    return SmoothSizes(_ceil(n ** (2 / den) * ell ** (-1 / den)), _ceil(n ** (2 * k / den) * ell ** (-k / den)),
                       _ceil(n ** ((4 * d + 4 * k + 2) / den) * ell ** (-(2 * d + 2 * k + 1) / den)),
                       _ceil(n ** ((2 * d + 2 * k) / den) * ell ** (-(d + k) / den)))


def practical_basis_size(n: int, d: int, K: float, delta: float | None = None,
                         constant: float = PAPER_R_CONSTANT) -> int:
    """R of the practical variant (App. A.5): :math:`\\lceil 0.5\\,n^{d/(2d+K)}\\rceil` or
    :math:`\\lceil 0.5\\,n^{2d/(3d+2K)}\\rceil`, >= 2."""
    n = check_int(n, "n", 1)
    d = check_int(d, "d", 1)
    k = check_smoothness(K)
    constant = check_real(constant, "constant", low=0.0, low_open=True)
    exponent = d / (2 * d + k) if delta is None else 2 * d / (3 * d + 2 * k)
    if delta is not None:
        check_probability(delta, "delta")
    return max(2, _ceil(constant * n**exponent))

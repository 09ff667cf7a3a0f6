"""Tensor-product Chebyshev basis on :math:`[-1,1]^d`: the basis queries of JWHZW Alg. 1 (steps 8 and 14).

JWHZW (Jin, Wang, Huang, Zhong, Wang) writes its basis functions as trigonometric
polynomials in :math:`\\theta_i = \\arccos x_i` (Algorithm 1, steps 8 and 14):

.. math::  \\phi_{\\mathbf r}(\\mathbf x) = \\prod_{i=1}^d \\cos(r_i \\arccos x_i)
           = \\prod_{i=1}^d T_{r_i}(x_i),

where :math:`T_r` is the Chebyshev polynomial of the first kind. We evaluate :math:`T_r` with the
three-term recurrence :math:`T_0 = 1`, :math:`T_1 = x`, :math:`T_{r+1} = 2x T_r - T_{r-1}`
(no trigonometric calls; stable on :math:`[-1, 1]`, where :math:`|T_r| \\le 1`), vectorised over
points, coordinates and degrees, and then take the products over the coordinates for a whole
set of multi-indices at once.

Multi-indices:

* :func:`full_indices` is :math:`\\mathcal T_t^d = \\{0, \\dots, t-1\\}^d` in C order (Algorithm 1,
  step 7; ``r = 0`` first);
* :func:`lowest_degree_indices` is the practical variant's subset of the ``R`` indices of smallest
  total degree :math:`|\\mathbf r|_1` (JWHZW §3.4: "a subset of size R of the ... basis functions
  preferred to lower degrees"). The paper gives no tie-break; we use the graded order in which,
  within one total degree, :math:`\\mathbf r` is sorted *descending* lexicographically (so the first
  coordinate's powers come first: :math:`e_1, e_2, \\dots` then :math:`2e_1, e_1 + e_2, \\dots`),
  the order of ``sklearn.preprocessing.PolynomialFeatures`` (our choice).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int

#: Largest number of multi-indices we build (the LP has one constraint per index).
MAX_INDICES = 1 << 20


def chebyshev_table(x: npt.ArrayLike, max_degree: int) -> np.ndarray:
    """:math:`T_0(x), \\dots, T_{\\mathrm{max\\_degree}}(x)` by the recurrence, stacked on a new last axis.

    ``x`` may have any shape; the result has shape ``x.shape + (max_degree + 1,)``. Values of
    ``x`` should lie in :math:`[-1, 1]` (the recurrence is valid everywhere, but only there is
    :math:`T_r(x) = \\cos(r \\arccos x)`).
    """
    degree = check_int(max_degree, "max_degree", 0)
    arr = np.asarray(x, dtype=np.float64)
    out = np.empty(arr.shape + (degree + 1,))
    out[..., 0] = 1.0
    if degree >= 1:
        out[..., 1] = arr
    twice = 2.0 * arr
    for r in range(2, degree + 1):
        np.multiply(twice, out[..., r - 1], out=out[..., r])
        out[..., r] -= out[..., r - 2]
    return out


def full_indices(d: int, t: int) -> np.ndarray:
    """:math:`\\mathcal T_t^d = \\{0,\\dots,t-1\\}^d` as a ``(t^d, d)`` int64 array in C order (``r = 0`` first)."""
    d = check_int(d, "d", 1)
    t = check_int(t, "t", 1)
    if t**d > MAX_INDICES:
        raise ValidationError("t", f"an integer with t^d <= {MAX_INDICES} (d = {d})", f"got t = {t}")
    grids = np.indices((t,) * d).reshape(d, -1).T
    return np.ascontiguousarray(grids, dtype=np.int64)


def _compositions_descending(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """All ``parts``-tuples of non-negative integers summing to ``total``, descending lexicographically (lazily)."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions_descending(total - first, parts - 1):
            yield (first,) + rest


def lowest_degree_indices(d: int, count: int, max_degree: int | None = None) -> np.ndarray:
    """The ``count`` multi-indices of smallest total degree, graded descending-lexicographic order.

    Always starts with :math:`\\mathbf r = 0`. ``max_degree`` (optional) caps every coordinate
    :math:`r_i \\le` ``max_degree`` (e.g. ``t - 1`` to stay inside :math:`\\mathcal T_t^d`).
    """
    d = check_int(d, "d", 1)
    count = check_int(count, "count", 1, MAX_INDICES)
    cap = None if max_degree is None else check_int(max_degree, "max_degree", 0)
    available = math.inf if cap is None else (cap + 1) ** d
    if count > available:
        raise ValidationError("count", f"an integer in [1, {int(available)}] (multi-indices with r_i <= {cap})",
                              f"got {count}")
    chosen: list[tuple[int, ...]] = []
    for total in itertools.count():
        for r in _compositions_descending(total, d):
            if cap is None or max(r) <= cap:
                chosen.append(r)
                if len(chosen) == count:
                    return np.asarray(chosen, dtype=np.int64).reshape(count, d)
    raise AssertionError("unreachable")  # pragma: no cover


def basis_values(points: npt.ArrayLike, indices: npt.ArrayLike) -> np.ndarray:
    """:math:`\\phi_{\\mathbf r}(\\mathbf x) = \\prod_i T_{r_i}(x_i)` for every point and multi-index.

    ``points`` is ``(P, d)`` in :math:`[-1,1]^d`, ``indices`` ``(R, d)`` non-negative integers;
    the result is ``(P, R)``. One Chebyshev table per coordinate, then ``d`` gathers and
    in-place products (memory ``O(P R)``).
    """
    x = np.asarray(points, dtype=np.float64)
    r = np.asarray(indices)
    if x.ndim != 2:
        raise ValidationError("points", "a (P, d) array", f"got shape {x.shape}")
    if r.ndim != 2 or r.shape[1] != x.shape[1] or r.dtype.kind not in "iu" or (r.size and r.min() < 0):
        raise ValidationError("indices", f"an (R, {x.shape[1]}) array of non-negative integers",
                              f"got shape {r.shape} and dtype {r.dtype}")
    out = np.ones((x.shape[0], r.shape[0]))
    if r.size == 0:
        return out
    table = chebyshev_table(x, int(r.max()))  # (P, d, degree + 1)
    for i in range(x.shape[1]):
        degrees = r[:, i]
        if not degrees.any():
            continue
        out *= table[:, i, :][:, degrees]
    return out

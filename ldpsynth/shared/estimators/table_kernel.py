"""A fused kernel for the sums of a table block (numba, optional): one pass over the weights.

For a block of queries with weight tables ``w[q, g, v]`` over groups with data ``hhat[g, v]``
(eq. 17's unbiased histogram), ``u[g, v] = N[g, v] + r n_g / k`` and ``n_g``, the estimators
need per query (see :class:`ldpsynth.shared.estimators.formulas.BlockSums`):

.. math::
   \\hat t = \\sum_{g,v} w\\,\\hat h, \\quad \\hat v = \\sum_{g,v} (w - m_g)^2 u, \\quad
   \\sum_g n_g a_g,\\ \\sum_g n_g b_g,\\ \\sum_g n_g c_g, \\quad
   \\min_{c_g > 0} a_g,\\ \\max_{c_g > 0} b_g,\\ \\min_{c_g > 0} c_g,\\ \\sum_{c_g > 0} n_g,

with :math:`m_g` the mean, :math:`a_g, b_g` the minimum and maximum and :math:`c_g = b_g - a_g`
of :math:`w[q, g, \\cdot]`. The numpy path (:func:`ldpsynth.shared.estimators.engine._chunk`) makes about
eight passes over each cache-sized chunk; this kernel reads every weight once and releases the
GIL, so the estimators run it on their worker threads over ranges of queries. Floating-point
reassociation is allowed (sums may differ from numpy's in the last bits); no infinity/NaN
assumptions are made (the extrema start at ±inf).

Two kernels compute these sums. :data:`KERNEL` takes any k and any subset of the weight table's
groups; its inner loop runs over a group's k values, so it is scalar. :func:`small_domain_kernel`
returns, for 2 <= k <= :data:`SMALL_DOMAIN` and all groups of the table, a kernel compiled for that k
whose loop over the groups is vectorised (SIMD lanes = groups: LLVM loads k consecutive vectors of
weights and de-interleaves them), faster than the scalar loop for small k (``benchmarks/bench_mechanism.py``,
its grouped-batch rows in benchmarks/results/).

numba is an optional dependency (the ``[aggregator]`` extra): without it :data:`KERNEL` is
None, :func:`small_domain_kernel` returns None and the estimators use the numpy path, which
computes the same sums.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ldpsynth.shared.jit import compiled, numba

__all__ = [
    "small_domain_kernel",
]

#: Floating-point liberties: reassociation and contraction only (no finite-math assumptions).
FASTMATH = {"reassoc", "contract", "arcp", "nsz"}

#: Largest domain size with a kernel of its own (at k = 8 LLVM's de-interleaving makes it 2x slower).
SMALL_DOMAIN = 7

#: 2^52: above it a float64 no longer tells an integer from its neighbours (eq. 21's lattice).
_INTEGER_LIMIT = 4503599627370496.0

F = TypeVar("F", bound=Callable[..., object])


def _compiled(function: F) -> F:
    """``function`` compiled with :data:`FASTMATH` (:func:`ldpsynth.shared.jit.compiled`)."""
    return compiled(function, fastmath=FASTMATH)


@_compiled
def _lattice_kind(values: np.ndarray) -> int:  # pragma: no cover - compiled by numba
    """Kind of ``values`` for eq. 21: 1 every weight 0 or 1 (an indicator), 2 other integers up to
    2^52 (the caller checks the lattice), 0 otherwise. Stops at the first non-integer, so
    real-valued queries cost one comparison."""
    indicator = True
    for x in values:
        if x != 0.0 and x != 1.0:
            indicator = False
            if x != np.floor(x) or abs(x) > _INTEGER_LIMIT:
                return 0
    return 1 if indicator else 2


@_compiled
def _finish_query(q: int, t: float, v: float, lows: np.ndarray, highs: np.ndarray, sizes: np.ndarray, kind: int,
                  t_hat: np.ndarray, v_hat: np.ndarray, low: np.ndarray, high: np.ndarray, spread: np.ndarray,
                  a_min: np.ndarray, b_max: np.ndarray, c_min: np.ndarray, varying: np.ndarray, step: np.ndarray,
                  lattice_check: np.ndarray) -> None:  # pragma: no cover - compiled by numba
    """Store query ``q``'s sums: ``t``, ``v``, the reductions of its groups' extremes ``lows``,
    ``highs`` (the groups' minima and maxima, weighted by ``sizes``) and the lattice step of its
    :func:`_lattice_kind`: indicator queries are decided here (each group's value set is {0}, {1}
    or {0, 1}, a full progression; step 1 if some group takes both values, else 0), other integer
    queries get ``lattice_check[q] = 1`` (the caller runs the general check), the rest step NaN.

    A scalar pass: numba gives LLVM no function-level no-NaN attribute, which its floating-point
    min/max reductions need to be vectorised."""
    lo_sum = 0.0
    hi_sum = 0.0
    spread_sum = 0.0
    a = np.inf
    b = -np.inf
    c = np.inf
    live = 0.0
    for i in range(sizes.shape[0]):
        lo = lows[i]
        hi = highs[i]
        n = sizes[i]
        lo_sum += lo * n
        hi_sum += hi * n
        width = hi - lo
        spread_sum += width * n
        if width > 0.0:
            a = min(a, lo)
            b = max(b, hi)
            c = min(c, width)
            live += n
    t_hat[q] = t
    v_hat[q] = v
    low[q] = lo_sum
    high[q] = hi_sum
    spread[q] = spread_sum
    a_min[q] = a
    b_max[q] = b
    c_min[q] = c
    varying[q] = live
    lattice_check[q] = 1 if kind == 2 else 0
    step[q] = (1.0 if live > 0.0 else 0.0) if kind == 1 else np.nan


@_compiled
def _table_sums(w3: np.ndarray, groups: np.ndarray, start: int, stop: int, hhat: np.ndarray, u: np.ndarray,
                u_sums: np.ndarray, sizes: np.ndarray, t_hat: np.ndarray, v_hat: np.ndarray, low: np.ndarray,
                high: np.ndarray, spread: np.ndarray, a_min: np.ndarray, b_max: np.ndarray, c_min: np.ndarray,
                varying: np.ndarray, step: np.ndarray, lattice_check: np.ndarray
                ) -> None:  # pragma: no cover - compiled by numba
    """Queries ``start .. stop - 1``; group ``i`` of the data is column ``groups[i]`` of ``w3``.

    The centred sum is taken in one pass, shifted by the group's first weight :math:`x_0`
    (:math:`d = w - x_0`, :math:`\\bar d = m_g - x_0`):
    :math:`\\sum_v (w - m_g)^2 u = \\sum_v d^2 u - 2 \\bar d \\sum_v d\\,u + \\bar d^2 \\sum_v u`.
    Every term is of the order of the group's spread squared, so the cancellation is harmless
    whatever the weights' offset (``u_sums[i]`` is :math:`\\sum_v u[i, v]`). The first value has
    :math:`d = 0`, so the shifted sums run over the other :math:`k - 1` values (14 % faster at k = 5).
    The extremes, the lattice step and the stores: :func:`_finish_query`.
    """
    k = w3.shape[2]
    lows = np.empty(groups.shape[0])
    highs = np.empty(groups.shape[0])
    for q in range(start, stop):
        t = 0.0
        v = 0.0
        kind = 1
        for i in range(groups.shape[0]):
            g = groups[i]
            x0 = w3[q, g, 0]
            lo = x0
            hi = x0
            shift = 0.0
            dot = x0 * hhat[i, 0]
            du = 0.0
            ddu = 0.0
            for j in range(1, k):  # d = 0 at j = 0: the shifted sums start at j = 1
                x = w3[q, g, j]
                dot += x * hhat[i, j]
                d = x - x0
                shift += d
                weighted = d * u[i, j]
                du += weighted
                ddu += weighted * d
                lo = min(lo, x)
                hi = max(hi, x)
            mean_shift = shift / k
            v += ddu - 2.0 * mean_shift * du + mean_shift * mean_shift * u_sums[i]
            t += dot
            lows[i] = lo
            highs[i] = hi
            if kind != 0:  # after the first non-integer group: no more checks
                group_kind = _lattice_kind(w3[q, g])
                kind = 0 if group_kind == 0 else max(kind, group_kind)
        _finish_query(q, t, v, lows, highs, sizes, kind, t_hat, v_hat, low, high, spread, a_min, b_max, c_min,
                      varying, step, lattice_check)


@functools.cache
def _small_domain_sums(k: int) -> Callable[..., None]:
    """The sums of :func:`_table_sums` for domain size ``k`` (a compile-time constant) over all groups.

    Arguments: the weights flattened ``w[(q G + g) k + v]``, the query range, ``hhat_t`` and ``u_t``
    value-major (``[v G + g]``), then as :func:`_table_sums` (G = ``len(sizes)``). The loop over the
    groups is vectorised: it reduces nothing across groups but the two sums, which ``reassoc`` lets
    LLVM split into lanes; the extremes' reductions are :func:`_finish_query`'s. Indices are
    unsigned so that numba emits no negative-index wraparound, which would hide the stride k from
    the vectoriser. Compiled once per k (numba's on-disk cache keeps it).
    """
    unsigned = np.uint64

    def sums(w: np.ndarray, start: int, stop: int, hhat_t: np.ndarray, u_t: np.ndarray, u_sums: np.ndarray,
             sizes: np.ndarray, t_hat: np.ndarray, v_hat: np.ndarray, low: np.ndarray, high: np.ndarray,
             spread: np.ndarray, a_min: np.ndarray, b_max: np.ndarray, c_min: np.ndarray, varying: np.ndarray,
             step: np.ndarray, lattice_check: np.ndarray) -> None:  # pragma: no cover - compiled by numba
        groups = sizes.shape[0]
        lows = np.empty(groups)
        highs = np.empty(groups)
        for q in range(start, stop):
            t = 0.0
            v = 0.0
            for i in range(groups):
                base = unsigned((q * groups + i) * k)
                x0 = w[base]
                lo = x0
                hi = x0
                shift = 0.0
                du = 0.0
                ddu = 0.0
                dot = x0 * hhat_t[unsigned(i)]
                for j in range(1, k):  # d = 0 at j = 0, as in _table_sums
                    x = w[base + unsigned(j)]
                    at = unsigned(j * groups + i)
                    dot += x * hhat_t[at]
                    d = x - x0
                    shift += d
                    weighted = d * u_t[at]
                    du += weighted
                    ddu += weighted * d
                    lo = lo if lo < x else x
                    hi = hi if hi > x else x
                mean_shift = shift / k
                v += ddu - 2.0 * mean_shift * du + mean_shift * mean_shift * u_sums[unsigned(i)]
                t += dot
                lows[unsigned(i)] = lo
                highs[unsigned(i)] = hi
            kind = _lattice_kind(w[q * groups * k:(q + 1) * groups * k])
            _finish_query(q, t, v, lows, highs, sizes, kind, t_hat, v_hat, low, high, spread, a_min, b_max, c_min,
                          varying, step, lattice_check)

    return _compiled(sums)


def small_domain_kernel(k: int) -> Callable[..., None] | None:
    """The kernel compiled for domain size ``k`` (see :func:`_small_domain_sums`), or None if k is
    outside 2..:data:`SMALL_DOMAIN` or numba is absent (or :data:`KERNEL` is switched off)."""
    if KERNEL is None or not 2 <= k <= SMALL_DOMAIN:
        return None
    return _small_domain_sums(k)


#: The compiled general kernel, or None without numba.
KERNEL: Callable[..., None] | None = None if numba is None else _table_sums

"""The numba kernels of the table-block sums (shared/estimators/table_kernel.py) against the numpy passes."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.estimators import engine as E
from ldpsynth.shared.estimators import table_kernel

pytestmark = pytest.mark.skipif(table_kernel.KERNEL is None, reason="numba is not installed (the [aggregator] extra)")

FIELDS = ("t_hat", "v_hat", "low", "high", "spread", "a_min", "b_max", "c_min", "varying", "step")


def _numpy_parts(weights: np.ndarray, counts: np.ndarray, debias: E.Debias, select: np.ndarray | None) -> E.BlockSums:
    kernel = table_kernel.KERNEL
    try:
        table_kernel.KERNEL = None
        return E._table_parts(weights, E._Counts.of(counts.astype(np.float64), debias), 2, select)
    finally:
        table_kernel.KERNEL = kernel


@pytest.mark.parametrize("k", [2, 3, 5, 7, 8, 11])
def test_both_paths_give_the_same_block_sums(k: int):
    """Random blocks with constant groups, integer (lattice) and real weights, empty groups, a subset
    of groups: the kernels (the one compiled for k on all groups when k <= SMALL_DOMAIN, the general
    one otherwise and on a subset) and the numpy passes agree on every field."""
    rng = np.random.default_rng(11 + k)
    debias = E.Debias(0.6, 0.4 / k, k)
    weights = rng.random((300, 7, k))
    weights[:100] = rng.integers(-3, 4, (100, 7, k))
    weights[50:80, 2] = 1.5
    weights[90:95] = 2.0
    weights[120:140] = rng.integers(0, 2, (20, 7, k))  # indicator queries: the kernel decides their step
    weights[140], weights[141] = 0.0, 1.0
    weights[150:160] = rng.integers(0, 3, (10, 7, k)) * 2.0  # even integers: a lattice of step 2
    weights[200:220] += 1e8  # a large offset: the kernel's one-pass centred sum must not cancel
    counts = rng.integers(0, 20, (7, k))
    counts[4] = 0
    for select in (None, np.array([0, 2, 3, 6])):
        used = counts if select is None else counts[select]
        fast = E._table_parts(weights, E._Counts.of(used.astype(np.float64), debias), 2, select)
        slow = _numpy_parts(weights, used, debias, select)
        ordinary = np.r_[0:200, 220:300]
        for name in FIELDS:
            np.testing.assert_allclose(getattr(fast, name)[ordinary], getattr(slow, name)[ordinary], rtol=1e-12,
                                       atol=1e-9, err_msg=name)
        # Offset 1e8: the numpy path centres on a rounded mean (error ~ 1e-8); the kernels' shifted
        # sum matches an extended-precision reference to 1e-10 (measured: 3e-12).
        w = (weights[200:220] if select is None else weights[200:220][:, select]).astype(np.longdouble)
        data = E._Counts.of(used.astype(np.float64), debias)
        exact = (((w - w.mean(axis=2, keepdims=True)) ** 2) * data.u.astype(np.longdouble)).sum(axis=(1, 2))
        np.testing.assert_allclose(fast.v_hat[200:220], exact.astype(np.float64), rtol=1e-10)
        np.testing.assert_allclose(slow.v_hat[200:220], exact.astype(np.float64), rtol=1e-7)


def test_small_domains_have_their_own_kernel():
    """k = 2 .. SMALL_DOMAIN get a kernel compiled for their k (so the test above compares it); the
    others and a switched-off KERNEL get None (the general kernel or the numpy passes)."""
    assert all(table_kernel.small_domain_kernel(k) is not None for k in range(2, table_kernel.SMALL_DOMAIN + 1))
    assert table_kernel.small_domain_kernel(5) is table_kernel.small_domain_kernel(5)
    assert table_kernel.small_domain_kernel(table_kernel.SMALL_DOMAIN + 1) is None
    assert table_kernel.small_domain_kernel(1) is None
    kernel = table_kernel.KERNEL
    try:
        table_kernel.KERNEL = None
        assert table_kernel.small_domain_kernel(5) is None
    finally:
        table_kernel.KERNEL = kernel


def test_non_finite_weights_reach_the_sums():
    """A NaN or an infinity in a weight makes t_hat non-finite in the vectorised kernel too, which is
    what the estimators check instead of every weight (estimators._check_finite_sums)."""
    weights = np.random.default_rng(3).random((4, 6, 5))
    weights[1, 2, 3] = np.nan
    weights[2, 0, 0] = np.inf
    weights[3, 5, 4] = -np.inf
    parts = E._table_parts(weights, E._Counts.of(np.full((6, 5), 4.0), E.Debias(0.6, 0.08, 5)), 1)
    assert np.isfinite(parts.t_hat[0])
    assert not np.isfinite(parts.t_hat[1:]).any()

"""The numba kernel of the table-block sums (shared/table_kernel.py) against the numpy passes."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared import estimators as E
from ldpsynth.shared import table_kernel


@pytest.mark.skipif(table_kernel.KERNEL is None, reason="numba is not installed (the [aggregator] extra)")
def test_both_paths_give_the_same_block_sums():
    """Random blocks with constant groups, integer (lattice) and real weights, empty groups, a subset
    of groups: the kernel and the numpy passes agree on every field."""
    rng = np.random.default_rng(11)
    debias = E.Debias(0.6, 0.1, 5)
    weights = rng.random((300, 7, 5))
    weights[:100] = rng.integers(-3, 4, (100, 7, 5))
    weights[50:80, 2] = 1.5
    weights[90:95] = 2.0
    weights[120:140] = rng.integers(0, 2, (20, 7, 5))  # indicator queries: the kernel decides their step
    weights[140], weights[141] = 0.0, 1.0
    weights[200:220] += 1e8  # a large offset: the kernel's one-pass centred sum must not cancel
    counts = rng.integers(0, 20, (7, 5))
    counts[4] = 0
    for select in (None, np.array([0, 2, 3, 6])):
        used = counts if select is None else counts[select]
        fast = E._table_parts(weights, used, debias, 2, select)
        kernel = table_kernel.KERNEL
        try:
            table_kernel.KERNEL = None
            slow = E._table_parts(weights, used, debias, 2, select)
        finally:
            table_kernel.KERNEL = kernel
        ordinary = np.r_[0:200, 220:300]
        for name in ("t_hat", "v_hat", "low", "high", "spread", "a_min", "b_max", "c_min", "varying", "step"):
            np.testing.assert_allclose(getattr(fast, name)[ordinary], getattr(slow, name)[ordinary], rtol=1e-12,
                                       atol=1e-9, err_msg=name)
        # Offset 1e8: the numpy path centres on a rounded mean (error ~ 1e-8); the kernel's shifted
        # sum matches an extended-precision reference to 1e-10 (measured: 3e-12).
        w = (weights[200:220] if select is None else weights[200:220][:, select]).astype(np.longdouble)
        data = E._Counts.of(used.astype(np.float64), debias)
        exact = (((w - w.mean(axis=2, keepdims=True)) ** 2) * data.u.astype(np.longdouble)).sum(axis=(1, 2))
        np.testing.assert_allclose(fast.v_hat[200:220], exact.astype(np.float64), rtol=1e-10)
        np.testing.assert_allclose(slow.v_hat[200:220], exact.astype(np.float64), rtol=1e-7)

"""The Walsh-Hadamard transform: the numba in-place kernel (cache-sized blocks, then radix-4 passes) equals the numpy
radix-4 passes exactly, on int32 and int64, on every size around the block and for rows of several groups."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.mechanisms import wht_kernel
from ldpsynth.shared.mechanisms.bits import walsh_hadamard

needs_numba = pytest.mark.skipif(wht_kernel.KERNEL is None, reason="numba is not installed (the [aggregator] extra)")
BLOCK_BITS = wht_kernel._BLOCK.bit_length() - 1


@needs_numba
@pytest.mark.parametrize("t", [0, 1, 5, BLOCK_BITS - 1, BLOCK_BITS, BLOCK_BITS + 1, BLOCK_BITS + 2, BLOCK_BITS + 3])
@pytest.mark.parametrize("wide", [False, True])
def test_kernel_transform_equals_numpy_passes(t: int, wide: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(t)
    bound = 1 << 40 if wide else 1 << 6                # int64 passes, or int32 ones (absolute sum below 2^31)
    x = rng.integers(-bound, bound, (3, 1 << t))
    compiled = (walsh_hadamard(x), walsh_hadamard(x[1]))
    with monkeypatch.context() as patch:
        patch.setattr(wht_kernel, "KERNEL", None)
        plain = (walsh_hadamard(x), walsh_hadamard(x[1]))
    for got, want in zip(compiled, plain, strict=True):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    assert (compiled[0][:, 0] == x.sum(axis=1)).all()   # the transform at 0 is the sum


@needs_numba
def test_kernel_transform_of_a_delta_is_a_character(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transform of the unit vector at u is :math:`(-1)^{|u \\wedge v|}` (beyond the block: its high passes)."""
    t, u = BLOCK_BITS + 3, 0b1011_0000_0000_0101 & ((1 << (BLOCK_BITS + 3)) - 1)
    x = np.zeros(1 << t, np.int64)
    x[u] = 1
    v = np.arange(1 << t)
    np.testing.assert_array_equal(walsh_hadamard(x), 1 - 2 * (np.bitwise_count(u & v).astype(np.int64) & 1))

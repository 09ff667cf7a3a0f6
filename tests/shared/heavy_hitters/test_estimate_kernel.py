"""A round's estimates: the numba one-pass kernel gives the numpy expressions' results bit for bit (the same
IEEE operations in the same order), over counts below 0, within [0, n] and above n, and every population."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.heavy_hitters import estimate_kernel
from ldpsynth.shared.heavy_hitters.device import RoundSpec
from ldpsynth.shared.heavy_hitters.server import round_estimate

needs_numba = pytest.mark.skipif(estimate_kernel.KERNEL is None,
                                 reason="numba is not installed (the [aggregator] extra)")


@needs_numba
@pytest.mark.parametrize(("epsilon", "width", "n", "population"), [
    (4.0, 12, 3_331, 10_000), (2.0, 10, 1, 1), (1.0, 3, 7, 7), (4.0, 14, 333_333, 1_000_000),
    (0.5, 9, 40_000, 123_456_789_012),              # N^2 beyond 2^53: the kernel gets it as numpy rounds it
])
def test_kernel_estimates_equal_numpy_bit_for_bit(epsilon: float, width: int, n: int, population: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    spec = RoundSpec(1, 8, width, np.array([[3], [9], [200]], np.uint8), epsilon)
    rng = np.random.default_rng(width)
    c = rng.normal(0.0, 3.0 * n, spec.domain_size)                   # below 0, in [0, n] and above n
    compiled = round_estimate(spec, c, n, population)
    with monkeypatch.context() as patch:
        patch.setattr(estimate_kernel, "KERNEL", None)
        plain = round_estimate(spec, c, n, population)
    assert compiled.counts.tobytes() == plain.counts.tobytes()
    assert compiled.std_errors.tobytes() == plain.std_errors.tobytes()
    assert (compiled.std_errors > 0).any()

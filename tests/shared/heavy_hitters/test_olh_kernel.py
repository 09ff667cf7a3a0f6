"""OLH's signed tally: the numba kernel (masks from the byte tables, their span in Gray-code order) and the numpy
doubling path give the same tally, exactly, on every hash width, grouped or not."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms import olh, olh_kernel
from ldpsynth.shared.mechanisms.olh import OLH

needs_numba = pytest.mark.skipif(olh_kernel.KERNEL is None, reason="numba is not installed (the [aggregator] extra)")


def _both(oracle: OLH, reports: np.ndarray, groups: np.ndarray | None, count: int,
          monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, np.ndarray]:
    def tally() -> np.ndarray:
        return oracle._tally(reports) if groups is None else oracle._group_tally(reports, groups, count)

    compiled = tally()
    with monkeypatch.context() as patch:
        patch.setattr(olh_kernel, "KERNEL", None)
        return compiled, tally()


@needs_numba
@pytest.mark.parametrize(("epsilon", "domain", "n"), [
    (0.5, 5, 0), (0.5, 5, 1), (1.0, 1000, 300), (2.0, 4097, 2_000), (4.0, 20_481, 800), (4.0, 1 << 16, 500),
    (7.5, 3_000, 400),                               # g = 1024, the widest hash
])
def test_kernel_tally_equals_numpy_tally(epsilon: float, domain: int, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = OLH(epsilon, domain)
    rng = np.random.default_rng(n + domain)
    reports = oracle.perturb(rng.integers(0, domain, n), rng)
    compiled, numpy_path = _both(oracle, reports, None, 1, monkeypatch)
    assert compiled.dtype == np.int64 and compiled.shape == (oracle.tally_size,)
    np.testing.assert_array_equal(compiled, numpy_path)
    np.testing.assert_array_equal(oracle._support(compiled, n), oracle._support_rows(reports).sum(axis=0))


@needs_numba
def test_kernel_group_tally_and_wide_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups offset each report's cells by ``group * 2^t``; int64 cells (forced) give the same tally as int32."""
    oracle = OLH(4.0, 700)
    rng = np.random.default_rng(3)
    reports = oracle.perturb(rng.integers(0, 700, 1_500), rng)
    reports[:40] = np.arange(40, dtype=np.uint64) % np.uint64(oracle.hash_range)   # seed 0: every mask 0, the
    groups = rng.integers(0, 5, 1_500)                                            # g terms on one cell (up to g)
    compiled, numpy_path = _both(oracle, reports, groups, 5, monkeypatch)
    np.testing.assert_array_equal(compiled, numpy_path)
    monkeypatch.setattr(olh, "_INT32", 0)
    np.testing.assert_array_equal(oracle._group_tally(reports, groups, 5), numpy_path)
    for group in range(5):
        mine = groups == group
        np.testing.assert_array_equal(numpy_path[group], oracle._tally(reports[mine]))
    assert numpy_path[:, 0].max() >= oracle.hash_range                        # a cell got g from one report


def test_support_refuses_a_tally_no_reports_give() -> None:
    """A tally's transform is divisible by g when it sums reports; one off (a forged cell) is refused."""
    oracle = OLH(4.0, 1_000)
    rng = np.random.default_rng(5)
    tally = oracle._tally(oracle.perturb(rng.integers(0, 1_000, 200), rng))
    np.testing.assert_array_equal(oracle._support(tally, 200) * oracle.hash_range,
                                  oracle._support(tally * oracle.hash_range, 200))
    tally[17] += 1
    with pytest.raises(ValidationError, match="not a sum of OLH reports"):
        oracle._support(tally, 200)

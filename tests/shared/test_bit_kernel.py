"""Column counts of packed bitmaps: the numba carry-save kernel, the numpy lanes and unpacking agree exactly."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.mechanisms import bit_kernel
from ldpsynth.shared.mechanisms.bits import column_counts, grouped_column_counts

needs_numba = pytest.mark.skipif(bit_kernel.KERNEL is None, reason="numba is not installed (the [aggregator] extra)")

#: Row counts around the kernel's boundaries: groups of 16 rows, byte lanes emptied every 255 groups.
ROWS = [0, 1, 15, 16, 17, 31, 255 * 16 - 1, 255 * 16, 255 * 16 + 1, 2 * 255 * 16 + 37]
#: Bitmap widths in bytes (whole words and not) and the counted size.
SHAPES = [(1, 1), (1, 8), (3, 20), (8, 64), (9, 70), (17, 136), (128, 1024)]


def reference(bitmaps: np.ndarray, size: int) -> np.ndarray:
    return np.unpackbits(bitmaps, axis=1, count=size, bitorder="little").sum(axis=0, dtype=np.int64)


@pytest.fixture(params=["kernel", "numpy"])
def path(request, monkeypatch):
    """Each path: the compiled kernel, and the numpy lanes with the kernel switched off."""
    if request.param == "kernel" and bit_kernel.KERNEL is None:
        pytest.skip("numba is not installed (the [aggregator] extra)")
    if request.param == "numpy":
        monkeypatch.setattr(bit_kernel, "KERNEL", None)
    return request.param


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("width, size", SHAPES)
def test_column_counts_equal_unpacked_sums(path, n, width, size):
    rng = np.random.default_rng(n * 1000 + width)
    bitmaps = rng.integers(0, 256, (n, width), dtype=np.uint8)
    np.testing.assert_array_equal(column_counts(bitmaps, size), reference(bitmaps, size))


def test_all_ones_reach_the_row_count(path):
    """Every counter level carries: all-ones rows count n in every column (n spans several lane emptyings)."""
    n = 3 * 255 * 16 + 5
    np.testing.assert_array_equal(column_counts(np.full((n, 9), 255, np.uint8), 72), np.full(72, n))


def test_non_contiguous_bitmaps(path):
    bitmaps = np.random.default_rng(7).integers(0, 256, (500, 32), dtype=np.uint8)[::3, 4:20]
    np.testing.assert_array_equal(column_counts(bitmaps, 128), reference(bitmaps, 128))


@pytest.mark.parametrize("n", [0, 1, 40, 5000])
def test_grouped_column_counts_equal_per_group_sums(path, n):
    rng = np.random.default_rng(n)
    bitmaps = rng.integers(0, 256, (n, 13), dtype=np.uint8)
    groups = rng.integers(0, 6, n) if n else np.zeros(0, np.int64)
    out = grouped_column_counts(bitmaps, groups, 7, 100)
    assert out.shape == (7, 100)
    for g in range(7):
        np.testing.assert_array_equal(out[g], reference(bitmaps[groups == g], 100))


@needs_numba
def test_kernel_adds_to_counts():
    """The kernel adds to the counts it is given (grouped counts and merging rely on it)."""
    w = np.random.default_rng(3).integers(0, 2**63, (100, 2), dtype=np.uint64)
    counts = np.full(128, 5, np.int64)
    bit_kernel.KERNEL(w, counts)
    np.testing.assert_array_equal(counts, 5 + reference(w.view(np.uint8), 128))

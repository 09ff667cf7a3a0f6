"""select_cells keeps what a full stable sort keeps: the cap largest (ties by index), over a threshold or not."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.heavy_hitters.candidates import select_cells


def by_full_sort(counts, std_errors, eligible, cap, threshold_count, z):
    estimates = counts[:len(eligible)]
    order = np.flatnonzero(eligible)
    order = order[np.argsort(-estimates[order], kind="stable")]
    if threshold_count is not None:
        order = order[(estimates - z * std_errors[:len(eligible)])[order] >= threshold_count]
    return order[:cap]


@pytest.mark.parametrize("cap", [1, 3, 17, 200, 1000])
@pytest.mark.parametrize("threshold_count", [None, 2.0])
def test_partition_keeps_what_a_full_sort_keeps(cap, threshold_count):
    """Integer-valued estimates (many ties, as equal support counts give), random eligibility, an "other" cell."""
    rng = np.random.default_rng(cap)
    for _ in range(20):
        counts = rng.integers(-5, 8, 401).astype(np.float64)
        std_errors = rng.random(401)
        eligible = rng.random(400) < 0.7
        kept = select_cells(counts, std_errors, eligible, cap=cap, threshold_count=threshold_count, z=1.5)
        expected = by_full_sort(counts, std_errors, eligible, cap, threshold_count, 1.5)
        assert kept.dtype == np.int64
        np.testing.assert_array_equal(kept, expected)

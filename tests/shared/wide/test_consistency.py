"""Norm-Sub: non-negative, summing to n, the Euclidean projection onto the scaled simplex."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import norm_sub


def test_non_negative_summing_to_the_total() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        c = rng.normal(20, 40, size=30)
        out = norm_sub(c, 600)
        assert out.min() >= 0
        assert out.sum() == pytest.approx(600)
        kept = out > 0                                    # one shift on the kept cells, order kept
        assert np.allclose(c[kept] - out[kept], (c - out)[kept][0])
        assert c[~kept].max(initial=-np.inf) <= c[kept].min()


def test_a_consistent_estimate_is_kept_and_an_example() -> None:
    assert np.allclose(norm_sub([1.0, 2.0, 3.0], 6), [1, 2, 3])
    assert np.allclose(norm_sub([5.0, -1.0, 3.0, 0.5], 6), [4, 0, 2, 0])


def test_it_is_the_closest_point_of_the_simplex() -> None:
    rng = np.random.default_rng(4)
    c = rng.normal(0, 3, size=4)
    out = norm_sub(c, 2.0)
    for _ in range(2000):                                 # random points of the scaled simplex are farther
        other = rng.dirichlet(np.ones(4)) * 2.0
        assert np.sum((c - other) ** 2) >= np.sum((c - out) ** 2) - 1e-12


def test_arguments_are_checked() -> None:
    with pytest.raises(ValidationError, match="counts"):
        norm_sub([np.nan], 1)
    with pytest.raises(ValidationError, match="total"):
        norm_sub([1.0], -1)

"""Analytic answers inside measured views: unbiased combination across views, intervals that cover."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import WideDomain, pairs, simulate
from ldpsynth.shared.wide.answers import analytic_marginal

DOMAIN = WideDomain(("a", "b", "c"), (3, 2, 6))


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.integers(0, 3, n)
    return np.stack([a, (rng.random(n) < 0.3 + 0.2 * a).astype(np.int64), rng.binomial(5, 0.3, n)], axis=1)


def test_identity_weights_give_the_cell_variances() -> None:
    rng = np.random.default_rng(1)
    rows = _rows(rng, 2000)
    m = simulate(DOMAIN, pairs(DOMAIN), rows, rng.integers(0, 3, 2000), 1.0, rng)[1]
    assert np.allclose(m.linear_share_variance(np.eye(m.view.size), 2000), m.share_variance(2000))


def test_intervals_of_one_and_two_way_marginals_cover() -> None:
    # 95% intervals of the 1-way marginal of c (combined over 2 views) and of (c, a) (one view, cells reordered)
    # over 150 simulated collections; alpha = 0.001: coverage within 0.95 -+ 3.29 sigma, sigma binomial with a
    # design effect of 4 (cells of a run are correlated).
    rng = np.random.default_rng(8)
    rows = _rows(rng, 3000)
    views = pairs(DOMAIN)
    truth = {attrs: DOMAIN.view(attrs).histogram(rows) / len(rows) for attrs in ((2,), (2, 0))}
    hits = {attrs: 0 for attrs in truth}
    for _ in range(150):
        measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 1.0, rng)
        for attrs, f in truth.items():
            low, high = analytic_marginal(measured, attrs, len(rows)).interval()
            hits[attrs] += int(np.sum((low <= f) & (f <= high)))
    for attrs, f in truth.items():
        total = 150 * f.size
        assert abs(hits[attrs] / total - 0.95) < 3.29 * np.sqrt(0.95 * 0.05 * 4 / total), attrs


def test_combining_views_lowers_the_error() -> None:
    rng = np.random.default_rng(2)
    rows = _rows(rng, 3000)
    measured = simulate(DOMAIN, pairs(DOMAIN), rows, rng.integers(0, 3, 3000), 1.0, rng)
    combined = analytic_marginal(measured, (2,), 3000)
    single = analytic_marginal([m for m in measured if m.view.attributes == (0, 2)], (2,), 3000)
    assert combined.views == ((0, 2), (1, 2))
    assert np.all(combined.standard_errors < single.standard_errors)
    with pytest.raises(ValidationError):
        analytic_marginal(measured, (0, 1, 2), 3000)

"""The Private-PGM model of all attributes: it recovers a known distribution from noisy views, and samples it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mbi")

from ldpsynth.shared.wide import WideDomain, pairs, simulate
from ldpsynth.shared.wide.model import fit, total_variation

DOMAIN = WideDomain(("a", "b", "c"), (3, 2, 4))


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """A chain a -> b -> c with strong dependence."""
    a = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    b = (rng.random(n) < np.array([0.2, 0.6, 0.9])[a]).astype(np.int64)
    c = np.where(b == 1, rng.choice(4, n, p=[0.1, 0.2, 0.3, 0.4]), rng.choice(4, n, p=[0.7, 0.1, 0.1, 0.1]))
    return np.stack([a, b, c], axis=1)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(11)
    rows = _rows(rng, 60_000)
    views = pairs(DOMAIN)
    measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 4.0, rng)
    return rows, fit(DOMAIN, measured, len(rows), iterations=300)


def test_the_model_recovers_the_marginals(fitted) -> None:
    rows, model = fitted
    for attrs in ((0, 1), (1, 2), (0, 2), (2,), (0, 1, 2), (2, 0)):
        truth = DOMAIN.view(attrs).histogram(rows) / len(rows)
        assert model.marginal(attrs).sum() == pytest.approx(1.0)
        assert total_variation(model.marginal(attrs), truth) < 0.03


def test_samples_follow_the_model(fitted) -> None:
    # alpha = 0.001: chi-square of 20,000 sampled rows against the model's joint (24 cells, each >= 5 expected).
    from scipy.stats import chisquare

    _, model = fitted
    sample = model.sample(20_000, np.random.default_rng(5))
    assert sample.shape == (20_000, 3)
    expected = model.marginal((0, 1, 2)) * 20_000
    assert expected.min() >= 5
    observed = DOMAIN.view((0, 1, 2)).histogram(sample)
    assert chisquare(observed, expected).pvalue > 0.001

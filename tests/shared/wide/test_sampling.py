"""Ancestral sampling along the junction tree: it draws from the model's joint (chi-square against the dense
joint, and a sampler that drops the parents is caught), a seed gives the same rows, and a model above the dense
limit now samples (its rows' pair margins are the model's)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

pytest.importorskip("mbi")

from ldpsynth.shared.wide import WideDomain, simulate
from ldpsynth.shared.wide.model import MAX_DENSE_DOMAIN, fit
from ldpsynth.shared.wide.sampling import ancestral_order, ancestral_sample

DOMAIN = WideDomain(("a", "b", "c", "d"), (3, 2, 4, 2))


def _chain(rng: np.random.Generator, n: int, sizes: tuple[int, ...]) -> np.ndarray:
    """A chain x0 -> x1 -> ...: each attribute equals its predecessor (mod its size) with probability 0.7."""
    out = np.zeros((n, len(sizes)), np.int64)
    out[:, 0] = rng.integers(0, sizes[0], n)
    for j in range(1, len(sizes)):
        keep = rng.random(n) < 0.7
        out[:, j] = np.where(keep, out[:, j - 1] % sizes[j], rng.integers(0, sizes[j], n))
    return out


def _fit(domain: WideDomain, rows: np.ndarray, rng: np.random.Generator, iterations: int):
    views = [domain.view((j, j + 1)) for j in range(domain.width - 1)]
    measured = simulate(domain, views, rows, rng.integers(0, len(views), len(rows)), 4.0, rng)
    return fit(domain, measured, len(rows), iterations=iterations)


@pytest.fixture(scope="module")
def chain_model():
    rng = np.random.default_rng(21)
    return _fit(DOMAIN, _chain(rng, 40_000, DOMAIN.sizes), rng, 300)


def _chi_square(observed: np.ndarray, expected: np.ndarray) -> float:
    """Pearson's p-value, the cells under 5 expected pooled into one bin."""
    small = expected < 5
    e, o = expected[~small], observed[~small]
    if small.any():
        e, o = np.append(e, expected[small].sum()), np.append(o, observed[small].sum())
    return float(chisquare(o, e * o.sum() / e.sum()).pvalue)


def _pvalue(model, sample: np.ndarray) -> float:
    """Chi-square of ``sample`` against the model's dense joint."""
    expected = model.joint.ravel() * len(sample)
    return _chi_square(np.bincount(np.ravel_multi_index(sample.T, DOMAIN.sizes), minlength=expected.size), expected)


def test_ancestral_draws_follow_the_dense_joint(chain_model) -> None:
    # alpha = 0.001; 30,000 rows over 96 cells, cells below 5 expected pooled into one bin.
    cliques = [tuple(int(str(n)[1:]) for n in c) for c in chain_model.mrf.cliques]
    order = ancestral_order(DOMAIN.width, cliques)
    assert sorted(a for a, _ in order) == [0, 1, 2, 3] and order[0][1] == ()
    assert all(len(parents) == 1 for _, parents in order[1:])          # a chain: one parent each
    sample = ancestral_sample(DOMAIN.sizes, order, chain_model.marginal, 30_000, np.random.default_rng(3))
    assert sample.shape == (30_000, 4) and sample.dtype == np.int64
    assert _pvalue(chain_model, sample) > 0.001
    again = ancestral_sample(DOMAIN.sizes, order, chain_model.marginal, 30_000, np.random.default_rng(3))
    assert np.array_equal(sample, again)                                # a seed gives the same rows


def test_a_sampler_without_parents_is_caught(chain_model) -> None:
    # The deliberate error: every attribute drawn from its own margin (the parents dropped) makes independent
    # columns; the same chi-square (alpha = 0.001) must reject it.
    order = [(a, ()) for a in range(DOMAIN.width)]
    wrong = ancestral_sample(DOMAIN.sizes, order, chain_model.marginal, 30_000, np.random.default_rng(3))
    assert _pvalue(chain_model, wrong) < 0.001


def test_a_model_above_the_dense_limit_samples() -> None:
    # 5 attributes of 30 values: 24,300,000 cells > 2^24, so no dense joint; the sampled rows' pair margins match
    # the model's (chi-square per pair at alpha = 0.001, cells under 5 expected pooled).
    sizes = (30,) * 5
    domain = WideDomain(tuple("vwxyz"), sizes)
    assert domain.size > MAX_DENSE_DOMAIN
    rng = np.random.default_rng(22)
    model = _fit(domain, _chain(rng, 30_000, sizes), rng, 100)
    sample = model.sample(20_000, np.random.default_rng(4))
    assert sample.shape == (20_000, 5) and sample.min() >= 0 and sample.max() < 30
    assert np.array_equal(sample, model.sample(20_000, np.random.default_rng(4)))
    for pair in ((0, 1), (3, 4)):
        expected = model.marginal(pair) * len(sample)
        assert _chi_square(domain.view(pair).histogram(sample), expected) > 0.001, pair

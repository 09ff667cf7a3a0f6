"""The covariance of a view's estimates: the protocol's count covariance is the matrix of its exact linear
variance, it matches simulated reports, and the share covariance adds the sampling term."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.mechanisms.registry import make_mechanism
from ldpsynth.shared.wide import WideDomain, measure, pairs, simulate
from ldpsynth.shared.wide.measure import protocol_of


@pytest.mark.parametrize("name", ["E", "OLH", "OUE"])
def test_the_count_covariance_is_the_linear_variances_quadratic_form(name: str) -> None:
    rng = np.random.default_rng(1)
    protocol = protocol_of(make_mechanism(name, 1.0, 6))
    histogram = np.array([50, 0, 7, 20, 3, 120])
    weights = rng.normal(size=(5, 6))
    exact = protocol.count_covariance(histogram, histogram.sum())
    assert np.allclose(np.einsum("qu,uv,qv->q", weights, exact, weights), protocol.linear_variance(weights, histogram))
    estimates = histogram + rng.normal(0, 5, 6)          # a plug-in: any counts, negative ones included
    plug_in = protocol.count_covariance(estimates, 200)
    assert np.allclose(np.einsum("qu,uv,qv->q", weights, plug_in, weights),
                       protocol.linear_variance_estimate(weights, estimates, 200))


@pytest.mark.parametrize("name", ["E", "OUE"])
def test_the_count_covariance_matches_simulated_reports(name: str) -> None:
    # 2,000 collections of 300 reports over 3 values; every entry of the sample covariance of the count
    # estimates within 4 of its standard errors of the exact one (alpha about 1e-4 per entry, 6 entries).
    rng = np.random.default_rng(2)
    mechanism = make_mechanism(name, 1.0, 3)
    codes = np.repeat([0, 1, 2], [200, 70, 30])
    view = WideDomain(("a",), (3,)).view((0,))
    counts = np.stack([measure(view, mechanism, mechanism.perturb(codes, rng)).counts() for _ in range(2000)])
    exact = protocol_of(mechanism).count_covariance(np.bincount(codes, minlength=3), len(codes))
    sample = np.cov(counts, rowvar=False)
    spread = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / 2000)
    assert np.all(np.abs(sample - exact) < 4 * spread)
    if name == "E":
        assert np.all(exact[~np.eye(3, dtype=bool)] < 0)     # one report supports one value: negative


def test_the_share_covariance_adds_the_sampling_term() -> None:
    rng = np.random.default_rng(3)
    domain = WideDomain(("a", "b"), (3, 2))
    rows = np.stack([rng.integers(0, 3, 3000), rng.integers(0, 2, 3000)], axis=1)
    m = simulate(domain, pairs(domain, singles=True), rows, rng.integers(0, 3, 3000), 1.0, rng)[2]
    covariance = m.share_covariance(3000)
    weights = rng.normal(size=(4, m.view.size))
    assert np.allclose(np.diag(covariance), m.share_variance(3000))
    assert np.allclose(np.einsum("qu,uv,qv->q", weights, covariance, weights),
                       m.linear_share_variance(weights, 3000))

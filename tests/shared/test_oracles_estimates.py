"""Unbiased counts and the closed-form variance of linear queries, by seeded simulation.

For each oracle (k = 32, epsilon = 1 and 3), R = 500 independent groups of the same n = 2,000 rows
(a fixed skewed histogram) are perturbed with a fixed seed and decoded; five linear queries are
estimated in each group (two point queries, a range, random normal weights, the total). Tests, each at
``ALPHA = 1e-4`` split over the five queries (Bonferroni), never retried:

* unbiasedness: the z statistic of the mean estimate, (mean - truth) / (sigma / sqrt(R)), with sigma the
  exact closed-form standard deviation (:meth:`PureProtocol.linear_variance`), two-sided;
* variance: (R - 1) s^2 / sigma^2 against chi-square with R - 1 degrees of freedom, two-sided (the
  estimates are sums over 2,000 independent reports, close to normal);
* the plug-in variance estimate is unbiased: the z statistic of its mean over the R groups against
  sigma^2, with its own sample standard deviation, two-sided.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms import OLH, OUE, HadamardResponse, PureProtocol, SubsetSelection

ALPHA = 1e-4
GROUPS, ROWS, K = 500, 2_000, 32


def workload(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A skewed histogram of ROWS rows over K values, and five queries (K columns)."""
    shares = 1.0 / np.arange(1, K + 1)
    histogram = np.floor(ROWS * shares / shares.sum()).astype(np.int64)
    histogram[0] += ROWS - histogram.sum()
    weights = np.vstack([np.eye(K)[0], np.eye(K)[K - 1], (np.arange(K) < K // 2).astype(float),
                         np.random.default_rng(seed).normal(size=K), np.ones(K)])
    return histogram, weights


@pytest.mark.parametrize("eps", [1.0, 3.0])
@pytest.mark.parametrize("cls", [OUE, OLH, HadamardResponse, SubsetSelection])
def test_estimates_are_unbiased_with_the_closed_form_variance(cls, eps):
    oracle = cls(eps, K)
    histogram, weights = workload(17)
    codes = np.repeat(np.arange(K), histogram)
    rng = np.random.default_rng(900 + K + int(10 * eps))
    reports = oracle.perturb(np.tile(codes, GROUPS), rng)
    reports = reports.reshape((GROUPS, ROWS) + reports.shape[1:])
    estimates, plug_in = [], []
    for group in reports:
        statistics = oracle.statistics(group)
        estimates.append(statistics.linear_estimates(weights))
        plug_in.append(statistics.linear_variance_estimate(weights))
    est, var_hat = np.array(estimates), np.array(plug_in)
    truth, sigma2 = weights @ histogram, oracle.protocol.linear_variance(weights, histogram)
    # The total has variance 0 where every support has the same size (SS: d values; HR at k = K: half of
    # them): then every estimate is the truth; the tests below take the other queries.
    fixed = sigma2 <= 1e-9 * ROWS
    assert fixed.sum() == (1 if cls in (SubsetSelection, HadamardResponse) else 0)
    np.testing.assert_allclose(est[:, fixed], np.broadcast_to(truth[fixed], (GROUPS, fixed.sum())), atol=1e-8 * ROWS)
    np.testing.assert_allclose(var_hat[:, fixed], 0.0, atol=1e-6 * ROWS)
    est, var_hat, truth, sigma2 = est[:, ~fixed], var_hat[:, ~fixed], truth[~fixed], sigma2[~fixed]
    alpha = ALPHA / len(weights)
    z = (est.mean(axis=0) - truth) / np.sqrt(sigma2 / GROUPS)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 2)), f"bias z = {z}"
    chi2 = (GROUPS - 1) * est.var(axis=0, ddof=1) / sigma2
    p = 2 * np.minimum(stats.chi2.cdf(chi2, GROUPS - 1), stats.chi2.sf(chi2, GROUPS - 1))
    assert np.all(p >= alpha), f"variance ratio s^2/sigma^2 = {chi2 / (GROUPS - 1)}, p = {p}"
    # Where the H-terms of the plug-in cancel (HR's 0/1 range at k = K) it is a constant: then it must equal sigma^2.
    spread = var_hat.std(axis=0, ddof=1)
    steady = spread <= 1e-9 * sigma2
    np.testing.assert_allclose(var_hat.mean(axis=0)[steady], sigma2[steady], rtol=1e-9)
    z_var = (var_hat.mean(axis=0) - sigma2)[~steady] / (spread[~steady] / np.sqrt(GROUPS))
    assert np.all(np.abs(z_var) < stats.norm.isf(alpha / 2)), f"plug-in variance z = {z_var}"


def test_mechanism_e_is_the_pure_protocol_of_its_weights():
    """E as a pure protocol: the closed form equals WYZ's per-row variance s tau^2 + r s (w(x) - m)^2 over r^2
    (shared/estimators/formulas.py) for a histogram and random weights."""
    m = MechanismE(1.5, 7)
    proto = PureProtocol.for_mechanism_e(m)
    rng = np.random.default_rng(4)
    w, h = rng.normal(size=(6, 7)), rng.integers(0, 50, 7)
    p, q = m.keep_probability, m.lie_probability
    r, s = p - q, 7 * q
    centred = w - w.mean(axis=1, keepdims=True)
    tau2 = (centred**2).mean(axis=1)
    expected = ((s * tau2)[:, None] + r * s * centred**2) @ h / r**2
    np.testing.assert_allclose(proto.linear_variance(w, h), expected, rtol=1e-10)


def test_variance_arguments_are_checked():
    proto = OUE(1.0, 4).protocol
    for weights in (np.ones((2, 5)), np.ones((2, 2, 4)), [[1, 2, 3, float("nan")]], [["a"] * 4], [[1, 2, 3, None]]):
        with pytest.raises(ValidationError, match="weights"):
            proto.linear_variance(weights, [1, 1, 1, 1])
    for histogram in ([1, 2, 3], [1, 2, -1, 0], [0.5, 1, 1, 1]):
        with pytest.raises(ValidationError, match="histogram"):
            proto.linear_variance(np.ones(4), histogram)
    with pytest.raises(ValidationError, match="estimates"):
        proto.linear_variance_estimate(np.ones(4), [1.0, 2.0], 10)
    assert proto.linear_variance(np.ones(4), [1, 0, 0, 2]).shape == (1,)

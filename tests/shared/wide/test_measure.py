"""Measuring views: the best oracle per size, unbiased counts with the stated exact variance, share intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2, norm

from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms import OLH, OUE
from ldpsynth.shared.mechanisms.registry import protocol_of
from ldpsynth.shared.wide import WideDomain, assign_view, best_mechanism, device_report, measure, pairs, simulate

ALPHA = 0.001


def test_best_mechanism_follows_the_size() -> None:
    # WBLJ17 §5: direct encoding beats OUE/OLH below about 3 e^eps + 2 values (10.2 at eps = 1).
    assert isinstance(best_mechanism(1.0, 8), MechanismE)
    assert isinstance(best_mechanism(1.0, 14), (OLH, OUE))
    assert isinstance(best_mechanism(4.0, 100), MechanismE)
    assert isinstance(best_mechanism(0.5, 224), (OLH, OUE))


@pytest.mark.parametrize("size", [6, 40])
def test_counts_are_unbiased_with_the_exact_variance(size: int) -> None:
    # alpha = 0.001 over all cells (Bonferroni): z-test of the mean of R estimates against the truth with the
    # exact variance, and a two-sided chi-square test of their sample variance against it.
    domain = WideDomain(("a", "b"), (2, size // 2))
    view = domain.view((0, 1))
    rng = np.random.default_rng(size)
    h = rng.multinomial(600, rng.dirichlet(np.ones(size)))
    codes = np.repeat(np.arange(size), h)
    reps = 400
    mechanism = best_mechanism(1.0, size)
    estimates = np.stack([measure(view, mechanism, mechanism.perturb(codes, rng)).counts() for _ in range(reps)])
    exact = measure(view, mechanism, mechanism.perturb(codes, rng)).count_variance(h)
    stated = 600 * protocol_of(mechanism).point_variance_factor() + h * float(
        (1 - protocol_of(mechanism).p - protocol_of(mechanism).q) / protocol_of(mechanism).signal)
    assert np.allclose(exact, stated, rtol=1e-9)                           # the module docstring's formula
    level = ALPHA / (2 * size)
    z = (estimates.mean(axis=0) - h) / np.sqrt(exact / reps)
    assert np.abs(z).max() < norm.isf(level / 2)
    ratio = (reps - 1) * estimates.var(axis=0, ddof=1) / exact
    assert ratio.min() > chi2.ppf(level / 2, reps - 1) and ratio.max() < chi2.isf(level / 2, reps - 1)


def test_share_intervals_cover() -> None:
    # 95% intervals of the shares of every cell of 3 views over 150 simulated collections (assignment and
    # noise redrawn); alpha = 0.001: the coverage of the 150 x cells intervals (clustered by run: the binomial
    # bound is widened by a design effect of 4) lies within 0.95 -+ 3.29 sigma.
    domain = WideDomain(("a", "b", "c"), (3, 2, 6))
    rng = np.random.default_rng(7)
    rows = np.stack([rng.integers(0, 3, 3000), rng.integers(0, 2, 3000), rng.binomial(5, 0.3, 3000)], axis=1)
    views = pairs(domain)
    truth = [v.histogram(rows) / len(rows) for v in views]
    hits, total = 0, 0
    for _ in range(150):
        measured = simulate(domain, views, rows, rng.integers(0, len(views), len(rows)), 1.0, rng)
        for m, f in zip(measured, truth):
            half = 1.959964 * np.sqrt(m.share_variance(len(rows)))
            hits += int(np.sum(np.abs(m.shares() - f) <= half))
            total += f.size
    sigma = np.sqrt(0.95 * 0.05 / total * 4)
    assert abs(hits / total - 0.95) < 3.29 * sigma


def test_device_report_uses_its_assigned_view() -> None:
    domain = WideDomain(("a", "b", "c"), (3, 2, 12))
    views = pairs(domain)
    salt = b"s" * 16
    index, name, report = device_report(domain, views, salt, b"device-1", [2, 1, 11], 1.0)
    assert index == assign_view(salt, b"device-1", len(views))
    mechanism = best_mechanism(1.0, views[index].size)
    assert measure(views[index], mechanism, report).n == 1
    assert name in ("E", "OLH", "OUE")


@pytest.mark.parametrize("size", [4, 8, 30, 224])
def test_each_view_spends_at_most_the_full_epsilon(size: int) -> None:
    mechanism = best_mechanism(1.0, size)
    assert mechanism.epsilon <= 1.0
    assert best_mechanism(1.0, size) is mechanism
    assert best_mechanism(np.nextafter(1.0, 0.0), size).epsilon < 1.0          # a smaller ε is not rounded up

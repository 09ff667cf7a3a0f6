"""Privacy of the smooth-query mechanism's basis noise, at its boundary, with deliberate violations caught.

Neighbours are replace-one. For Laplace noise the largest privacy loss of any output between
data sets with exact basis answers b and b' is ||b - b'||_1 / scale, attained at outputs far out in
the direction sign(b - b'); the tests evaluate the mechanism's own log density there.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ldpsynth.evaluation.primitives.composition import composed_epsilon, gaussian_delta
from ldpsynth.evaluation.smooth.chebyshev import basis_values, full_indices
from ldpsynth.evaluation.smooth.noise import basis_noise, gaussian_basis_noise
from ldpsynth.evaluation.smooth.params import smooth_sizes
from ldpsynth.evaluation.smooth.synth import grid_histogram, grid_points

EPS = 1.0
N_ROWS, DIM, K = 3000, 1, 4.0   # t = 4, N = 209: a grid pair whose basis vectors differ by 4.25 > t^d in l1


def _witness() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Neighbouring data sets (one row replaced) maximising ||b - b'||_1 over grid rows, and the basis matrix."""
    sizes = smooth_sizes(N_ROWS, DIM, K)
    points = grid_points(sizes.N, DIM)
    w = basis_values(points, full_indices(DIM, sizes.t)).T
    gaps = np.abs(w[:, :, None] - w[:, None, :]).sum(axis=0)
    i, j = np.unravel_index(gaps.argmax(), gaps.shape)
    rest = np.random.default_rng(9).uniform(-1, 1, size=(N_ROWS - 1, DIM))
    d1 = np.vstack([rest, points[i]])
    d2 = np.vstack([rest, points[j]])
    return w @ grid_histogram(d1, sizes.N), w @ grid_histogram(d2, sizes.N), w


def _worst_loss(noise, b1: np.ndarray, b2: np.ndarray) -> float:
    y = b1 + 1e3 * np.sign(b1 - b2)
    return noise.log_density(y, b1) - noise.log_density(y, b2)


def test_witness_pair_exceeds_the_papers_sensitivity() -> None:
    b1, b2, w = _witness()
    k = w.shape[0]
    assert k == 4
    gap = np.abs(b1 - b2).sum() * N_ROWS
    assert k < gap <= 2 * (k - 1)


def test_safe_laplace_is_epsilon_dp_and_half_the_noise_is_caught() -> None:
    b1, b2, w = _witness()
    noise = basis_noise(w.shape[0], N_ROWS, EPS, None, "safe")
    assert noise.scale == pytest.approx(2 * (w.shape[0] - 1) / (N_ROWS * EPS))
    loss = _worst_loss(noise, b1, b2)
    assert loss == pytest.approx(np.abs(b1 - b2).sum() / noise.scale, rel=1e-9)
    assert loss <= EPS + 1e-12 and noise.guarantee.epsilon == EPS
    halved = dataclasses.replace(noise, scale=noise.scale / 2)
    assert _worst_loss(halved, b1, b2) > EPS


def test_paper_laplace_violates_its_claim_but_keeps_the_stated_guarantee() -> None:
    b1, b2, w = _witness()
    k = w.shape[0]
    noise = basis_noise(k, N_ROWS, EPS, None, "paper")
    assert noise.scale == pytest.approx(k / (N_ROWS * EPS)) and noise.noisy_constant
    loss = _worst_loss(noise, b1, b2)
    assert loss > EPS                                   # the published claim (eps-DP) fails on this pair
    assert noise.guarantee.epsilon == pytest.approx(2 * EPS * (k - 1) / k)
    assert loss <= noise.guarantee.epsilon + 1e-12       # the guarantee we state holds


def test_safe_constant_answer_is_released_exactly() -> None:
    noise = basis_noise(5, 100, EPS)
    out = noise.apply(np.array([1.0, 0.1, 0.2, 0.3, 0.4]), np.random.default_rng(0))
    assert out[0] == 1.0 and not np.allclose(out[1:], [0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize("count, n, delta", [(16, 1000, 1e-10), (400, 569, 1e-6), (2, 50, 1e-3)])
def test_safe_gaussian_meets_delta_at_epsilon_and_smaller_noise_does_not(count: int, n: int, delta: float) -> None:
    noise = basis_noise(count, n, EPS, delta, "safe")
    assert noise.kind == "gaussian" and not noise.noisy_constant
    mu = 2 * math.sqrt(count - 1) / n / noise.scale
    assert gaussian_delta(mu, EPS) <= delta
    assert gaussian_delta(2 * math.sqrt(count - 1) / n / (noise.scale * 0.99), EPS) > delta
    assert noise.guarantee.epsilon <= EPS and noise.guarantee.delta == delta
    assert gaussian_basis_noise(count, n, mu, delta).scale == pytest.approx(noise.scale)


def test_paper_approximate_variant_states_its_composition() -> None:
    count, n, delta = 400, 10_000, 1e-10
    noise = basis_noise(count, n, EPS, delta, "paper")
    assert noise.scale == pytest.approx(math.sqrt(count * math.log(1 / delta)) / (n * EPS))
    eps0 = (2 / n) / noise.scale
    assert noise.guarantee.epsilon == pytest.approx(composed_epsilon(eps0, count - 1, delta))
    assert noise.guarantee.epsilon > 2 * EPS        # about 2 sqrt(2) eps, not the eps the paper claims
    assert noise.guarantee.delta == delta


def test_release_guarantee_matches_the_noise() -> None:
    from ldpsynth.evaluation.smooth.synth import smooth_synthetic_database

    z = np.random.default_rng(1).uniform(-1, 1, size=(500, 1))
    rng = np.random.default_rng(2)
    assert smooth_synthetic_database(z, 0.5, 2, rng).guarantee.epsilon == 0.5
    paper = smooth_synthetic_database(z, 0.5, 2, rng, noise="paper")
    t = paper.details["t"]
    assert paper.guarantee.epsilon == pytest.approx(2 * 0.5 * (t - 1) / t)
    approx = smooth_synthetic_database(z, 0.5, 2, rng, delta=1e-8)
    assert approx.guarantee.epsilon <= 0.5 and approx.guarantee.delta == 1e-8


def test_gaussian_accountant_against_closed_forms() -> None:
    from statistics import NormalDist

    from ldpsynth.evaluation.primitives.composition import gaussian_epsilon, gaussian_mu, zcdp_epsilon

    phi = NormalDist().cdf
    assert gaussian_delta(1.0, 0.0) == pytest.approx(phi(0.5) - phi(-0.5), rel=1e-12)
    assert gaussian_delta(0.8, 1.5) == pytest.approx(phi(-1.5 / 0.8 + 0.4) - math.exp(1.5) * phi(-1.5 / 0.8 - 0.4),
                                                     rel=1e-9)
    mu = gaussian_mu(1.0, 1e-10)
    assert gaussian_epsilon(mu, 1e-10) == pytest.approx(1.0, rel=1e-9)
    assert gaussian_epsilon(mu, 1e-10) < zcdp_epsilon(mu, 1e-10)     # the exact profile is tighter than zCDP
    assert composed_epsilon(0.01, 10_000, 1e-6) < 10_000 * 0.01          # advanced composition beats basic here
    assert composed_epsilon(0.5, 3, 1e-6) == pytest.approx(1.5)          # ... and basic wins for few steps

"""The practical smooth-query variant's budget allocations (JWHZW §3.4): privacy at the boundary, over-spends caught.

Neighbours are replace-one. The adaptive allocation's means release is the l_inf K-norm mechanism
(ε-DP) or a Gaussian (μ-GDP); its worst privacy loss between neighbouring means v, v' is
eps * ||v - v'||_inf / (2/n), attained at outputs far out in the direction sign(v - v').
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.evaluation.primitives.composition import gaussian_delta, gaussian_epsilon, gaussian_mu
from ldpsynth.evaluation.smooth import budget as smooth_budget
from ldpsynth.evaluation.smooth.budget import (
    ReleaseShape,
    adaptive_plan,
    compose_gdp,
    compose_pure,
    fixed_split_plan,
    moment_indices,
)
from ldpsynth.evaluation.smooth.chebyshev import basis_values, lowest_degree_indices
from ldpsynth.evaluation.smooth.moments import gaussian_moments, laplace_moments, linf_moments
from ldpsynth.evaluation.smooth.practical import PracticalSettings, practical_smooth_synthetic_database
from ldpsynth.evaluation.smooth.release import grid_centres
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError

EPS, DELTA = 1.0, 1e-10
N, D = 569, 30                       # WDBC: PSI is skipped
BIG_N = 200_000                      # PSI's noise norm falls below the bound d = 30: PSI runs


def _neighbouring_means(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate means of two neighbouring data sets: one row moved from (1, ..., 1) to (-1, ..., -1)."""
    rest = np.random.default_rng(0).uniform(-1, 1, size=(n - 1, d))
    first, second = np.vstack([rest, np.ones(d)]), np.vstack([rest, -np.ones(d)])
    indices = moment_indices(d, 2, centre=True, fit=False)
    return basis_values(first, indices).mean(axis=0), basis_values(second, indices).mean(axis=0)


def _worst_loss(release, v1: np.ndarray, v2: np.ndarray) -> float:
    y = v1 + 1e3 * np.sign(v1 - v2)
    return release.log_density(y, v1) - release.log_density(y, v2)


def test_linf_means_are_epsilon_dp_at_the_boundary_and_half_the_noise_is_caught() -> None:
    v1, v2 = _neighbouring_means(N, D)
    assert np.abs(v1 - v2).max() == pytest.approx(2 / N)          # the l_inf sensitivity is attained
    release = linf_moments(D, N, EPS)
    assert release.scale == pytest.approx(2 / (N * EPS)) and release.guarantee.epsilon == EPS
    assert _worst_loss(release, v1, v2) == pytest.approx(EPS, rel=1e-9)
    ys = v1 + release.scale * np.random.default_rng(1).standard_normal((500, D)) * 20
    losses = [release.log_density(y, v1) - release.log_density(y, v2) for y in ys]
    assert max(losses) <= EPS + 1e-12
    halved = dataclasses.replace(release, scale=release.scale / 2)
    assert _worst_loss(halved, v1, v2) == pytest.approx(2 * EPS, rel=1e-9)


def test_linf_sampler_has_the_k_norm_density() -> None:
    """||y - v||_inf / b ~ Gamma(count, 1) under the density exp(-||y - v||_inf / b): chi-square, alpha = 0.01,
    20 equiprobable bins of 200 expected draws each; and E||y - v||^2 = c(c+1)(c+2) b^2 / 3 by a z-test,
    alpha = 0.01."""
    release = linf_moments(D, N, EPS)
    rng = np.random.default_rng(2024)
    noise = np.array([release.apply(np.zeros(D), rng) for _ in range(4000)])
    norms = np.abs(noise).max(axis=1) / release.scale
    edges = stats.gamma.ppf(np.linspace(0, 1, 21), D)
    observed = np.histogram(norms, bins=edges)[0]
    assert stats.chisquare(observed).pvalue > 0.01
    squares = (noise**2).sum(axis=1)
    z = (squares.mean() - release.expected_squared_error) / (squares.std(ddof=1) / math.sqrt(len(squares)))
    assert abs(z) < stats.norm.ppf(0.995)
    # 2.3x less noise per coordinate than Laplace at the same epsilon (d = 30)
    assert laplace_moments(D, N, EPS).expected_squared_error / release.expected_squared_error == pytest.approx(
        6 * D**2 / ((D + 1) * (D + 2)))


def test_laplace_and_gaussian_means_are_calibrated_to_their_sensitivities() -> None:
    v1, v2 = _neighbouring_means(N, D)
    laplace = laplace_moments(D, N, EPS)
    assert _worst_loss(laplace, v1, v2) == pytest.approx(EPS, rel=1e-9)          # ||v1 - v2||_1 = 2d/n
    mu = gaussian_mu(EPS, DELTA)
    gaussian = gaussian_moments(D, N, mu, DELTA)
    assert np.linalg.norm(v1 - v2) / gaussian.scale == pytest.approx(mu)         # ||v1 - v2||_2 = 2 sqrt(d)/n
    assert gaussian_delta(mu, EPS) <= DELTA and gaussian.guarantee.epsilon == pytest.approx(EPS, rel=1e-9)
    assert gaussian_delta(mu * 1.01, EPS) > DELTA                                # less noise breaks delta


def _shape(n: int, d: int = D, basis: int = 25) -> ReleaseShape:
    return ReleaseShape(n, d, basis, 5, math.ceil(10 * math.log(d)))


@pytest.mark.parametrize("n, psi_runs", [(N, False), (BIG_N, True)])
def test_adaptive_pure_plan_spends_exactly_epsilon(n: int, psi_runs: bool) -> None:
    plan = adaptive_plan(_shape(n), EPS, None, uses_pca=True, dp_centre=True, psi_share=0.5, eigenvalue_bound=D)
    assert (plan.psi is not None) == psi_runs and plan.fit == psi_runs and not plan.snap
    spent = (plan.psi.cost(n, D) if psi_runs else 0.0) + plan.moments.cost
    assert spent == pytest.approx(EPS, rel=1e-12) and plan.guarantee.epsilon == pytest.approx(EPS, rel=1e-12)
    assert plan.guarantee.delta == 0.0 and plan.moments.kind == "linf"
    assert ("PSI skipped" in plan.guarantee.statement) == (not psi_runs)
    np.testing.assert_array_equal(plan.moment_indices[:D], np.eye(D, dtype=np.int64))   # the centre first
    basis = {tuple(r) for r in lowest_degree_indices(D, 25)[1:].tolist()}
    released = {tuple(r) for r in plan.moment_indices.tolist()}
    assert basis <= released if psi_runs else len(released) == D
    if psi_runs:
        assert plan.psi.noise_column_norm(D) < D
    else:
        assert smooth_budget._psi_config(_shape(n), 1.0, EPS, None).noise_column_norm(D) >= D   # even at the whole ε


@pytest.mark.parametrize("n, psi_runs", [(N, False), (BIG_N, True)])
def test_adaptive_gaussian_plan_composes_to_epsilon_delta(n: int, psi_runs: bool) -> None:
    plan = adaptive_plan(_shape(n), EPS, DELTA, uses_pca=True, dp_centre=True, psi_share=0.5, eigenvalue_bound=D)
    assert (plan.psi is not None) == psi_runs and plan.moments.kind == "gaussian"
    mu = math.hypot(plan.psi.cost(n, D) if psi_runs else 0.0, plan.moments.cost)
    assert mu == pytest.approx(gaussian_mu(EPS, DELTA), rel=1e-12)
    assert gaussian_epsilon(mu, DELTA) == pytest.approx(EPS, rel=1e-9)
    assert plan.guarantee.epsilon == pytest.approx(EPS, rel=1e-9) and plan.guarantee.delta == DELTA


def test_a_deliberate_over_spend_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    assert compose_pure([("a", 0.375), ("b", 0.625)], EPS).epsilon == EPS            # at the boundary: accepted
    with pytest.raises(PrivacyBudgetExceeded, match="budget"):
        compose_pure([("a", 0.375), ("b", 0.625 + 1e-6)], EPS)
    mu = gaussian_mu(EPS, DELTA)
    assert compose_gdp([("a", mu * 0.6), ("b", mu * 0.8)], mu, DELTA).epsilon == pytest.approx(EPS, rel=1e-9)
    with pytest.raises(PrivacyBudgetExceeded, match="budget"):
        compose_gdp([("a", mu * 0.6), ("b", mu * 0.81)], mu, DELTA)
    # An allocation whose means release spends twice its share is refused, with or without PSI.
    doubled = lambda count, n, epsilon: linf_moments(count, n, 2 * epsilon)      # noqa: E731
    monkeypatch.setattr(smooth_budget, "linf_moments", doubled)
    for n in (N, BIG_N):
        with pytest.raises(PrivacyBudgetExceeded):
            adaptive_plan(_shape(n), EPS, None, uses_pca=True, dp_centre=True, psi_share=0.5, eigenvalue_bound=D)


def test_fixed_split_plan_is_the_previous_allocation() -> None:
    plan = fixed_split_plan(_shape(N), EPS, None, "safe", uses_pca=True, dp_centre=True, psi_share=0.5,
                            centre_share=0.25)
    assert (plan.snap and plan.psi.cost(N, D) == pytest.approx(3 / 8)
            and plan.centre_release.cost == pytest.approx(1 / 8))
    assert plan.centre_release.scale == pytest.approx(2 * D / (N * EPS / 8))
    assert plan.guarantee.epsilon == pytest.approx(EPS)
    paper = fixed_split_plan(_shape(N), EPS, DELTA, "paper", uses_pca=True, dp_centre=True, psi_share=0.5,
                             centre_share=0.25)
    assert paper.psi.scale == pytest.approx(89.25, abs=0.01) and not paper.guarantee.is_private
    assert fixed_split_plan(_shape(N), EPS, None, "paper", uses_pca=True, dp_centre=True, psi_share=0.5,
                            centre_share=0.25).psi.scale == pytest.approx(6738.2, abs=0.1)


def _data(n: int, d: int, seed: int) -> np.ndarray:
    return np.clip(np.random.default_rng(seed).normal(-0.3, 0.25, size=(n, d)), -1, 1)


@pytest.mark.parametrize("delta", [None, DELTA])
def test_adaptive_release_at_wdbc_size_is_the_noisy_mean_and_says_why(delta: float | None) -> None:
    releases = [practical_smooth_synthetic_database(_data(N, D, seed), EPS, 36.0, np.random.default_rng(3),
                                                    delta=delta) for seed in (1, 2)]
    for release in releases:
        assert release.guarantee.epsilon == pytest.approx(EPS, rel=1e-9) and release.guarantee.delta == (delta or 0.0)
        assert "PSI skipped" in release.guarantee.statement and release.details["psi"] is None
        assert len(release.points) == 1 and release.details["lp_residual"] is None
    # the decision reads only public sizes: two data sets of the same shape, the same statement
    assert releases[0].guarantee.statement == releases[1].guarantee.statement


def test_adaptive_release_runs_psi_when_it_can_resolve_the_eigenvalues_and_does_not_snap() -> None:
    z = _data(800, 6, 4)
    release = practical_smooth_synthetic_database(z, 500.0, 4.0, np.random.default_rng(5),
                                                  settings=PracticalSettings(candidates=400))
    assert release.details["psi"] is not None and release.details["allocation"] == "adaptive"
    assert release.guarantee.epsilon == pytest.approx(500.0, rel=1e-12)
    grid = grid_centres(release.details["N"])
    on_grid = np.isclose(release.details["candidate_points"][..., None], grid).any(axis=-1).all(axis=1)
    assert not on_grid.any() and release.details["lp_residual"] is not None
    # a smaller public eigenvalue bound switches PSI off
    bounded = practical_smooth_synthetic_database(z, 500.0, 4.0, np.random.default_rng(5),
                                                  settings=PracticalSettings(candidates=400, eigenvalue_bound=1e-3))
    assert bounded.details["psi"] is None and "PSI skipped" in bounded.guarantee.statement


def test_fixed_split_snaps_and_non_private_says_so() -> None:
    z = _data(800, 6, 6)
    fixed = practical_smooth_synthetic_database(z, 1.0, 4.0, np.random.default_rng(7),
                                                settings=PracticalSettings(candidates=300, allocation="fixed-split"))
    grid = grid_centres(fixed.details["N"])
    assert np.isclose(fixed.details["candidate_points"][..., None], grid).any(axis=-1).all()
    replication = practical_smooth_synthetic_database(
        z, 1.0, 4.0, np.random.default_rng(8), settings=PracticalSettings(candidates=300, allocation="non-private"))
    assert not replication.guarantee.is_private and "NON-PRIVATE" in replication.guarantee.statement
    assert replication.details["centre"] == "exact-mean" and not replication.details["snapped"]


@pytest.mark.parametrize("kwargs, noise, field", [
    ({"allocation": "greedy"}, "safe", "allocation"),
    ({"allocation": "adaptive"}, "paper", "allocation"),
    ({"allocation": "non-private", "candidate_source": "uniform"}, "safe", "allocation"),
    ({"eigenvalue_bound": 0.0}, "safe", "eigenvalue_bound"),
    ({"eigenvalue_bound": math.nan}, "safe", "eigenvalue_bound"),
])
def test_invalid_allocation_settings(kwargs: dict, noise: str, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        practical_smooth_synthetic_database(_data(50, 3, 9), 1.0, 4.0, np.random.default_rng(0), noise=noise,
                                            settings=PracticalSettings(**kwargs))
    assert info.value.field == field

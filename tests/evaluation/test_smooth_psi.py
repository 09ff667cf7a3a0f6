"""Private Subspace Iteration (JWHZW Alg. 2) and the practical variant built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpsynth.evaluation.primitives.composition import gaussian_mu
from ldpsynth.evaluation.smooth.chebyshev import basis_values, lowest_degree_indices
from ldpsynth.evaluation.smooth.practical import PracticalSettings, practical_smooth_synthetic_database
from ldpsynth.evaluation.smooth.private_pca import (
    PsiConfig,
    covariance,
    covariance_sensitivity,
    private_subspace_iteration,
)
from ldpsynth.evaluation.smooth.release import grid_centres, snap_to_grid
from ldpsynth.shared.errors import ValidationError


def _planted(n: int = 5000, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a planted covariance: eigenvalues 0.09, 0.04, 0.01 then 1e-4, rotated by a random orthogonal U."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((d, d)))
    sd = np.sqrt(np.array([0.09, 0.04, 0.01] + [1e-4] * (d - 3)))
    z = (rng.standard_normal((n, d)) * sd) @ u.T
    return np.clip(z, -1, 1), u


@pytest.mark.parametrize("eigenvalues", ["noisy", "rayleigh"])
def test_noiseless_psi_recovers_top_eigenpairs(eigenvalues: str) -> None:
    z, u = _planted()
    values, vectors = np.linalg.eigh(covariance(z))
    top = vectors[:, ::-1][:, :3]
    result = private_subspace_iteration(z, PsiConfig(3, 60, scale=0.0, eigenvalues=eigenvalues),
                                        np.random.default_rng(1))
    cosines = np.abs(np.einsum("ij,ij->j", result.vectors, top))
    assert (cosines > 1 - 1e-6).all()
    np.testing.assert_allclose(result.values, values[::-1][:3], rtol=1e-6)
    # ... and these are the planted directions, up to sampling error.
    assert (np.abs(np.einsum("ij,ij->j", result.vectors, u[:, :3])) > 0.99).all()
    np.testing.assert_allclose(result.vectors.T @ result.vectors, np.eye(3), atol=1e-12)


def test_covariance_sensitivity_bounds_replace_one_neighbours() -> None:
    rng = np.random.default_rng(2)
    n, d = 50, 4
    worst = 0.0
    for _ in range(300):
        base = rng.choice([-1.0, 1.0], size=(n, d)) if rng.uniform() < 0.5 else rng.uniform(-1, 1, size=(n, d))
        other = base.copy()
        other[rng.integers(n)] = rng.choice([-1.0, 1.0], size=d)
        gap = covariance(base) - covariance(other)
        worst = max(worst, np.linalg.norm(gap, 2))
        x, _ = np.linalg.qr(rng.standard_normal((d, 2)))
        assert np.linalg.norm(gap @ x) <= math.sqrt(2) * covariance_sensitivity(n, d) + 1e-12
    assert worst <= covariance_sensitivity(n, d)
    # A near-worst pair: every row at a corner v, then one row moved to -v (the mean term moves by ~4d/n).
    corner = np.ones((n, d))
    moved = corner.copy()
    moved[0] = -1.0
    gap = np.linalg.norm(covariance(corner) - covariance(moved), 2)
    assert gap == pytest.approx(d * (4 / n - 4 / n**2))
    assert 0.75 * covariance_sensitivity(n, d) < gap <= covariance_sensitivity(n, d)


def test_psi_accounting_matches_the_stated_sigma() -> None:
    n, d, k, iterations = 569, 30, 5, 35
    mu = gaussian_mu(1.0, 1e-10)
    safe = PsiConfig.safe_gaussian(n, d, k, iterations, mu)
    assert safe.scale == pytest.approx(math.sqrt((iterations + 1) * k) * covariance_sensitivity(n, d) / mu)
    assert safe.cost(n, d) == pytest.approx(mu)
    laplace = PsiConfig.safe_laplace(n, d, k, iterations, 0.5)
    assert laplace.cost(n, d) == pytest.approx(0.5)
    # RMS norm of one noise column (what the adaptive allocation compares with the eigenvalue bound)
    assert safe.noise_column_norm(d) == pytest.approx(safe.scale * math.sqrt(d))
    assert laplace.noise_column_norm(d) == pytest.approx(laplace.scale * math.sqrt(2 * d))
    # Monte Carlo over 4000 columns, fixed seed: the standard error of the RMS norm is 0.3 %, the tolerance 2 %.
    g = np.random.default_rng(0).laplace(0.0, laplace.scale, size=(d, 4000))
    assert np.sqrt((g**2).sum(axis=0).mean()) == pytest.approx(laplace.noise_column_norm(d), rel=0.02)
    # Deliberate violation: the same noise with the paper's ||X||_max multiplier is charged sqrt(d) more.
    shrunk = PsiConfig(k, iterations, "gaussian", safe.scale, "max", "noisy")
    assert shrunk.cost(n, d) == pytest.approx(mu * math.sqrt(d))
    paper = PsiConfig.paper_gaussian(n, d, k, iterations, 1.0, 1e-10)
    assert paper.scale == pytest.approx(5 * d * math.sqrt(4 * k * iterations * math.log(1e10)) / n)
    assert math.isinf(paper.cost(n, d))                  # exact-covariance eigenvalues: not private
    assert PsiConfig.paper_laplace(n, d, k, iterations, 1.0).scale == pytest.approx(50 * d**1.5 * k * iterations / n)


def test_invalid_psi_parameters() -> None:
    with pytest.raises(ValidationError, match="noise"):
        PsiConfig(2, 5, noise="cauchy")
    with pytest.raises(ValidationError, match="scale"):
        PsiConfig(2, 5, scale=-1.0)
    with pytest.raises(ValidationError, match="k"):
        private_subspace_iteration(np.zeros((10, 2)), PsiConfig(3, 5), np.random.default_rng(0))


def _data(n: int = 800, d: int = 6) -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.clip(rng.normal(-0.3, 0.25, size=(n, d)), -1, 1)


@pytest.mark.parametrize("allocation", ["adaptive", "fixed-split"])
@pytest.mark.parametrize("delta", [None, 1e-8])
def test_practical_variant_end_to_end_safe(delta: float | None, allocation: str) -> None:
    z = _data()
    release = practical_smooth_synthetic_database(z, 1.0, 4.0, np.random.default_rng(4), delta=delta,
                                                  settings=PracticalSettings(candidates=500, allocation=allocation))
    assert release.guarantee.epsilon == pytest.approx(1.0, abs=1e-6)
    assert release.guarantee.delta == (delta or 0.0)
    d = release.details
    assert release.m == d["m"] and (release.counts > 0).all()
    assert d["candidates"] <= 500 and d["basis_functions"] >= 2
    cand = {tuple(p) for p in d["candidate_points"]}
    assert all(tuple(p) in cand for p in release.points)
    u = d["distribution"]
    assert (u >= 0).all() and u.sum() == pytest.approx(1.0)


def test_practical_variant_paper_setting_says_not_private() -> None:
    release = practical_smooth_synthetic_database(_data(), 1.0, 4.0, np.random.default_rng(5), noise="paper",
                                                  settings=PracticalSettings(candidates=300))
    assert not release.guarantee.is_private and "Cor. 3.5" in release.guarantee.statement


def test_practical_variant_uniform_candidates_spend_everything_on_the_basis() -> None:
    release = practical_smooth_synthetic_database(
        _data(), 1.0, 4.0, np.random.default_rng(6),
        settings=PracticalSettings(candidates=300, candidate_source="uniform"))
    assert release.guarantee.epsilon == 1.0 and release.details["psi"] is None


def test_practical_variant_noiseless_limit_fits_at_least_as_well_as_the_snapped_data() -> None:
    """With negligible noise and every grid cell a candidate, the LP optimum is no worse than the data's own snapped
    histogram (a feasible point), whose residual is only the snapping error."""
    z = _data(2000, 2)
    release = practical_smooth_synthetic_database(
        z, 1e9, 4.0, np.random.default_rng(7),
        settings=PracticalSettings(candidates=100_000, basis=10, candidate_source="uniform"))
    d = release.details
    assert d["candidates"] == d["N"] ** 2
    indices = lowest_degree_indices(2, 10)
    exact = basis_values(z, indices).mean(axis=0)
    snapped = basis_values(grid_centres(d["N"])[snap_to_grid(z, d["N"])], indices).mean(axis=0)
    assert d["lp_residual"] <= np.abs(snapped - exact).sum() + 1e-6
    assert np.abs(snapped - exact).sum() < 0.05


@pytest.mark.parametrize("kwargs, field", [({"psi_share": 1.0}, "psi_share"), ({"centre": "median"}, "centre"),
                                           ({"candidates": 0}, "candidates"), ({"basis": 1}, "basis"),
                                           ({"candidate_source": "sobol"}, "candidate_source")])
def test_invalid_practical_settings(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        PracticalSettings(**kwargs)
    assert info.value.field == field

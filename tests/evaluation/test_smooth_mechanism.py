"""JWHZW Alg. 1: Chebyshev basis, the L1 LP, sizes, sampling from u*, accuracy, invalid input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.evaluation.smooth.chebyshev import (
    basis_values,
    chebyshev_table,
    full_indices,
    lowest_degree_indices,
)
from ldpsynth.evaluation.smooth.lp import fit_distribution
from ldpsynth.evaluation.smooth.params import practical_basis_size, smooth_sizes
from ldpsynth.evaluation.smooth.release import UnitCube, grid_centres, round_to_lattice, snap_to_grid
from ldpsynth.evaluation.smooth.synth import grid_histogram, grid_points, smooth_synthetic_database
from ldpsynth.shared.errors import ValidationError


def test_chebyshev_recurrence_equals_cos_r_arccos() -> None:
    x = np.random.default_rng(0).uniform(-1, 1, size=(200, 3))
    table = chebyshev_table(x, 12)
    r = np.arange(13)
    np.testing.assert_allclose(table, np.cos(r * np.arccos(x)[..., None]), atol=1e-12)
    indices = np.array([[0, 0, 0], [3, 0, 1], [12, 5, 7], [1, 1, 1]])
    expected = np.cos(indices[None, :, :] * np.arccos(x)[:, None, :]).prod(axis=2)
    np.testing.assert_allclose(basis_values(x, indices), expected, atol=1e-12)


def test_multi_indices() -> None:
    full = full_indices(2, 3)
    assert full.shape == (9, 2) and (full[0] == 0).all() and len({tuple(r) for r in full}) == 9
    low = lowest_degree_indices(3, 10)
    assert low.tolist()[:4] == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert (np.diff(low.sum(axis=1)) >= 0).all() and len({tuple(r) for r in low}) == 10
    # Every index of total degree 1 comes before any of degree 2: all 3 + 1 of degree <= 1 are in.
    assert {tuple(r) for r in low if r.sum() <= 1} == {(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)}


def test_sizes_follow_algorithm_1_step_1() -> None:
    s = smooth_sizes(3000, 1, 4)
    assert (s.t, s.N, s.m, s.L) == (math.ceil(3000 ** (1 / 6)), math.ceil(3000 ** (4 / 6)),
                                    math.ceil(3000 ** (1 + 5 / 6)), math.ceil(3000 ** (5 / 6)))
    a = smooth_sizes(3000, 2, 4, delta=1e-10)
    ell, den = math.log(1e10), 14
    assert a.t == math.ceil(3000 ** (2 / den) * ell ** (-1 / den))
    assert a.N == math.ceil(3000 ** (8 / den) * ell ** (-4 / den))
    # App. A.5 with K = sigma^2: R = ceil(0.5 n^{d/(2d+K)}) for WDBC (n = 569, d = 30), sigma = 2.
    assert practical_basis_size(569, 30, 4) == math.ceil(0.5 * 569 ** (30 / 64)) == 10
    assert practical_basis_size(569, 30, 100) == 2


def test_grid_snap_and_lattice() -> None:
    np.testing.assert_allclose(grid_centres(4), [-0.75, -0.25, 0.25, 0.75])
    z = np.array([-1.0, -0.51, -0.49, 0.0, 0.99, 1.0])
    assert snap_to_grid(z, 4).tolist() == [0, 0, 1, 2, 3, 3]
    np.testing.assert_allclose(round_to_lattice(np.array([0.26, -3.0, 0.74]), 2), [0.5, -1.0, 0.5])


def test_lp_solution_is_a_distribution_reproducing_exact_answers() -> None:
    rng = np.random.default_rng(3)
    points = rng.uniform(-1, 1, size=(60, 2))
    w = basis_values(points, full_indices(2, 3)).T
    u0 = rng.dirichlet(np.ones(60))
    fit = fit_distribution(w, w @ u0)
    assert (fit.u >= 0).all() and fit.u.sum() == pytest.approx(1.0, abs=1e-12)
    assert fit.residual < 1e-8
    # A basic optimum has at most (#constraints) = 9 + 1 non-zero weights.
    assert np.count_nonzero(fit.u > 1e-12) <= 10


def test_noiseless_limit_reproduces_basis_answers() -> None:
    """With epsilon -> infinity (noise scale ~1e-12) and no rounding, W u* equals the exact basis answers."""
    rng = np.random.default_rng(4)
    z = np.clip(rng.normal(0.3, 0.3, size=(4000, 2)), -1, 1)
    release = smooth_synthetic_database(z, 1e12, 4, rng, round_to_grid=False)
    d = release.details
    w = basis_values(grid_points(d["N"], 2), full_indices(2, d["t"])).T
    exact = w @ grid_histogram(z, d["N"])
    u = d["distribution"]
    assert (u >= 0).all() and u.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(w @ u, exact, atol=1e-7)
    assert d["lp_residual"] < 1e-6


def test_synthetic_rows_follow_u_star() -> None:
    """Chi-square goodness of fit of the m sampled rows against m u* (alpha = 1e-3; cells pooled to >= 5 expected)."""
    rng = np.random.default_rng(5)
    z = np.clip(rng.normal(-0.2, 0.4, size=(600, 1)), -1, 1)
    release = smooth_synthetic_database(z, 1.0, 2, rng)
    d = release.details
    points = grid_points(d["N"], 1)
    index = {float(p[0]): i for i, p in enumerate(points)}
    observed = np.zeros(len(points))
    observed[[index[float(p[0])] for p in release.points]] = release.counts
    expected = release.m * d["distribution"]
    assert observed[expected == 0].sum() == 0
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
        obs[-1] += observed[~keep].sum()
        exp[-1] += expected[~keep].sum()
    assert len(obs) >= 2
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert release.m == d["m"] == release.rows().shape[0]


def test_accuracy_on_smooth_queries_with_large_epsilon() -> None:
    """With negligible noise the error is the paper's approximation error: small for a smooth 2-D query."""
    rng = np.random.default_rng(6)
    z = np.clip(rng.normal(0.2, 0.35, size=(20000, 2)), -1, 1)
    centres = rng.uniform(-1, 1, size=(20, 2))

    def kernels(p: np.ndarray) -> np.ndarray:
        return np.exp(-((p[:, None, :] - centres[None]) ** 2).sum(-1) / (2 * 2.0**2))

    release = smooth_synthetic_database(z, 1e6, 4, rng)
    err = np.abs(release.answer(kernels) - kernels(z).mean(axis=0))
    assert err.max() < 0.01


@pytest.mark.parametrize("kwargs, field", [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"), ({"K": -1.0}, "K"),
    ({"noise": "loud"}, "noise"), ({"delta": 1.0}, "delta"), ({"round_to_grid": 1}, "round_to_grid"),
    ({"K": 40.0, "n": 50000, "d": 2}, "K"),
])
def test_invalid_parameters_name_the_field(kwargs: dict, field: str) -> None:
    n, d = kwargs.pop("n", 200), kwargs.pop("d", 1)
    args = {"epsilon": 1.0, "K": 2.0} | kwargs
    z = np.zeros((n, d))
    with pytest.raises(ValidationError) as info:
        smooth_synthetic_database(z, args.pop("epsilon"), args.pop("K"), np.random.default_rng(0), **args)
    assert info.value.field == field


def test_data_outside_the_unit_cube_is_rejected() -> None:
    z = np.zeros((10, 2))
    z[7, 1] = 1.5
    with pytest.raises(ValidationError) as info:
        smooth_synthetic_database(z, 1.0, 2.0, np.random.default_rng(0))
    assert info.value.field == "data[:, 1]" and info.value.position == 7


def test_unit_cube_uses_public_bounds() -> None:
    cube = UnitCube(np.array([17.0, 1.0]), np.array([90.0, 99.0]))
    x = np.array([[17.0, 99.0], [53.5, 50.0]])
    z = cube.to_unit(x)
    np.testing.assert_allclose(z, [[-1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(cube.from_unit(z), x)
    with pytest.raises(ValidationError) as info:
        cube.to_unit(np.array([[16.0, 5.0]]))
    assert info.value.field == "data[:, 0]" and "public bounds" in info.value.legal
    with pytest.raises(ValidationError):
        UnitCube(np.array([1.0]), np.array([1.0]))

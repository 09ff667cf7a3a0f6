"""The practical variant of the smooth-query mechanism (JWHZW §3.4 + App. A.5): private-PCA candidates,
R basis functions.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.smooth.practical``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.smooth.budget import (
    ALLOCATIONS,
    BudgetPlan,
    ReleaseShape,
    adaptive_plan,
    fixed_split_plan,
    non_private_plan,
)
from ldpsynth.evaluation.smooth.chebyshev import basis_values, lowest_degree_indices
from ldpsynth.evaluation.smooth.lp import fit_distribution
from ldpsynth.evaluation.smooth.params import practical_basis_size, smooth_sizes
from ldpsynth.evaluation.smooth.private_pca import covariance, private_subspace_iteration
from ldpsynth.evaluation.smooth.release import (
    SmoothRelease,
    check_release_arguments,
    grid_centres,
    round_to_lattice,
    snap_to_grid,
)
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_bool, check_choice, check_int, check_probability, check_real, real_range

CENTRES = ("dp-mean", "zero")
CANDIDATE_SOURCES = ("pca", "uniform")


@dataclass(frozen=True)
class PracticalSettings:
    """Knobs of the practical variant; ``None`` means JWHZW's value or our default (see the module docstring).

    ``allocation`` None: ``"adaptive"`` with ``noise="safe"``, ``"fixed-split"`` with ``noise="paper"``.
    ``eigenvalue_bound`` None: ``d`` (every data set in :math:`[-1,1]^d` has :math:`\\lambda_1 \\le d`);
    a smaller value must be public (it decides whether the adaptive allocation runs PSI).
    """

    candidates: int = 10_000
    basis: int | None = None
    pca_dimension: int | None = None
    psi_iterations: int | None = None
    psi_share: float = 0.5
    centre: str = "dp-mean"
    centre_share: float = 0.25
    candidate_source: str = "pca"
    output_rows: int | None = None
    round_to_grid: bool = False
    allocation: str | None = None
    eigenvalue_bound: float | None = None

    def __post_init__(self) -> None:
        check_int(self.candidates, "candidates", 1, 1 << 22)
        if self.basis is not None:
            check_int(self.basis, "basis", 2, 1 << 16)
        if self.pca_dimension is not None:
            check_int(self.pca_dimension, "pca_dimension", 1)
        if self.psi_iterations is not None:
            check_int(self.psi_iterations, "psi_iterations", 1, 10_000)
        check_probability(self.psi_share, "psi_share")
        check_probability(self.centre_share, "centre_share")
        check_choice(self.centre, "centre", CENTRES)
        check_choice(self.candidate_source, "candidate_source", CANDIDATE_SOURCES)
        if self.output_rows is not None:
            check_int(self.output_rows, "output_rows", 1)
        check_bool(self.round_to_grid, "round_to_grid")
        check_choice(self.allocation, "allocation", (*ALLOCATIONS, None))
        if self.allocation == "non-private" and self.candidate_source != "pca":
            raise ValidationError("allocation", "'adaptive' or 'fixed-split' with candidate_source='uniform' (no "
                                  "centre or covariance to take exactly)", "got 'non-private'")
        if self.eigenvalue_bound is not None:
            check_real(self.eigenvalue_bound, "eigenvalue_bound", low=0.0, low_open=True,
                       legal=real_range(0.0, low_open=True) + " (public) or None (d)")


def _budget_plan(shape: ReleaseShape, eps: float, delta: float | None, setting: str,
                 s: PracticalSettings) -> BudgetPlan:
    """The allocation's plan (:mod:`~.budget`) for these public sizes and settings."""
    allocation = s.allocation if s.allocation is not None else ("adaptive" if setting == "safe" else "fixed-split")
    uses_pca, dp_centre = s.candidate_source == "pca", s.centre == "dp-mean"
    if allocation == "adaptive":
        if setting != "safe":
            raise ValidationError("allocation", "'fixed-split' or 'non-private' with noise='paper' (the adaptive "
                                  "allocation calibrates the safe noise)", "got 'adaptive'")
        bound = s.eigenvalue_bound if s.eigenvalue_bound is not None else float(shape.d)
        return adaptive_plan(shape, eps, delta, uses_pca=uses_pca, dp_centre=dp_centre, psi_share=s.psi_share,
                             eigenvalue_bound=bound)
    if allocation == "fixed-split":
        return fixed_split_plan(shape, eps, delta, setting, uses_pca=uses_pca, dp_centre=dp_centre,
                                psi_share=s.psi_share, centre_share=s.centre_share)
    return non_private_plan(shape, eps, delta, setting, dp_centre=dp_centre)


def _ellipsoid_points(centre: np.ndarray, vectors: np.ndarray, values: np.ndarray, count: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``count`` points uniform in
    :math:`\\{c + \\sum_s \\alpha_s\\sqrt{\\lambda_s}\\mathbf x_s : \\|\\alpha\\|_2 \\le 1\\}`."""
    k = vectors.shape[1]
    g = rng.standard_normal((count, k))
    radius = rng.uniform(size=(count, 1)) ** (1.0 / k)
    alpha = radius * g / np.linalg.norm(g, axis=1, keepdims=True)
    return centre + (alpha * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def _exact_eigenpairs(z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-``k`` eigenvectors (d, k) and eigenvalues (k,) of the exact covariance (not private)."""
    values, vectors = np.linalg.eigh(covariance(z))
    return vectors[:, ::-1][:, :k], values[::-1][:k]


def _candidates(z: np.ndarray, plan: BudgetPlan, released: np.ndarray | None, k: int, count: int, N: int,
                rng: np.random.Generator) -> np.ndarray:
    """Steps 1-3: the eigenpairs and the centre as the plan says, ``count`` points of the ellipsoid, snapped
    if planned."""
    d = z.shape[1]
    if plan.psi is not None:
        pairs = private_subspace_iteration(z, plan.psi, rng)
        axes: tuple[np.ndarray, np.ndarray] | None = (pairs.vectors, pairs.values)
    else:
        axes = _exact_eigenpairs(z, k) if plan.exact_eigenpairs else None
    if plan.centre == "noisy-mean":
        assert plan.centre_release is not None  # planned with the centre (_budget_plan)
        centre = np.clip(plan.centre_release.apply(z.mean(axis=0), rng), -1.0, 1.0)
    elif plan.centre == "released-means":
        assert released is not None  # planned with the moments
        centre = np.clip(released[:d], -1.0, 1.0)
    else:
        centre = z.mean(axis=0) if plan.centre == "exact-mean" else np.zeros(d)
    if axes is None:
        return centre[None, :]
    raw = np.clip(_ellipsoid_points(centre, *axes, count, rng), -1.0, 1.0)
    return grid_centres(N)[np.unique(snap_to_grid(raw, N), axis=0)] if plan.snap else np.unique(raw, axis=0)


def practical_smooth_synthetic_database(data: npt.ArrayLike, epsilon: float, K: float, rng: np.random.Generator, *,
                                        delta: float | None = None, noise: str = "safe",
                                        settings: PracticalSettings = PracticalSettings()) -> SmoothRelease:
    """Run the practical variant on ``data`` (``(n, d)`` in :math:`[-1,1]^d`); ``delta`` None for ε-DP."""
    start = time.perf_counter()
    z, eps, setting, delta = check_release_arguments(data, epsilon, noise, delta)
    if not isinstance(settings, PracticalSettings):
        raise ValidationError("settings", "a PracticalSettings", f"got a {type(settings).__name__}")
    n, d = z.shape
    sizes = smooth_sizes(n, d, K, delta)
    R = settings.basis if settings.basis is not None else practical_basis_size(n, d, K, delta)
    k = settings.pca_dimension if settings.pca_dimension is not None else min(5, max(1, d // 2))
    if k > d:
        raise ValidationError("pca_dimension", f"an integer in [1, d = {d}]", f"got {k}")
    iterations = settings.psi_iterations if settings.psi_iterations is not None else max(1, math.ceil(10 * math.log(d)))
    plan = _budget_plan(ReleaseShape(n, d, R, k, iterations), eps, delta, setting, settings)

    released = None                                                            # the adaptive means release
    if plan.moments is not None:
        assert plan.moment_indices is not None  # planned together (_budget_plan)
        released = plan.moments.apply(basis_values(z, plan.moment_indices).mean(axis=0), rng)
    if settings.candidate_source == "pca":                                   # steps 1-3
        candidates = _candidates(z, plan, released, k, settings.candidates, sizes.N, rng)
    else:
        candidates = grid_centres(sizes.N)[np.unique(rng.integers(0, sizes.N, size=(settings.candidates, d)), axis=0)]

    if plan.fit:
        indices = lowest_degree_indices(d, R)                                  # step 4
        if plan.basis is not None:                                             # step 5
            noisy = plan.basis.apply(basis_values(z, indices).mean(axis=0), rng)
        else:
            assert released is not None  # no basis release: the basis answers come from the moments
            noisy = plan.basis_answers(indices, released)
        w = basis_values(candidates, indices).T
        if settings.round_to_grid:
            noisy, w = round_to_lattice(noisy, sizes.L), round_to_lattice(w, sizes.L)
        fit = fit_distribution(w, noisy)                                       # step 6
        u, residual = fit.u, fit.residual
    else:                                                                      # one candidate: u = (1)
        u, residual = np.ones(len(candidates)), None
    answers_noise = plan.basis if plan.basis is not None else plan.moments
    rows = settings.output_rows if settings.output_rows is not None else sizes.m
    counts = rng.multinomial(rows, u)                                          # step 7
    keep = counts > 0
    details = {"variant": "practical" if delta is None else "practical-approx", "n": n, "d": d, "K": float(K),
               "N": sizes.N, "m": rows, "L": sizes.L, "basis_functions": R, "candidates": len(candidates),
               "candidate_source": settings.candidate_source, "pca_dimension": k, "psi_iterations": iterations,
               "allocation": plan.allocation, "psi": plan.psi, "psi_skipped": plan.note, "snapped": plan.snap,
               "centre": plan.centre, "noise": setting,
               "noise_kind": None if answers_noise is None else answers_noise.kind,
               "noise_scale": None if answers_noise is None else answers_noise.scale, "lp_residual": residual,
               "distribution": u, "candidate_points": candidates}
    return SmoothRelease(candidates[keep], counts[keep], plan.guarantee, time.perf_counter() - start, details)

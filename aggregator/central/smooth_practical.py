"""The practical variant of the smooth-query mechanism (seed 003 §3.4 + App. A.5): private-PCA candidates, R basis functions.

Algorithm 1's LP has :math:`N^d` variables and :math:`t^d` constraints, hopeless for WDBC's
:math:`d = 30`. The practical variant (central-mechanisms.md §6.3) restricts both:

1. :math:`(X, \\hat\\lambda)` = Private Subspace Iteration (:mod:`~.private_pca`, Algorithm 2) with
   budget :math:`\\epsilon_1`;
2. the ellipsoid :math:`E = \\{c + \\sum_{s\\le k}\\alpha_s\\sqrt{\\hat\\lambda_s}\\,\\mathbf x_s : \\|\\alpha\\|_2\\le 1\\}`;
   the paper leaves the centre :math:`c` unspecified: ``centre="dp-mean"`` (default) releases the
   mean with noise (Laplace, :math:`\\Delta_1 = 2d/n`; or Gaussian, :math:`\\Delta_2 = 2\\sqrt d/n`) from a
   share of :math:`\\epsilon_1`, ``"zero"`` uses the public centre 0;
3. ``C`` points uniform in :math:`E` (:math:`\\alpha = U^{1/k} g/\\|g\\|`, :math:`g\\sim N(0, I_k)`), clipped to
   :math:`[-1,1]^d`, snapped to the :math:`N`-grid of Algorithm 1 and deduplicated
   (``candidates="uniform"``: C grid points uniform over :math:`N^d` instead, the App. A.5 ablation,
   no PSI);
4. the R basis functions of lowest total degree (:func:`~.chebyshev.lowest_degree_indices`),
   R from :func:`~.smooth_params.practical_basis_size` unless given;
5. noisy basis answers on the raw rows with budget :math:`\\epsilon_2` (:mod:`~.smooth_noise`);
6. the L1 LP over the candidates; 7. ``m`` (or ``n``) output rows sampled from :math:`\\mathbf u^*`.

Budget (not stated in the paper; [RECOMMENDED] defaults): ``psi_share`` = 1/2 of the budget for
steps 1–2, of which ``centre_share`` = 1/4 for the centre. Pure ε-DP composes by adding ε's; the safe
(ε, δ) setting runs every step as a Gaussian mechanism and composes exactly in GDP
(:math:`\\mu^2` adds; shares are shares of :math:`\\mu^2`), so the whole release is (ε, δ)-DP.

Settings: ``noise="safe"`` (default): PSI with multiplier 1 and eigenvalues from one more noisy
iteration, basis noise calibrated to the true sensitivity: guarantee (ε, 0) or (ε, δ).
``noise="paper"``: PSI as published (Theorem 3.6 scales, multiplier :math:`\\|X\\|_{\\max}`,
eigenvalues :math:`\\sqrt{\\mathbf x^\\top A^2\\mathbf x}` from the exact covariance, Cor. 3.5) and the paper-style
basis noise: **not differentially private** as published (the eigenvalues are not private), which the
returned guarantee states (ε = inf).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int

from .chebyshev import basis_values, lowest_degree_indices
from .private_pca import PsiConfig, private_subspace_iteration
from .smooth_lp import fit_distribution
from .smooth_noise import BasisNoise, basis_noise, gaussian_basis_noise
from .smooth_params import practical_basis_size, smooth_sizes
from .smooth_privacy import PrivacyGuarantee, gaussian_guarantee, gaussian_mu
from .smooth_release import SmoothRelease, check_release_arguments, grid_centres, round_to_lattice, snap_to_grid

CENTRES = ("dp-mean", "zero")
CANDIDATE_SOURCES = ("pca", "uniform")


def _fraction(value: object, name: str, low_open: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not ((0.0 < value) if low_open else (0.0 <= value)) or not value < 1.0:
        raise ValidationError(name, f"a number in {'(0' if low_open else '[0'}, 1)", f"got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PracticalSettings:
    """Knobs of the practical variant; ``None`` means the paper's or the spec's default (see the module docstring)."""

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

    def __post_init__(self) -> None:
        check_int(self.candidates, "candidates", 1, 1 << 22)
        if self.basis is not None:
            check_int(self.basis, "basis", 2, 1 << 16)
        if self.pca_dimension is not None:
            check_int(self.pca_dimension, "pca_dimension", 1)
        if self.psi_iterations is not None:
            check_int(self.psi_iterations, "psi_iterations", 1, 10_000)
        _fraction(self.psi_share, "psi_share")
        _fraction(self.centre_share, "centre_share")
        if self.centre not in CENTRES:
            raise ValidationError("centre", f"one of {CENTRES}", f"got {self.centre!r}")
        if self.candidate_source not in CANDIDATE_SOURCES:
            raise ValidationError("candidate_source", f"one of {CANDIDATE_SOURCES}", f"got {self.candidate_source!r}")
        if self.output_rows is not None:
            check_int(self.output_rows, "output_rows", 1)
        if not isinstance(self.round_to_grid, bool):
            raise ValidationError("round_to_grid", "True or False", f"got {self.round_to_grid!r}")


@dataclass(frozen=True)
class _Plan:
    """How the budget is spent: PSI configuration, centre noise (kind, scale), basis noise, and the total guarantee."""

    psi: PsiConfig | None
    centre_kind: str
    centre_scale: float
    noise: BasisNoise
    guarantee: PrivacyGuarantee


def _plan(n: int, d: int, R: int, k: int, iterations: int, eps: float, delta: float | None, setting: str,
          s: PracticalSettings) -> _Plan:
    uses_pca = s.candidate_source == "pca"
    dp_centre = uses_pca and s.centre == "dp-mean"
    part = s.psi_share if uses_pca else 0.0
    if delta is None or setting == "paper":
        eps_part = part * eps
        eps_centre = s.centre_share * eps_part if dp_centre else 0.0
        eps_psi, eps_basis = eps_part - eps_centre, eps - eps_part
        centre_scale = 2.0 * d / (n * eps_centre) if dp_centre else 0.0
        noise = basis_noise(R, n, eps_basis, delta, setting)
        if not uses_pca:
            return _Plan(None, "none", 0.0, noise, noise.guarantee)
        if setting == "paper":
            psi = (PsiConfig.paper_laplace(n, d, k, iterations, eps_psi) if delta is None
                   else PsiConfig.paper_gaussian(n, d, k, iterations, eps_psi, delta))
            return _Plan(psi, "laplace", centre_scale, noise, PrivacyGuarantee(
                math.inf, 0.0 if delta is None else delta,
                "not differentially private as published: PSI's eigenvalues sqrt(x' A^2 x) use the exact covariance "
                f"(seed 003 Cor. 3.5); basis noise: {noise.guarantee.statement}"))
        psi = PsiConfig.safe_laplace(n, d, k, iterations, eps_psi)
        total = eps_centre + psi.cost(n, d) + noise.guarantee.epsilon
        return _Plan(psi, "laplace", centre_scale, noise, PrivacyGuarantee(
            total, 0.0, f"basic composition: centre {eps_centre:.4g} + PSI {psi.cost(n, d):.4g} + basis "
                        f"{noise.guarantee.epsilon:.4g} = {total:.4g}-DP"))
    mu = gaussian_mu(eps, delta)
    mu2_part = part * mu * mu
    mu2_centre = s.centre_share * mu2_part if dp_centre else 0.0
    mu_basis = math.sqrt(mu * mu - mu2_part)
    noise = gaussian_basis_noise(R, n, mu_basis, delta)
    if not uses_pca:
        return _Plan(None, "none", 0.0, noise, gaussian_guarantee(mu_basis, delta, "Gaussian basis answers"))
    psi = PsiConfig.safe_gaussian(n, d, k, iterations, math.sqrt(mu2_part - mu2_centre))
    centre_scale = 2.0 * math.sqrt(d) / n / math.sqrt(mu2_centre) if dp_centre else 0.0
    total = math.sqrt(mu2_centre + psi.cost(n, d) ** 2 + mu_basis**2)
    return _Plan(psi, "gaussian", centre_scale, noise, gaussian_guarantee(
        total, delta, "GDP composition of the Gaussian centre, PSI and basis answers"))


def _ellipsoid_points(centre: np.ndarray, vectors: np.ndarray, values: np.ndarray, count: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``count`` points uniform in :math:`\\{c + \\sum_s \\alpha_s\\sqrt{\\lambda_s}\\mathbf x_s : \\|\\alpha\\|_2 \\le 1\\}`."""
    k = vectors.shape[1]
    g = rng.standard_normal((count, k))
    radius = rng.uniform(size=(count, 1)) ** (1.0 / k)
    alpha = radius * g / np.linalg.norm(g, axis=1, keepdims=True)
    return centre + (alpha * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


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
    plan = _plan(n, d, R, k, iterations, eps, delta, setting, settings)

    if settings.candidate_source == "pca":                                   # steps 1-3
        pairs = private_subspace_iteration(z, plan.psi, rng)
        centre = np.zeros(d)
        if plan.centre_scale > 0.0:
            draw = rng.laplace if plan.centre_kind == "laplace" else rng.normal
            centre = np.clip(z.mean(axis=0) + draw(0.0, plan.centre_scale, size=d), -1.0, 1.0)
        raw = np.clip(_ellipsoid_points(centre, pairs.vectors, pairs.values, settings.candidates, rng), -1.0, 1.0)
        codes = np.unique(snap_to_grid(raw, sizes.N), axis=0)
    else:
        codes = np.unique(rng.integers(0, sizes.N, size=(settings.candidates, d)), axis=0)
    candidates = grid_centres(sizes.N)[codes]

    indices = lowest_degree_indices(d, R)                                      # step 4
    answers = basis_values(z, indices).mean(axis=0)                            # step 5
    noisy = plan.noise.apply(answers, rng)
    w = basis_values(candidates, indices).T
    if settings.round_to_grid:
        noisy, w = round_to_lattice(noisy, sizes.L), round_to_lattice(w, sizes.L)
    fit = fit_distribution(w, noisy)                                           # step 6
    rows = settings.output_rows if settings.output_rows is not None else sizes.m
    counts = rng.multinomial(rows, fit.u)                                      # step 7
    keep = counts > 0
    details = {"variant": "practical" if delta is None else "practical-approx", "n": n, "d": d, "K": float(K),
               "N": sizes.N, "m": rows, "L": sizes.L, "basis_functions": R, "candidates": len(candidates),
               "candidate_source": settings.candidate_source, "pca_dimension": k, "psi_iterations": iterations,
               "psi": plan.psi, "centre": settings.centre, "noise": setting, "noise_kind": plan.noise.kind,
               "noise_scale": plan.noise.scale, "lp_residual": fit.residual, "distribution": fit.u,
               "candidate_points": candidates}
    return SmoothRelease(candidates[keep], counts[keep], plan.guarantee, time.perf_counter() - start, details)

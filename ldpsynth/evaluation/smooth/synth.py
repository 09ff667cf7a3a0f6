"""JWHZW Alg. 1 (ε-DP) and its (ε, δ) variant (JWHZW §3.2): a synthetic database for all smooth queries.

For data :math:`D \\in ([-1,1]^d)^n` and smoothness order :math:`K` (JWHZW §3.1, Alg. 1):

1. sizes :math:`t, N, m, L` (:func:`~.params.smooth_sizes`);
2. snap every row to the grid :math:`\\{a_k\\}^d`, :math:`a_k = (2k+1-N)/N` (steps 3–6);
3. basis answers :math:`b_{\\mathbf r} = \\frac1n\\sum_{x\\in D'}\\prod_i T_{r_i}(x_i)` for
   :math:`\\mathbf r \\in \\mathcal T_t^d` (steps 7–8), noisy :math:`\\hat b_{\\mathbf r}`
   (:mod:`~.noise`, step 9), optionally rounded to :math:`\\mathcal L` (step 10);
4. :math:`W_{\\mathbf r,\\mathbf k} = \\prod_i T_{r_i}(a_{k_i})`, optionally rounded to :math:`\\mathcal L`
   (steps 12–17);
5. :math:`\\mathbf u^* = \\arg\\min_{\\mathbf u\\in\\Delta}\\|W'\\mathbf u - \\hat{\\mathbf b}'\\|_1` (step 20, HiGHS);
6. :math:`m` i.i.d. grid points with probabilities :math:`\\mathbf u^*` (steps 21–24).

The basis answers are computed from the grid histogram of :math:`D'` (:math:`b = W h / n`), one
matrix–vector product. Rounding to :math:`\\mathcal L` only bounds the LP's bit complexity in the
paper; it is on by default for fidelity (``round_to_grid=False`` skips it).

Privacy: the release is post-processing of :math:`\\hat b`, so it has the guarantee of the noise
(replace-one neighbours): ε-DP (safe), :math:`2\\epsilon(1 - t^{-d})`-DP provable for the paper's scale;
see :mod:`~.noise`. Accuracy (paper): :math:`O(n^{-K/(2d+K)}/\\epsilon)`; time
:math:`O(n^{(3dK+5d)/(4d+2K)})`.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.smooth.chebyshev import basis_values, full_indices
from ldpsynth.evaluation.smooth.lp import fit_distribution
from ldpsynth.evaluation.smooth.noise import basis_noise
from ldpsynth.evaluation.smooth.params import smooth_sizes
from ldpsynth.evaluation.smooth.release import (
    SmoothRelease,
    check_release_arguments,
    grid_centres,
    round_to_lattice,
    snap_to_grid,
)
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_bool

#: Largest LP matrix W (t^d rows times N^d columns) Algorithm 1 builds (256 MiB of float64).
MAX_LP_ENTRIES = 1 << 25


def grid_points(N: int, d: int) -> np.ndarray:
    """All :math:`N^d` grid points :math:`(a_{k_1},\\dots,a_{k_d})` in C order of :math:`(k_1,\\dots,k_d)`,
    shape ``(N^d, d)``."""
    centres = grid_centres(N)
    return centres[np.indices((N,) * d).reshape(d, -1).T]


def grid_histogram(z: np.ndarray, N: int) -> np.ndarray:
    """Fraction of the rows of ``z`` (in :math:`[-1,1]^d`) snapped to each of the :math:`N^d` grid points (C order)."""
    n, d = z.shape
    flat = np.ravel_multi_index(tuple(snap_to_grid(z, N).T), (N,) * d)
    return np.bincount(flat, minlength=N**d) / n


def smooth_synthetic_database(data: npt.ArrayLike, epsilon: float, K: float, rng: np.random.Generator, *,
                              delta: float | None = None, noise: str = "safe",
                              round_to_grid: bool = True) -> SmoothRelease:
    """Run Algorithm 1 (``delta`` None) or the (ε, δ) variant on ``data`` (``(n, d)`` in :math:`[-1,1]^d`).

    ``noise`` is ``"safe"`` (default) or ``"paper"`` (:mod:`~.noise`). Raises
    :class:`~ldpsynth.shared.errors.ValidationError` when the LP would exceed :data:`MAX_LP_ENTRIES`
    (use the practical variant, :mod:`~.practical`, in higher dimension).
    """
    start = time.perf_counter()
    z, eps, setting, delta = check_release_arguments(data, epsilon, noise, delta)
    check_bool(round_to_grid, "round_to_grid")
    n, d = z.shape
    sizes = smooth_sizes(n, d, K, delta)
    basis_count, cells = sizes.t**d, sizes.N**d
    if basis_count < 2:
        raise ValidationError("n", "large enough that t >= 2 (at least one informative basis function)",
                              f"got t = {sizes.t} for n = {n}, d = {d}, K = {K}")
    if basis_count * cells > MAX_LP_ENTRIES:
        raise ValidationError("K", f"a smoothness order with t^d * N^d <= {MAX_LP_ENTRIES} for n = {n}, d = {d} "
                              "(or use the practical variant)", f"got t = {sizes.t}, N = {sizes.N}")
    indices = full_indices(d, sizes.t)
    points = grid_points(sizes.N, d)
    w = basis_values(points, indices).T                                       # (t^d, N^d), steps 12-14
    answers = w @ grid_histogram(z, sizes.N)                                   # steps 3-8
    noise_model = basis_noise(basis_count, n, eps, delta, setting)
    noisy = noise_model.apply(answers, rng)                                    # step 9
    if round_to_grid:
        noisy, w = round_to_lattice(noisy, sizes.L), round_to_lattice(w, sizes.L)   # steps 10, 15
    fit = fit_distribution(w, noisy)                                           # step 20
    counts = rng.multinomial(sizes.m, fit.u)                                   # steps 21-24
    keep = counts > 0
    details = {"variant": "algorithm-1" if delta is None else "algorithm-1-approx", "n": n, "d": d, "K": float(K),
               "t": sizes.t, "N": sizes.N, "m": sizes.m, "L": sizes.L, "basis_functions": basis_count,
               "candidates": cells, "noise": setting, "noise_kind": noise_model.kind, "noise_scale": noise_model.scale,
               "round_to_grid": round_to_grid, "lp_residual": fit.residual, "distribution": fit.u}
    return SmoothRelease(points[keep], counts[keep], noise_model.guarantee, time.perf_counter() - start, details)

"""The smooth test queries of JWHZW §4: linear combinations of Gaussian kernels, evaluated in batches.

.. math::  f(\\mathbf x) = \\sum_{j=1}^{J} \\alpha_j
           \\exp\\Big(-\\frac{\\|\\mathbf x - \\mathbf x_j\\|^2}{2\\sigma^2}\\Big),
           \\qquad q_f(D) = \\frac1n\\sum_{x\\in D} f(x),

with :math:`J = 10`, :math:`\\alpha_j \\sim U[0,1]`, :math:`\\mathbf x_j \\sim U[-1,1]^d`. The weights are
normalised to :math:`\\|\\alpha\\|_1 = 1`, the condition of Proposition 2.1 (:math:`\\|f\\|_K \\le 1` for
:math:`K \\le \\sigma^2`); the paper's Table 3 implies it too: its absolute/relative error ratios,
which equal :math:`q_f(D)`, lie in [0.11, 0.86], impossible with unnormalised weights summing to ~5.

Batches are evaluated as weighted means over points without materialising :math:`(P, Q, J)`
arrays: squared distances by one matrix product per chunk of queries
(:math:`\\|p\\|^2 + \\|c\\|^2 - 2p\\cdot c`), shared by every bandwidth σ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int

#: Kernel centres per chunk of the batch evaluation (bounds the (P, chunk) distance matrix).
CENTRES_PER_CHUNK = 1 << 13


@dataclass(frozen=True)
class KernelQueries:
    """``Q`` queries in ``d`` dimensions: ``centres`` (Q, J, d) and ``weights`` (Q, J) with rows summing to 1."""

    centres: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return int(self.centres.shape[0])

    @classmethod
    def random(cls, count: int, d: int, rng: np.random.Generator, kernels: int = 10) -> KernelQueries:
        """JWHZW §4: :math:`\\mathbf x_j \\sim U[-1,1]^d`, :math:`\\alpha_j \\sim U[0,1]`.

        Normalised to sum 1 (the condition ‖α‖₁ ≤ 1 of JWHZW Prop. 2.1; §4 does not normalise).
        """
        count = check_int(count, "count", 1)
        d = check_int(d, "d", 1)
        kernels = check_int(kernels, "kernels", 1)
        alphas = rng.uniform(0.0, 1.0, size=(count, kernels))
        return cls(rng.uniform(-1.0, 1.0, size=(count, kernels, d)), alphas / alphas.sum(axis=1, keepdims=True))

    def answers(self, points: npt.ArrayLike, mass: npt.ArrayLike, sigmas: Sequence[float]) -> np.ndarray:
        """:math:`\\sum_p \\mathrm{mass}_p f_{q,\\sigma}(p)` for every σ and query: shape ``(len(sigmas), Q)``.

        ``mass`` (P,) are the points' weights (``1/n`` each for a data set, ``counts/m`` for a release).
        """
        p = np.asarray(points, dtype=np.float64)
        w = np.asarray(mass, dtype=np.float64)
        q, j, d = self.centres.shape
        if p.ndim != 2 or p.shape[1] != d:
            raise ValidationError("points", f"a (P, {d}) array", f"got shape {p.shape}")
        if w.shape != (p.shape[0],):
            raise ValidationError("mass", f"{p.shape[0]} weights (one per point)", f"got shape {w.shape}")
        s = np.asarray(sigmas, dtype=np.float64)
        if s.ndim != 1 or s.size == 0 or not (np.isfinite(s).all() and (s > 0).all()):
            raise ValidationError("sigmas", "a non-empty list of finite numbers > 0", f"got {sigmas!r}")
        flat = self.centres.reshape(q * j, d)
        out = np.empty((s.size, q))
        p_sq = (p * p).sum(axis=1)[:, None]
        per_chunk = max(j, (CENTRES_PER_CHUNK // j) * j)
        for start in range(0, q * j, per_chunk):
            c = flat[start:start + per_chunk]
            sq = np.maximum(p_sq + (c * c).sum(axis=1)[None, :] - 2.0 * (p @ c.T), 0.0)  # (P, chunk)
            rows = slice(start // j, (start + len(c)) // j)
            alphas = self.weights[rows].reshape(-1)
            for i, sigma in enumerate(s):
                kernel = np.exp(sq / (-2.0 * sigma * sigma))
                out[i, rows] = ((w @ kernel) * alphas).reshape(-1, j).sum(axis=1)
        return out

"""The linear program of JWHZW Alg. 1 step 20: the distribution that best fits noisy basis answers.

.. math::  \\mathbf u^* = \\arg\\min_{\\mathbf u} \\|W'\\mathbf u - \\hat{\\mathbf b}'\\|_1
           \\quad \\text{s.t.}\\quad \\mathbf u \\succeq 0,\\ \\mathbf 1^\\top \\mathbf u = 1,

with :math:`W'_{\\mathbf r, \\mathbf k} = \\phi_{\\mathbf r}(\\mathbf a_{\\mathbf k})` (one row per basis
function, one column per candidate point). We solve it in equality form with the residual split
into its positive and negative parts, :math:`W\\mathbf u - \\mathbf p + \\mathbf q = \\hat{\\mathbf b}`,
:math:`\\mathbf p, \\mathbf q \\ge 0`, minimising :math:`\\mathbf 1^\\top(\\mathbf p + \\mathbf q)` (at an
optimum :math:`p_r q_r = 0`, so the objective is the :math:`\\ell_1` residual), with
``scipy.optimize.linprog`` and the HiGHS solver (the paper used CPLEX). A basic optimal solution
has at most ``R + 1`` non-zero entries of :math:`\\mathbf u`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import linprog

from ldpsynth.shared.errors import LdpsynthError, ValidationError


class LinearProgramError(LdpsynthError):
    """HiGHS did not return an optimal solution (never expected: the LP is always feasible and bounded)."""


@dataclass(frozen=True)
class DistributionFit:
    """The LP's optimal distribution ``u`` over the candidate points and its :math:`\\ell_1` residual."""

    u: np.ndarray
    residual: float


def fit_distribution(basis: npt.ArrayLike, targets: npt.ArrayLike) -> DistributionFit:
    """Solve :math:`\\min_{\\mathbf u \\in \\Delta} \\|W\\mathbf u - \\mathbf b\\|_1` for ``basis`` ``W`` (R, C)
    and ``targets`` ``b`` (R,).

    The returned ``u`` is a probability vector: HiGHS's tiny negative round-off is clipped and
    the vector renormalised.
    """
    w = np.asarray(basis, dtype=np.float64)
    b = np.asarray(targets, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] == 0 or w.shape[1] == 0 or not np.isfinite(w).all():
        raise ValidationError("basis", "a finite (R, C) array with R, C >= 1", f"got shape {w.shape}")
    if b.shape != (w.shape[0],) or not np.isfinite(b).all():
        raise ValidationError("targets", f"{w.shape[0]} finite numbers (one per basis function)",
                              f"got shape {b.shape}")
    rows, cols = w.shape
    eye = sp.identity(rows, format="csr")
    a_eq = sp.vstack([sp.hstack([sp.csr_matrix(w), -eye, eye]),
                      sp.hstack([sp.csr_matrix(np.ones((1, cols))), sp.csr_matrix((1, 2 * rows))])], format="csr")
    cost = np.concatenate([np.zeros(cols), np.ones(2 * rows)])
    result = linprog(cost, A_eq=a_eq, b_eq=np.concatenate([b, [1.0]]), bounds=(0, None), method="highs")
    if result.status != 0:
        raise LinearProgramError(f"HiGHS failed on the LP of JWHZW Alg. 1 step 20 ({rows} x {cols}): {result.message}")
    u = np.clip(result.x[:cols], 0.0, None)
    u /= u.sum()
    return DistributionFit(u, float(np.abs(w @ u - b).sum()))

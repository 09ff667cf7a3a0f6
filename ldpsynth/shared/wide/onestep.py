"""A model answer corrected by the views it can be checked against: the one-step estimate and its standard error.

The model's marginal :math:`q` of the attributes A a query depends on is shrunk: mirror descent stopped within
the views' noise and the positivity of a distribution pull it toward independence, and the bootstrap's refits,
shrunk the same way, do not see that bias (docs/wide.md "Coverage"). Every measured view V holding some of A
measures the sub-marginal on :math:`S = A \\cap V` without bias; the blocks used are the views whose S is
maximal (no other view's intersection with A holds it), each its own independent estimate
:math:`\\hat\\mu_S = M_{S,V}\\hat f_V` with the plug-in covariance :math:`M\\Sigma_V M^\\top`.

Let :math:`T(x)` stack the indicators of the blocks' cells on A's cells, :math:`\\mu = E_q T` and
:math:`C = \\operatorname{Cov}_q T`. In the exponential family through q with sufficient statistics T (the
maximum-entropy tables with given S-marginals) a change :math:`d\\mu` of the statistics' means moves a linear
query :math:`\\theta = w\\cdot f_A` by :math:`g\\,d\\mu` with :math:`g = \\operatorname{Cov}_q(w, T)\\,C^{+}`
(the natural parameters move by :math:`C^{+}d\\mu`). The one-step estimate (BKRW93, the efficient
estimator's linearisation; for log-linear models the first IPF step linearised) is

.. math::  \\tilde\\theta = w\\cdot q + g\\,(\\hat\\mu - \\mu),

unbiased to first order whenever the truth lies in that family (for all pairs and a 3-way marginal: no
three-way interaction beyond what the pairs fix). Its error is :math:`g(\\hat\\mu - \\mu^{true})` plus what the
model gets wrong orthogonally to T, :math:`\\delta = (w - gT^\\top)\\cdot(q - f_A)`. The variance is

.. math::  \\operatorname{Var}\\tilde\\theta = \\sum_{\\text{blocks}} g_S M\\Sigma_V M^\\top g_S^\\top
           + \\widehat{\\operatorname{Var}}\\,\\delta,

the second term the variance of :math:`(w - gT^\\top)\\cdot q^*_b` over the B bootstrap refits
:math:`q^*_b` (the noise of the other views carried through the model into A; zero when T spans w). The
interval is Student-t with the Welch-Satterthwaite degrees of freedom of the sum (Sat46),
:math:`\\nu = (B-1)\\,(v_1+v_2)^2/v_2^2` (normal when :math:`v_2 = 0`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from .measure import ViewMeasurement
from .views import WideDomain, project

__all__ = ["MAX_CORRECTED_CELLS", "Correction", "OneStep", "blocks"]

#: The most cells of A whose answers are corrected (T is sparse, cells × blocks non-zeros; above it the model's
#: answer keeps the bootstrap's error alone, :class:`~ldpsynth.shared.wide.database.WideDatabase`).
MAX_CORRECTED_CELLS = 1 << 18


@dataclass(frozen=True, eq=False)
class OneStep:
    """Per query: the one-step ``estimate``, its ``variance`` from the blocks' views (``analytic``) and from
    the bootstrap (``bootstrap``), the Welch-Satterthwaite ``df``; ``views``: the blocks' views (attributes)."""

    estimate: np.ndarray
    analytic: np.ndarray
    bootstrap: np.ndarray
    df: np.ndarray
    views: tuple[tuple[int, ...], ...]

    @property
    def standard_error(self) -> np.ndarray:
        return np.sqrt(self.analytic + self.bootstrap)


def blocks(measurements: Sequence[ViewMeasurement], attributes: Sequence[int]) -> list[tuple[ViewMeasurement,
                                                                                           tuple[int, ...]]]:
    """The (view, S) pairs of the module docstring: views with reports whose intersection S with ``attributes``
    is non-empty and held by no other view's larger intersection; S in the order of ``attributes``."""
    attrs = tuple(attributes)
    held = [(m, tuple(a for a in attrs if a in m.view.attributes)) for m in measurements if m.n > 0]
    held = [(m, s) for m, s in held if s]
    sets = {frozenset(s) for _, s in held}
    return [(m, s) for m, s in held if not any(frozenset(s) < other for other in sets)]


def _statistics(domain: WideDomain, attrs: tuple[int, ...], chosen: Sequence[tuple[ViewMeasurement, tuple[int, ...]]]
                ) -> Any:
    """T as a sparse ``cells(A) x Σ cells(S)`` indicator matrix (each A-cell's S-cell per block, S in the order of
    ``attrs`` as :func:`~.views.project` sums to it)."""
    from scipy import sparse  # scipy comes with mbi (the [wide] extra)

    sizes = [domain.sizes[a] for a in attrs]
    cells = math.prod(sizes)
    grid = np.unravel_index(np.arange(cells), sizes)
    parts = []
    for _, s in chosen:
        shape = [domain.sizes[a] for a in s]
        column = np.ravel_multi_index(tuple(grid[attrs.index(a)] for a in s), shape)
        parts.append(sparse.csr_matrix((np.ones(cells), (np.arange(cells), column)), shape=(cells, math.prod(shape))))
    return sparse.hstack(parts, format="csr")


@dataclass(frozen=True, eq=False)
class Correction:
    """The one-step correction of the answers over one set of attributes A (module docstring): built once from the
    model's marginal of A and its bootstrap replicates (:meth:`of`; ``draw_means``: T's means under each replicate,
    B × Σ cells(S)), then applied to any queries over A (:meth:`answer`)."""

    marginal: np.ndarray
    draws: np.ndarray
    statistics: Any
    draw_means: np.ndarray
    means: np.ndarray
    inverse: np.ndarray
    residual: np.ndarray
    covariances: tuple[np.ndarray, ...]
    views: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, domain: WideDomain, measurements: Sequence[ViewMeasurement], attributes: Sequence[int],
           marginal: np.ndarray, replicates: np.ndarray, population: int) -> Correction:
        """The correction over ``attributes`` from the model's ``marginal`` of them (cells in mixed radix), its
        bootstrap ``replicates`` (B × cells) and the views' ``measurements`` (N = ``population``); at most
        :data:`MAX_CORRECTED_CELLS` cells."""
        attrs = tuple(attributes)
        q = np.asarray(marginal, np.float64)
        if q.size > MAX_CORRECTED_CELLS:
            raise ValidationError("attributes", f"at most {MAX_CORRECTED_CELLS:,} cells to correct",
                                  f"got {q.size:,}")
        draws = np.asarray(replicates, np.float64)
        chosen = blocks(measurements, attrs)
        if not chosen:
            empty = np.zeros((q.size, 0))
            return cls(q, draws, empty, np.zeros((len(draws), 0)), np.zeros(0), np.zeros((0, 0)), np.zeros(0), (), ())
        t = _statistics(domain, attrs, chosen)
        mu = t.T @ q
        covariance = (t.T @ t.multiply(q[:, None])).toarray() - np.outer(mu, mu)
        measured = np.concatenate([project(m.shares(), m.view, s) for m, s in chosen])
        # each block's covariance of its S-marginal, M Sigma_V M^T, on the blocks' stacked cells
        covariances = []
        for m, s in chosen:
            on_view = project(np.eye(m.view.size), m.view, s).T                        # cells(S) x cells(V)
            covariances.append(on_view @ m.share_covariance(population) @ on_view.T)
        return cls(q, draws, t, (t.T @ draws.T).T, mu, np.linalg.pinv(covariance, rcond=1e-10, hermitian=True),
                   measured - mu,
                   tuple(covariances), tuple(m.view.attributes for m, _ in chosen))

    def answer(self, weights: np.ndarray) -> OneStep:
        """The one-step answers of the queries ``weights`` over A's cells: rows of weights, or a 1-d array of
        cells (a marginal's indicators)."""
        w = np.asarray(weights)
        q, draws, t = self.marginal, self.draws, self.statistics
        cells_only = w.ndim == 1
        model_answer = q[w] if cells_only else w @ q
        replicate_answers = draws[:, w] if cells_only else draws @ w.T                  # B x queries
        if not self.views:
            plain = np.var(replicate_answers, axis=0, ddof=1)
            return OneStep(model_answer, np.zeros_like(plain), plain, np.full(plain.shape, len(draws) - 1.0), ())
        weighted = t[w].multiply(q[w][:, None]).toarray() if cells_only else (t.T @ (w * q).T).T
        gain = (weighted - np.outer(model_answer, self.means)) @ self.inverse
        estimate = model_answer + gain @ self.residual
        analytic = np.zeros(len(estimate))
        start = 0
        for covariance in self.covariances:
            g = gain[:, start:start + len(covariance)]
            analytic += np.sum((g @ covariance) * g, axis=1)
            start += len(covariance)
        residual = replicate_answers - self.draw_means @ gain.T                         # B x queries
        bootstrap = np.var(residual, axis=0, ddof=1)
        total = analytic + bootstrap
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(bootstrap > 0, (len(draws) - 1) * total ** 2 / np.maximum(bootstrap, 1e-300) ** 2,
                          math.inf)
        return OneStep(estimate, analytic, bootstrap, df, self.views)

"""The Laplace mechanism, on the workload answers and on the histogram.

:math:`f(D) + \\mathrm{Lap}(\\Delta_1/\\epsilon)^k` is ε-DP when
:math:`\\Delta_1 = \\max_{D \\sim D'} \\|f(D) - f(D')\\|_1` (Dwork, McSherry, Nissim, Smith 2006).

* :class:`LaplaceAnswers`: ``f`` = the ``m`` normalised workload answers. A replace-one
  neighbour moves one row from cell ``x`` to cell ``x'``, so
  :math:`\\Delta_1 = \\max_{x, x'} \\sum_j |W_j(x) - W_j(x')| / Z_j` — over pairs with the same label
  when labels are public (:attr:`~..primitives.guarantee.Neighbours.REPLACE_ONE_VALUE`), over all
  pairs of cells otherwise. The noise grows linearly with ``m``. Releases answers only.
* :class:`LaplaceHistogram`: ``f`` = the ``(G, k)`` histogram; replace-one moves one unit
  from one cell to another, :math:`\\Delta_1 = 2` (for either neighbour notion). The noisy table is
  projected (Euclidean) onto :math:`\\{x \\ge 0, \\sum_v x_{g,v} = n_g\\}` per label (public labels) or
  onto :math:`\\{x \\ge 0, \\sum x = n\\}` (post-processing), giving a synthetic histogram that
  answers every query at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.comparison.releases import CentralRelease, normalized_distribution
from ldpsynth.evaluation.comparison.workloads import CHUNK_CELLS, Histogram, Workload
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.validation import check_epsilon


def neighbours(public_labels: bool) -> Neighbours:
    """Replace-one value when the labels are public (a row keeps its label), else replace-one row."""
    return Neighbours.REPLACE_ONE_VALUE if public_labels else Neighbours.REPLACE_ONE_ROW


def answers_sensitivity(workload: Workload, group_sizes: npt.ArrayLike, public_labels: bool = True) -> float:
    """:math:`\\Delta_1` of the normalised answer vector under replace-one (see the module docstring).

    Exact maximum over all pairs of cells (same label only if ``public_labels``), computed in
    query chunks: :math:`O(m G k^2)` (public labels) or :math:`O(m G^2 k^2)` work.
    """
    z = workload.normalizers(group_sizes)
    scaled_rows = workload.weights.reshape(workload.size, -1) / z[:, None]
    if public_labels:
        per_query = workload.groups * workload.k * workload.k
        acc = np.zeros((workload.groups, workload.k, workload.k))
        w3 = scaled_rows.reshape(workload.size, workload.groups, workload.k)
        for s in range(0, workload.size, max(1, CHUNK_CELLS // per_query)):
            c = w3[s:s + max(1, CHUNK_CELLS // per_query)]
            acc += np.abs(c[:, :, :, None] - c[:, :, None, :]).sum(axis=0)
        return float(acc.max())
    cells = workload.cells
    acc2 = np.zeros((cells, cells))
    step = max(1, CHUNK_CELLS // (cells * cells))
    for s in range(0, workload.size, step):
        c = scaled_rows[s:s + step]
        acc2 += np.abs(c[:, :, None] - c[:, None, :]).sum(axis=0)
    return float(acc2.max())


def project_to_scaled_simplex(x: npt.ArrayLike, totals: npt.ArrayLike) -> np.ndarray:
    """Euclidean projection of each row of ``x`` onto :math:`\\{y \\ge 0, \\sum y = t\\}` (Duchi et al. 2008).

    Vectorised over rows: sort descending, :math:`\\theta = (\\sum_{i \\le \\rho} u_i - t)/\\rho` with
    :math:`\\rho = \\max\\{i : u_i > (\\sum_{l \\le i} u_l - t)/i\\}`, :math:`y = \\max(x - \\theta, 0)`.
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    t = np.broadcast_to(np.asarray(totals, dtype=np.float64), (a.shape[0],))
    u = -np.sort(-a, axis=1)
    css = np.cumsum(u, axis=1) - t[:, None]
    idx = np.arange(1, a.shape[1] + 1)
    rho = (u - css / idx > 0).sum(axis=1)  # the condition holds exactly for a prefix
    rho = np.maximum(rho, 1)
    theta = css[np.arange(a.shape[0]), rho - 1] / rho
    return np.maximum(a - theta[:, None], 0.0)


@dataclass(frozen=True)
class _LaplaceMechanism:
    """What the two Laplace mechanisms share: ε, the neighbour notion and a pure ε-DP guarantee.

    Parameters
    ----------
    epsilon:
        Privacy budget, a finite number > 0.
    public_labels:
        True: neighbours keep each row's public label
        (:attr:`~..primitives.guarantee.Neighbours.REPLACE_ONE_VALUE`); False: any row may change
        label too. What it changes in each mechanism: that mechanism's docstring.
    """

    #: The guarantee's ``statement``: how the mechanism meets it.
    STATEMENT: ClassVar[str]

    epsilon: float
    public_labels: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(self.epsilon, 0.0, neighbours(self.public_labels), self.STATEMENT)


@dataclass(frozen=True)
class LaplaceAnswers(_LaplaceMechanism):
    """Laplace mechanism on the workload's normalised answers: ε-DP, answers only (parameters:
    :class:`_LaplaceMechanism`). With ``public_labels`` the L1 sensitivity is over value changes within
    a label; without, over any change of a row.
    """

    STATEMENT = "Laplace mechanism with the exact L1 sensitivity of the answer vector"

    @property
    def name(self) -> str:
        return "Laplace (answers)"

    def scale(self, workload: Workload, hist: Histogram) -> float:
        """:math:`\\Delta_1/\\epsilon`."""
        return answers_sensitivity(workload, hist.group_sizes, self.public_labels) / self.epsilon

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        b = self.scale(workload, hist)
        truth = workload.answers(hist.counts, hist.group_sizes)
        noisy = truth + rng.laplace(scale=b, size=truth.shape)
        return CentralRelease(self.name, noisy, None, hist.n, self.guarantee, {"scale": b})


@dataclass(frozen=True)
class LaplaceHistogram(_LaplaceMechanism):
    """Laplace mechanism on the ``(G, k)`` histogram (Δ1 = 2, replace-one), projected to a synthetic histogram
    (parameters: :class:`_LaplaceMechanism`). With ``public_labels`` each label's noisy counts are projected
    onto its public size :math:`n_g`; without, the whole table onto :math:`n` (the group sizes are then
    not used).
    """

    STATEMENT = "Laplace mechanism on every cell, L1 sensitivity 2; projection is post-processing"
    SENSITIVITY = 2.0

    @property
    def name(self) -> str:
        return "Laplace (histogram)"

    @property
    def scale(self) -> float:
        """:math:`2/\\epsilon`."""
        return self.SENSITIVITY / self.epsilon

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        noisy = hist.counts + rng.laplace(scale=self.scale, size=hist.counts.shape)
        if self.public_labels:
            synthetic = project_to_scaled_simplex(noisy, hist.group_sizes)
        else:
            synthetic = project_to_scaled_simplex(noisy.reshape(1, -1), hist.n).reshape(noisy.shape)
        dist = normalized_distribution(synthetic)
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n, self.guarantee,
                              {"scale": self.scale})

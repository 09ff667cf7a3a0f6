"""How the practical smooth-query variant (JWHZW §3.4, App. A.5) spends its budget: three allocations.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.smooth.budget``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.evaluation.primitives.composition import gaussian_guarantee, gaussian_mu, within_budget
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.evaluation.smooth.chebyshev import lowest_degree_indices
from ldpsynth.evaluation.smooth.moments import MomentRelease, gaussian_moments, laplace_moments, linf_moments
from ldpsynth.evaluation.smooth.noise import BasisNoise, basis_noise, gaussian_basis_noise
from ldpsynth.evaluation.smooth.private_pca import PsiConfig
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError

ALLOCATIONS = ("adaptive", "fixed-split", "non-private")


@dataclass(frozen=True)
class ReleaseShape:
    """The public sizes a plan depends on: ``n`` rows, ``d`` attributes, ``basis`` = R, PSI's ``k`` and
    ``iterations``."""

    n: int
    d: int
    basis: int
    k: int
    iterations: int


@dataclass(frozen=True)
class BudgetPlan:
    """What one release computes from the data, with which noise, and what the whole guarantees.

    ``centre`` is ``"zero"`` (public), ``"exact-mean"`` (non-private), ``"noisy-mean"`` (the mean plus
    ``centre_release``'s noise) or ``"released-means"`` (the first d entries of the ``moments`` release).
    ``moments`` releases the means of ``moment_indices`` (adaptive); ``basis`` is the basis answers'
    own release (fixed-split, non-private). ``fit`` is False when the candidates are the centre
    alone (no LP, no basis answers). ``note`` says what was skipped and why.
    """

    allocation: str
    psi: PsiConfig | None
    exact_eigenpairs: bool
    centre: str
    centre_release: MomentRelease | None
    moments: MomentRelease | None
    moment_indices: np.ndarray | None
    basis: BasisNoise | None
    fit: bool
    snap: bool
    guarantee: PrivacyGuarantee
    note: str = ""

    def basis_answers(self, indices: np.ndarray, released: np.ndarray) -> np.ndarray:
        """The noisy answers of the multi-indices ``indices`` (``r = 0`` first) read off the ``moments`` release."""
        if self.moment_indices is None:
            raise ValidationError("plan", "an adaptive plan with a moments release", f"got {self.allocation!r}")
        position = {tuple(r): i for i, r in enumerate(self.moment_indices.tolist())}
        out = np.empty(len(indices))
        for j, r in enumerate(indices.tolist()):
            out[j] = 1.0 if not any(r) else released[position[tuple(r)]]
        return out


def compose_pure(parts: Sequence[tuple[str, float]], epsilon: float) -> PrivacyGuarantee:
    """Basic composition of pure ε-DP ``parts`` (name, ε): :math:`\\sum_i \\epsilon_i`, checked against ``epsilon``."""
    total = float(sum(cost for _, cost in parts))
    spelled = " + ".join(f"{name} {cost:.6g}" for name, cost in parts)
    if not within_budget(total, epsilon):
        raise PrivacyBudgetExceeded(f"the parts spend epsilon {spelled} = {total:.6g} > the budget {epsilon:.6g}")
    return PrivacyGuarantee(total, 0.0, Neighbours.REPLACE_ONE_ROW, f"basic composition: {spelled} = {total:.6g}-DP")


def compose_gdp(parts: Sequence[tuple[str, float]], mu: float, delta: float) -> PrivacyGuarantee:
    """GDP composition of μ-GDP ``parts`` (name, μ): :math:`\\sqrt{\\sum_i \\mu_i^2}`, checked against ``mu``,
    stated at δ."""
    total = math.sqrt(sum(cost * cost for _, cost in parts))
    spelled = " + ".join(f"{name} {cost:.6g}^2" for name, cost in parts)
    if not within_budget(total, mu):
        raise PrivacyBudgetExceeded(f"the parts spend mu^2 = {spelled}, mu = {total:.6g} > the budget mu {mu:.6g}")
    return gaussian_guarantee(total, delta, Neighbours.REPLACE_ONE_ROW, f"GDP composition: mu^2 = {spelled}")


def moment_indices(d: int, basis: int, centre: bool, fit: bool) -> np.ndarray:
    """Multi-indices of the adaptive release: :math:`e_1..e_d` if ``centre``, then the R lowest-degree
    ``r != 0`` not yet listed if ``fit``."""
    rows: list[tuple[int, ...]] = []
    if centre:
        rows += [tuple(int(i == j) for i in range(d)) for j in range(d)]
    if fit:
        seen = set(rows)
        rows += [r for r in map(tuple, lowest_degree_indices(d, basis)[1:].tolist()) if r not in seen]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), d)


def _psi_config(shape: ReleaseShape, share: float, eps: float, delta: float | None) -> PsiConfig:
    """Safe PSI at ``share`` of the budget (of ε, or of :math:`\\mu^2`)."""
    n, d, k, iterations = shape.n, shape.d, shape.k, shape.iterations
    if delta is None:
        return PsiConfig.safe_laplace(n, d, k, iterations, share * eps)
    return PsiConfig.safe_gaussian(n, d, k, iterations, math.sqrt(share) * gaussian_mu(eps, delta))


def adaptive_plan(shape: ReleaseShape, eps: float, delta: float | None, *, uses_pca: bool, dp_centre: bool,
                  psi_share: float, eigenvalue_bound: float) -> BudgetPlan:
    """The adaptive allocation (module docstring): PSI only if its noise norm is below ``eigenvalue_bound``."""
    psi, note = None, ""
    if uses_pca:
        trial = _psi_config(shape, psi_share, eps, delta)
        norm = trial.noise_column_norm(shape.d)
        if norm < eigenvalue_bound:
            psi = trial
        else:
            note = (f"PSI skipped: its noise norm {norm:.4g} at {psi_share:g} of the budget is >= the eigenvalue "
                    f"bound {eigenvalue_bound:.4g}, so the ellipsoid is its centre alone (one candidate, no LP)")
    fit = psi is not None or not uses_pca
    centre = "released-means" if uses_pca and dp_centre else "zero"
    indices = moment_indices(shape.d, shape.basis, centre == "released-means", fit)
    share = psi_share if psi is not None else 0.0
    moments = None
    if len(indices):
        moments = (linf_moments(len(indices), shape.n, (1.0 - share) * eps) if delta is None else
                   gaussian_moments(len(indices), shape.n, math.sqrt(1.0 - share) * gaussian_mu(eps, delta), delta))
    parts = ([("PSI", psi.cost(shape.n, shape.d))] if psi is not None else []) + (
        [(f"{len(indices)} means", moments.cost)] if moments is not None else [])
    said = [note] if note else []
    if moments is not None:
        said.append(f"means: {moments.guarantee.statement}")
    if not parts:
        composed = PrivacyGuarantee(0.0, 0.0, Neighbours.REPLACE_ONE_ROW,
                                    "no data read: the release is the public centre 0")
    elif delta is None:
        composed = compose_pure(parts, eps)
    else:
        composed = compose_gdp(parts, gaussian_mu(eps, delta), delta)
    guarantee = PrivacyGuarantee(composed.epsilon, composed.delta, composed.neighbours,
                                 "; ".join(said + [composed.statement]))
    return BudgetPlan("adaptive", psi, False, centre, None, moments, indices, None, fit, False, guarantee, note)


def fixed_split_plan(shape: ReleaseShape, eps: float, delta: float | None, setting: str, *, uses_pca: bool,
                     dp_centre: bool, psi_share: float, centre_share: float) -> BudgetPlan:
    """The fixed split (module docstring): PSI ``psi_share`` incl. the centre's ``centre_share`` of it,
    basis the rest; snapped."""
    n, d, R, k, iterations = shape.n, shape.d, shape.basis, shape.k, shape.iterations
    dp_centre = uses_pca and dp_centre
    centre = "noisy-mean" if dp_centre else "zero"
    part = psi_share if uses_pca else 0.0
    if delta is None or setting == "paper":
        eps_part = part * eps
        eps_centre = centre_share * eps_part if dp_centre else 0.0
        eps_psi, eps_basis = eps_part - eps_centre, eps - eps_part
        centre_release = laplace_moments(d, n, eps_centre) if dp_centre else None
        noise = basis_noise(R, n, eps_basis, delta, setting)
        if not uses_pca:
            return BudgetPlan("fixed-split", None, False, "zero", None, None, None, noise, True, True, noise.guarantee)
        if setting == "paper":
            psi = (PsiConfig.paper_laplace(n, d, k, iterations, eps_psi) if delta is None
                   else PsiConfig.paper_gaussian(n, d, k, iterations, eps_psi, delta))
            return BudgetPlan("fixed-split", psi, False, centre, centre_release, None, None, noise, True, True,
                              PrivacyGuarantee(math.inf, 0.0 if delta is None else delta, Neighbours.REPLACE_ONE_ROW,
                                               "not differentially private as published: PSI's eigenvalues "
                                               "sqrt(x' A^2 x) use the exact covariance (JWHZW Cor. 3.5); basis "
                                               f"noise: {noise.guarantee.statement}"))
        psi = PsiConfig.safe_laplace(n, d, k, iterations, eps_psi)
        parts = ([("centre", eps_centre)] if dp_centre else []) + [("PSI", psi.cost(n, d)),
                                                                  ("basis", noise.guarantee.epsilon)]
        return BudgetPlan("fixed-split", psi, False, centre, centre_release, None, None, noise, True, True,
                          compose_pure(parts, eps))
    mu = gaussian_mu(eps, delta)
    mu2_part = part * mu * mu
    mu2_centre = centre_share * mu2_part if dp_centre else 0.0
    mu_basis = math.sqrt(mu * mu - mu2_part)
    noise = gaussian_basis_noise(R, n, mu_basis, delta)
    if not uses_pca:
        return BudgetPlan("fixed-split", None, False, "zero", None, None, None, noise, True, True,
                          gaussian_guarantee(mu_basis, delta, Neighbours.REPLACE_ONE_ROW, "Gaussian basis answers"))
    psi = PsiConfig.safe_gaussian(n, d, k, iterations, math.sqrt(mu2_part - mu2_centre))
    centre_release = gaussian_moments(d, n, math.sqrt(mu2_centre), delta) if dp_centre else None
    parts = ([("centre", centre_release.cost)] if centre_release is not None else []) + [
        ("PSI", psi.cost(n, d)), ("basis", mu_basis)]
    return BudgetPlan("fixed-split", psi, False, centre, centre_release, None, None, noise, True, True,
                      compose_gdp(parts, mu, delta))


def non_private_plan(shape: ReleaseShape, eps: float, delta: float | None, setting: str, *,
                     dp_centre: bool) -> BudgetPlan:
    """The NON-PRIVATE replication: exact mean and covariance eigenpairs, the whole ε on the basis answers,
    no snapping."""
    noise = basis_noise(shape.basis, shape.n, eps, delta, setting)
    centre = "exact-mean" if dp_centre else "zero"
    return BudgetPlan("non-private", None, True, centre, None, None, None, noise, True, False, PrivacyGuarantee(
        math.inf, 0.0 if delta is None else delta, Neighbours.REPLACE_ONE_ROW,
        f"NON-PRIVATE replication: {'the exact mean as centre, ' if dp_centre else ''}the exact covariance's top "
        f"{shape.k} eigenpairs as the ellipsoid; basis answers: {noise.guarantee.statement}"))

"""One model of all attributes fitted to the noisy views: Private-PGM (MSM19), from the ``mbi`` package.

Each view V gives the estimated population counts :math:`y_V = N\\hat f_V` with per-cell standard deviations
:math:`\\sigma_V(v) = N\\sqrt{\\operatorname{Var}\\hat f_V(v)}` (:mod:`.measure`). Private-PGM finds the
graphical model p over the full row domain whose marginals minimise the weighted least squares

.. math::  L(\\mu) = \\sum_V \\tfrac12 \\big\\| (\\mu_V - y_V)/\\sigma_V \\big\\|_2^2

over the marginal polytope (MSM19's estimation problem with :math:`Q_V` the identity scaled by
:math:`1/\\sigma_V`; mirror descent, MSM19 Algorithm 1). The model is post-processing of the reports: it
spends no ε.

**How long it runs** (:meth:`Problem.fit`): at least ``iterations`` steps (stopped early, mirror descent from the
uniform start shrinks the model toward independence, which lowers its error at small ε), then on, in blocks of
``mbi``'s 50 steps, until the model fits the views within their noise, the discrepancy principle
:math:`2L(\\mu) \\le m` (m the fitted cells: :math:`E\\,2L(\\mu^*) = m` at the true marginals), at most
:data:`MAX_ITERATIONS` steps. At large ε the views' σ are small and the step size, which starts at
:math:`2/(\\mathcal L N)` and grows 1 % per accepted step, needs thousands of steps: Adult's 28 pairs at ε = 16 after
500 steps were 0.38 from the truth in 2-way TVD, the views themselves 0.06 (docs/wide.md "Fit time").

The model answers any marginal (:meth:`WideModel.marginal`) and samples synthetic rows (:meth:`WideModel.sample`).

``mbi`` runs on JAX; it is imported only here (the optional ``[wide]`` extra).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_int
from .bounded import bounded_margins
from .measure import ViewMeasurement
from .sampling import ancestral_order, ancestral_sample
from .views import WideDomain, project

__all__ = ["DEFAULT_ITERATIONS", "MAX_DENSE_DOMAIN", "MAX_ITERATIONS", "Margin", "Problem", "WideModel",
           "bootstrap_errors", "bootstrap_marginals", "fit", "total_variation"]

#: Mirror-descent iterations of a fit (Adult's 8 attributes on 2 shared cores: 5-80 s by load with all 28 pair views
#: under the junction-tree bound of :mod:`.bounded`, 1-26 s with the 1-way views and a tree of pairs, docs/wide.md).
DEFAULT_ITERATIONS = 500
#: The most mirror-descent iterations a fit runs to fit the views within their noise (module docstring).
MAX_ITERATIONS = 10_000
#: The largest row domain whose model is evaluated as a dense array (128 MiB of float64).
MAX_DENSE_DOMAIN = 1 << 24


def _mbi() -> Any:
    """The ``mbi`` module with JAX in float64 (``mbi`` warns that float32 stalls its estimators)."""
    try:
        import jax
    except ImportError as exc:                                  # pragma: no cover - the [wide] extra
        raise ImportError("the wide-row model needs the [wide] extra: pip install 'ldpsynth[wide]'") from exc
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)    # mbi: many small programs, a cache only costs
    import mbi

    return mbi


def _mbi_jax() -> Any:
    import jax

    return jax


def _name(j: int) -> str:
    return f"a{j}"


@dataclass(frozen=True, eq=False)
class WideModel:
    """A fitted Private-PGM model of all attributes of ``domain`` (module docstring).

    Its distribution is :math:`p(x) \\propto \\exp\\sum_C \\theta_C(x_C)` over the fitted cliques' potentials;
    for a row domain of at most :data:`MAX_DENSE_DOMAIN` cells it is evaluated once as a dense array, from
    which every marginal is a sum and every sample a draw (``mbi``'s own projections compile a JAX program
    per call, seconds each on 2 cores); above it, marginals come from ``mbi``'s projections and
    :meth:`sample` draws along the junction tree (:mod:`.sampling`).
    """

    domain: WideDomain
    total: float
    mrf: Any
    #: Mirror-descent steps run, and :math:`2L/m` at the end (at most 1: within the views' noise).
    steps: int
    discrepancy: float

    @functools.cached_property
    def joint(self) -> np.ndarray:
        """The model's shares of every row, shape ``domain.sizes`` (float64, sums to 1)."""
        if self.domain.size > MAX_DENSE_DOMAIN:
            raise ValidationError("domain", f"a row domain of at most {MAX_DENSE_DOMAIN:,} cells",
                                  f"got {self.domain.size:,}")
        log_p = np.zeros(self.domain.sizes)
        for clique, factor in self.mrf.potentials.tables.items():
            axes = [int(name[1:]) for name in clique]
            values = np.asarray(factor.values, dtype=np.float64)
            order = np.argsort(axes)
            shape = [1] * self.domain.width
            for a in axes:
                shape[a] = self.domain.sizes[a]
            log_p = log_p + values.transpose(order).reshape(shape)
        p = np.exp(log_p - log_p.max())
        return p / p.sum()

    def marginal(self, attributes: Sequence[int]) -> np.ndarray:
        """The model's shares of the cells of the view of ``attributes`` (mixed radix in that order; sums to 1).

        Above :data:`MAX_DENSE_DOMAIN` cells, ``mbi``'s own projection (its clique marginals when one holds the
        attributes, variable elimination over the potentials otherwise: a JAX program compiled per call)."""
        view = self.domain.view(attributes)
        if self.domain.size > MAX_DENSE_DOMAIN:
            names = [_name(a) for a in view.attributes]
            values = np.asarray(self.mrf.project(names).transpose(names).datavector(), np.float64)
            values = np.clip(values, 0.0, None)
            return values / values.sum()
        others = tuple(j for j in range(self.domain.width) if j not in view.attributes)
        kept = sorted(view.attributes)
        summed = self.joint.sum(axis=others)
        return summed.transpose([kept.index(a) for a in view.attributes]).ravel()

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` synthetic rows ``(rows, d)`` int64, drawn independently from the model with ``rng``: from the
        dense joint up to :data:`MAX_DENSE_DOMAIN` cells, above it along the junction tree
        (:mod:`.sampling`: one clique marginal per attribute)."""
        count = check_int(rows, "rows", 0)
        if self.domain.size > MAX_DENSE_DOMAIN:
            cliques = [tuple(int(str(name)[1:]) for name in clique) for clique in self.mrf.cliques]
            return ancestral_sample(self.domain.sizes, ancestral_order(self.domain.width, cliques), self.marginal,
                                    count, rng)
        flat = self.joint.ravel()
        cells = np.minimum(np.searchsorted(np.cumsum(flat), rng.random(count) * flat.sum(), side="right"),
                           flat.size - 1)
        return np.stack(np.unravel_index(cells, self.domain.sizes), axis=1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class Margin:
    """A sub-marginal of a measured view fitted in place of the view (so the view's clique stays out of the
    model's junction tree): :math:`M f_V` with its variance from
    :meth:`~ldpsynth.shared.wide.measure.ViewMeasurement.linear_share_variance` (the protocol's exact linear
    variance plus sampling), :math:`\\sigma` in counts."""

    measurement: int
    attributes: tuple[int, ...]
    weights: np.ndarray
    sigma: np.ndarray
    query: Any


@dataclass(frozen=True, eq=False)
class Problem:
    """What a fit needs besides the views' shares: the ``mbi`` domain and, per view, its clique, the
    standard deviations :math:`\\sigma_V` of its counts and the weighted query :math:`1/\\sigma_V`. Built once
    per set of measurements: refits (the bootstrap) reuse the same query objects, so JAX reuses its compiled
    program (``mbi`` keys it on the queries' identity)."""

    domain: WideDomain
    measurements: tuple[ViewMeasurement, ...]
    population: int
    mbi_domain: Any
    sigmas: tuple[np.ndarray, ...]
    queries: tuple[Any, ...]
    margins: tuple[Margin, ...] = ()

    @classmethod
    def of(cls, domain: WideDomain, measurements: Sequence[ViewMeasurement], population: int,
           margins: Sequence[tuple[int, Sequence[int]]] | None = None) -> Problem:
        """``margins``: ``(i, attributes)`` pairs, the sub-marginal of ``attributes`` of measurement i fitted
        *instead of* that view's cells when the view itself is left out of the model (:class:`Margin`); by
        default the 1-way margins of the views that would push the junction tree's largest clique above
        :data:`~ldpsynth.shared.wide.bounded.MAX_CLIQUE` cells (:func:`~ldpsynth.shared.wide.bounded.bounded_margins`;
        none when every view fits, e.g. a tree of pairs)."""
        mbi = _mbi()
        n = check_int(population, "population", 1)
        if not measurements:
            raise ValidationError("measurements", "one or more views", "got none")
        mbi_domain = mbi.Domain([_name(j) for j in range(domain.width)], list(domain.sizes))
        if margins is None:
            margins = bounded_margins(measurements, n, mbi_domain)
        sigmas = tuple(n * np.sqrt(np.maximum(m.share_variance(n), 1e-12)) for m in measurements)
        built = []
        for i, attributes in margins:
            m = measurements[check_int(i, "margins", 0, len(measurements) - 1)]
            weights = project(np.eye(m.view.size), m.view, tuple(attributes)).T
            sigma = n * np.sqrt(np.maximum(m.linear_share_variance(weights, n), 1e-12))
            built.append(Margin(i, tuple(attributes), weights, sigma, mbi.WeightedQuery(1.0 / sigma)))
        return cls(domain, tuple(measurements), n, mbi_domain, sigmas,
                   tuple(mbi.WeightedQuery(1.0 / sigma) for sigma in sigmas), tuple(built))

    def fit(self, shares: Sequence[npt.ArrayLike], iterations: int = DEFAULT_ITERATIONS,
            warm_start: WideModel | None = None, limit: int = MAX_ITERATIONS) -> WideModel:
        """The model fitted to the views' ``shares`` (one vector per measurement) with the views' weights,
        mirror descent started from ``warm_start``'s potentials (default: zero, the uniform distribution): at
        least ``iterations`` steps, then on until within the views' noise, at most ``limit`` (module docstring;
        ``limit = iterations``: exactly that many, rounded up to ``mbi``'s blocks of 50)."""
        mbi = _mbi()
        least = check_int(iterations, "iterations", 1)
        most = check_int(limit, "limit", least)
        n = self.population
        fitted = []
        for i, (m, f, sigma, query) in enumerate(zip(self.measurements, shares, self.sigmas, self.queries,
                                                     strict=True)):
            y = np.asarray(f, np.float64)
            if y.shape != (m.view.size,):
                raise ValidationError("shares", f"{m.view.size} shares for view {m.view.attributes}",
                                      f"got shape {y.shape}")
            subs = [g for g in self.margins if g.measurement == i]
            if not subs:
                clique = tuple(_name(a) for a in m.view.attributes)
                fitted.append(mbi.LinearMeasurement(n * y / sigma, clique, 1.0, query=query))
            for g in subs:
                sub = tuple(_name(a) for a in g.attributes)
                fitted.append(mbi.LinearMeasurement(n * (g.weights @ y) / g.sigma, sub, 1.0, query=g.query))
        return _mirror_descent(self.domain, self.mbi_domain, fitted, float(n), least, most,
                               None if warm_start is None else warm_start.mrf)


def _mirror_descent(domain: WideDomain, mbi_domain: Any, fitted: list[Any], total: float, least: int, most: int,
                    warm_start: Any) -> WideModel:
    """MSM19 Algorithm 1 by ``mbi``'s :class:`~mbi.estimation.MirrorDescent`, run block by block as its own
    ``estimate`` loop runs it (its ``_init``, ``_multi_step`` and ``_finalize``: the estimator's subclass
    interface), so that the stopping rule of the module docstring can read the loss between blocks without
    restarting the step size."""
    mbi, jax = _mbi(), _mbi_jax()
    from mbi.estimation import CALLBACK_EVERY

    estimator = mbi.estimation.MirrorDescent()
    loss_fn = mbi.marginal_loss.from_linear_measurements(fitted, mbi_domain)
    cells = sum(int(np.size(m.noisy_measurement)) for m in fitted)
    state = jax.tree.map(jax.numpy.copy, estimator._init(mbi_domain, loss_fn, total, warm_start=warm_start))
    steps = 0
    while steps < most:
        state = estimator._multi_step(state, loss_fn, total)
        steps += CALLBACK_EVERY
        if steps >= least and 2.0 * float(state.loss) <= cells:
            break
    mrf = estimator._finalize(state, total)
    jax.block_until_ready(mrf.potentials.tables)            # JAX dispatches asynchronously: finish here
    return WideModel(domain, total, mrf, steps, 2.0 * float(loss_fn(mrf.marginals)) / cells)


def fit(domain: WideDomain, measurements: Sequence[ViewMeasurement], population: int,
        iterations: int = DEFAULT_ITERATIONS, estimates: Sequence[npt.ArrayLike] | None = None) -> WideModel:
    """Private-PGM fitted to the views' ``measurements`` of ``population`` devices (module docstring).

    ``estimates``: the views' shares to fit instead of the measurements' unbiased ones (e.g. after
    :func:`~ldpsynth.shared.wide.consistency.norm_sub`), with the same weights.
    """
    problem = Problem.of(domain, measurements, population)
    return problem.fit([m.shares() for m in measurements] if estimates is None else estimates, iterations)


def _root(covariance: np.ndarray) -> np.ndarray:
    """A matrix R with :math:`RR^\\top = \\Sigma` (eigenvalues below 0, from the plug-in, set to 0)."""
    values, vectors = np.linalg.eigh(covariance)
    return vectors * np.sqrt(np.maximum(values, 0.0))


def bootstrap_marginals(problem: Problem, model: WideModel, queries: Sequence[Sequence[int]], replicates: int,
                        rng: np.random.Generator, iterations: int = DEFAULT_ITERATIONS,
                        warm: bool = False) -> list[np.ndarray]:
    """The parametric bootstrap's replicate answers: for each of ``queries``, a ``(replicates, cells)`` array of
    the refitted models' marginals (:func:`bootstrap_errors` takes their standard deviation; a linear query of
    a marginal takes the standard deviation of its values on the rows).

    Replicate b draws every view's shares as :math:`\\tilde f_V = \\mu_V + R_V z`, :math:`\\mu_V` the
    model's marginal of V, z standard normal per cell and :math:`R_VR_V^\\top` the view's plug-in covariance
    (:meth:`~ldpsynth.shared.wide.measure.ViewMeasurement.share_covariance`: the oracle's covariances between
    the cells and the sampling's; with independent cells a 2-cell view's noise would be half its true
    variance on the contrast), refits the model and answers the queries. Costs ``replicates`` fits, however
    many queries; with ``warm`` each refit starts from
    ``model`` (whose marginals are the replicates' centre), so fewer ``iterations`` reach the same loss."""
    b = check_int(replicates, "replicates", 2)
    centre = [model.marginal(m.view.attributes) for m in problem.measurements]
    roots = [_root(m.share_covariance(problem.population)) for m in problem.measurements]
    answers: list[list[np.ndarray]] = [[] for _ in queries]
    for _ in range(b):
        draw = [mu + root @ rng.standard_normal(mu.size) for mu, root in zip(centre, roots)]
        refit = problem.fit(draw, iterations, warm_start=model if warm else None)
        for out, attrs in zip(answers, queries):
            out.append(refit.marginal(attrs))
    return [np.stack(a) for a in answers]


def bootstrap_errors(problem: Problem, model: WideModel, queries: Sequence[Sequence[int]], replicates: int,
                     rng: np.random.Generator, iterations: int = DEFAULT_ITERATIONS,
                     warm: bool = False) -> list[np.ndarray]:
    """Standard errors of ``model``'s marginals of ``queries`` by a parametric bootstrap over the views' noise:
    the standard deviation of each cell over :func:`bootstrap_marginals`' replicates."""
    return [np.std(r, axis=0, ddof=1) for r in bootstrap_marginals(problem, model, queries, replicates, rng,
                                                                   iterations, warm)]


def total_variation(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """:math:`\\tfrac12\\sum_v |p(v) - q(v)|` of two share vectors."""
    return 0.5 * float(np.abs(np.asarray(p, np.float64) - np.asarray(q, np.float64)).sum())


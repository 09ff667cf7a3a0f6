"""The wide synthetic database: the query kinds of :mod:`ldpsynth.shared.queries.model` answered over the wide
row's attribute names and values, from the measured views or from the fitted model.

The database stands for the N devices' rows. A query is reduced to linear queries :math:`w\\cdot f_A` of the
marginal :math:`f_A` of the attributes A it depends on (the answer of WYZ eq. 9 is
:math:`\\frac{N}{Z}\\,w\\cdot f_A`, Z its normaliser):

* a marginal: the indicators of its cells; a predicate: the indicator of its conditions (times the ``value``
  attribute), A the attributes they name;
* a linear query (one weight per row of the wide domain D, mixed radix over all attributes, the last fastest):
  A the attributes along which its weights vary;
* a dense query of N row functions :math:`w_i` (row i of the synthetic database, whose rows are drawn
  independently, so exchangeable): :math:`\\sum_i w_i\\cdot f` on D, then as a linear query.

Each is answered with a standard error and a 95 % interval by one of two methods:

* ``"analytic"`` when A lies inside a measured view: :func:`~ldpsynth.shared.wide.answers.analytic_linear`, the
  views' unbiased estimates combined by inverse variance, with the exact variance (the protocol's linear
  variance plus the sampling term), normal interval (for a marginal this is
  :func:`~ldpsynth.shared.wide.answers.analytic_marginal`);
* ``"model"`` otherwise: the Private-PGM model's marginal (:mod:`.model`), its standard error from a
  parametric bootstrap of B refits (:func:`~ldpsynth.shared.wide.model.bootstrap_marginals`), Student-t
  interval with B − 1 degrees of freedom. Biased where the model's structure misses a dependence.

The model is fitted once, on first use; the bootstrap runs once per :meth:`WideDatabase.answer` call for the
union of the margins it needs that earlier calls did not (B fits however many queries), and its replicates
are kept. Every bootstrap starts a generator from the database's ``seed``: replicate b redraws the same views
in every call, so an answer does not depend on which queries were asked before it (a server and an offline
estimate with the same seed give the same numbers). The database holds private attributes only: grouped
queries are answered per public group by a wide parent (:mod:`.grouped`, through the ``grouped`` hook of
:meth:`WideDatabase.answer`); cut queries are refused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ..attributes import Attribute, CategoricalAttribute, IntegerAttribute
from ..errors import ValidationError
from ..queries.compiler import MAX_QUERY_WEIGHTS, condition_values
from ..queries.model import (
    QUERY_KINDS,
    DenseQuery,
    GroupedQuery,
    LinearQuery,
    MarginalQuery,
    PredicateQuery,
    Query,
    query_field,
)
from ..queries.numeric import NumericQuery
from ..validation import check_int, check_probability
from .answers import Z95, analytic_linear
from .measure import ViewMeasurement
from .model import DEFAULT_ITERATIONS, Problem, WideModel, bootstrap_marginals
from .onestep import MAX_CORRECTED_CELLS, Correction
from .views import WideDomain

__all__ = ["ANALYTIC", "DEFAULT_REPLICATES", "MODEL", "WideAnswer", "WideDatabase", "student_quantile"]

ANALYTIC, MODEL = "analytic", "model"
#: Bootstrap replicates B of a model answer's standard error.
DEFAULT_REPLICATES = 20


@dataclass(frozen=True, slots=True)
class WideAnswer:
    """One answer: ``query`` (its index in the batch), ``label`` (a marginal's cells: ``label[a=v,...]``), the
    estimate, its standard error and interval ``[low, high]``, the ``method`` (``"analytic"`` or ``"model"``),
    the measured ``views`` (attribute names) it combines (a model answer: those its one-step correction reads),
    for a model answer the model's own answer ``proper``, and the interval's degrees of freedom ``df``
    (``inf``: normal)."""

    query: int
    label: str
    estimate: float
    standard_error: float
    low: float
    high: float
    method: str
    views: tuple[tuple[str, ...], ...] = ()
    proper: float | None = None
    df: float = math.inf

    @property
    def proper_estimate(self) -> float:
        """A distribution's answer: a model answer's ``proper`` (the model's own, which the synthetic rows share),
        else the estimate."""
        return self.estimate if self.proper is None else self.proper


def student_quantile(level: float, df: npt.ArrayLike) -> np.ndarray:
    """The Student-t quantiles of two-sided ``level`` intervals with ``df`` degrees of freedom (``inf``: normal)."""
    from scipy.stats import t as student  # scipy comes with mbi (the [wide] extra)

    return np.asarray(student.ppf(0.5 + level / 2, np.asarray(df, np.float64)), np.float64)


@dataclass(frozen=True, eq=False)
class _Linear:
    """A query reduced to rows of weights over the cells of ``attributes`` (sorted indices, mixed radix):
    answer j is ``scale[j] * weights[j] @ f_A``. A marginal's ``weights`` are the cell of each answer (1-d
    int64: the rows of a permutation matrix, not stored densely)."""

    query: int
    labels: tuple[str, ...]
    attributes: tuple[int, ...]
    weights: np.ndarray
    scale: np.ndarray

    def apply(self, shares: np.ndarray) -> np.ndarray:
        """``weights @ shares`` along the last axis of ``shares`` (cells of A)."""
        return shares[..., self.weights] if self.weights.ndim == 1 else shares @ self.weights.T

    def dense(self, cells: int) -> np.ndarray:
        """The weights as a ``(rows, cells)`` matrix."""
        if self.weights.ndim == 2:
            return self.weights
        out = np.zeros((self.weights.size, cells))
        out[np.arange(self.weights.size), self.weights] = 1.0
        return out


def _codes_attributes(domain: WideDomain) -> tuple[Attribute, ...]:
    """Integer attributes ``0 .. k_j - 1`` named as the domain's: the values are the codes."""
    return tuple(IntegerAttribute(name, False, 0, k - 1) for name, k in zip(domain.names, domain.sizes))


def _scale(normalization: str, total: float, spread: np.ndarray, rows: float) -> np.ndarray:
    """The factor of :math:`w\\cdot f` in each answer (WYZ eq. 9): ``total`` (N when w is one row function
    applied to all N rows, 1 when w is the sum of a dense query's N row functions) over Z: 1 (sum), ``rows`` = N
    (mean) or ``rows * spread`` (range; ``spread`` the mean range :math:`\\sum_i c_i/N`)."""
    if normalization == "sum":
        return np.full(spread.shape, float(total))
    if normalization == "mean":
        return np.full(spread.shape, float(total) / rows)
    if not np.all(spread > 0):
        raise ValidationError("normalization", "'sum' or 'mean' for a query constant on every row",
                              "the range normaliser Z is 0")
    return float(total) / (rows * spread)


@dataclass(eq=False)
class WideDatabase:
    """The synthetic database of ``population`` rows over ``attributes``, from the views' ``measurements``
    (module docstring). Build it with :meth:`fit`."""

    attributes: tuple[Attribute, ...]
    domain: WideDomain
    measurements: tuple[ViewMeasurement, ...]
    population: int
    iterations: int
    replicates: int
    seed: int
    _bootstrap: dict[tuple[int, ...], np.ndarray] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def fit(cls, domain: WideDomain, measurements: Sequence[ViewMeasurement], population: int, *,
            attributes: Sequence[Attribute] | None = None, iterations: int = DEFAULT_ITERATIONS,
            replicates: int = DEFAULT_REPLICATES, seed: int | None = None) -> WideDatabase:
        """The database of ``measurements`` (views of ``domain``) of ``population`` devices.

        ``attributes``: the wide row's private attributes (names and sizes as ``domain``'s), whose values
        queries name and :meth:`sample_rows` returns; default: integer attributes whose values are the codes.
        Public attributes are refused: they are not part of the wide model in this phase. ``iterations``:
        the least mirror-descent iterations of the model and of each bootstrap refit (each runs on until it fits
        the views within their noise, :meth:`~.model.Problem.fit`); ``replicates``: B; ``seed``: the
        bootstrap's generator (post-processing noise, not a device's; ``None``: drawn once from the OS)."""
        n = check_int(population, "population", 1)
        attrs = _codes_attributes(domain) if attributes is None else tuple(attributes)
        if tuple(a.name for a in attrs) != domain.names or tuple(a.size for a in attrs) != domain.sizes:
            raise ValidationError("attributes", f"attributes named {list(domain.names)} of sizes {list(domain.sizes)}",
                                  f"got {[(a.name, a.size) for a in attrs]}")
        public = [a.name for a in attrs if a.public]
        if public:
            raise ValidationError("attributes", "private attributes only (public attributes are not part of the "
                                  "wide model in this phase)", f"{public} are public")
        views = tuple(measurements)
        if not views:
            raise ValidationError("measurements", "one or more measured views", "got none")
        for i, m in enumerate(views):
            inside = all(0 <= a < domain.width for a in m.view.attributes)
            if not inside or m.view.sizes != tuple(domain.sizes[a] for a in m.view.attributes):
                raise ValidationError(f"measurements[{i}]", "a view of the domain", f"got {m.view}")
        if sum(m.n for m in views) > n:
            raise ValidationError("population", "at least the views' devices in all",
                                  f"{sum(m.n for m in views)} devices > {n}")
        drawn = int(np.random.SeedSequence().generate_state(1, np.uint64)[0]) if seed is None else None
        return cls(attrs, domain, views, n, check_int(iterations, "iterations", 1),
                   check_int(replicates, "replicates", 2), drawn if drawn is not None else check_int(seed, "seed", 0))

    # ----- the model (the optional [wide] extra) ---------------------------------------------------------------
    @functools.cached_property
    def problem(self) -> Problem:
        """The model's :class:`~ldpsynth.shared.wide.model.Problem` (built once)."""
        return Problem.of(self.domain, self.measurements, self.population)

    @functools.cached_property
    def model(self) -> WideModel:
        """The :class:`~ldpsynth.shared.wide.model.WideModel` fitted to the views' unbiased shares (once)."""
        return self.problem.fit([m.shares() for m in self.measurements], self.iterations)

    def _replicates(self, margins: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
        """The bootstrap replicates (B, cells) of each margin: one bootstrap for all the missing ones, its
        generator started from :attr:`seed` (the same B redrawn views in every call)."""
        missing = sorted({a for a in margins if a not in self._bootstrap})
        if missing:
            drawn = bootstrap_marginals(self.problem, self.model, missing, self.replicates,
                                        np.random.default_rng(self.seed), self.iterations)
            self._bootstrap.update(zip(missing, drawn))
        return [self._bootstrap[a] for a in margins]

    def sample_rows(self, rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``rows`` synthetic rows drawn independently from the model, as attribute name -> values (labels)."""
        codes = self.model.sample(rows, rng)
        return {a.name: a.decode(codes[:, j]) for j, a in enumerate(self.attributes)}

    # ----- compiling queries -----------------------------------------------------------------------------------
    def _index(self, name: str, fld: str) -> int:
        if name not in self.domain.names:
            raise ValidationError(fld, f"an attribute of the wide row: one of {list(self.domain.names)}",
                                  f"unknown attribute {name!r}")
        return self.domain.names.index(name)

    def _reduce(self, weights: np.ndarray) -> tuple[tuple[int, ...], np.ndarray]:
        """Weights over D -> the attributes they vary along and the weights over those attributes' cells."""
        cube = weights.reshape(self.domain.sizes)
        varying = tuple(j for j in range(self.domain.width) if np.any(np.diff(cube, axis=j)))
        return varying, cube[tuple(slice(None) if j in varying else 0 for j in range(self.domain.width))].ravel()

    def _full_domain(self, fld: str, rows: int = 1) -> int:
        k = self.domain.size
        if rows * k > MAX_QUERY_WEIGHTS:
            raise ValidationError(fld, f"at most {MAX_QUERY_WEIGHTS} weights over the wide domain D (rows x |D|)",
                                  f"{rows} x |D| = {rows} x {k}")
        return k

    def _compile(self, index: int, query: Query) -> _Linear:
        n, base = self.population, query.label if query.label is not None else f"{query.kind}#{index}"
        norm = str(query.normalization)
        if isinstance(query, MarginalQuery):
            order = tuple(self._index(a, f"attributes[{j}]") for j, a in enumerate(query.attributes))
            attrs = tuple(sorted(order))
            grid = np.indices([self.domain.sizes[a] for a in order]).reshape(len(order), -1)
            # cell u of the query (its order) against every cell of the sorted attributes
            place = [math.prod(self.domain.sizes[b] for b in attrs[attrs.index(a) + 1:]) for a in order]
            cells = np.asarray(place, np.int64) @ grid
            decoded = [self.attributes[a].decode(grid[j]) for j, a in enumerate(order)]
            labels = tuple(base + "[" + ",".join(f"{self.attributes[a].name}={decoded[j][u]}"
                                                 for j, a in enumerate(order)) + "]" for u in range(grid.shape[1]))
            return _Linear(index, labels, attrs, cells, _scale(norm, n, np.ones(len(labels)), n))
        if isinstance(query, PredicateQuery):
            factors: dict[int, np.ndarray] = {}
            for j, cond in enumerate(query.where):
                a = self._index(cond.attribute, f"where[{j}].attribute")
                mask = condition_values(self.attributes[a], cond, j).astype(np.float64)
                factors[a] = factors[a] * mask if a in factors else mask
            if query.value is not None:
                a = self._index(query.value, "value")
                if isinstance(self.attributes[a], CategoricalAttribute):
                    raise ValidationError("value", "a numeric (integer, binary or continuous) attribute",
                                          f"{query.value!r} is categorical")
                values = self.attributes[a].decode(np.arange(self.domain.sizes[a])).astype(np.float64)
                factors[a] = factors[a] * values if a in factors else values
            attrs = tuple(sorted(factors))
            cube = functools.reduce(np.multiply.outer, [factors[a] for a in attrs], np.ones(()))
            w = np.ravel(cube)[None, :]
            spread = np.array([w.max() - w.min()])     # the range over D: w depends on the row only through A
            return _Linear(index, (base,), attrs, w, _scale(norm, n, spread, n))
        if isinstance(query, LinearQuery):
            k = self._full_domain("weights")
            if len(query.weights) != k:
                raise ValidationError("weights", f"a list of |D| = {k} finite numbers (D: every attribute, mixed "
                                      "radix, the last fastest)", f"got {len(query.weights)} numbers")
            full = np.asarray(query.weights, dtype=np.float64)
            attrs, w = self._reduce(full)
            return _Linear(index, (base,), attrs, w[None, :], _scale(norm, n, np.array([np.ptp(full)]), n))
        if isinstance(query, DenseQuery):
            k = self._full_domain("table", len(query.table))
            if len(query.table) != n or len(query.table[0]) != k:
                raise ValidationError("table", f"{n} rows (one per row of the synthetic database) of |D| = {k} "
                                      "weights", f"got {len(query.table)} rows of {len(query.table[0])}")
            table = np.asarray(query.table, dtype=np.float64)
            attrs, w = self._reduce(table.sum(axis=0))
            spread = np.array([np.ptp(table, axis=1).sum() / n])
            return _Linear(index, (base,), attrs, w[None, :], _scale(norm, 1.0, spread, n))
        if isinstance(query, GroupedQuery):
            raise ValidationError("attribute", "a public attribute of a wide collection's parent (a database of "
                                  "private attributes alone answers no grouped query: use a linear or predicate "
                                  "query over the wide row)", f"grouped query on {query.attribute!r}")
        raise ValidationError("source", "public vertex attributes; public attributes are not part of the wide "
                              "model in this phase", "a cut query needs them")

    # ----- answering -------------------------------------------------------------------------------------------
    def _analytic(self, attrs: tuple[int, ...], weights: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, tuple[tuple[int, ...], ...]]:
        """Shares and standard errors of ``weights @ f_attrs`` from the views (exact when ``attrs`` is empty)."""
        if not attrs:
            return weights[:, 0].copy(), np.zeros(len(weights)), ()
        answer = analytic_linear(self.measurements, attrs, weights, self.population)
        return answer.shares, answer.standard_errors, answer.views

    def _measured(self, attrs: tuple[int, ...]) -> bool:
        return any(set(attrs) <= set(m.view.attributes) and m.n > 0 for m in self.measurements)

    def answer(self, queries: Sequence[Query | NumericQuery], level: float = 0.95, *,
               grouped: Callable[[int, GroupedQuery, float], WideAnswer] | None = None) -> list[WideAnswer]:
        """The answers of ``queries``, in order (a marginal: one answer per cell), with intervals at ``level``
        (normal for an analytic answer, Student-t with B - 1 degrees of freedom for a model one); errors name
        ``queries[i]`` or ``level``. ``grouped``: answers grouped query ``i`` (a wide parent's groups,
        :mod:`.grouped`); without it grouped queries are refused."""
        level = check_probability(level, "level")
        z = Z95 if level == 0.95 else NormalDist().inv_cdf(0.5 + level / 2)
        compiled = []
        results: dict[int, list[WideAnswer]] = {}
        for i, query in enumerate(queries):
            if isinstance(query, NumericQuery):
                raise ValidationError(f"queries[{i}].kind", "a query over the wide row's categories (a numeric "
                                      "attribute's mean, sum, quantiles or histogram needs a numeric collection)",
                                      f"got {query.kind!r}")
            if not isinstance(query, tuple(QUERY_KINDS.values())):
                raise ValidationError(f"queries[{i}]", "a query object", f"got {type(query).__name__}")
            with query_field(i):
                if isinstance(query, GroupedQuery) and grouped is not None:
                    results[i] = [grouped(i, query, level)]
                else:
                    compiled.append(self._compile(i, query))
        groups: dict[tuple[int, ...], list[_Linear]] = {}
        for item in compiled:
            groups.setdefault(item.attributes, []).append(item)
        modelled = [a for a in groups if a and not self._measured(a)]
        replicates = dict(zip(modelled, self._replicates(modelled))) if modelled else {}
        for attrs, items in groups.items():
            scale = np.concatenate([it.scale for it in items])
            cells = math.prod(self.domain.sizes[a] for a in attrs)
            proper: list[float | None] = [None] * len(scale)
            if attrs in replicates:
                marginal = self.model.marginal(attrs)
                proper = (scale * np.concatenate([it.apply(marginal) for it in items])).tolist()
                shares, errors, df, measured = self._modelled(attrs, items, marginal, replicates[attrs], cells)
                estimate, error, method = scale * shares, scale * errors, MODEL
                quantile = student_quantile(level, df)
            else:
                weights = np.concatenate([it.dense(cells) for it in items])
                shares, errors, measured = self._analytic(attrs, weights)
                estimate, error, method = scale * shares, scale * errors, ANALYTIC
                quantile, df = np.full(len(scale), z), np.full(len(scale), math.inf)
            views = tuple(tuple(self.domain.names[a] for a in v) for v in measured)
            est, err, dfs = estimate.tolist(), error.tolist(), df.tolist()
            low, high = (estimate - quantile * error).tolist(), (estimate + quantile * error).tolist()
            row = 0
            for it in items:
                end = row + len(it.labels)
                results[it.query] = [WideAnswer(it.query, label, e, s, lo, hi, method, views, p, d)
                                     for label, e, s, lo, hi, p, d in zip(it.labels, est[row:end], err[row:end],
                                                                          low[row:end], high[row:end], proper[row:end],
                                                                          dfs[row:end])]
                row = end
        return [a for i in range(len(queries)) for a in results[i]]

    def _modelled(self, attrs: tuple[int, ...], items: Sequence[_Linear], marginal: np.ndarray,
                  replicates: np.ndarray, cells: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[tuple[int, ...], ...]]:
        """Shares, standard errors, degrees of freedom and the views read of the model's answers over ``attrs``:
        the one-step correction (:class:`~.onestep.Correction`, built once for all of them) up to
        :data:`~.onestep.MAX_CORRECTED_CELLS` cells, above them the model's marginal with the bootstrap's error
        (B − 1 degrees of freedom)."""
        if cells > MAX_CORRECTED_CELLS:
            shares = np.concatenate([it.apply(marginal) for it in items])
            errors = np.concatenate([np.std(it.apply(replicates), axis=0, ddof=1) for it in items])
            return shares, errors, np.full(len(shares), self.replicates - 1.0), ()
        correction = Correction.of(self.domain, self.measurements, attrs, marginal, replicates, self.population)
        steps = [correction.answer(it.weights) for it in items]
        return (np.concatenate([o.estimate for o in steps]), np.concatenate([o.standard_error for o in steps]),
                np.concatenate([o.df for o in steps]), steps[0].views)


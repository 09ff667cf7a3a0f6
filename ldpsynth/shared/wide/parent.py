"""A wide collection's parent answered from its views' sub-collections (issue 39, phase 3).

Each view V is served as an ordinary sub-collection whose private code is V's cell (mixed radix over the
view's attributes in the view's order, :meth:`~ldpsynth.shared.wide.views.View.cells`). Its sufficient statistic,
on the server (the merged pinned statistics of the query engine) or recomputed from its export, is per public key
either E's counts per cell or a frequency oracle's tally. The parent's measurement of V is

.. math::  S_V(v) = \\sum_{g\\ \\mathrm{kept}} S_{V,g}(v), \\qquad n_V = \\sum_{g\\ \\mathrm{kept}} n_{V,g},

the support counts (WBLJ17 §3) summed over the public-key groups g at or above the collection's minimum batch
(:func:`~ldpsynth.shared.guarantees.withhold`: a group below it is never counted). The sum over the public keys is
the view's measurement of the whole population; a grouped query by a public attribute is answered from each
value's own measurements (:mod:`.grouped`, the same sums over that value's keys).
The population is :math:`N = \\sum_V n_V`, every report kept (each device reports one view). A view
none of whose reports is kept is left out: its marginals are then answered by the model, and N does not count it.

:func:`parent_database` fits the parent's :class:`~ldpsynth.shared.wide.database.WideDatabase` with the settings
of a :class:`WideFit` (mirror-descent iterations, bootstrap replicates B, the bootstrap's seed): the same
statistics and settings give the same answers, on the server and offline (:mod:`.release`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..attributes import Attribute
from ..errors import ValidationError
from ..estimators.engine import Statistics
from ..estimators.formulas import AnswerColumns
from ..estimators.statistics import SufficientStatistics
from ..guarantees import Withheld, withhold
from ..mechanisms.oracle import FrequencyOracle, OracleStatistics
from ..queries.model import Query
from ..queries.numeric import NumericQuery
from ..validation import check_int
from .collection import WideCard
from .database import DEFAULT_REPLICATES, MODEL, WideAnswer, WideDatabase
from .measure import ViewMeasurement
from .model import DEFAULT_ITERATIONS
from .views import WideDomain

__all__ = ["Answering", "DEFAULT_FIT", "DEFAULT_SEED", "ParentMeasurements", "WideAnswers", "WideFit", "measure_parent",
           "parent_database", "private_domain", "wide_answers"]

#: The bootstrap's default seed: post-processing noise, fixed so that a server and an offline estimate agree.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class WideFit:
    """How the parent's model is fitted: the least mirror-descent ``iterations`` (of the fit and of each
    bootstrap refit; each runs on until within the views' noise, :meth:`~.model.Problem.fit`), bootstrap
    ``replicates`` B (at least 2) and the bootstrap's ``seed``."""

    iterations: int = DEFAULT_ITERATIONS
    replicates: int = DEFAULT_REPLICATES
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        check_int(self.iterations, "iterations", 1)
        check_int(self.replicates, "replicates", 2)
        check_int(self.seed, "seed", 0)


#: The fit a server and ``ldpsynth estimate`` use unless told otherwise.
DEFAULT_FIT = WideFit()


def private_domain(card: WideCard) -> tuple[WideDomain, tuple[Attribute, ...]]:
    """The wide row's private attributes (schema order) and their :class:`WideDomain`."""
    private = tuple(a for a in card.schema.attributes if not a.public)
    return WideDomain(tuple(a.name for a in private), tuple(a.size for a in private)), private


@dataclass(frozen=True, eq=False)
class ParentMeasurements:
    """The views' measurements (views with a kept report only), what each view withheld (every view, in the
    card's order) and the population N, the kept reports of all views."""

    measurements: tuple[ViewMeasurement, ...]
    withheld: tuple[Withheld, ...]
    population: int

    def key(self) -> tuple[tuple[int, bytes], ...]:
        """What identifies the measurements (a cache key): each view's n and support counts."""
        return tuple((m.n, m.support.tobytes()) for m in self.measurements)


def _support(stats: Statistics) -> np.ndarray:
    """The support counts :math:`S(v)` of all the reports of ``stats`` (summed over the public keys)."""
    if isinstance(stats, SufficientStatistics):
        return stats.histogram()
    oracle: FrequencyOracle = stats.oracle
    return OracleStatistics(oracle, stats.n, stats.table.sum(axis=0)).support_counts()


def measure_parent(card: WideCard, statistics: Sequence[Statistics]) -> ParentMeasurements:
    """The parent's measurements from each view sub-collection's ``statistics`` (the card's order; module
    docstring), the public-key groups below the minimum batch withheld."""
    if len(statistics) != len(card.cards):
        raise ValidationError("statistics", f"one per view sub-collection ({len(card.cards)})",
                              f"got {len(statistics)}")
    domain, _ = private_domain(card)
    minimum = card.cards[0].schema.minimum_batch[0]
    kept, withheld = [], []
    for i, (sub, stats) in enumerate(zip(card.cards, statistics)):
        if stats.domain_size != sub.mechanism.domain_size:
            raise ValidationError(f"statistics[{i}]", f"statistics of {sub.schema.name!r} "
                                  f"({sub.mechanism.domain_size} cells)", f"got {stats.domain_size} cells")
        rule = withhold(minimum, stats.group_sizes)
        withheld.append(rule)
        part = stats.restricted(rule.kept)
        if part.n == 0:
            continue
        view = domain.view([domain.names.index(a.name) for a in sub.schema.private_attributes])
        kept.append(ViewMeasurement(view, sub.mechanism, part.n, _support(part)))
    return ParentMeasurements(tuple(kept), tuple(withheld), sum(m.n for m in kept))


def parent_database(card: WideCard, measured: ParentMeasurements, fit: WideFit = DEFAULT_FIT) -> WideDatabase:
    """The parent's synthetic database (:meth:`WideDatabase.fit` over the private attributes, population N);
    a ValidationError naming ``measurements`` when no view has a kept report."""
    domain, private = private_domain(card)
    return WideDatabase.fit(domain, measured.measurements, max(measured.population, 1), attributes=private,
                            iterations=fit.iterations, replicates=fit.replicates, seed=fit.seed)


@dataclass(frozen=True, eq=False)
class WideAnswers(AnswerColumns):
    """The parent's answers as the query service's columns: ``estimate``, ``proper_estimate`` (an analytic
    answer's estimate again, no eq. 21 projection; a model answer's the model's own, which the synthetic rows
    share), ``std_error``, the interval at ``level``; ``bound`` and ``bound_proper`` NaN
    (WYZ eq. 20/22 are not defined for these answers); ``exact`` False. Per answer its ``labels``, the index
    of the query it comes from (``origins``) and its ``methods`` (``"analytic"`` or ``"model"``); ``views``:
    the measured views the analytic answers combine (attribute names), ``modelled``: whether any answer comes
    from the model (which reads every view)."""

    labels: tuple[str, ...] = field(kw_only=True)
    origins: np.ndarray = field(kw_only=True)
    methods: tuple[str, ...] = field(kw_only=True)
    views: frozenset[tuple[str, ...]] = field(kw_only=True, default=frozenset())
    modelled: bool = field(kw_only=True, default=False)

    def label(self, j: int) -> str:
        return self.labels[j]

    def labels_sent(self) -> tuple[str, ...] | None:
        return self.labels

    def methods_sent(self) -> tuple[str, ...] | None:
        return self.methods

    def origin(self, j: int) -> int:
        return int(self.origins[j])


class Answering(Protocol):
    """What answers a wide parent's queries: a :class:`WideDatabase`, or the parent with its groups
    (:class:`~ldpsynth.shared.wide.grouped.WideParent`)."""

    @property
    def population(self) -> int: ...

    def answer(self, queries: Sequence[Query | NumericQuery], level: float = 0.95) -> list[WideAnswer]: ...


def wide_answers(database: Answering, queries: Sequence[Query | NumericQuery], level: float,
                 epsilon: float) -> WideAnswers:
    """``database``'s answers to ``queries`` at ``level`` as :class:`WideAnswers` (n: the population N)."""
    answers: list[WideAnswer] = database.answer(queries, level)
    estimate = np.array([a.estimate for a in answers], np.float64)
    nan = np.full(len(answers), np.nan)
    return WideAnswers(estimate, np.array([a.proper_estimate for a in answers], np.float64),
                       np.zeros(len(answers), bool),
                       np.array([a.standard_error for a in answers], np.float64),
                       np.array([a.low for a in answers], np.float64), np.array([a.high for a in answers], np.float64),
                       nan, nan.copy(), float(level), database.population, float(epsilon),
                       labels=tuple(a.label for a in answers), origins=np.array([a.query for a in answers], np.int64),
                       methods=tuple(a.method for a in answers), views=frozenset(v for a in answers for v in a.views),
                       modelled=any(a.method == MODEL for a in answers))

"""A wide parent's answers, grouped queries by a public attribute included (issue 39, phase 3).

A grouped query (:class:`~ldpsynth.shared.queries.model.GroupedQuery`) gives each value g of a public attribute its
own weights :math:`w_g` over the wide row's domain D (mixed radix over the private attributes, the last fastest;
``default``, or zeros, for the values it does not list). Its answer is WYZ eq. 9 with the row function
:math:`w_{g(i)}`:

.. math::  \\frac{1}{Z} \\sum_g N_g\\, w_g \\cdot f_g, \\qquad
           \\mathrm{Var} = \\frac{1}{Z^2} \\sum_g \\mathrm{Var}(N_g\\, \\widehat{w_g \\cdot f_g}),

:math:`f_g` the distribution of the private row among the N_g kept reports of group g (every view's reports whose
public key has that value, the groups below the minimum batch withheld), Z = 1 (sum), N (mean) or
:math:`\\sum_g N_g (\\max w_g - \\min w_g)` (range, WYZ eq. 10). The groups hold disjoint devices, so their
estimates are independent and the variances add. Each group's term is answered by the group's own
:class:`~ldpsynth.shared.wide.database.WideDatabase`, fitted to the group's view measurements
(:func:`~ldpsynth.shared.wide.parent.measure_parent` of the group's statistics): analytic when the attributes
:math:`w_g` varies along lie inside a view measured in that group, else from the group's own model (fitted on
first use, cached with the parent, its bootstrap seeded as the parent's). The answer is ``analytic`` when every
group's term is, else ``model`` (its interval then Student-t with B − 1 degrees of freedom, the other terms'
variances added).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..attributes import Attribute
from ..errors import ValidationError
from ..estimators.engine import Statistics
from ..queries.compiler import MAX_QUERY_WEIGHTS, encode_values, public_attribute
from ..queries.model import GroupedQuery, LinearQuery, Query
from ..queries.numeric import NumericQuery
from .collection import WideCard
from .database import ANALYTIC, MODEL, WideAnswer, WideDatabase, student_quantile
from .parent import DEFAULT_FIT, ParentMeasurements, WideFit, measure_parent, parent_database

__all__ = ["WideParent"]


@dataclass(eq=False)
class WideParent:
    """The parent's answers from its views' ``statistics`` (the card's order): ``database`` for the whole population
    and, per value of a public attribute, the group's database (fitted on first use and kept)."""

    card: WideCard
    statistics: tuple[Statistics, ...]
    measured: ParentMeasurements
    database: WideDatabase
    _groups: dict[tuple[str, int], WideDatabase | None] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, card: WideCard, statistics: Sequence[Statistics], fit: WideFit = DEFAULT_FIT) -> WideParent:
        """Measure the views (:func:`measure_parent`) and fit the whole population's database."""
        measured = measure_parent(card, statistics)
        return cls(card, tuple(statistics), measured, parent_database(card, measured, fit))

    @property
    def population(self) -> int:
        """N, the kept reports of all views."""
        return self.database.population

    def group(self, attribute: Attribute, code: int) -> WideDatabase | None:
        """The database of the reports whose public ``attribute`` has ``code`` (``None``: no kept report)."""
        key = (attribute.name, code)
        if key not in self._groups:
            parts = []
            for sub, stats in zip(self.card.cards, self.statistics):
                digits = sub.schema.public_digits(stats.present_keys)[attribute.name]
                parts.append(stats.restricted(np.asarray(digits) == code))
            measured = measure_parent(self.card, parts)
            base = self.database
            self._groups[key] = None if not measured.measurements else parent_database(
                self.card, measured, WideFit(base.iterations, base.replicates, base.seed))
        return self._groups[key]

    def answer(self, queries: Sequence[Query | NumericQuery], level: float = 0.95) -> list[WideAnswer]:
        """The answers of ``queries`` (:meth:`WideDatabase.answer`, grouped queries as the module docstring says)."""
        return self.database.answer(queries, level, grouped=self._grouped)

    def _grouped(self, index: int, query: GroupedQuery, level: float) -> WideAnswer:
        attr = public_attribute(self.card.cards[0].schema, query.attribute, "attribute")   # every view has them
        codes = encode_values(attr, [v for v, _ in query.tables], "tables", ".value")
        if len(np.unique(codes)) != len(codes):
            raise ValidationError("tables", "one table per value of the attribute", "a value appears twice")
        k = self.database.domain.size
        if k > MAX_QUERY_WEIGHTS:
            raise ValidationError("tables", f"weights over a wide domain D of at most {MAX_QUERY_WEIGHTS} rows",
                                  f"|D| = {k}")
        tables = {int(c): _weights(w, k, f"tables[{j}].weights") for j, (c, (_, w)) in enumerate(zip(codes,
                                                                                                   query.tables))}
        default = np.zeros(k) if query.default is None else _weights(query.default, k, "default")
        estimate = variance = spread = proper = 0.0
        df_terms: list[float] = []              # Welch-Satterthwaite: v_g^2 / df_g per group
        methods: set[str] = set()
        views: set[tuple[str, ...]] = set()
        for code in range(attr.size):
            w = tables.get(code, default)
            database = self.group(attr, code) if w.any() else None
            if database is None:                     # weights 0, or no kept report of this value: adds nothing
                continue
            term = database.answer([LinearQuery(weights=tuple(w.tolist()), normalization="sum")], level)[0]
            estimate += term.estimate
            proper += term.proper_estimate
            variance += term.standard_error ** 2
            df_terms.append(term.standard_error ** 4 / term.df)
            spread += database.population * float(np.ptp(w))
            methods.add(term.method)
            views.update(term.views)
        norm = str(query.normalization)
        z = 1.0 if norm == "sum" else float(self.population) if norm == "mean" else spread
        if z <= 0:
            raise ValidationError("normalization", "'sum' or 'mean' for a query constant on every row",
                                  "the range normaliser Z is 0")
        method = MODEL if MODEL in methods else ANALYTIC
        error = math.sqrt(variance) / z
        df = variance ** 2 / sum(df_terms) if sum(df_terms) > 0 else math.inf
        quantile = float(student_quantile(level, df))
        value = estimate / z
        return WideAnswer(index, query.label if query.label is not None else f"grouped#{index}", value, error,
                          value - quantile * error, value + quantile * error, method, tuple(sorted(views)),
                          proper / z if method == MODEL else None, df)


def _weights(weights: Sequence[float], k: int, fld: str) -> np.ndarray:
    """One weight per row of the wide domain D (|D| = ``k``)."""
    if len(weights) != k:
        raise ValidationError(fld, f"a list of |D| = {k} finite numbers (D: every private attribute, mixed radix, "
                              "the last fastest)", f"got {len(weights)} numbers")
    return np.asarray(weights, dtype=np.float64)

"""The builders users call to make queries: :func:`linear`, :func:`condition`, :func:`predicate`,
:func:`marginal`, :func:`grouped`, :func:`cut` and :func:`dense` (the kinds of
:mod:`ldpsynth.shared.queries.model`; their meaning and JSON form: :mod:`ldpsynth.shared.queries.json_form`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy.typing as npt

from ldpsynth.shared.queries import model
from ldpsynth.shared.queries.model import Scalar

__all__ = ["linear", "condition", "predicate", "marginal", "grouped", "cut", "dense"]


def linear(weights: npt.ArrayLike, *, normalization: str = "range", label: str | None = None) -> model.LinearQuery:
    """A linear query: the weight list ``weights`` (one number per value of D) on every row."""
    return model.LinearQuery(weights, normalization=normalization, label=label)  # type: ignore[arg-type]


def condition(attribute: str, op: str, value: Any) -> model.Condition:
    """A predicate condition, e.g. ``condition("rating", ">=", 4)``."""
    return model.Condition(attribute, op, value)


def predicate(*where: model.Condition, value: str | None = None, normalization: str = "sum",
              label: str | None = None) -> model.PredicateQuery:
    """A predicate count (``"sum"``) or fraction (``"mean"``) of the rows meeting every condition."""
    return model.PredicateQuery(where, value, normalization=normalization, label=label)


def marginal(*attributes: str, normalization: str = "sum", label: str | None = None) -> model.MarginalQuery:
    """The marginal of the private ``attributes``: one count per cell."""
    return model.MarginalQuery(attributes, normalization=normalization, label=label)


def grouped(attribute: str, tables: Mapping[Any, npt.ArrayLike] | Iterable[tuple[Scalar, npt.ArrayLike]], *,
            default: npt.ArrayLike | None = None, normalization: str = "range", label: str | None = None
            ) -> model.GroupedQuery:
    """A heterogeneous query: weight list ``tables[value]`` for rows whose ``attribute`` is ``value``."""
    return model.GroupedQuery(attribute, tables, default, normalization=normalization, label=label)  # type: ignore[arg-type]


def cut(S: Iterable[Scalar], T: Iterable[Scalar], *, source: str | None = None, target: str | None = None,
        edge: str | None = None, normalization: str = "sum", label: str | None = None) -> model.CutQuery:
    """The cut query of the disjoint vertex sets ``S`` and ``T`` (eq. 33)."""
    return model.CutQuery(tuple(S), tuple(T), source, target, edge, normalization=normalization, label=label)


def dense(table: npt.ArrayLike, *, normalization: str = "range", label: str | None = None) -> model.DenseQuery:
    """A per-row query: ``table[i]`` is the weight list of row ``i`` of the synthetic database."""
    return model.DenseQuery(table, normalization=normalization, label=label)  # type: ignore[arg-type]

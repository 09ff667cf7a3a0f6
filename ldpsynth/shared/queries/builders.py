"""The builders users call to make queries: :func:`linear`, :func:`condition`, :func:`predicate`,
:func:`marginal`, :func:`grouped`, :func:`cut` and :func:`dense` (the kinds of
:mod:`ldpsynth.shared.queries.model`; their meaning and JSON form: :mod:`ldpsynth.shared.queries.json_form`),
and a numeric collection's :func:`mean`, :func:`sum_`, :func:`variance`, :func:`quantiles` and :func:`histogram`
(:mod:`ldpsynth.shared.queries.numeric`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy.typing as npt

from ldpsynth.shared.queries import model, numeric
from ldpsynth.shared.queries.model import Scalar

__all__ = ["linear", "condition", "predicate", "marginal", "grouped", "cut", "dense", "mean", "sum_", "variance",
           "quantiles", "histogram"]


def linear(weights: npt.ArrayLike, *, normalization: str = "range", label: str | None = None) -> model.LinearQuery:
    """A linear query: the weight list ``weights`` (one number per value of D) on every row.

    Parameters
    ----------
    weights : array_like
        A non-empty list of finite numbers, one per value of the private domain D (the length is
        checked against the schema when the query is compiled).
    normalization : {"range", "sum", "mean"}, default "range"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    LinearQuery

    Raises
    ------
    ValidationError
        Naming ``weights`` (with the position of a number that is not finite), ``normalization`` or ``label``.
    """
    return model.LinearQuery(weights, normalization=normalization, label=label)  # type: ignore[arg-type]


def condition(attribute: str, op: str, value: Any) -> model.Condition:
    """A predicate condition, e.g. ``condition("rating", ">=", 4)``.

    Parameters
    ----------
    attribute : str
        An attribute name (non-empty; checked against the schema when the query is compiled).
    op : {"==", "!=", "<", "<=", ">", ">=", "in", "between"}
        The comparison.
    value : str, int, float, bool or list
        For ``==`` and ``!=``: a string, a finite number or a boolean; for ``in``: a non-empty
        list of those; for ``between``: ``[lo, hi]``, two finite numbers with ``lo <= hi``; for
        ``<``, ``<=``, ``>``, ``>=``: a finite number.

    Returns
    -------
    Condition

    Raises
    ------
    ValidationError
        Naming ``attribute``, ``op``, ``value`` or ``value[j]``.
    """
    return model.Condition(attribute, op, value)


def predicate(*where: model.Condition, value: str | None = None, normalization: str = "sum",
              label: str | None = None) -> model.PredicateQuery:
    """A predicate count (``"sum"``) or fraction (``"mean"``) of the rows meeting every condition.

    Parameters
    ----------
    *where : Condition
        The conditions (:func:`condition`) a row must all meet; none: every row.
    value : str or None, default None
        A numeric private attribute whose value multiplies the indicator (a sum or mean of the
        attribute over the rows meeting ``where``); ``None``: a count.
    normalization : {"range", "sum", "mean"}, default "sum"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    PredicateQuery

    Raises
    ------
    ValidationError
        Naming ``where[j]`` (not a condition), ``value`` (not a non-empty string), ``normalization`` or ``label``.
    """
    return model.PredicateQuery(where, value, normalization=normalization, label=label)


def marginal(*attributes: str, normalization: str = "sum", label: str | None = None) -> model.MarginalQuery:
    """The marginal of the private ``attributes``: one count per cell.

    Parameters
    ----------
    *attributes : str
        Distinct private attribute names, at least one.
    normalization : {"range", "sum", "mean"}, default "sum"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    MarginalQuery

    Raises
    ------
    ValidationError
        Naming ``attributes`` (none, or duplicates), ``attributes[j]`` (not a non-empty string),
        ``normalization`` or ``label``.
    """
    return model.MarginalQuery(attributes, normalization=normalization, label=label)


def grouped(attribute: str, tables: Mapping[Any, npt.ArrayLike] | Iterable[tuple[Scalar, npt.ArrayLike]], *,
            default: npt.ArrayLike | None = None, normalization: str = "range", label: str | None = None
            ) -> model.GroupedQuery:
    """A heterogeneous query: weight list ``tables[value]`` for rows whose ``attribute`` is ``value``.

    Parameters
    ----------
    attribute : str
        A public attribute name.
    tables : mapping or iterable of (value, weights) pairs
        At least one pair; each value a string, a finite number or a boolean, each weights a
        non-empty list of finite numbers (one per value of D, checked when compiled).
    default : array_like or None, default None
        The weight list of rows whose value has no table; ``None``: zeros.
    normalization : {"range", "sum", "mean"}, default "range"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    GroupedQuery

    Raises
    ------
    ValidationError
        Naming ``attribute``, ``tables``, ``tables[j]``, ``tables[j].value``, ``tables[j].weights``,
        ``default``, ``normalization`` or ``label``.
    """
    return model.GroupedQuery(attribute, tables, default, normalization=normalization, label=label)  # type: ignore[arg-type]


def cut(S: Iterable[Scalar], T: Iterable[Scalar], *, source: str | None = None, target: str | None = None,
        edge: str | None = None, normalization: str = "sum", label: str | None = None) -> model.CutQuery:
    """The cut query of the disjoint vertex sets ``S`` and ``T`` (eq. 33).

    Parameters
    ----------
    S, T : iterable of str, int, float or bool
        Disjoint sets of vertices, each non-empty and without duplicates; a vertex is a string, a
        finite number or a boolean.
    source, target : str or None, default None
        The public attributes of the vertex pair ``(i, j)``; ``None``: the schema's only pair
        (resolved when compiled).
    edge : str or None, default None
        The binary private attribute ``x_ij``; ``None``: the schema's only one (resolved when compiled).
    normalization : {"range", "sum", "mean"}, default "sum"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    CutQuery

    Raises
    ------
    ValidationError
        Naming ``S``, ``T``, ``S[j]``, ``T[j]``, ``source``, ``target``, ``edge``, ``normalization`` or ``label``.
    TypeError
        ``S`` or ``T`` is not iterable.
    """
    return model.CutQuery(tuple(S), tuple(T), source, target, edge, normalization=normalization, label=label)


def dense(table: npt.ArrayLike, *, normalization: str = "range", label: str | None = None) -> model.DenseQuery:
    """A per-row query: ``table[i]`` is the weight list of row ``i`` of the synthetic database.

    Parameters
    ----------
    table : array_like
        A non-empty list of weight lists of one length (|D|, checked when compiled), one per row
        of the synthetic database; each a list of finite numbers.
    normalization : {"range", "sum", "mean"}, default "range"
        The normaliser Z of the answer (WYZ eq. 10: :mod:`~ldpsynth.shared.queries.model`);
        ``"eq10"`` is accepted as the former name of ``"range"``.
    label : str or None, default None
        At most 256 characters; ``None``: ``<kind>#<j>``, by the query's place ``j`` in its batch.

    Returns
    -------
    DenseQuery

    Raises
    ------
    ValidationError
        Naming ``table``, ``table[i]``, ``normalization`` or ``label``.
    """
    return model.DenseQuery(table, normalization=normalization, label=label)  # type: ignore[arg-type]


def mean(attribute: str, *, by: str | None = None, label: str | None = None) -> numeric.MeanQuery:
    """The mean of the numeric ``attribute`` (collected by HM), overall or per value of the public attribute ``by``.

    Raises
    ------
    ValidationError
        Naming ``attribute``, ``by`` (not a non-empty string) or ``label``; the schema is checked when the
        batch is compiled (:mod:`ldpsynth.shared.numeric.answering`).
    """
    return numeric.MeanQuery(attribute, by=by, label=label)


def sum_(attribute: str, *, by: str | None = None, label: str | None = None) -> numeric.SumQuery:
    """The sum of the numeric ``attribute`` (HM), overall or per value of ``by`` (JSON kind ``"sum"``; the
    trailing underscore keeps Python's ``sum``). Errors as :func:`mean`."""
    return numeric.SumQuery(attribute, by=by, label=label)


def variance(attribute: str, *, by: str | None = None, label: str | None = None) -> numeric.VarianceQuery:
    """The population variance of the numeric ``attribute``'s values (collected by HM above ε* ≈ 0.61, or by SW),
    overall or per value of ``by``. Errors as :func:`mean`; an HM attribute at ε ≤ ε* is refused naming
    ``epsilon`` when the batch is compiled."""
    return numeric.VarianceQuery(attribute, by=by, label=label)


def quantiles(attribute: str, q: npt.ArrayLike, *, by: str | None = None, label: str | None = None
              ) -> numeric.QuantilesQuery:
    """The ``q``-quantiles (probabilities in [0, 1]) of the numeric ``attribute`` (collected by SW), overall or per
    value of ``by``. Errors as :func:`mean`, and ``q`` (with the position of a bad probability)."""
    return numeric.QuantilesQuery(attribute, q=q, by=by, label=label)  # type: ignore[arg-type]


def histogram(attribute: str, bins: int, *, by: str | None = None, label: str | None = None
              ) -> numeric.HistogramQuery:
    """The shares of the numeric ``attribute``'s values (SW) in ``bins`` equal bins of its declared range, overall
    or per value of ``by``. Errors as :func:`mean`, and ``bins`` (an integer in [1, 4096])."""
    return numeric.HistogramQuery(attribute, bins=bins, by=by, label=label)

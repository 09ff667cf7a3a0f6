"""Statistical queries (WYZ Def. 3, eqs. 9-10): the query kinds and their conditions.

A statistical query is a sequence of row functions :math:`\\varphi_i : D \\to \\mathbb{R}` (eq. 9);
its answer on a database :math:`x` is

.. math::  q_\\varphi(x) = \\frac{1}{Z} \\sum_{i=1}^n \\varphi_i(x_i),

with one of three normalisers :math:`Z`:

* ``"range"``: :math:`Z = \\sum_i c_i`, :math:`c_i = \\max_v \\varphi_i(v) - \\min_v \\varphi_i(v)`,
  the sum of the row functions' ranges (WYZ eq. 10; the query must not be constant on every row);
  ``"eq10"``, its former name, is accepted on input as an alias;
* ``"sum"``: :math:`Z = 1`, a plain sum (a count, a cut, eq. 33);
* ``"mean"``: :math:`Z = n`, an average over all rows of the synthetic database.

The row function of row ``i`` depends on the row only through its public attributes (its
*group*): :math:`\\varphi_i(v) = W[\\mathrm{group}(i), v]`.

This module holds the query kinds (:class:`LinearQuery`, :class:`PredicateQuery`,
:class:`MarginalQuery`, :class:`GroupedQuery`, :class:`CutQuery`, :class:`DenseQuery`) and the
:class:`Condition` of a predicate; each checks its own fields on construction, without a schema
(the fields every kind has, ``normalization`` and ``label``, are :class:`BaseQuery`'s).
Their meaning and JSON form are described in :mod:`ldpsynth.shared.queries.json_form`; users build them
with :mod:`ldpsynth.shared.queries.builders`; :func:`~ldpsynth.shared.queries.compiler.compile_queries`
checks them against a schema and turns them into weight blocks over the schema's private domain
:math:`D` (:mod:`ldpsynth.shared.queries.batch`), which the estimators
(:mod:`ldpsynth.shared.estimators.formulas`) contract with sufficient statistics.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_real, is_finite_real, is_real

__all__ = [
    "NORMALIZATIONS", "NORMALIZATION_ALIASES", "RANGE", "EQ10", "SUM", "MEAN", "normalization_name", "OPERATORS",
    "Scalar", "Condition", "BaseQuery", "LinearQuery", "PredicateQuery", "MarginalQuery", "GroupedQuery", "CutQuery",
    "DenseQuery", "Query",
]

#: Normalisations by their public name; a name's index is its code in compiled blocks.
NORMALIZATIONS = ("range", "sum", "mean")
RANGE, SUM, MEAN = 0, 1, 2
#: Former names accepted on input (never written): WYZ eq. 10's normalisation was called "eq10".
NORMALIZATION_ALIASES = {"eq10": "range"}
#: The former name of the code :data:`RANGE`, for code that imports it.
EQ10 = RANGE
#: Condition operators of predicate queries.
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "between")

Scalar = str | int | float | bool


# ----- structural checks ---------------------------------------------------------------------
@contextmanager
def query_field(index: int) -> Iterator[None]:
    """Re-raise a ValidationError with its field prefixed by ``queries[index].``."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(f"queries[{index}].{exc.field}", exc.legal, exc.problem, exc.position) from None


def _iterable(values: object, name: str, legal: str, strings: tuple[type, ...] = (str, bytes)) -> Iterable[Any]:
    """``values`` when it is a list of items: iterable and none of ``strings`` (one value, not a list of
    characters); else a :class:`ValidationError` naming ``name`` with ``legal``."""
    if isinstance(values, strings) or not isinstance(values, Iterable):
        raise ValidationError(name, legal, f"got {type(values).__name__}")
    return values


def _weights(values: object, name: str) -> tuple[float, ...]:
    """A non-empty list of finite numbers, as a tuple of floats."""
    legal = "a non-empty list of finite numbers"
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.size == 0 or values.dtype.kind not in "iuf":
            raise ValidationError(name, legal, f"got an array of shape {values.shape} and dtype {values.dtype}")
        bad = ~np.isfinite(values.astype(np.float64))
        if bad.any():
            raise ValidationError(name, legal, "not finite", int(np.flatnonzero(bad)[0]))
        return tuple(float(v) for v in values.tolist())
    out = []
    for j, v in enumerate(_iterable(values, name, legal)):
        if not is_finite_real(v):
            raise ValidationError(name, legal, f"got {v!r}", j)
        out.append(float(v))
    if not out:
        raise ValidationError(name, legal, "empty")
    return tuple(out)


def _scalar(value: object, name: str) -> Scalar:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (str, bool)) or is_finite_real(value):
        return value  # type: ignore[return-value]
    raise ValidationError(name, "a string, a finite number or a boolean", f"got {value!r}")


def _scalars(values: object, name: str) -> tuple[Scalar, ...]:
    items = _iterable(values, name, "a non-empty list of values", (str, bytes, Mapping))
    out = tuple(_scalar(v, f"{name}[{j}]") for j, v in enumerate(items))
    if not out:
        raise ValidationError(name, "a non-empty list of values", "empty")
    return out


def _integer_vertices(values: object) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints when it is a list/tuple/array of integers (no booleans), without a
    per-element Python check (cut queries on large graphs carry thousands of vertices); else None."""
    if isinstance(values, np.ndarray):
        return tuple(values.tolist()) if values.ndim == 1 and values.dtype.kind in "iu" else None
    if not isinstance(values, (list, tuple)) or set(map(type, values)) != {int}:
        return None
    try:
        arr = np.asarray(values)
    except (ValueError, OverflowError):
        return None
    return tuple(arr.tolist()) if arr.ndim == 1 and arr.dtype.kind in "iu" else None


def _name(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(name, "an attribute name (a non-empty string)", f"got {value!r}")
    return value


def normalization_name(value: object, field: str = "normalization") -> str:
    """The public name (one of :data:`NORMALIZATIONS`) of a normalisation given by that name or by a
    former name (:data:`NORMALIZATION_ALIASES`); anything else raises a :class:`ValidationError`
    naming ``field``.

    >>> normalization_name("eq10"), normalization_name("mean")
    ('range', 'mean')
    """
    if isinstance(value, str):
        name = NORMALIZATION_ALIASES.get(value, value)
        if name in NORMALIZATIONS:
            return name
    former = "; ".join(f"{alias!r}: the former name of {name!r}" for alias, name in NORMALIZATION_ALIASES.items())
    raise ValidationError(field, f"one of {', '.join(map(repr, NORMALIZATIONS))} ({former})", f"got {value!r}")


# ----- the query model -----------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One condition ``attribute op value`` of a predicate query (see :mod:`~ldpsynth.shared.queries.json_form`)."""

    attribute: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        _name(self.attribute, "attribute")
        check_choice(self.op, "op", OPERATORS)
        if self.op == "in":
            object.__setattr__(self, "value", _scalars(self.value, "value"))
        elif self.op == "between":
            bounds = _scalars(self.value, "value")
            if len(bounds) != 2 or not all(is_real(b) for b in bounds) or bounds[0] > bounds[1]:  # type: ignore[operator]
                raise ValidationError("value", "[lo, hi]: two finite numbers with lo <= hi", f"got {list(bounds)!r}")
            object.__setattr__(self, "value", bounds)
        elif self.op in ("==", "!="):
            object.__setattr__(self, "value", _scalar(self.value, "value"))
        else:
            check_real(self.value, "value")


@dataclass(frozen=True)
class BaseQuery:
    """What every query kind has after its own fields, as keyword arguments: ``normalization`` (one of
    :data:`NORMALIZATIONS` or a former name, :data:`NORMALIZATION_ALIASES`; ``None`` or left out: the
    kind's default) and ``label`` (at most 256 characters).

    A kind names itself (its JSON ``kind``) and its default normalisation as class keywords::

        class LinearQuery(BaseQuery, kind="linear", normalization="range"): ...
    """

    kind: ClassVar[str]
    default_normalization: ClassVar[str]
    normalization: str | None = field(default=None, kw_only=True)
    label: str | None = field(default=None, kw_only=True)

    def __init_subclass__(cls, *, kind: str, normalization: str, **options: Any) -> None:
        super().__init_subclass__(**options)
        cls.kind, cls.default_normalization = kind, normalization

    def __post_init__(self) -> None:
        given = self.normalization
        object.__setattr__(self, "normalization", self.default_normalization if given is None
                           else normalization_name(given))
        if self.label is not None and (not isinstance(self.label, str) or len(self.label) > 256):
            raise ValidationError("label", "a string of at most 256 characters", f"got {self.label!r}")


@dataclass(frozen=True)
class LinearQuery(BaseQuery, kind="linear", normalization="range"):
    """The same row function ``weights`` (one number per value of D) for every row."""

    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _weights(self.weights, "weights"))
        super().__post_init__()


@dataclass(frozen=True)
class PredicateQuery(BaseQuery, kind="predicate", normalization="sum"):
    """Indicator that all ``where`` conditions hold, times the private attribute ``value`` if given."""

    where: tuple[Condition, ...] = ()
    value: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", tuple(_iterable(self.where, "where", "a list of conditions", (str, Mapping))))
        for j, cond in enumerate(self.where):
            if not isinstance(cond, Condition):
                raise ValidationError(f"where[{j}]", "a condition", f"got {type(cond).__name__}")
        if self.value is not None:
            _name(self.value, "value")
        super().__post_init__()


@dataclass(frozen=True)
class MarginalQuery(BaseQuery, kind="marginal", normalization="sum"):
    """The counts of every cell of the listed private attributes (expands to one query per cell)."""

    attributes: tuple[str, ...]

    def __post_init__(self) -> None:
        attributes = _iterable(self.attributes, "attributes", "a non-empty list of private attribute names", (str,))
        names = tuple(_name(a, f"attributes[{j}]") for j, a in enumerate(attributes))
        if not names or len(set(names)) != len(names):
            raise ValidationError("attributes", "a non-empty list of distinct private attribute names",
                                  "empty" if not names else "duplicates")
        object.__setattr__(self, "attributes", names)
        super().__post_init__()


@dataclass(frozen=True)
class GroupedQuery(BaseQuery, kind="grouped", normalization="range"):
    """A weight list per value of the public ``attribute``; ``default`` (or zeros) for other values."""

    attribute: str
    tables: tuple[tuple[Scalar, tuple[float, ...]], ...]
    default: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _name(self.attribute, "attribute")
        pairs = self.tables.items() if isinstance(self.tables, Mapping) else self.tables
        tables = []
        for j, pair in enumerate(_iterable(pairs, "tables", "a non-empty list of (value, weights) pairs")):
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise ValidationError(f"tables[{j}]", "a (value, weights) pair", f"got {pair!r}")
            tables.append((_scalar(pair[0], f"tables[{j}].value"), _weights(pair[1], f"tables[{j}].weights")))
        if not tables:
            raise ValidationError("tables", "a non-empty list of (value, weights) pairs", "empty")
        object.__setattr__(self, "tables", tuple(tables))
        if self.default is not None:
            object.__setattr__(self, "default", _weights(self.default, "default"))
        super().__post_init__()


@dataclass(frozen=True)
class CutQuery(BaseQuery, kind="cut", normalization="sum"):
    """Cut query :math:`\\sum_{(i,j) \\in S \\times T} x_{ij}` on a vertex-pair collection (eq. 33)."""

    S: tuple[Scalar, ...]
    T: tuple[Scalar, ...]
    source: str | None = None
    target: str | None = None
    edge: str | None = None

    def __post_init__(self) -> None:
        for key in ("S", "T"):
            values = _iterable(getattr(self, key), key, "a non-empty list of distinct vertices", (str, bytes, Mapping))
            vertices: tuple[Scalar, ...] | None = _integer_vertices(values)
            if vertices is None:
                vertices = tuple(_scalar(v, f"{key}[{j}]") for j, v in enumerate(values))
            if not vertices:
                raise ValidationError(key, "a non-empty list of distinct vertices", "empty")
            if len(set(vertices)) != len(vertices):
                raise ValidationError(key, "a non-empty list of distinct vertices", "duplicate vertices")
            object.__setattr__(self, key, vertices)
        common = set(self.S) & set(self.T)
        if common:
            raise ValidationError("T", "a vertex set disjoint from S", f"{len(common)} vertices in both S and T")
        for key in ("source", "target", "edge"):
            if getattr(self, key) is not None:
                _name(getattr(self, key), key)
        super().__post_init__()


@dataclass(frozen=True)
class DenseQuery(BaseQuery, kind="dense", normalization="range"):
    """A row function per row of the synthetic database: ``table[i]`` is the weight list of row ``i``."""

    table: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        rows = list(self.table) if isinstance(self.table, np.ndarray) else self.table
        items = _iterable(rows, "table", "a non-empty list of weight lists")
        table = tuple(_weights(row, f"table[{i}]") for i, row in enumerate(items))
        if not table:
            raise ValidationError("table", "a non-empty list of weight lists", "empty")
        if len({len(row) for row in table}) != 1:
            raise ValidationError("table", "weight lists of equal length |D|", "rows of different lengths")
        object.__setattr__(self, "table", table)
        super().__post_init__()


Query = LinearQuery | PredicateQuery | MarginalQuery | GroupedQuery | CutQuery | DenseQuery
#: The query classes by their ``kind`` (the JSON field).
QUERY_KINDS: dict[str, type] = {cls.kind: cls for cls in
                                (LinearQuery, PredicateQuery, MarginalQuery, GroupedQuery, CutQuery, DenseQuery)}

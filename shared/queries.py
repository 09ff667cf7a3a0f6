"""Statistical queries (seed 000 Definition 3, eqs. 9-10): the model, its JSON form, compilation.

A statistical query is a sequence of row functions :math:`\\varphi_i : D \\to \\mathbb{R}` (eq. 9);
its answer on a database :math:`x` is

.. math::  q_\\varphi(x) = \\frac{1}{Z} \\sum_{i=1}^n \\varphi_i(x_i),

with one of three normalisers :math:`Z`:

* ``"eq10"``: :math:`Z = \\sum_i c_i`, :math:`c_i = \\max_v \\varphi_i(v) - \\min_v \\varphi_i(v)`
  (seed 000 eq. 10; the query must not be constant on every row);
* ``"sum"``: :math:`Z = 1`, a plain sum (a count, a cut, eq. 33);
* ``"mean"``: :math:`Z = n`, an average over all rows of the synthetic database.

The row function of row ``i`` depends on the row only through its public attributes (its
*group*): :math:`\\varphi_i(v) = W[\\mathrm{group}(i), v]`. :func:`compile_queries` turns a list
of queries into weight blocks over the schema's private domain :math:`D`; the estimators
(:mod:`ldpsynth.shared.estimators`) contract them with sufficient statistics.

JSON form
---------
A query batch is a JSON array of objects. Every object has a ``"kind"`` and may have
``"normalization"`` (``"eq10"``, ``"sum"`` or ``"mean"``; the default depends on the kind) and
``"label"`` (a string, default ``"<kind>#<index>"``). Unknown fields are errors.

A *weight list* has one finite number per value of :math:`D`, in the mixed-radix order of the
private attributes (first attribute most significant): with private attributes ``rating``
(integer 1..5) and ``liked`` (binary), position ``2 * (rating - 1) + liked``.

``linear`` (default ``"eq10"``): the same row function for every row::

    {"kind": "linear", "weights": [0, 0, 0, 1, 1], "normalization": "mean"}

``predicate`` (default ``"sum"``: a count; ``"mean"``: the fraction of rows): the indicator that
every condition holds, times the optional numeric private attribute ``"value"``::

    {"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": 4},
                                    {"attribute": "genre", "op": "in", "value": ["drama", "comedy"]}]}

  A condition is ``{"attribute": A, "op": OP, "value": V}`` over a private attribute ``A``.
  ``==``, ``!=`` and ``in`` (``V`` a non-empty list) compare codes: ``V`` is encoded by the
  attribute (for a continuous attribute: the bucket that holds ``V``). ``<``, ``<=``, ``>``,
  ``>=`` and ``between`` (``V = [lo, hi]``, inclusive) compare the decoded value (the bucket
  lower edge for a continuous attribute) and are not defined for categorical attributes.
  An empty ``where`` selects every row.

``marginal`` (default ``"sum"``): one predicate count per cell of the listed private attributes,
in mixed-radix order, labelled ``"<label>[rating=1,genre=drama]"``::

    {"kind": "marginal", "attributes": ["rating", "genre"]}

``grouped`` (heterogeneous, default ``"eq10"``): a weight list per value of ONE public attribute;
rows with any other value use ``"default"`` (optional, all zeros)::

    {"kind": "grouped", "attribute": "movie",
     "tables": [{"value": 1, "weights": [0, 0, 0, 1, 1]}, {"value": 2, "weights": [1, 0, 0, 0, 0]}],
     "default": [0, 0, 0, 0, 0]}

``cut`` (graph collections, seed 000 §VI-B, default ``"sum"``): rows are vertex pairs
``(source, target)`` (two public attributes over the same vertex domain) with a private binary
edge bit; :math:`q_{S,T}(x) = \\sum_{(i,j) \\in S \\times T} x_{ij}` (eq. 33) for non-empty
disjoint vertex sets ``S`` and ``T``. ``source``/``target`` default to the schema's two public
attributes and ``edge`` to its only private attribute::

    {"kind": "cut", "S": [0, 1, 2], "T": [3, 4], "source": "src", "target": "dst", "edge": "edge"}

``dense`` (small ``n``, default ``"eq10"``): one weight list per row of the synthetic database,
in its stored order (``table`` has exactly ``n`` rows)::

    {"kind": "dense", "table": [[0, 1], [1, 0], [0, 2]]}

Errors are :class:`~ldpsynth.shared.errors.ValidationError` whose ``field`` names the query
(``queries[3].weights``) and whose ``legal`` states the legal range.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Iterator, Union

import numpy as np
import numpy.typing as npt

from . import jsonio
from .errors import ValidationError
from .schema import Attribute, BinaryAttribute, CategoricalAttribute, Schema

#: Normalisations and their codes in compiled blocks.
NORMALIZATIONS = ("eq10", "sum", "mean")
EQ10, SUM, MEAN = 0, 1, 2
#: Condition operators of predicate queries.
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "between")
#: Largest number of weights one query may expand to (|D| for a weight list, n |D| for a dense
#: table, cells x |D| for a marginal).
MAX_QUERY_WEIGHTS = 1 << 24

Scalar = Union[str, int, float, bool]


# ----- structural checks ---------------------------------------------------------------------
@contextmanager
def _query_field(index: int) -> Iterator[None]:
    """Re-raise a ValidationError with its field prefixed by ``queries[index].``."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(f"queries[{index}].{exc.field}", exc.legal, exc.problem, exc.position) from None


def _is_number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


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
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValidationError(name, legal, f"got {type(values).__name__}")
    out = []
    for j, v in enumerate(values):
        if not _is_number(v) or not math.isfinite(float(v)):
            raise ValidationError(name, legal, f"got {v!r}", j)
        out.append(float(v))
    if not out:
        raise ValidationError(name, legal, "empty")
    return tuple(out)


def _scalar(value: object, name: str) -> Scalar:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (str, bool)) or (_is_number(value) and math.isfinite(float(value))):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    raise ValidationError(name, "a string, a finite number or a boolean", f"got {value!r}")


def _scalars(values: object, name: str) -> tuple[Scalar, ...]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ValidationError(name, "a non-empty list of values", f"got {type(values).__name__}")
    out = tuple(_scalar(v, f"{name}[{j}]") for j, v in enumerate(values))
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


def _check_common(normalization: object, label: object) -> None:
    if normalization not in NORMALIZATIONS:
        raise ValidationError("normalization", "one of 'eq10', 'sum', 'mean'", f"got {normalization!r}")
    if label is not None and (not isinstance(label, str) or len(label) > 256):
        raise ValidationError("label", "a string of at most 256 characters", f"got {label!r}")


# ----- the query model -----------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One condition ``attribute op value`` of a predicate query (see the module docstring)."""

    attribute: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        _name(self.attribute, "attribute")
        if self.op not in OPERATORS:
            raise ValidationError("op", f"one of {', '.join(OPERATORS)}", f"got {self.op!r}")
        if self.op == "in":
            object.__setattr__(self, "value", _scalars(self.value, "value"))
        elif self.op == "between":
            bounds = _scalars(self.value, "value")
            if len(bounds) != 2 or not all(_is_number(b) for b in bounds) or bounds[0] > bounds[1]:  # type: ignore[operator]
                raise ValidationError("value", "[lo, hi]: two finite numbers with lo <= hi", f"got {list(bounds)!r}")
            object.__setattr__(self, "value", bounds)
        elif self.op in ("==", "!="):
            object.__setattr__(self, "value", _scalar(self.value, "value"))
        elif not _is_number(self.value) or not math.isfinite(float(self.value)):
            raise ValidationError("value", "a finite number", f"got {self.value!r}")

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"attribute": self.attribute, "op": self.op, "value": value}


@dataclass(frozen=True)
class LinearQuery:
    """The same row function ``weights`` (one number per value of D) for every row."""

    kind: ClassVar[str] = "linear"
    weights: tuple[float, ...]
    normalization: str = "eq10"
    label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _weights(self.weights, "weights"))
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        return {"weights": list(self.weights)}


@dataclass(frozen=True)
class PredicateQuery:
    """Indicator that all ``where`` conditions hold, times the private attribute ``value`` if given."""

    kind: ClassVar[str] = "predicate"
    where: tuple[Condition, ...] = ()
    value: str | None = None
    normalization: str = "sum"
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.where, (str, Mapping)) or not isinstance(self.where, Iterable):
            raise ValidationError("where", "a list of conditions", f"got {type(self.where).__name__}")
        object.__setattr__(self, "where", tuple(self.where))
        for j, cond in enumerate(self.where):
            if not isinstance(cond, Condition):
                raise ValidationError(f"where[{j}]", "a condition", f"got {type(cond).__name__}")
        if self.value is not None:
            _name(self.value, "value")
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"where": [c.to_json() for c in self.where]}
        if self.value is not None:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class MarginalQuery:
    """The counts of every cell of the listed private attributes (expands to one query per cell)."""

    kind: ClassVar[str] = "marginal"
    attributes: tuple[str, ...]
    normalization: str = "sum"
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.attributes, str) or not isinstance(self.attributes, Iterable):
            raise ValidationError("attributes", "a non-empty list of private attribute names",
                                  f"got {type(self.attributes).__name__}")
        names = tuple(_name(a, f"attributes[{j}]") for j, a in enumerate(self.attributes))
        if not names or len(set(names)) != len(names):
            raise ValidationError("attributes", "a non-empty list of distinct private attribute names",
                                  "empty" if not names else "duplicates")
        object.__setattr__(self, "attributes", names)
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        return {"attributes": list(self.attributes)}


@dataclass(frozen=True)
class GroupedQuery:
    """A weight list per value of the public ``attribute``; ``default`` (or zeros) for other values."""

    kind: ClassVar[str] = "grouped"
    attribute: str
    tables: tuple[tuple[Scalar, tuple[float, ...]], ...]
    default: tuple[float, ...] | None = None
    normalization: str = "eq10"
    label: str | None = None

    def __post_init__(self) -> None:
        _name(self.attribute, "attribute")
        pairs = self.tables.items() if isinstance(self.tables, Mapping) else self.tables
        if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
            raise ValidationError("tables", "a non-empty list of (value, weights) pairs",
                                  f"got {type(self.tables).__name__}")
        tables = []
        for j, pair in enumerate(pairs):
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise ValidationError(f"tables[{j}]", "a (value, weights) pair", f"got {pair!r}")
            tables.append((_scalar(pair[0], f"tables[{j}].value"), _weights(pair[1], f"tables[{j}].weights")))
        if not tables:
            raise ValidationError("tables", "a non-empty list of (value, weights) pairs", "empty")
        object.__setattr__(self, "tables", tuple(tables))
        if self.default is not None:
            object.__setattr__(self, "default", _weights(self.default, "default"))
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attribute": self.attribute,
                               "tables": [{"value": v, "weights": list(w)} for v, w in self.tables]}
        if self.default is not None:
            out["default"] = list(self.default)
        return out


@dataclass(frozen=True)
class CutQuery:
    """Cut query :math:`\\sum_{(i,j) \\in S \\times T} x_{ij}` on a vertex-pair collection (eq. 33)."""

    kind: ClassVar[str] = "cut"
    S: tuple[Scalar, ...]
    T: tuple[Scalar, ...]
    source: str | None = None
    target: str | None = None
    edge: str | None = None
    normalization: str = "sum"
    label: str | None = None

    def __post_init__(self) -> None:
        for key in ("S", "T"):
            values = getattr(self, key)
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
                raise ValidationError(key, "a non-empty list of distinct vertices", f"got {type(values).__name__}")
            vertices = _integer_vertices(values)
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
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"S": list(self.S), "T": list(self.T)}
        for key in ("source", "target", "edge"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class DenseQuery:
    """A row function per row of the synthetic database: ``table[i]`` is the weight list of row ``i``."""

    kind: ClassVar[str] = "dense"
    table: tuple[tuple[float, ...], ...]
    normalization: str = "eq10"
    label: str | None = None

    def __post_init__(self) -> None:
        rows = self.table
        if isinstance(rows, np.ndarray):
            rows = list(rows)
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise ValidationError("table", "a non-empty list of weight lists", f"got {type(self.table).__name__}")
        table = tuple(_weights(row, f"table[{i}]") for i, row in enumerate(rows))
        if not table:
            raise ValidationError("table", "a non-empty list of weight lists", "empty")
        if len({len(row) for row in table}) != 1:
            raise ValidationError("table", "weight lists of equal length |D|", "rows of different lengths")
        object.__setattr__(self, "table", table)
        _check_common(self.normalization, self.label)

    def _json(self) -> dict[str, Any]:
        return {"table": [list(row) for row in self.table]}


Query = Union[LinearQuery, PredicateQuery, MarginalQuery, GroupedQuery, CutQuery, DenseQuery]
_KINDS: dict[str, type] = {cls.kind: cls for cls in
                           (LinearQuery, PredicateQuery, MarginalQuery, GroupedQuery, CutQuery, DenseQuery)}


# ----- builders ------------------------------------------------------------------------------
def linear(weights: npt.ArrayLike, *, normalization: str = "eq10", label: str | None = None) -> LinearQuery:
    """A linear query: the weight list ``weights`` (one number per value of D) on every row."""
    return LinearQuery(weights, normalization, label)  # type: ignore[arg-type]


def condition(attribute: str, op: str, value: Any) -> Condition:
    """A predicate condition, e.g. ``condition("rating", ">=", 4)``."""
    return Condition(attribute, op, value)


def predicate(*where: Condition, value: str | None = None, normalization: str = "sum",
              label: str | None = None) -> PredicateQuery:
    """A predicate count (``"sum"``) or fraction (``"mean"``) of the rows meeting every condition."""
    return PredicateQuery(where, value, normalization, label)


def marginal(*attributes: str, normalization: str = "sum", label: str | None = None) -> MarginalQuery:
    """The marginal of the private ``attributes``: one count per cell."""
    return MarginalQuery(attributes, normalization, label)


def grouped(attribute: str, tables: Mapping[Scalar, npt.ArrayLike] | Iterable[tuple[Scalar, npt.ArrayLike]], *,
            default: npt.ArrayLike | None = None, normalization: str = "eq10", label: str | None = None
            ) -> GroupedQuery:
    """A heterogeneous query: weight list ``tables[value]`` for rows whose ``attribute`` is ``value``."""
    return GroupedQuery(attribute, tables, default, normalization, label)  # type: ignore[arg-type]


def cut(S: Iterable[Scalar], T: Iterable[Scalar], *, source: str | None = None, target: str | None = None,
        edge: str | None = None, normalization: str = "sum", label: str | None = None) -> CutQuery:
    """The cut query of the disjoint vertex sets ``S`` and ``T`` (eq. 33)."""
    return CutQuery(tuple(S), tuple(T), source, target, edge, normalization, label)


def dense(table: npt.ArrayLike, *, normalization: str = "eq10", label: str | None = None) -> DenseQuery:
    """A per-row query: ``table[i]`` is the weight list of row ``i`` of the synthetic database."""
    return DenseQuery(table, normalization, label)  # type: ignore[arg-type]


# ----- JSON ----------------------------------------------------------------------------------
_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # kind -> (required, optional) besides kind/normalization/label
    "linear": ({"weights"}, set()),
    "predicate": (set(), {"where", "value"}),
    "marginal": ({"attributes"}, set()),
    "grouped": ({"attribute", "tables"}, {"default"}),
    "cut": ({"S", "T"}, {"source", "target", "edge"}),
    "dense": ({"table"}, set()),
}


def query_to_json(query: Query) -> dict[str, Any]:
    """The JSON object of one query (the inverse of :func:`query_from_json`)."""
    out: dict[str, Any] = {"kind": query.kind}
    out.update(query._json())
    out["normalization"] = query.normalization
    if query.label is not None:
        out["label"] = query.label
    return out


def _condition_from_json(obj: object, j: int) -> Condition:
    if not isinstance(obj, Mapping) or set(obj) != {"attribute", "op", "value"}:
        raise ValidationError(f"where[{j}]", "an object with exactly the fields attribute, op, value",
                              f"got {obj!r}" if not isinstance(obj, Mapping) else f"fields {sorted(obj)}")
    try:
        return Condition(obj["attribute"], obj["op"], obj["value"])
    except ValidationError as exc:
        raise ValidationError(f"where[{j}].{exc.field}", exc.legal, exc.problem, exc.position) from None


def _tables_from_json(obj: object) -> list[tuple[Any, Any]]:
    if not isinstance(obj, list):
        raise ValidationError("tables", "a list of {\"value\": ..., \"weights\": [...]} objects",
                              f"got {type(obj).__name__}")
    pairs = []
    for j, item in enumerate(obj):
        if not isinstance(item, Mapping) or set(item) != {"value", "weights"}:
            raise ValidationError(f"tables[{j}]", "an object with exactly the fields value, weights",
                                  f"got {item!r}" if not isinstance(item, Mapping) else f"fields {sorted(item)}")
        pairs.append((item["value"], item["weights"]))
    return pairs


def query_from_json(obj: object) -> Query:
    """Parse one JSON query object (see the module docstring); errors name the field."""
    if not isinstance(obj, Mapping):
        raise ValidationError("kind", "an object with a kind field", f"got {type(obj).__name__}")
    kind = obj.get("kind")
    if kind not in _KINDS:
        raise ValidationError("kind", f"one of {', '.join(_KINDS)}", f"got {kind!r}")
    required, optional = _FIELDS[kind]
    allowed = required | optional | {"kind", "normalization", "label"}
    extra = set(obj) - allowed
    if extra:
        raise ValidationError(sorted(extra)[0], f"the fields of a {kind} query: {', '.join(sorted(allowed))}",
                              "unknown field")
    missing = required - set(obj)
    if missing:
        raise ValidationError(sorted(missing)[0], f"the fields {', '.join(sorted(required))}", "missing")
    args = {key: obj[key] for key in required | optional if key in obj}
    if kind == "predicate" and "where" in args:
        where = args["where"]
        if not isinstance(where, list):
            raise ValidationError("where", "a list of conditions", f"got {type(where).__name__}")
        args["where"] = tuple(_condition_from_json(c, j) for j, c in enumerate(where))
    if kind == "grouped":
        args["tables"] = _tables_from_json(args["tables"])
    common = {key: obj[key] for key in ("normalization", "label") if key in obj}
    return _KINDS[kind](**args, **common)


def queries_from_json(obj: object, *, first_index: int = 0) -> list[Query]:
    """Parse a JSON array of queries (a string, bytes or already-decoded list); errors name
    ``queries[first_index + i]`` (the index in a batch sent in parts)."""
    if isinstance(obj, (str, bytes)):
        obj = jsonio.loads(obj, "queries", "a JSON array of query objects")
    if not isinstance(obj, list):
        raise ValidationError("queries", "a JSON array of query objects", f"got {type(obj).__name__}")
    out = []
    for i, item in enumerate(obj):
        with _query_field(first_index + i):
            out.append(query_from_json(item))
    return out


def queries_to_json(queries: Sequence[Query]) -> list[dict[str, Any]]:
    """The JSON array of a list of queries."""
    return [query_to_json(q) for q in queries]


def dumps_queries(queries: Sequence[Query]) -> str:
    """``queries`` as JSON text."""
    return json.dumps(queries_to_json(queries))


# ----- compiled blocks -----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TableBlock:
    """Queries whose row function depends on one public attribute (or on nothing).

    ``weights[j, l]`` is query ``j``'s weight list for rows whose ``attribute`` has code
    ``values[l]``; rows with any other code use ``default[j]``. With ``attribute`` None there is
    a single table (``weights.shape[1] == 1``) for every row.
    """

    attribute: str | None
    values: np.ndarray        # (L,) int64 codes of the attribute
    weights: np.ndarray       # (Q, L, |D|) float64
    default: np.ndarray       # (Q, |D|) float64
    normalization: np.ndarray  # (Q,) int8: EQ10, SUM or MEAN
    positions: np.ndarray     # (Q,) positions in the batch


@dataclass(frozen=True, eq=False)
class RowBlock:
    """Dense per-row queries: ``weights[j, i]`` is query ``j``'s weight list for row ``i``."""

    weights: np.ndarray       # (Q, n, |D|) float64
    normalization: np.ndarray
    positions: np.ndarray


@dataclass(frozen=True, eq=False)
class CutBlock:
    """Cut queries: ``sources[j]``/``targets[j]`` are the vertex masks of S and T (codes of ``source``)."""

    source: str
    target: str
    edge: str
    sources: np.ndarray       # (Q, V) bool
    targets: np.ndarray       # (Q, V) bool
    normalization: np.ndarray
    positions: np.ndarray


Block = Union[TableBlock, RowBlock, CutBlock]


@dataclass(frozen=True, eq=False)
class QueryBatch:
    """Compiled queries: weight blocks over ``schema``'s private domain, in batch order.

    ``origins[j]`` is the index of the input query that compiled query ``j`` came from (a
    marginal expands to several); ``labels`` is None for array-built batches (default labels).
    """

    schema: Schema
    blocks: tuple[Block, ...]
    size: int
    origins: np.ndarray
    labels: tuple[str, ...] | None = field(default=None)

    def __len__(self) -> int:
        return self.size

    def label(self, j: int) -> str:
        """The label of compiled query ``j``."""
        return self.labels[j] if self.labels is not None else f"q{j}"


# ----- compilation ---------------------------------------------------------------------------
def _find(schema: Schema, name: str) -> Attribute | None:
    return next((a for a in schema.attributes if a.name == name), None)


def _private(schema: Schema, name: str, fld: str) -> Attribute:
    attr = _find(schema, name)
    if attr is None or attr.public:
        legal = f"a private attribute: one of {[a.name for a in schema.private_attributes]}"
        raise ValidationError(fld, legal, f"unknown attribute {name!r}" if attr is None else f"{name!r} is public")
    return attr


def _public(schema: Schema, name: str, fld: str) -> Attribute:
    attr = _find(schema, name)
    if attr is None or not attr.public:
        legal = f"a public attribute: one of {[a.name for a in schema.public_attributes]}"
        raise ValidationError(fld, legal, f"unknown attribute {name!r}" if attr is None else f"{name!r} is private")
    return attr


def _encode(attr: Attribute, values: Sequence[Scalar], fld: str, suffix: str = "", *, indexed: bool = True
            ) -> np.ndarray:
    """Codes of raw ``values`` of ``attr``; an illegal value raises naming ``fld[position]suffix``."""
    listed = list(values)
    column = None
    if set(map(type, listed)) == {int}:  # integers: encode them as one int64 array
        try:
            column = np.asarray(listed, dtype=np.int64)
        except OverflowError:
            column = None
    try:
        return attr.encode(column if column is not None else np.asarray(listed, dtype=object))
    except ValidationError as exc:
        where = f"{fld}[{exc.position}]{suffix}" if indexed else f"{fld}{suffix}"
        raise ValidationError(where, f"a value of {attr.name!r}: {attr.legal_range}", "illegal value") from None


def _table(weights: tuple[float, ...], k: int, fld: str) -> np.ndarray:
    if len(weights) != k:
        raise ValidationError(fld, f"a list of |D| = {k} finite numbers", f"got {len(weights)} numbers")
    return np.asarray(weights, dtype=np.float64)


class _Compiler:
    """Turns queries into blocks; one instance per :func:`compile_queries` call."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.k = schema.private_domain_size
        if self.k > MAX_QUERY_WEIGHTS:
            raise ValidationError("schema", f"a private domain of at most {MAX_QUERY_WEIGHTS} values for queries",
                                  f"|D| = {self.k}")
        self._digits: dict[str, np.ndarray] | None = None

    @property
    def digits(self) -> dict[str, np.ndarray]:
        """Per private attribute, its code in every value of D (``(|D|,)`` arrays)."""
        if self._digits is None:
            self._digits = self.schema.private_digits(np.arange(self.k, dtype=np.int64))
        return self._digits

    def condition_mask(self, cond: Condition, j: int) -> np.ndarray:
        """Indicator over D of one condition."""
        attr = _private(self.schema, cond.attribute, f"where[{j}].attribute")
        codes = np.arange(attr.size)
        if cond.op in ("==", "!=", "in"):
            if cond.op == "in":
                chosen = _encode(attr, cond.value, f"where[{j}].value")
            else:
                chosen = _encode(attr, [cond.value], f"where[{j}].value", indexed=False)
            mask = np.isin(codes, chosen)
            if cond.op == "!=":
                mask = ~mask
        else:
            if isinstance(attr, CategoricalAttribute):
                raise ValidationError(f"where[{j}].op", "==, != or in for a categorical attribute",
                                      f"got {cond.op!r}")
            decoded = attr.decode(codes).astype(np.float64)
            if cond.op == "between":
                mask = (decoded >= float(cond.value[0])) & (decoded <= float(cond.value[1]))
            else:
                ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
                mask = ops[cond.op](decoded, float(cond.value))
        return mask[self.digits[attr.name]]

    def predicate(self, query: PredicateQuery) -> np.ndarray:
        weights = np.ones(self.k)
        for j, cond in enumerate(query.where):
            weights *= self.condition_mask(cond, j)
        if query.value is not None:
            attr = _private(self.schema, query.value, "value")
            if isinstance(attr, CategoricalAttribute):
                raise ValidationError("value", "a numeric (integer, binary or continuous) private attribute",
                                      f"{query.value!r} is categorical")
            weights *= attr.decode(np.arange(attr.size)).astype(np.float64)[self.digits[attr.name]]
        return weights

    def marginal(self, query: MarginalQuery, base: str) -> tuple[np.ndarray, list[str]]:
        attrs = [_private(self.schema, name, f"attributes[{j}]") for j, name in enumerate(query.attributes)]
        cells = math.prod(a.size for a in attrs)
        if cells * self.k > MAX_QUERY_WEIGHTS:
            raise ValidationError("attributes", f"at most {MAX_QUERY_WEIGHTS} cells x |D| weights",
                                  f"{cells} cells x |D| = {self.k}")
        cell = np.zeros(self.k, np.int64)
        for attr in attrs:
            cell = cell * attr.size + self.digits[attr.name]
        weights = (cell[None, :] == np.arange(cells)[:, None]).astype(np.float64)
        grid = np.indices([a.size for a in attrs]).reshape(len(attrs), -1)
        decoded = [a.decode(grid[j]) for j, a in enumerate(attrs)]
        labels = [base + "[" + ",".join(f"{a.name}={decoded[j][c]}" for j, a in enumerate(attrs)) + "]"
                  for c in range(cells)]
        return weights, labels

    def grouped(self, query: GroupedQuery) -> tuple[np.ndarray, dict[int, np.ndarray], np.ndarray]:
        attr = _public(self.schema, query.attribute, "attribute")
        codes = _encode(attr, [v for v, _ in query.tables], "tables", ".value")
        if len(np.unique(codes)) != len(codes):
            raise ValidationError("tables", "one table per value of the attribute", "a value appears twice")
        tables = {int(c): _table(w, self.k, f"tables[{j}].weights")
                  for j, (c, (_, w)) in enumerate(zip(codes, query.tables))}
        default = np.zeros(self.k) if query.default is None else _table(query.default, self.k, "default")
        return codes, tables, default

    def cut(self, query: CutQuery) -> tuple[str, str, str, np.ndarray, np.ndarray]:
        publics, privates = self.schema.public_attributes, self.schema.private_attributes
        if query.source is None or query.target is None:
            if len(publics) != 2:
                raise ValidationError("source", "a public attribute name (the schema has no unique vertex pair)",
                                      "missing")
        source = _public(self.schema, query.source or publics[0].name, "source")
        target = _public(self.schema, query.target or publics[1].name, "target")
        if source.name == target.name or {**source.to_json(), "name": ""} != {**target.to_json(), "name": ""}:
            raise ValidationError("target", f"a public attribute other than {source.name!r} with the same "
                                  "vertex domain", f"got {target.name!r}")
        if query.edge is None and len(privates) != 1:
            raise ValidationError("edge", "a binary private attribute name", "missing")
        edge = _private(self.schema, query.edge or privates[0].name, "edge")
        if not isinstance(edge, BinaryAttribute):
            raise ValidationError("edge", "a binary private attribute", f"{edge.name!r} is not binary")
        masks = []
        for key in ("S", "T"):
            mask = np.zeros(source.size, bool)
            mask[_encode(source, getattr(query, key), key)] = True
            masks.append(mask)
        if (masks[0] & masks[1]).any():
            raise ValidationError("T", "a vertex set disjoint from S", "S and T share a vertex")
        return source.name, target.name, edge.name, masks[0], masks[1]

    def dense(self, query: DenseQuery) -> np.ndarray:
        n = len(query.table)
        if n * self.k > MAX_QUERY_WEIGHTS:
            raise ValidationError("table", f"at most {MAX_QUERY_WEIGHTS} weights (n x |D|)", f"{n} x {self.k}")
        if len(query.table[0]) != self.k:
            raise ValidationError("table", f"rows of |D| = {self.k} finite numbers", f"got {len(query.table[0])}")
        return np.asarray(query.table, dtype=np.float64)


def compile_queries(queries: Sequence[Query], schema: Schema, *, first_index: int = 0) -> QueryBatch:
    """Check ``queries`` against ``schema`` and compile them to weight blocks.

    Queries of one form share a block (one table block per grouping attribute, one row block
    per table length); a marginal expands to one compiled query per cell. Answers come back in
    batch order (see :attr:`QueryBatch.origins`). ``first_index`` is the index of ``queries[0]``
    in a larger batch sent in parts: error fields (``queries[j]``) and default labels use the
    index in that batch; ``origins`` stay relative to ``queries`` (see :func:`concat_batches`).
    """
    comp = _Compiler(schema)
    labels: list[str] = []
    origins: list[int] = []
    tables: dict[str | None, list[tuple[int, Any, int]]] = {}
    rows: dict[int, list[tuple[int, np.ndarray, int]]] = {}
    cuts: dict[tuple[str, str, str], list[tuple[int, np.ndarray, np.ndarray, int]]] = {}

    def add(i: int, label: str) -> int:
        labels.append(label)
        origins.append(i)
        return len(labels) - 1

    for i, query in enumerate(queries):
        index = first_index + i
        if not isinstance(query, tuple(_KINDS.values())):
            raise ValidationError(f"queries[{index}]", "a query object", f"got {type(query).__name__}")
        base = query.label if query.label is not None else f"{query.kind}#{index}"
        norm = NORMALIZATIONS.index(query.normalization)
        with _query_field(index):
            if isinstance(query, LinearQuery):
                tables.setdefault(None, []).append((add(i, base), _table(query.weights, comp.k, "weights"), norm))
            elif isinstance(query, PredicateQuery):
                tables.setdefault(None, []).append((add(i, base), comp.predicate(query), norm))
            elif isinstance(query, MarginalQuery):
                weights, cell_labels = comp.marginal(query, base)
                for w, lab in zip(weights, cell_labels):
                    tables.setdefault(None, []).append((add(i, lab), w, norm))
            elif isinstance(query, GroupedQuery):
                tables.setdefault(query.attribute, []).append((add(i, base), comp.grouped(query), norm))
            elif isinstance(query, CutQuery):
                source, target, edge, s_mask, t_mask = comp.cut(query)
                cuts.setdefault((source, target, edge), []).append((add(i, base), s_mask, t_mask, norm))
            else:
                table = comp.dense(query)
                rows.setdefault(len(table), []).append((add(i, base), table, norm))

    blocks: list[Block] = []
    for attribute, items in tables.items():
        pos = np.array([p for p, _, _ in items], np.int64)
        norms = np.array([nm for _, _, nm in items], np.int8)
        if attribute is None:
            weights = np.stack([w for _, w, _ in items]).reshape(len(items), 1, comp.k)
            blocks.append(TableBlock(None, np.zeros(0, np.int64), weights, np.zeros((len(items), comp.k)), norms, pos))
            continue
        values = np.unique(np.concatenate([codes for _, (codes, _, _), _ in items]))
        column = {int(c): j for j, c in enumerate(values)}
        weights = np.empty((len(items), len(values), comp.k))
        default = np.stack([d for _, (_, _, d), _ in items])
        for j, (_, (_, per_value, d), _) in enumerate(items):
            weights[j] = d
            for code, w in per_value.items():
                weights[j, column[code]] = w
        blocks.append(TableBlock(attribute, values, weights, default, norms, pos))
    for items_r in rows.values():
        blocks.append(RowBlock(np.stack([t for _, t, _ in items_r]), np.array([nm for _, _, nm in items_r], np.int8),
                               np.array([p for p, _, _ in items_r], np.int64)))
    for (source, target, edge), items_c in cuts.items():
        blocks.append(CutBlock(source, target, edge, np.stack([s for _, s, _, _ in items_c]),
                               np.stack([t for _, _, t, _ in items_c]),
                               np.array([nm for *_, nm in items_c], np.int8),
                               np.array([p for p, *_ in items_c], np.int64)))
    return QueryBatch(schema, tuple(blocks), len(labels), np.asarray(origins, np.int64), tuple(labels))


def _shifted(block: Block, offset: int) -> Block:
    """``block`` with its positions moved ``offset`` places down the batch."""
    return replace(block, positions=block.positions + offset)


def concat_batches(batches: Sequence[QueryBatch], input_counts: Sequence[int]) -> QueryBatch:
    """One batch answering ``batches`` one after the other (a batch received in parts).

    ``input_counts[b]`` is the number of input queries batch ``b`` was compiled from (its
    compiled size unless marginals expanded), so ``origins`` index the whole input. Labels are
    kept where a part has them; compiled query ``j`` of a part without labels is ``q<global j>``.
    """
    if not batches or len(batches) != len(input_counts):
        raise ValidationError("batches", "at least one batch and one input count per batch",
                              f"got {len(batches)} batches and {len(input_counts)} counts")
    if any(b.schema != batches[0].schema for b in batches):
        raise ValidationError("batches", "batches over one schema", "got several schemas")
    if len(batches) == 1:
        return batches[0]
    have_labels = any(b.labels is not None for b in batches)
    blocks: list[Block] = []
    origins, labels = [], []
    size = first_input = 0
    for batch, count in zip(batches, input_counts):
        blocks += [_shifted(block, size) for block in batch.blocks]
        origins.append(batch.origins + first_input)
        if have_labels:
            labels += batch.labels if batch.labels is not None else [f"q{size + j}" for j in range(batch.size)]
        size += batch.size
        first_input += count
    return QueryBatch(batches[0].schema, tuple(blocks), size, np.concatenate(origins),
                      tuple(labels) if have_labels else None)


def _check_finite_queries(w: np.ndarray) -> None:
    """Raise naming the first query of ``w`` (shape ``(Q, ...)``) that holds a NaN or an infinity."""
    step = max(1, MAX_QUERY_WEIGHTS // max(1, w[0].size))
    for start in range(0, len(w), step):
        chunk = w[start:start + step]
        bad = ~np.isfinite(chunk).reshape(len(chunk), -1).all(axis=1)
        if bad.any():
            raise ValidationError("weights", "finite numbers", "not finite", start + int(np.flatnonzero(bad)[0]))


def linear_batch(schema: Schema, weights: npt.ArrayLike, *, normalization: str = "eq10",
                 check_finite: bool = True) -> QueryBatch:
    """A batch of linear queries straight from an array (no per-query objects).

    ``weights`` has shape ``(Q, |D|)``: query ``j`` applies the weight list ``weights[j]`` to every
    row (the same answers as ``compile_queries([linear(w) for w in weights], schema)``, default
    labels). The array is used as is (no copy when it is C-contiguous float64). With
    ``check_finite=False`` the NaN/infinity check is left to the estimator, which reports the
    first such query from its own pass over the weights (the same error, one pass fewer).
    """
    _check_common(normalization, None)
    k = schema.private_domain_size
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != k or w.shape[0] == 0:
        raise ValidationError("weights", f"an array of shape (Q >= 1, {k})", f"got shape {w.shape}")
    if check_finite:
        _check_finite_queries(w)
    norms = np.full(len(w), NORMALIZATIONS.index(normalization), np.int8)
    block = TableBlock(None, np.zeros(0, np.int64), w.reshape(len(w), 1, k), np.zeros((len(w), k)), norms,
                       np.arange(len(w), dtype=np.int64))
    return QueryBatch(schema, (block,), len(w), np.arange(len(w), dtype=np.int64))


def grouped_batch(schema: Schema, attribute: str, weights: npt.ArrayLike, *, values: Sequence[Scalar] | None = None,
                  default: npt.ArrayLike | None = None, normalization: str = "eq10",
                  check_finite: bool = True) -> QueryBatch:
    """A batch of heterogeneous queries straight from an array (no per-query objects).

    ``weights`` has shape ``(Q, L, |D|)``: query ``j`` applies ``weights[j, l]`` to rows whose
    public ``attribute`` equals ``values[l]`` (default: every value of the attribute, in code
    order) and ``default[j]`` (default zeros) to the other rows. The array is used as is (no
    copy when it is C-contiguous float64); it is checked for finiteness in chunks, or (with
    ``check_finite=False``) by the estimator in its own pass, as for :func:`linear_batch`.
    """
    _check_common(normalization, None)
    attr = _public(schema, attribute, "attribute")
    k = schema.private_domain_size
    codes = np.arange(attr.size, dtype=np.int64) if values is None else _encode(attr, list(values), "values")
    if len(np.unique(codes)) != len(codes):
        raise ValidationError("values", "distinct values of the attribute", "a value appears twice")
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[1:] != (len(codes), k) or w.shape[0] == 0:
        raise ValidationError("weights", f"an array of shape (Q >= 1, {len(codes)}, {k})", f"got shape {w.shape}")
    if check_finite:
        _check_finite_queries(w)
    d = np.zeros((len(w), k)) if default is None else np.ascontiguousarray(default, dtype=np.float64)
    if d.shape != (len(w), k) or not np.isfinite(d).all():
        raise ValidationError("default", f"an array of shape ({len(w)}, {k}) of finite numbers", f"got shape {d.shape}")
    norms = np.full(len(w), NORMALIZATIONS.index(normalization), np.int8)
    block = TableBlock(attribute, codes, w, d, norms, np.arange(len(w), dtype=np.int64))
    return QueryBatch(schema, (block,), len(w), np.arange(len(w), dtype=np.int64))

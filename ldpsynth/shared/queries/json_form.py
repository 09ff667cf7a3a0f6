"""The JSON form of the queries of :mod:`ldpsynth.shared.queries.model`: parsing (through the limits
of :mod:`ldpsynth.shared.jsonio`) and serialisation.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.queries.json_form``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.model import QUERY_KINDS, Condition, Query, normalization_name, query_field
from ldpsynth.shared.queries.numeric import NUMERIC_KINDS, HistogramQuery, NumericQuery, QuantilesQuery
from ldpsynth.shared.validation import check_choice

__all__ = ["AnyQuery", "query_to_json", "query_from_json", "queries_from_json", "queries_to_json", "dumps_queries"]

#: A query object of any kind: a categorical collection's (:mod:`~ldpsynth.shared.queries.model`) or a numeric
#: collection's (:mod:`~ldpsynth.shared.queries.numeric`).
AnyQuery = Query | NumericQuery
#: One query as the public functions take it: a JSON object, or a query object (what the builders of
#: :mod:`ldpsynth.shared.queries.builders` return).
QueryLike = AnyQuery | Mapping[str, Any]
_QUERY_TYPES: tuple[type[Query] | type[NumericQuery], ...] = (*QUERY_KINDS.values(), NumericQuery)


def _own_fields(cls: type) -> tuple[list[str], list[str]]:
    """The fields of a query class besides :class:`BaseQuery`'s, in order: (required, optional)."""
    own = [f for f in dataclasses.fields(cls) if f.name not in ("normalization", "label")]
    required = [f.name for f in own if f.default is dataclasses.MISSING]
    return required, [f.name for f in own if f.name not in required]


#: kind -> (required, optional) JSON fields besides kind/normalization/label, read from the query classes.
_FIELDS = {kind: _own_fields(cls) for kind, cls in QUERY_KINDS.items()}
#: kind -> its optional fields (left out when None).
_OPTIONAL = {kind: tuple(optional) for kind, (_, optional) in _FIELDS.items()}


def query_to_json(query: AnyQuery) -> dict[str, Any]:
    """The JSON object of one query (the inverse of :func:`query_from_json`).

    >>> from ldpsynth.shared.queries.builders import marginal
    >>> query_to_json(marginal("rating", normalization="eq10"))
    {'kind': 'marginal', 'attributes': ['rating'], 'normalization': 'range'}
    """
    if isinstance(query, NumericQuery):
        return _numeric_to_json(query)
    kind = query.kind
    out = _WRITERS[kind](query)
    for key in _OPTIONAL[kind]:
        if out[key] is None:  # an optional field not given is left out
            del out[key]
    out["normalization"] = query.normalization
    if query.label is not None:
        out["label"] = query.label
    return out


def _numeric_to_json(query: NumericQuery) -> dict[str, Any]:
    """The JSON object of a numeric query: its kind, attribute and own fields; ``by`` and ``label`` when given."""
    out: dict[str, Any] = {"kind": query.kind, "attribute": query.attribute}
    if isinstance(query, QuantilesQuery):
        out["q"] = list(query.q)
    elif isinstance(query, HistogramQuery):
        out["bins"] = query.bins
    for key in ("by", "label"):
        if getattr(query, key) is not None:
            out[key] = getattr(query, key)
    return out


def _numeric_from_json(kind: str, obj: Mapping[str, Any]) -> NumericQuery:
    """Parse a numeric query's JSON object (:mod:`~ldpsynth.shared.queries.numeric`)."""
    own = {"quantiles": ("q",), "histogram": ("bins",)}.get(kind, ())
    allowed = {"kind", "attribute", "by", "label", *own}
    extra = set(obj) - allowed
    if extra:
        raise ValidationError(sorted(extra)[0], f"the fields of a {kind} query: {', '.join(sorted(allowed))}",
                              "unknown field")
    missing = {"attribute", *own} - set(obj)
    if missing:
        raise ValidationError(sorted(missing)[0], f"the fields {', '.join(sorted({'attribute', *own}))}", "missing")
    return NUMERIC_KINDS[kind](**{key: obj[key] for key in allowed - {"kind"} if key in obj})


def _condition_to_json(condition: Condition) -> dict[str, Any]:
    value = condition.value
    return {"attribute": condition.attribute, "op": condition.op,
            "value": list(value) if isinstance(value, tuple) else value}


#: kind -> the JSON object of a query, its kind and own fields (the inverse of :func:`query_from_json`).
_WRITERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "linear": lambda q: {"kind": q.kind, "weights": list(q.weights)},
    "predicate": lambda q: {"kind": q.kind, "where": [_condition_to_json(c) for c in q.where], "value": q.value},
    "marginal": lambda q: {"kind": q.kind, "attributes": list(q.attributes)},
    "grouped": lambda q: {"kind": q.kind, "attribute": q.attribute,
                          "tables": [{"value": v, "weights": list(w)} for v, w in q.tables],
                          "default": None if q.default is None else list(q.default)},
    "cut": lambda q: {"kind": q.kind, "S": list(q.S), "T": list(q.T), "source": q.source, "target": q.target,
                      "edge": q.edge},
    "dense": lambda q: {"kind": q.kind, "table": [list(row) for row in q.table]},
}


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


def query_from_json(obj: object) -> AnyQuery:
    """Parse one JSON query object (see the module docstring; the numeric kinds:
    :mod:`~ldpsynth.shared.queries.numeric`); errors name the field."""
    if not isinstance(obj, Mapping):
        raise ValidationError("kind", "an object with a kind field", f"got {type(obj).__name__}")
    kind = check_choice(obj.get("kind"), "kind", (*QUERY_KINDS, *NUMERIC_KINDS))
    if kind in NUMERIC_KINDS:
        return _numeric_from_json(kind, obj)
    required, optional = _FIELDS[kind]
    allowed = {*required, *optional, "kind", "normalization", "label"}
    extra = set(obj) - allowed
    if extra:
        raise ValidationError(sorted(extra)[0], f"the fields of a {kind} query: {', '.join(sorted(allowed))}",
                              "unknown field")
    missing = set(required) - set(obj)
    if missing:
        raise ValidationError(sorted(missing)[0], f"the fields {', '.join(sorted(required))}", "missing")
    args = {key: obj[key] for key in [*required, *optional] if key in obj}
    if kind == "predicate" and "where" in args:
        where = args["where"]
        if not isinstance(where, list):
            raise ValidationError("where", "a list of conditions", f"got {type(where).__name__}")
        args["where"] = tuple(_condition_from_json(c, j) for j, c in enumerate(where))
    if kind == "grouped":
        args["tables"] = _tables_from_json(args["tables"])
    if "normalization" in obj:  # given, it must be a name (the query classes read None as the kind's default)
        normalization_name(obj["normalization"])
    common = {key: obj[key] for key in ("normalization", "label") if key in obj}
    return QUERY_KINDS[kind](**args, **common)


def queries_from_json(obj: object, *, first_index: int = 0) -> list[AnyQuery]:
    """Parse a JSON array of queries (a string, bytes or already-decoded list or tuple, whose items
    may also be query objects, taken as they are); errors name ``queries[first_index + i]`` (the
    index in a batch sent in parts)."""
    if isinstance(obj, (str, bytes)):
        obj = jsonio.loads(obj, "queries", "a JSON array of query objects")
    if not isinstance(obj, (list, tuple)):
        raise ValidationError("queries", "a JSON array of query objects", f"got {type(obj).__name__}")
    out: list[AnyQuery] = []
    for i, item in enumerate(obj):
        with query_field(first_index + i):
            out.append(item if isinstance(item, _QUERY_TYPES) else query_from_json(item))
    return out


def queries_to_json(queries: Iterable[QueryLike]) -> list[Any]:
    """The JSON array of a list of queries: query objects through :func:`query_to_json`, JSON
    objects as they are (whoever parses the array checks them)."""
    return [query_to_json(q) if isinstance(q, _QUERY_TYPES) else q for q in queries]


def dumps_queries(queries: Iterable[QueryLike]) -> str:
    """``queries`` as JSON text."""
    return json.dumps(queries_to_json(queries))

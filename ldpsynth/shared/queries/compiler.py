"""Compilation of query objects (:mod:`ldpsynth.shared.queries.model`) to a
:class:`~ldpsynth.shared.queries.batch.QueryBatch`.

:func:`compile_queries` checks every query against the schema (attribute names and kinds, values,
sizes; errors name ``queries[j]``) and turns it into weights over the private domain :math:`D`,
a weight list per group of rows (:math:`\\varphi_i(v) = W[\\mathrm{group}(i), v]`, WYZ
eq. 9): predicates and marginals become indicator weights, a cut query two vertex masks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.batch import Block, CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.queries.model import (
    NORMALIZATIONS,
    QUERY_KINDS,
    Condition,
    CutQuery,
    DenseQuery,
    GroupedQuery,
    LinearQuery,
    MarginalQuery,
    PredicateQuery,
    Query,
    Scalar,
    query_field,
)
from ldpsynth.shared.queries.numeric import NumericQuery
from ldpsynth.shared.schema import Attribute, BinaryAttribute, CategoricalAttribute, Schema

__all__ = ["MAX_QUERY_WEIGHTS", "compile_queries", "condition_values"]

#: Largest number of weights one query may expand to (|D| for a weight list, n |D| for a dense
#: table, cells x |D| for a marginal).
MAX_QUERY_WEIGHTS = 1 << 24


def _find(schema: Schema, name: str) -> Attribute | None:
    return next((a for a in schema.attributes if a.name == name), None)


def _private(schema: Schema, name: str, fld: str) -> Attribute:
    attr = _find(schema, name)
    if attr is None or attr.public:
        legal = f"a private attribute: one of {[a.name for a in schema.private_attributes]}"
        raise ValidationError(fld, legal, f"unknown attribute {name!r}" if attr is None else f"{name!r} is public")
    return attr


def public_attribute(schema: Schema, name: str, fld: str) -> Attribute:
    """The public attribute ``name`` of ``schema``; otherwise an error naming the field ``fld``."""
    attr = _find(schema, name)
    if attr is None or not attr.public:
        legal = f"a public attribute: one of {[a.name for a in schema.public_attributes]}"
        raise ValidationError(fld, legal, f"unknown attribute {name!r}" if attr is None else f"{name!r} is private")
    return attr


def encode_values(attr: Attribute, values: Sequence[Scalar], fld: str, suffix: str = "", *, indexed: bool = True
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


def condition_values(attr: Attribute, cond: Condition, j: int) -> np.ndarray:
    """Indicator over the codes ``0 .. attr.size - 1`` of the values of ``attr`` that satisfy ``cond``, the
    ``j``-th condition of a predicate (errors name ``where[j]``)."""
    codes = np.arange(attr.size)
    if cond.op in ("==", "!=", "in"):
        if cond.op == "in":
            chosen = encode_values(attr, cond.value, f"where[{j}].value")
        else:
            chosen = encode_values(attr, [cond.value], f"where[{j}].value", indexed=False)
        mask = np.isin(codes, chosen)
        return ~mask if cond.op == "!=" else mask
    if isinstance(attr, CategoricalAttribute):
        raise ValidationError(f"where[{j}].op", "==, != or in for a categorical attribute", f"got {cond.op!r}")
    decoded = attr.decode(codes).astype(np.float64)
    if cond.op == "between":
        return (decoded >= float(cond.value[0])) & (decoded <= float(cond.value[1]))
    ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
    return np.asarray(ops[cond.op](decoded, float(cond.value)), dtype=bool)


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
        return condition_values(attr, cond, j)[self.digits[attr.name]]

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
        attr = public_attribute(self.schema, query.attribute, "attribute")
        codes = encode_values(attr, [v for v, _ in query.tables], "tables", ".value")
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
        source = public_attribute(self.schema, query.source or publics[0].name, "source")
        target = public_attribute(self.schema, query.target or publics[1].name, "target")
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
            mask[encode_values(source, getattr(query, key), key)] = True
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


def compile_queries(queries: Sequence[Query | NumericQuery], schema: Schema, *, first_index: int = 0) -> QueryBatch:
    """Check ``queries`` against ``schema`` and compile them to weight blocks.

    Queries of one form share a block (one table block per grouping attribute, one row block
    per table length); a marginal expands to one compiled query per cell. Answers come back in
    batch order (see :attr:`QueryBatch.origins`). ``first_index`` is the index of ``queries[0]``
    in a larger batch sent in parts: error fields (``queries[j]``) and default labels use the
    index in that batch; ``origins`` stay relative to ``queries`` (see :func:`concat_batches`). A numeric kind
    (:mod:`~ldpsynth.shared.queries.numeric`) is refused naming ``queries[j].attribute``: it asks a numeric
    collection (:func:`~ldpsynth.shared.numeric.answering.compile_numeric`).
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
        if isinstance(query, NumericQuery):
            raise ValidationError(f"queries[{index}].attribute", "a numeric attribute (collected by HM or SW): a "
                                  f"{query.kind} asks a numeric collection",
                                  f"{query.attribute!r} is not one; this collection's kinds are linear, predicate, "
                                  "marginal, grouped, cut and dense")
        if not isinstance(query, tuple(QUERY_KINDS.values())):
            raise ValidationError(f"queries[{index}]", "a query object", f"got {type(query).__name__}")
        base = query.label if query.label is not None else f"{query.kind}#{index}"
        norm = NORMALIZATIONS.index(query.normalization)
        with query_field(index):
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

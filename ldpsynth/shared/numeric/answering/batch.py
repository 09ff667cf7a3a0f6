"""A batch of numeric queries checked against a numeric collection's schema, and its answers' layout.

:func:`compile_numeric` checks each query of :mod:`ldpsynth.shared.queries.numeric` against the schema (the
attribute is the collection's numeric one, its mechanism answers the kind, ``by`` is a public attribute) and
expands it into answers: one per group (every value of ``by`` in code order, or one for all rows) and, within a
group, one per probability (quantiles) or bin (histogram). Errors name ``queries[j].<field>``; a categorical kind
(linear, marginal, ...) is refused naming ``queries[j].kind``, a variance of an HM attribute at ε ≤ ε* (HM is
Duchi there: its reports say nothing of x²) naming ``epsilon``, as a numeric kind is on a categorical collection
(:func:`~ldpsynth.shared.queries.compiler.compile_queries`). A batch may ask at most
:data:`MAX_BOOTSTRAP_GROUPS` (SW query, group) pairs (refused naming the first query over it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.numeric.collection.mechanism import numeric_mechanism
from ldpsynth.shared.numeric.samplers import HybridMechanism
from ldpsynth.shared.numeric.variance import check_answerable
from ldpsynth.shared.queries.compiler import public_attribute
from ldpsynth.shared.queries.json_form import AnyQuery
from ldpsynth.shared.queries.model import query_field
from ldpsynth.shared.queries.numeric import (
    NUMERIC_KINDS,
    HistogramQuery,
    NumericQuery,
    QuantilesQuery,
    VarianceQuery,
)
from ldpsynth.shared.schema import Schema

__all__ = ["MAX_BOOTSTRAP_GROUPS", "NumericBatch", "compile_numeric", "concat_numeric"]

#: Most (SW query, group) pairs one batch may ask: each is an EMS fit and its bootstrap refits (about 1-2 s of
#: CPU on a 2-core machine at n = 10^4-10^5, docs/numeric.md), so a batch holds a replica's thread for at most
#: a few minutes.
MAX_BOOTSTRAP_GROUPS = 64


def _kinds_of(mechanism: str) -> str:
    return ", ".join(kind for kind, cls in NUMERIC_KINDS.items() if mechanism in cls.mechanisms)


@dataclass(frozen=True, eq=False)
class NumericBatch:
    """Checked numeric queries and their answers' layout: answer ``j`` is query ``queries[origins[j]]``'s, labelled
    ``labels[j]``; ``schema`` is the collection's."""

    schema: Schema
    queries: tuple[NumericQuery, ...]
    origins: np.ndarray
    labels: tuple[str, ...]

    @property
    def fits(self) -> int:
        """The (SW query, group) pairs the batch asks: EMS fits, each with its bootstrap."""
        if self.schema.mechanism != "SW":
            return 0
        return sum(1 if q.by is None else self.schema.attribute(q.by).size for q in self.queries)

    @property
    def size(self) -> int:
        """The number of answers."""
        return len(self.labels)

    def __len__(self) -> int:
        return self.size

    def label(self, j: int) -> str:
        return self.labels[j]


def _check(query: AnyQuery, schema: Schema) -> NumericQuery:
    """``query`` checked against the numeric ``schema`` (module docstring); errors name the query's field."""
    attribute = schema.numeric
    assert attribute is not None
    mechanism = schema.mechanism
    if not isinstance(query, NumericQuery):
        raise ValidationError("kind", f"a numeric collection's kind ({mechanism}: {_kinds_of(mechanism)})",
                              f"{query.kind!r} asks for the categories of mechanism E or a frequency oracle; this "
                              f"collection's reports are {mechanism} numbers")
    if query.attribute != attribute.name:
        raise ValidationError("attribute", f"the collection's numeric attribute {attribute.name!r}",
                              f"got {query.attribute!r}")
    if mechanism not in query.mechanisms:
        raise ValidationError("kind", f"a kind {mechanism} answers: {_kinds_of(mechanism)}",
                              f"a {query.kind} needs an attribute collected by {' or '.join(query.mechanisms)}; "
                              f"{attribute.name!r} is collected by {mechanism}")
    if query.by is not None:
        public_attribute(schema, query.by, "by")
    return query


def _check_variance(query: NumericQuery, schema: Schema, index: int) -> None:
    """An HM variance needs HM's PM share: refused naming ``epsilon`` at ε ≤ ε* (HM is Duchi there)."""
    if isinstance(query, VarianceQuery) and schema.mechanism == "HM":
        sampler = numeric_mechanism(schema.mechanism, schema.epsilon).sampler
        assert isinstance(sampler, HybridMechanism)
        try:
            check_answerable(sampler)
        except ValidationError as exc:
            raise ValidationError(exc.field, exc.legal, f"queries[{index}] asks a variance of "
                                  f"{query.attribute!r}; {exc.problem}") from None


def compile_numeric(queries: Sequence[AnyQuery], schema: Schema, *, first_index: int = 0) -> NumericBatch:
    """Check ``queries`` against the numeric collection's ``schema`` and lay out their answers (module docstring);
    ``first_index`` is the index of ``queries[0]`` in a batch sent in parts (errors and default labels use it)."""
    if schema.numeric is None:
        raise ValidationError("schema", "a numeric collection's schema", "it has no numeric attribute")
    checked: list[NumericQuery] = []
    origins: list[int] = []
    labels: list[str] = []
    fits = 0
    for i, query in enumerate(queries):
        index = first_index + i
        with query_field(index):
            q = _check(query, schema)
        _check_variance(q, schema, index)
        checked.append(q)
        base = q.label if q.label is not None else f"{q.kind}#{index}"
        groups = [""] if q.by is None else \
            [f"{q.by}={v}" for v in schema.attribute(q.by).decode(np.arange(schema.attribute(q.by).size)).tolist()]
        fits += len(groups) if schema.mechanism == "SW" else 0
        if fits > MAX_BOOTSTRAP_GROUPS:
            raise ValidationError(f"queries[{index}]", f"at most {MAX_BOOTSTRAP_GROUPS} (SW query, group) pairs per "
                                  "batch (each is an EMS fit with a bootstrap of it); split the batch",
                                  f"{fits} so far")
        if isinstance(q, QuantilesQuery):
            parts = [f"q={p:g}" for p in q.q]
        elif isinstance(q, HistogramQuery):
            edges = schema.numeric.range.from_unit(np.linspace(-1.0, 1.0, q.bins + 1))
            parts = [f"bin=[{a:g}, {b:g}{']' if j == q.bins - 1 else ')'}"
                     for j, (a, b) in enumerate(zip(edges[:-1], edges[1:]))]
        else:
            parts = [""]
        for group in groups:
            for part in parts:
                inner = ",".join(x for x in (group, part) if x)
                labels.append(f"{base}[{inner}]" if inner else base)
                origins.append(i)
    return NumericBatch(schema, tuple(checked), np.asarray(origins, np.int64), tuple(labels))


def concat_numeric(batches: Sequence[NumericBatch], input_counts: Sequence[int]) -> NumericBatch:
    """One batch of the parts of a batch sent in chunks (``input_counts[k]``: the queries of part k; the origins
    become indices in the whole batch)."""
    if not batches:
        raise ValidationError("queries", "at least one query", "the batch is empty")
    offsets = np.concatenate([[0], np.cumsum(input_counts)[:-1]]).astype(np.int64)
    batch = NumericBatch(batches[0].schema, tuple(q for b in batches for q in b.queries),
                         np.concatenate([b.origins + off for b, off in zip(batches, offsets)]),
                         tuple(label for b in batches for label in b.labels))
    if batch.fits > MAX_BOOTSTRAP_GROUPS:
        raise ValidationError("queries", f"at most {MAX_BOOTSTRAP_GROUPS} (SW query, group) pairs per batch (each "
                              "is an EMS fit with a bootstrap of it); split the batch", f"got {batch.fits}")
    return batch

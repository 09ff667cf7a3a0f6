"""The schema's share of the error: one private attribute made public, or coarser.

The private domain is :math:`D = A_1 \\times \\dots \\times A_m` in mixed radix (first attribute most
significant, :mod:`ldpsynth.shared.schema`), so a weight table over D is an array of shape
``(before, |A_j|, after)`` with ``before`` :math:`= \\prod_{l<j}|A_l|` and ``after``
:math:`= \\prod_{l>j}|A_l|`. A :class:`SchemaChange` rewrites a query's weight tables (and the row
shares of a :class:`~ldpsynth.shared.planning.row_distribution.RowDistribution`) for the changed schema, so the
planner can evaluate the same query under it:

* **public**: :math:`A_j` is sent in clear. A row of group g with :math:`a_j = a` joins group (g, a)
  and keeps the private value (before, after): :math:`W'[(g, a), (b, c)] = W[g, (b, a, c)]`. The row
  function and the answer are unchanged; E now randomizes over :math:`|D|/|A_j|` values.
* **coarser**: the values of :math:`A_j` are merged into cells (a continuous attribute: one bit less,
  i.e. pairs of adjacent buckets; an integer or categorical one: adjacent pairs of codes, or the
  caller's groups). A release over the coarse domain sees only the cell, so it answers the query whose
  weight is the cell average, :math:`W'[g, (b, C, c)] = \\frac{1}{|C|}\\sum_{a \\in C} W[g, (b, a, c)]`;
  the answer moves by the bias :math:`\\sum_i (W'[g_i, \\mathrm{cell}(x_i)] - W[g_i, x_i]) / Z`, which the
  planner reports beside the standard error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.schema import Attribute, BinaryAttribute, ContinuousAttribute, Schema

__all__ = [
    "COARSER",
    "SchemaChange",
    "made_public",
    "made_coarser",
    "schema_changes",
]

PUBLIC, COARSER = "public", "coarser"
#: Cells listed in a description; larger merges are summarised.
_SHOWN_CELLS = 8


@dataclass(frozen=True, eq=False)
class SchemaChange:
    """One private attribute of a schema made public (``cells`` None) or coarser (``cells[a]`` = cell of code a)."""

    attribute: str
    kind: str
    before: int
    size: int
    after: int
    cells: np.ndarray | None
    description: str

    @property
    def cell_count(self) -> int:
        """Values of the attribute after the change (1: it left the private domain)."""
        return 1 if self.cells is None else int(self.cells.max()) + 1

    @property
    def domain_size(self) -> int:
        """|D| after the change."""
        return self.before * self.cell_count * self.after

    def weights(self, w3: np.ndarray) -> np.ndarray:
        """Weight tables ``(Q, G, |D|)`` of the original schema -> those of the changed one."""
        q, groups, _ = w3.shape
        w5 = w3.reshape(q, groups, self.before, self.size, self.after)
        if self.cells is None:
            return w5.transpose(0, 1, 3, 2, 4).reshape(q, groups * self.size, self.before * self.after)
        return self._merge(w5, average=True).reshape(q, groups, self.domain_size)

    def joint(self, shares: np.ndarray) -> np.ndarray:
        """Row shares ``(G, |D|)`` of the original groups -> ``(G', |D'|)`` of the changed schema's groups."""
        return self.weights(shares[None])[0] if self.cells is None else \
            self._merge(shares.reshape(1, len(shares), self.before, self.size, self.after),
                        average=False).reshape(len(shares), self.domain_size)

    def coarse_at_fine(self, coarse: np.ndarray) -> np.ndarray:
        """Coarse weight tables ``(Q, G, |D'|)`` read at every fine value: ``(Q, G, |D|)`` (for the bias)."""
        q, groups, _ = coarse.shape
        c5 = coarse.reshape(q, groups, self.before, self.cell_count, self.after)
        return c5[:, :, :, self.cells, :].reshape(q, groups, self.before * self.size * self.after)

    def _merge(self, w5: np.ndarray, *, average: bool) -> np.ndarray:
        """Sum (or average) axis 3 of ``w5`` over the cells."""
        assert self.cells is not None
        order = np.argsort(self.cells, kind="stable")
        sorted_cells = self.cells[order]
        starts = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]])
        out = np.add.reduceat(w5[:, :, :, order, :], starts, axis=3)
        if average:
            out /= np.diff(np.r_[starts, len(order)])[None, None, None, :, None]
        return out


def _layout(schema: Schema, name: str) -> tuple[Attribute, int, int]:
    """The private attribute ``name`` and the sizes before and after it in D's mixed radix."""
    privates = schema.private_attributes
    names = [a.name for a in privates]
    if name not in names:
        raise ValidationError("attribute", f"a private attribute: one of {names}", f"got {name!r}")
    j = names.index(name)
    return privates[j], math.prod(a.size for a in privates[:j]), math.prod(a.size for a in privates[j + 1:])


def made_public(schema: Schema, name: str) -> SchemaChange:
    """The private attribute ``name`` sent in clear instead."""
    attr, before, after = _layout(schema, name)
    return SchemaChange(name, PUBLIC, before, attr.size, after, None, f"{name} public")


def _describe_cells(attr: Attribute, cells: np.ndarray) -> str:
    count = int(cells.max()) + 1
    if isinstance(attr, ContinuousAttribute) and np.array_equal(cells, np.arange(attr.size) // 2):
        return f"{attr.name} {attr.bits - 1} bits"
    merged = [np.flatnonzero(cells == c) for c in range(count)]
    merged = [m for m in merged if len(m) > 1]
    if len(merged) > _SHOWN_CELLS:
        return f"{attr.name} {attr.size} -> {count} values"
    shown = ",".join("+".join(str(v) for v in attr.decode(m).tolist()) for m in merged)
    return f"{attr.name} {shown}"


def made_coarser(schema: Schema, name: str, groups: Sequence[Sequence[object]] | None = None) -> SchemaChange:
    """The private attribute ``name`` with merged values.

    ``groups`` lists raw values to merge, one list per new value (values not listed stay alone);
    default: a continuous attribute loses one bit (pairs of adjacent buckets), others merge adjacent
    pairs of codes. A binary attribute (two values) cannot become coarser and stay private.
    """
    attr, before, after = _layout(schema, name)
    if groups is None:
        if attr.size < 3:
            raise ValidationError("attribute", "a private attribute with at least 3 values (or give the merged "
                                  "values)", f"{name!r} has {attr.size}")
        cells = np.arange(attr.size) // 2
    else:
        cells = _cells_of_groups(attr, groups)
    return SchemaChange(name, COARSER, before, attr.size, after, cells, _describe_cells(attr, cells))


def _cells_of_groups(attr: Attribute, groups: Sequence[Sequence[object]]) -> np.ndarray:
    """Cell of every code: the listed groups merged, other codes alone; cells numbered by first code."""
    field = f"merge.{attr.name}"
    owner = np.full(attr.size, -1, np.int64)
    for j, values in enumerate(groups):
        try:
            codes = attr.encode(np.asarray(list(values), dtype=object))
        except ValidationError:
            raise ValidationError(f"{field}[{j}]", f"values of {attr.name!r}: {attr.legal_range}",
                                  "illegal value") from None
        if (owner[codes] >= 0).any() or len(np.unique(codes)) != len(codes):
            raise ValidationError(f"{field}[{j}]", "groups of distinct values, each value in one group",
                                  "a value appears twice")
        owner[codes] = j
    if not any(len(g) > 1 for g in groups):
        raise ValidationError(field, "at least one group of two or more values", "nothing merged")
    keys = np.where(owner >= 0, owner, len(groups) + np.arange(attr.size))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    cells = rank[inverse]
    if cells.max() + 1 < 2:
        raise ValidationError(field, "at least two values left after merging", "everything merged into one")
    return cells


def schema_changes(schema: Schema, merges: Mapping[str, Sequence[Sequence[object]]] | None = None
                   ) -> list[SchemaChange]:
    """For every private attribute: made public, and made coarser (``merges[name]`` or the default)
    where it can be (not a binary attribute, and at least 3 values or explicit merges)."""
    merges = dict(merges or {})
    names = [a.name for a in schema.private_attributes]
    for name in merges:
        if name not in names:
            raise ValidationError(f"merge.{name}", f"a private attribute: one of {names}", "unknown attribute")
    changes = []
    for attr in schema.private_attributes:
        changes.append(made_public(schema, attr.name))
        if attr.name in merges:
            changes.append(made_coarser(schema, attr.name, merges[attr.name]))
        elif attr.size >= 3 and not isinstance(attr, BinaryAttribute):
            changes.append(made_coarser(schema, attr.name))
    return changes

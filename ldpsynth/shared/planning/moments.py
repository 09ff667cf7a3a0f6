"""The ε-free sums of a batch of queries over planned rows: everything of the planned error that does not
depend on the mechanism or its ε.

Group g of rows (one row function, the public part of a row; for a dense query the row's position) has the
share :math:`f_g` of the rows and the weight table :math:`W[g, \\cdot]` over D, with
:math:`D_g(v) = (W[g, v] - m_g)^2` (:math:`m_g` its mean over D) and :math:`c_g = \\max_v W[g,v] - \\min_v W[g,v]`.
The variance of WYZ eq. 17's estimator is linear in :math:`\\sum_g f_g\\sum_v D_g(v)` and in
:math:`\\sum_g f_g\\max_v D_g(v)` (worst case over the private values) or
:math:`\\sum_{g,v}\\pi(g,v)D_g(v)` (under a prior :math:`\\pi`); eq. 10's normaliser and eq. 20's bound need
:math:`\\sum_g f_g c_g` and the :math:`a, b, c` of the groups with :math:`c_g > 0`.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.moments``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ldpsynth.shared.planning.row_distribution import RowDistribution
from ldpsynth.shared.planning.schema_changes import COARSER, SchemaChange
from ldpsynth.shared.queries.batch import CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.schema import Schema

__all__ = ["Moments", "moments"]

#: Weights per chunk of queries (2 MiB of float64): the temporaries of one chunk stay in cache.
CHUNK_WEIGHTS = 1 << 18


@dataclass(frozen=True, eq=False)
class Moments:
    """Per query, the ε-free sums of the module docstring per row of the data set (shares f_g, not counts).

    ``spread`` :math:`\\sum_g f_g\\sum_v D_g(v)`; ``worst_high`` / ``worst_low`` :math:`\\sum_g f_g \\max_v`
    / :math:`\\min_v D_g(v)`; ``prior`` :math:`\\sum_{g,v}\\pi(g,v)D_g(v)`; ``width`` :math:`\\sum_g f_g c_g`;
    ``varying``, ``a``, ``b``, ``c``: eq. 20's :math:`n'/n, a, b, c` over the groups with :math:`c_g > 0`;
    ``bias_high``, ``bias_low``, ``bias_prior``: the same sums of a coarser schema's weight change
    :math:`\\beta` (zeros otherwise); ``fixed``: dense queries, whose n is their table's.
    """

    spread: np.ndarray
    worst_high: np.ndarray
    worst_low: np.ndarray
    prior: np.ndarray
    width: np.ndarray
    varying: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    bias_high: np.ndarray
    bias_low: np.ndarray
    bias_prior: np.ndarray
    fixed: np.ndarray

    @classmethod
    def empty(cls, size: int) -> Moments:
        return cls(**{f.name: np.zeros(size) for f in fields(cls) if f.name != "fixed"}, fixed=np.zeros(size, bool))


@dataclass(frozen=True, eq=False)
class _Groups:
    """A block as weight tables over groups of rows and those groups' shares of the rows.

    ``tables(start, stop)`` gives the tables ``(q, G, |D|)`` of queries ``[start, stop)``; ``joint`` the
    shares ``(G, |D|)``. With ``scale`` (cut queries) every query has the one table ``tables(0, 1)`` over
    the rows of its own S x T, whose share is ``scale[j]``. ``fixed``: dense queries (n is their table's).
    """

    size: int
    positions: np.ndarray
    joint: np.ndarray
    tables: Callable[[int, int], np.ndarray]
    scale: np.ndarray | None = None
    fixed: bool = False


def _table_groups(block: TableBlock, rows: RowDistribution) -> _Groups:
    """The listed values of the block's attribute that hold rows, and the other rows when some query's
    ``default`` is not constant (a constant row function adds nothing to any sum)."""
    listed, other = rows.by_group(block)
    present = np.flatnonzero(listed.sum(axis=1) > 0)
    with_default = other.sum() > 0 and bool(np.ptp(block.default, axis=1).any())
    joint = np.concatenate([listed[present], other[None, :]]) if with_default else listed[present]
    every = len(present) == len(listed)

    def tables(start: int, stop: int) -> np.ndarray:
        w = block.weights[start:stop] if every else block.weights[start:stop][:, present]
        return np.concatenate([w, block.default[start:stop, None, :]], axis=1) if with_default else w

    return _Groups(len(block.positions), block.positions, joint, tables)


def _row_groups(block: RowBlock, rows: RowDistribution) -> _Groups:
    """Dense queries: each stored row is its own group (:meth:`RowDistribution.stored_rows`)."""
    count = block.weights.shape[1]
    joint = rows.stored_rows(count)
    return _Groups(len(block.positions), block.positions, joint, lambda start, stop: block.weights[start:stop],
                   fixed=True)


def _cut_groups(block: CutBlock, rows: RowDistribution, schema: Schema) -> _Groups:
    """Cut queries: the edge bit's indicator on the rows of S x T (its D_g is 1/4 at every value, so the
    private shares within S x T do not matter; the overall ones stand in for them)."""
    k = schema.private_domain_size
    edge = (schema.private_digits(np.arange(k))[block.edge] == 1).astype(np.float64)
    return _Groups(len(block.positions), block.positions, rows.private()[None, :],
                   lambda start, stop: edge[None, None, :], scale=rows.cut_share(block))


def _groups(batch: QueryBatch, rows: RowDistribution) -> list[_Groups]:
    out = []
    for block in batch.blocks:
        if isinstance(block, TableBlock):
            out.append(_table_groups(block, rows))
        elif isinstance(block, RowBlock):
            out.append(_row_groups(block, rows))
        else:
            out.append(_cut_groups(block, rows, batch.schema))
    return out


def _fill(out: Moments, where: np.ndarray, w: np.ndarray, joint: np.ndarray, beta: np.ndarray | None,
          fine_joint: np.ndarray, scale: np.ndarray | float) -> None:
    """The sums of the tables ``w`` (q, G, k') over rows with shares ``joint``, times ``scale``; ``beta`` is
    a coarser schema's weight change ``(q, G, k)`` over the original rows' shares ``fine_joint``.

    Value-major copies (k', q, G): every reduction over the values is then a pass of elementwise
    operations over contiguous (q, G) slabs, about ten times faster than reducing the short last axis."""
    f = joint.sum(axis=1)
    d = np.array(w.transpose(2, 0, 1), order="C")  # a copy: d is changed in place below
    low, high = np.minimum.reduce(d, axis=0), np.maximum.reduce(d, axis=0)
    d -= np.add.reduce(d, axis=0) / len(d)
    np.square(d, out=d)
    spread = high - low
    live = (spread > 0) & (f > 0)
    out.spread[where] = scale * (np.add.reduce(d, axis=0) @ f)
    out.worst_high[where] = scale * (np.maximum.reduce(d, axis=0) @ f)
    out.worst_low[where] = scale * (np.minimum.reduce(d, axis=0) @ f)
    out.prior[where] = scale * np.einsum("vqg,vg->q", d, joint.T)
    out.width[where] = scale * (spread @ f)
    out.varying[where] = scale * (live @ f)
    out.a[where] = np.where(live, low, np.inf).min(axis=1, initial=np.inf)
    out.b[where] = np.where(live, high, -np.inf).max(axis=1, initial=-np.inf)
    out.c[where] = np.where(live, spread, np.inf).min(axis=1, initial=np.inf)
    if beta is not None:
        f_fine = fine_joint.sum(axis=1)
        bt = np.ascontiguousarray(beta.transpose(2, 0, 1))
        out.bias_high[where] = scale * (np.maximum.reduce(bt, axis=0) @ f_fine)
        out.bias_low[where] = scale * (np.minimum.reduce(bt, axis=0) @ f_fine)
        out.bias_prior[where] = scale * np.einsum("vqg,vg->q", bt, fine_joint.T)


def moments(batch: QueryBatch, rows: RowDistribution, change: SchemaChange | None = None) -> Moments:
    """The :class:`Moments` of every compiled query of ``batch`` under ``rows`` (of ``change``'s schema if given)."""
    out = Moments.empty(batch.size)
    for groups in _groups(batch, rows):
        joint = groups.joint if change is None else change.joint(groups.joint)
        coarser = change is not None and change.kind == COARSER
        count = 1 if groups.scale is not None else groups.size
        chunk = max(1, CHUNK_WEIGHTS // max(1, groups.joint.size))
        for start in range(0, count, chunk):
            stop = min(start + chunk, count)
            fine = groups.tables(start, stop)
            w = fine if change is None else change.weights(fine)
            beta = change.coarse_at_fine(w) - fine if coarser else None  # type: ignore[union-attr]
            if groups.scale is None:
                _fill(out, groups.positions[start:stop], w, joint, beta, groups.joint, 1.0)
            else:  # one table for every cut query, over its own share of the rows
                _fill(out, groups.positions, w, joint, beta, groups.joint, groups.scale)
        out.fixed[groups.positions] = groups.fixed
    return out

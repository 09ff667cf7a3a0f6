"""Compiled query batches: weight blocks over a schema's private domain :math:`D`, in batch order.

:func:`~ldpsynth.shared.queries.compiler.compile_queries` (from query objects) and
:mod:`ldpsynth.shared.queries.packed` (from weight arrays) build a :class:`QueryBatch`; the
estimators (:mod:`ldpsynth.shared.estimators.engine`) evaluate it block by block. A block stores
each query's normalisation as its code :data:`~ldpsynth.shared.queries.model.RANGE`,
:data:`~ldpsynth.shared.queries.model.SUM` or :data:`~ldpsynth.shared.queries.model.MEAN`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.schema import Schema

__all__ = ["TableBlock", "RowBlock", "CutBlock", "Block", "QueryBatch", "concat_batches"]


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
    normalization: np.ndarray  # (Q,) int8: RANGE, SUM or MEAN
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


Block = TableBlock | RowBlock | CutBlock


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


# ----- a batch received in parts -------------------------------------------------------------
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
    origins: list[np.ndarray] = []
    labels: list[str] = []
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

"""Compact pair counts of a graph collection in one shard: the data side of cut queries.

A graph collection stores one row per vertex pair ``(i, j)`` (two public attributes over vertex
domains) with a private edge bit (WYZ §VI-B). A cut query (WYZ eq. 33) needs, per query, the
number of stored rows with :math:`(i, j) \\in S \\times T` and how many of them carry a
perturbed edge bit 1:

.. math::  m = \\mathbf 1_S^\\top M\\, \\mathbf 1_T, \\qquad y_1 = \\mathbf 1_S^\\top Y\\, \\mathbf 1_T,

with :math:`M[i, j]` the rows of pair ``(i, j)`` and :math:`Y[i, j]` those whose edge bit is 1.
:class:`PairCounts` keeps :math:`M` and :math:`Y` side by side as one ``(V_s, 2 V_t)`` matrix of
the smallest unsigned integer type that holds them (``uint8`` for a release with one row per
pair: 33 MB for the 4,039-vertex Facebook graph), and answers a batch of cut queries with one
matrix product, streamed over row blocks converted to float32 (exact while every partial sum
stays below :math:`2^{24}`, else float64). Totals of disjoint row sets add up, so shards answer
for their rows and the server sums.
"""

from __future__ import annotations

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import Schema

#: Rows of the pair matrix converted to floating point at a time.
ROW_BLOCK = 512
_FLOAT32_EXACT = 1 << 24


class PairCounts:
    """:math:`[M \\mid Y]` of one shard's rows of a graph collection (see the module docstring)."""

    def __init__(self, matrix: np.ndarray, targets: int):
        self.matrix = matrix
        self.targets = targets

    @classmethod
    def build(cls, schema: Schema, stats: SufficientStatistics, source: str, target: str, edge: str) -> PairCounts:
        """Count the rows of ``stats`` per (source, target) pair, and those with ``edge`` = 1."""
        vs, vt = schema.attribute(source).size, schema.attribute(target).size
        digits = schema.public_digits(stats.keys)
        edge_on = schema.private_digits(np.arange(stats.domain_size))[edge] == 1
        cell = digits[source] * vt + digits[target]
        rows = np.bincount(cell, weights=stats.counts, minlength=vs * vt)
        ones = np.bincount(cell, weights=stats.counts * edge_on[stats.codes], minlength=vs * vt)
        largest = int(rows.max(initial=0))
        dtype = np.min_scalar_type(largest) if largest > 0 else np.dtype(np.uint8)
        matrix = np.empty((vs, 2 * vt), dtype)
        matrix[:, :vt] = rows.reshape(vs, vt)
        matrix[:, vt:] = ones.reshape(vs, vt)
        return cls(matrix, vt)

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes)

    def totals(self, sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(m, y1)`` per query for vertex masks ``sources`` ``(Q, V_s)`` and ``targets`` ``(Q, V_t)``."""
        vs, vt = self.matrix.shape[0], self.targets
        if sources.ndim != 2 or sources.shape[1] != vs or targets.shape != (len(sources), vt):
            raise ValidationError("sources/targets", f"masks of shape (Q, {vs}) and (Q, {vt})",
                                  f"got {sources.shape} and {targets.shape}")
        largest = int(self.matrix.max(initial=0))
        dtype = np.float32 if vs * largest < _FLOAT32_EXACT else np.float64
        s: np.ndarray = sources.astype(dtype)
        product = np.zeros((len(sources), 2 * vt), np.float64 if dtype == np.float64 else np.float32)
        for start in range(0, vs, ROW_BLOCK):
            block: np.ndarray = self.matrix[start:start + ROW_BLOCK].astype(dtype)
            product += s[:, start:start + ROW_BLOCK] @ block
        t = targets.astype(np.float64)
        product = product.astype(np.float64)
        return np.einsum("qv,qv->q", product[:, :vt], t), np.einsum("qv,qv->q", product[:, vt:], t)

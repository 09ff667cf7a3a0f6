"""Pair totals of cut queries: one implementation for the shards and the estimators.

A graph collection stores one row per vertex pair ``(i, j)`` (two public attributes over vertex
domains) with a private edge bit (WYZ §VI-B). A cut query (WYZ eq. 33) over vertex sets
:math:`S, T` needs sums over the pairs of :math:`S \\times T` of per-pair values: for E the rows
:math:`M[i, j]` and those whose perturbed edge bit is 1, :math:`Y[i, j]`,

.. math::  m = \\mathbf 1_S^\\top M\\, \\mathbf 1_T, \\qquad y_1 = \\mathbf 1_S^\\top Y\\, \\mathbf 1_T,

for a frequency oracle the per-pair estimates and variances
(:func:`~ldpsynth.shared.estimators.engine.cut_oracle_sums`).
:class:`PairTotals` keeps the value columns of every pair. With at most :data:`DENSE_PAIRS` vertex
pairs they are one ``(V_s, C V_t)`` matrix (integer values in the smallest unsigned type that
holds them: 33 MB for E on the 4,039-vertex Facebook graph), and a batch of queries is one matrix
product streamed over row blocks (float32 while every partial sum stays below :math:`2^{24}`, so
exact; float64 otherwise) and a row-wise dot with the target masks. Above it they stay a list of
pairs and the masks are gathered per pair, chunk by chunk. Totals over disjoint row sets add up, so
shards answer for their rows and the server sums.
"""

from __future__ import annotations

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import Schema

__all__ = ["DENSE_PAIRS", "PairTotals", "edge_pair_totals"]

#: Largest number of vertex pairs V_s V_t kept as a dense matrix.
DENSE_PAIRS = 1 << 24
#: Rows of the dense matrix converted to floating point at a time.
ROW_BLOCK = 512
#: Mask entries gathered at a time on the pair-list path.
_CHUNK_ENTRIES = 1 << 22
_FLOAT32_EXACT = 1 << 24


class PairTotals:
    """The value columns ``values`` ``(P, C)`` of pairs ``(src[p], dst[p])`` over vertex domains of sizes
    ``sources`` and ``targets``, ready to total cut queries (see the module docstring)."""

    def __init__(self, sources: int, targets: int, src: np.ndarray, dst: np.ndarray, values: np.ndarray):
        self.sources, self.targets, self.columns = sources, targets, values.shape[1]
        self.matrix: np.ndarray | None = None
        self._pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._exact32 = False
        if sources * targets > DENSE_PAIRS:
            self._pairs = (src, dst, values.astype(np.float64))
            return
        flat = src * targets + dst
        matrix = np.concatenate([np.bincount(flat, weights=values[:, c], minlength=sources * targets)
                                 .reshape(sources, targets) for c in range(self.columns)], axis=1)
        if np.issubdtype(values.dtype, np.integer) and (values.size == 0 or values.min() >= 0):
            largest = int(matrix.max(initial=0))
            matrix = matrix.astype(np.min_scalar_type(largest) if largest > 0 else np.dtype(np.uint8))
            # Counts: a float32 product is exact while every partial sum (at most V_s times the largest) < 2^24.
            self._exact32 = sources * largest < _FLOAT32_EXACT
        self.matrix = matrix

    def totals(self, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``(Q, C)``: per query, the sums of every value column over the pairs in ``sources x targets``
        (boolean masks ``(Q, V_s)`` and ``(Q, V_t)``)."""
        if sources.ndim != 2 or sources.shape[1] != self.sources or targets.shape != (len(sources), self.targets):
            raise ValidationError("sources/targets", f"masks of shape (Q, {self.sources}) and (Q, {self.targets})",
                                  f"got {sources.shape} and {targets.shape}")
        if self.matrix is None:
            return self._pair_list_totals(sources, targets)
        dtype = np.float32 if self._exact32 else np.float64
        s = sources.astype(dtype)
        product = np.zeros((len(sources), self.matrix.shape[1]), dtype)
        for start in range(0, self.sources, ROW_BLOCK):
            product += s[:, start:start + ROW_BLOCK] @ self.matrix[start:start + ROW_BLOCK].astype(dtype)
        t = targets.astype(np.float64)
        columns = product.astype(np.float64).reshape(len(sources), self.columns, self.targets)
        return np.einsum("qcv,qv->qc", columns, t)

    def _pair_list_totals(self, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
        assert self._pairs is not None
        src, dst, values = self._pairs
        out = np.empty((len(sources), self.columns))
        chunk = max(1, _CHUNK_ENTRIES // max(1, len(src)))
        for s in range(0, len(sources), chunk):
            inside = sources[s:s + chunk][:, src] & targets[s:s + chunk][:, dst]
            out[s:s + chunk] = inside @ values
        return out


def edge_pair_totals(schema: Schema, stats: SufficientStatistics, source: str, target: str, edge: str) -> PairTotals:
    """E's pair totals: per pair the rows :math:`M` and those whose perturbed ``edge`` bit is 1, :math:`Y`."""
    digits = schema.public_digits(stats.present_keys)
    edge_on = schema.private_digits(np.arange(stats.domain_size))[edge] == 1
    values = np.stack([stats.group_sizes, stats.table[:, edge_on].sum(axis=1)], axis=1).astype(np.int64)
    return PairTotals(schema.attribute(source).size, schema.attribute(target).size, digits[source], digits[target],
                      values)

"""Sufficient statistics of the synthetic database: counts per (public key, private code).

Every statistical query of the design (seed 000 eq. 17, :math:`\\varphi_i(v) = W[key(i), v]`)
is a function of the counts

.. math::  c_{k, v} = \\#\\{ i : key_i = k,\\; Y_i = v \\}, \\qquad n = \\sum_{k, v} c_{k, v},

so the query API answers batches of queries as matrix products over these counts, never as
loops over rows. A shard keeps its counts in memory (:class:`StatsAccumulator`), updated after
each durable commit and rebuilt from disk when the shard opens; :meth:`SufficientStats.merge`
sums shards. The exchanged form is sparse (COO: only non-zero cells), which stays compact when
the public domain is large (e.g. one public key per vertex pair of a graph); :meth:`dense`
materialises the ``(public_domain_size, private_domain_size)`` matrix when it is small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.statistics import SufficientStatistics

#: A shard keeps a dense count matrix when it has at most this many cells, else sparse runs.
DENSE_MAX_CELLS = 1 << 20
#: Committed reports a sparse accumulator keeps unsorted (16 bytes each) before it compacts on its own;
#: reads (:meth:`StatsAccumulator.snapshot`) compact at once. Large enough that ingest rarely sorts.
PENDING_ROWS = 1 << 22
#: Largest matrix :meth:`SufficientStats.dense` builds unless told otherwise (512 MiB of int64).
DEFAULT_MAX_DENSE_CELLS = 1 << 26


def aggregate_cells(keys: np.ndarray, codes: np.ndarray,
                    counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum ``counts`` per distinct (key, code); return the cells sorted by (key, code).

    Sorted as one int64 cell index ``key * (max code + 1) + code`` (a single quicksort, about 2x
    a two-key lexsort) when it fits in 62 bits, else by lexsort.
    """
    if keys.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty.copy(), empty.copy()
    width = int(codes.max()) + 1
    if int(keys.max()) < (1 << 62) // width:
        order = np.argsort(keys.astype(np.int64) * width + codes)
    else:
        order = np.lexsort((codes, keys))
    k, c, w = keys[order], codes[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], (k[1:] != k[:-1]) | (c[1:] != c[:-1]))))
    return k[starts], c[starts], np.add.reduceat(w, starts)


@dataclass(frozen=True)
class SufficientStats:
    """Counts of stored reports per cell, sparse (COO).

    Attributes
    ----------
    public_domain_size, private_domain_size:
        The collection's number of public keys and :math:`|D|`.
    keys, codes, counts:
        int64 arrays of equal length: the non-zero cells sorted by (key, code) and their counts.
    """

    public_domain_size: int
    private_domain_size: int
    keys: np.ndarray
    codes: np.ndarray
    counts: np.ndarray

    @property
    def n(self) -> int:
        """Number of stored reports."""
        return int(self.counts.sum())

    def dense(self, max_cells: int = DEFAULT_MAX_DENSE_CELLS) -> np.ndarray:
        """The ``(public_domain_size, private_domain_size)`` count matrix (int64)."""
        cells = self.public_domain_size * self.private_domain_size
        if cells > max_cells:
            raise ValidationError("public_domain_size x private_domain_size", f"at most {max_cells} cells for a dense "
                                  "matrix (use the sparse keys/codes/counts)", f"got {cells}")
        out = np.zeros((self.public_domain_size, self.private_domain_size), np.int64)
        out[self.keys, self.codes] = self.counts
        return out

    @classmethod
    def empty(cls, public_domain_size: int, private_domain_size: int) -> "SufficientStats":
        zero = np.zeros(0, np.int64)
        return cls(public_domain_size, private_domain_size, zero, zero.copy(), zero.copy())

    @classmethod
    def merge(cls, parts: Sequence["SufficientStats"]) -> "SufficientStats":
        """Sum the statistics of several shards of one collection."""
        if not parts:
            raise ValidationError("parts", "at least one SufficientStats", "empty")
        shape = {(p.public_domain_size, p.private_domain_size) for p in parts}
        if len(shape) != 1:
            raise ValidationError("parts", "statistics of one collection (same domain sizes)", "mixed domains")
        keys, codes, counts = aggregate_cells(np.concatenate([p.keys for p in parts]),
                                              np.concatenate([p.codes for p in parts]),
                                              np.concatenate([p.counts for p in parts]))
        return cls(parts[0].public_domain_size, parts[0].private_domain_size, keys, codes, counts)

    def to_statistics(self) -> SufficientStatistics:
        """The same counts as the estimators' compact table (one row per key that occurs)."""
        present, row = np.unique(self.keys, return_inverse=True)
        table = np.zeros((len(present), self.private_domain_size), np.int64)
        table[row, self.codes] = self.counts  # cells are distinct (key, code) pairs
        return SufficientStatistics(present.astype(np.int64), table, self.public_domain_size)


class StatsAccumulator:
    """In-memory counts of one collection in one shard, updated with each commit.

    Dense (a flat count vector over all cells) when the collection has at most
    :data:`DENSE_MAX_CELLS` cells; otherwise the newly committed cells are appended to a pending
    list and compacted into the sorted sparse form when read, or when the pending rows outgrow
    both the compacted ones and :data:`PENDING_ROWS` (amortised :math:`O(\\log n)` per row; a
    commit itself only appends).
    """

    def __init__(self, public_domain_size: int, private_domain_size: int):
        self._p = int(public_domain_size)
        self._d = int(private_domain_size)
        self._dense: np.ndarray | None = None
        if self._p * self._d <= DENSE_MAX_CELLS:
            self._dense = np.zeros(self._p * self._d, np.int64)
        self._compact = SufficientStats.empty(self._p, self._d)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    @classmethod
    def restore(cls, stats: SufficientStats) -> "StatsAccumulator":
        """An accumulator holding the counts ``stats`` (e.g. read from a snapshot)."""
        accumulator = cls(stats.public_domain_size, stats.private_domain_size)
        if accumulator._dense is not None:
            accumulator._dense[stats.keys * accumulator._d + stats.codes] = stats.counts
        else:
            accumulator._compact = stats
        return accumulator

    def add(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """Count one committed report per (keys[i], codes[i])."""
        if keys.size == 0:
            return
        if self._dense is not None:
            cells, counts = np.unique(keys.astype(np.int64) * self._d + codes, return_counts=True)
            self._dense[cells] += counts
            return
        self._pending.append((keys.astype(np.int64, copy=True), codes.astype(np.int64, copy=True)))
        self._pending_rows += keys.size
        if self._pending_rows > max(self._compact.keys.size, PENDING_ROWS):
            self._compaction()

    def _compaction(self) -> None:
        keys = np.concatenate([self._compact.keys] + [k for k, _ in self._pending])
        codes = np.concatenate([self._compact.codes] + [c for _, c in self._pending])
        counts = np.concatenate([self._compact.counts, np.ones(self._pending_rows, np.int64)])
        self._compact = SufficientStats(self._p, self._d, *aggregate_cells(keys, codes, counts))
        self._pending = []
        self._pending_rows = 0

    def snapshot(self) -> SufficientStats:
        """The current counts (unaffected by later commits)."""
        if self._dense is not None:
            cells = np.flatnonzero(self._dense)
            return SufficientStats(self._p, self._d, cells // self._d, cells % self._d, self._dense[cells])
        if self._pending:
            self._compaction()
        return self._compact

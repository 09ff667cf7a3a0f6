"""Sufficient statistics of a synthetic database: counts of rows per (public key, private value).

Every statistical query whose row function depends on a row only through its public key and its
private value, :math:`\\varphi_i(v) = W[\\mathrm{key}(i), v]`, is a function of the counts

.. math::  N[g, v] = |\\{ i : \\mathrm{key}(i) = g,\\ Y_i = v \\}|, \\qquad n_g = \\sum_v N[g, v],

so a batch of queries is a batch of contractions of weight tables with :math:`N` (WYZ
eq. 17 only needs :math:`\\sum_i \\varphi_i(Y_i) = \\sum_{g,v} W[g, v] N[g, v]`), never a loop
over rows.

One class, :class:`SufficientStatistics`, serves the aggregator (shards exchange, snapshot and
merge it; a shard's running counts are :class:`~ldpsynth.aggregator.storage.stats.StatsAccumulator`)
and the offline path (``ldpsynth estimate`` on an export, the planner, the simulation). It holds
the non-zero cells sparse (COO: ``keys``, ``codes``, ``counts`` sorted by (key, code)), which
stays compact when the public domain is large (e.g. one public key per vertex pair of a graph):
a public domain of :math:`10^{10}` keys with :math:`10^6` rows costs :math:`10^6` cells at most.
The estimators read the same counts as a compact table, :attr:`~SufficientStatistics.table`:
one row per public key that occurs (:attr:`~SufficientStatistics.present_keys`, ascending),
built once per object. Counting rows is one ``np.bincount`` (plus one ``np.unique`` when the
dense table ``public_domain_size * |D|`` would be too large); merging shards is one sort.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_codes, check_int

__all__ = [
    "aggregate_cells",
    "SufficientStatistics",
]

#: Largest dense ``public_domain_size * |D|`` table built directly by ``np.bincount``.
DENSE_CELLS = 1 << 24
#: Largest matrix :meth:`SufficientStatistics.dense` builds unless told otherwise (512 MiB of int64).
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


def _histogram(codes: npt.ArrayLike, size: int) -> np.ndarray:
    """``np.bincount`` of 1-d integer codes in ``[0, size)``, validated by the count itself (a
    negative code makes bincount fail, a code >= size lengthens its result): no extra passes."""
    arr = np.asarray(codes)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.dtype == np.uint64:
        arr = check_codes(arr, "codes", size, ndim=1)  # raises naming the problem, else int64 (empty: any dtype)
    try:
        counts = np.bincount(arr, minlength=size)
    except ValueError:  # a negative code
        counts = np.zeros(0, np.int64)
    if len(counts) != size:
        check_codes(arr, "codes", size)  # raises naming the first code out of range
    return counts


@dataclass(frozen=True, eq=False)
class SufficientStatistics:
    """Counts of rows per (public key, private code), sparse.

    Attributes
    ----------
    public_domain_size:
        Number of possible public keys (1 when the schema has no public attribute).
    domain_size:
        :math:`|D|`, the number of private codes.
    keys, codes, counts:
        int64 arrays of equal length: the non-zero cells, sorted by (key, code), and their counts.
    """

    public_domain_size: int
    domain_size: int
    keys: np.ndarray
    codes: np.ndarray
    counts: np.ndarray

    # ----- the estimators' view: a compact table --------------------------------------------
    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        present, row = np.unique(self.keys, return_inverse=True)
        table = np.zeros((len(present), self.domain_size), np.int64)
        table[row, self.codes] = self.counts  # cells are distinct (key, code) pairs
        return present.astype(np.int64, copy=False), table

    @property
    def present_keys(self) -> np.ndarray:
        """``(G,)`` int64: the public keys that occur, ascending (the rows of :attr:`table`)."""
        return self._table[0]

    @property
    def table(self) -> np.ndarray:
        """``(G, |D|)`` int64: ``table[g, v]`` rows with public key ``present_keys[g]`` and code ``v``;
        every row has a positive sum."""
        return self._table[1]

    @property
    def group_sizes(self) -> np.ndarray:
        """:math:`n_g`, the number of rows per present public key (int64, aligned with :attr:`present_keys`)."""
        return self.table.sum(axis=1)

    def histogram(self) -> np.ndarray:
        """Counts per private value over all rows, ``(|D|,)`` int64."""
        return self.table.sum(axis=0)

    def restricted(self, kept: np.ndarray) -> SufficientStatistics:
        """The statistics of the rows whose public key is kept (``kept``: a mask over :attr:`present_keys`)."""
        if kept.all():
            return self
        return self._of_table(self.present_keys[kept], self.table[kept], self.public_domain_size)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.counts.sum())

    def dense(self, max_cells: int = DEFAULT_MAX_DENSE_CELLS) -> np.ndarray:
        """The ``(public_domain_size, |D|)`` count matrix (int64)."""
        cells = self.public_domain_size * self.domain_size
        if cells > max_cells:
            raise ValidationError("public_domain_size x private_domain_size", f"at most {max_cells} cells for a dense "
                                  "matrix (use the sparse keys/codes/counts)", f"got {cells}")
        out = np.zeros((self.public_domain_size, self.domain_size), np.int64)
        out[self.keys, self.codes] = self.counts
        return out

    # ----- construction ---------------------------------------------------------------------
    @classmethod
    def empty(cls, public_domain_size: int, domain_size: int) -> SufficientStatistics:
        """No rows."""
        zero = np.zeros(0, np.int64)
        return cls(public_domain_size, domain_size, zero, zero.copy(), zero.copy())

    @classmethod
    def merge(cls, parts: Sequence[SufficientStatistics]) -> SufficientStatistics:
        """The statistics of the union of disjoint sets of rows (e.g. the shards of one collection)."""
        if not parts:
            raise ValidationError("parts", "at least one SufficientStatistics", "empty")
        shape = {(p.public_domain_size, p.domain_size) for p in parts}
        if len(shape) != 1:
            raise ValidationError("parts", "statistics of one collection (same domain sizes)",
                                  f"got (public keys, |D|) = {sorted(shape)}")
        keys, codes, counts = aggregate_cells(np.concatenate([p.keys for p in parts]),
                                              np.concatenate([p.codes for p in parts]),
                                              np.concatenate([p.counts for p in parts]))
        return cls(parts[0].public_domain_size, parts[0].domain_size, keys, codes, counts)

    @classmethod
    def _of_table(cls, present_keys: np.ndarray, table: np.ndarray, public_domain_size: int) -> SufficientStatistics:
        """From a compact table already known to be sound (sorted distinct keys, positive int64 rows)."""
        rows, codes = np.nonzero(table)
        stats = cls(public_domain_size, int(table.shape[1]), present_keys[rows], codes.astype(np.int64, copy=False),
                    table[rows, codes])
        stats.__dict__["_table"] = (present_keys, table)  # the cached_property, filled: no second pass
        return stats

    @classmethod
    def from_table(cls, present_keys: npt.ArrayLike, table: npt.ArrayLike,
                   public_domain_size: int) -> SufficientStatistics:
        """From the estimators' compact form: ``table[g, v]`` rows with key ``present_keys[g]`` and code ``v``.

        ``present_keys`` strictly increasing in ``[0, public_domain_size)``; ``table`` non-negative
        integer counts, one row per key, each row with a positive sum.
        """
        size = check_int(public_domain_size, "public_domain_size", 1)
        keys = check_codes(present_keys, "present_keys", size, ndim=1)
        counts = np.asarray(table)
        if counts.ndim != 2 or counts.shape[0] != len(keys) or counts.shape[1] < 2 or counts.dtype.kind not in "iu":
            raise ValidationError("table", f"integer counts of shape ({len(keys)}, |D| >= 2), one row per key",
                                  f"got shape {counts.shape} and dtype {counts.dtype}")
        if (np.diff(keys) <= 0).any():
            raise ValidationError("present_keys", "strictly increasing keys", "not sorted or repeated")
        counts = counts.astype(np.int64, copy=False)
        if (counts < 0).any() or (counts.sum(axis=1) == 0).any():
            raise ValidationError("table", "non-negative counts with a positive sum in every row",
                                  "a negative count or an empty row")
        return cls._of_table(keys, counts, size)

    @classmethod
    def from_rows(cls, public_keys: npt.ArrayLike | None, codes: npt.ArrayLike, *, domain_size: int,
                  public_domain_size: int = 1) -> SufficientStatistics:
        """Count rows given their public keys (``None``: no public attribute) and private codes.

        Vectorised: one ``np.bincount`` over ``key * |D| + code`` when the dense table has at
        most :data:`DENSE_CELLS` cells, else ``np.unique`` over the keys first (compact form).
        """
        k = check_int(domain_size, "domain_size", 2)
        size = check_int(public_domain_size, "public_domain_size", 1)
        if public_keys is None and size == 1:  # one histogram: validated by the count itself
            counts = _histogram(codes, k)
            present = np.zeros(1 if counts.any() else 0, np.int64)
            return cls._of_table(present, counts[None, :].astype(np.int64, copy=False)[: len(present)], size)
        y = check_codes(codes, "codes", k, ndim=1)
        if public_keys is None:
            raise ValidationError("public_keys", f"one key per row in [0, {size - 1}]", "missing")
        keys = check_codes(public_keys, "public_keys", size, ndim=1)
        if len(keys) != len(y):
            raise ValidationError("public_keys", f"one key per row ({len(y)} rows)", f"got {len(keys)}")
        if size * k <= DENSE_CELLS:
            table = np.bincount(keys * k + y, minlength=size * k).reshape(size, k)
            present = np.flatnonzero(table.any(axis=1))
            counts = table[present]
        else:
            present, inverse = np.unique(keys, return_inverse=True)
            counts = np.bincount(inverse * k + y, minlength=len(present) * k).reshape(len(present), k)
        return cls._of_table(present.astype(np.int64), counts.astype(np.int64, copy=False), size)

    @classmethod
    def from_schema(cls, schema: Schema, public_keys: npt.ArrayLike | None, codes: npt.ArrayLike
                    ) -> SufficientStatistics:
        """:meth:`from_rows` with the domain sizes of ``schema``."""
        return cls.from_rows(public_keys, codes, domain_size=schema.private_domain_size,
                             public_domain_size=schema.public_domain_size)

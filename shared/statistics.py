"""Sufficient statistics of a synthetic database: counts of rows per (public key, private value).

Every statistical query whose row function depends on a row only through its public key and its
private value, :math:`\\varphi_i(v) = W[\\mathrm{key}(i), v]`, is a function of the table

.. math::  N[g, v] = |\\{ i : \\mathrm{key}(i) = g,\\ Y_i = v \\}|, \\qquad n_g = \\sum_v N[g, v],

so a batch of queries is a batch of contractions of weight tables with :math:`N` (seed 000
eq. 17 only needs :math:`\\sum_i \\varphi_i(Y_i) = \\sum_{g,v} W[g, v] N[g, v]`). The table is
kept *compact*: only public keys that occur are stored (``keys`` sorted ascending), so a public
domain of :math:`10^{10}` keys with :math:`10^6` rows costs :math:`10^6 \\cdot |D|` counts at
most. Building it is one ``np.bincount`` (plus one ``np.unique`` when the dense table
``public_domain_size * |D|`` would be too large); merging shards is a sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .errors import ValidationError
from .schema import Schema
from .validation import check_int

#: Largest dense ``public_domain_size * |D|`` table built directly by ``np.bincount``.
DENSE_CELLS = 1 << 24


def _row_array(values: npt.ArrayLike, name: str, size: int) -> np.ndarray:
    """``values`` as a 1-d int64 array of codes in ``[0, size)``; raise naming the first bad row."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValidationError(name, "a 1-d array of integer codes", f"got {arr.ndim} dimensions")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValidationError(name, f"integer codes in [0, {size - 1}]", "not integers")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        _out_of_range(arr, name, size)
    return arr


def _out_of_range(arr: np.ndarray, name: str, size: int) -> None:
    bad = (arr < 0) | (arr >= size)
    raise ValidationError(name, f"integer codes in [0, {size - 1}]", "out of range", int(np.flatnonzero(bad)[0]))


def _histogram(codes: npt.ArrayLike, size: int) -> np.ndarray:
    """``np.bincount`` of 1-d integer codes in ``[0, size)``, validated by the count itself (a
    negative code makes bincount fail, a code >= size lengthens its result): no extra passes."""
    arr = np.asarray(codes)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        _row_array(arr, "codes", size)  # raises naming the problem
    try:
        counts = np.bincount(arr, minlength=size)
    except ValueError:
        _out_of_range(arr.astype(np.int64), "codes", size)
    if len(counts) != size:
        _out_of_range(arr.astype(np.int64), "codes", size)
    return counts


@dataclass(frozen=True, eq=False)
class SufficientStatistics:
    """Counts ``counts[g, v]`` of rows with public key ``keys[g]`` and private code ``v``.

    Attributes
    ----------
    keys:
        ``(G,)`` int64, the public keys that occur, sorted ascending.
    counts:
        ``(G, |D|)`` int64 counts; every row of it has a positive sum.
    public_domain_size:
        Number of possible public keys (1 when the schema has no public attribute).
    """

    keys: np.ndarray
    counts: np.ndarray
    public_domain_size: int

    @property
    def domain_size(self) -> int:
        """:math:`|D|`."""
        return int(self.counts.shape[1])

    @property
    def group_sizes(self) -> np.ndarray:
        """:math:`n_g`, the number of rows per stored public key (int64)."""
        return self.counts.sum(axis=1)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.counts.sum())

    def histogram(self) -> np.ndarray:
        """Counts per private value over all rows, ``(|D|,)`` int64."""
        return self.counts.sum(axis=0)

    @classmethod
    def from_rows(cls, public_keys: npt.ArrayLike | None, codes: npt.ArrayLike, *, domain_size: int,
                  public_domain_size: int = 1) -> "SufficientStatistics":
        """Count rows given their public keys (``None``: no public attribute) and private codes.

        Vectorised: one ``np.bincount`` over ``key * |D| + code`` when the dense table has at
        most :data:`DENSE_CELLS` cells, else ``np.unique`` over the keys first (compact form).
        """
        k = check_int(domain_size, "domain_size", 2)
        size = check_int(public_domain_size, "public_domain_size", 1)
        if public_keys is None and size == 1:  # one histogram: validated by the count itself
            counts = _histogram(codes, k)
            present = np.zeros(1 if counts.any() else 0, np.int64)
            return cls(present, counts[None, :].astype(np.int64, copy=False)[: len(present)], size)
        y = _row_array(codes, "codes", k)
        if public_keys is None:
            if size != 1:
                raise ValidationError("public_keys", f"one key per row in [0, {size - 1}]", "missing")
            keys = np.zeros(len(y), np.int64)
        else:
            keys = _row_array(public_keys, "public_keys", size)
            if len(keys) != len(y):
                raise ValidationError("public_keys", f"one key per row ({len(y)} rows)", f"got {len(keys)}")
        if size == 1:
            counts = np.bincount(y, minlength=k)[None, :]
            present = np.zeros(1, np.int64)
        elif size * k <= DENSE_CELLS:
            table = np.bincount(keys * k + y, minlength=size * k).reshape(size, k)
            present = np.flatnonzero(table.any(axis=1))
            counts = table[present]
        else:
            present, inverse = np.unique(keys, return_inverse=True)
            counts = np.bincount(inverse * k + y, minlength=len(present) * k).reshape(len(present), k)
        if len(y) == 0:
            present, counts = present[:0], counts[:0]
        return cls(present.astype(np.int64), counts.astype(np.int64, copy=False), size)

    @classmethod
    def from_schema(cls, schema: Schema, public_keys: npt.ArrayLike | None, codes: npt.ArrayLike
                    ) -> "SufficientStatistics":
        """:meth:`from_rows` with the domain sizes of ``schema``."""
        return cls.from_rows(public_keys, codes, domain_size=schema.private_domain_size,
                             public_domain_size=schema.public_domain_size)

    def merge(self, other: "SufficientStatistics") -> "SufficientStatistics":
        """The statistics of the union of two disjoint sets of rows (e.g. two shards)."""
        if (other.domain_size, other.public_domain_size) != (self.domain_size, self.public_domain_size):
            raise ValidationError("statistics", f"|D| = {self.domain_size} and {self.public_domain_size} public keys",
                                  f"got |D| = {other.domain_size} and {other.public_domain_size} public keys")
        keys, inverse = np.unique(np.concatenate([self.keys, other.keys]), return_inverse=True)
        counts = np.zeros((len(keys), self.domain_size), np.int64)
        np.add.at(counts, inverse, np.concatenate([self.counts, other.counts]))
        return SufficientStatistics(keys, counts, self.public_domain_size)

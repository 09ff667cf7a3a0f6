"""Sufficient statistics of a frequency oracle's reports: per public key, the reports and their tally.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.estimators.tallies``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.validation import check_codes, check_int

__all__ = [
    "KeyedTallies",
    "count_estimates",
]


def count_estimates(oracle: FrequencyOracle, tallies: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:math:`\\hat c_g(v) = (S_g(v) - n_g q^*)/(p^* - q^*)` (WBLJ17 §3) of every group: ``(G, k)`` float64
    from the tallies ``(G, tally_size)`` of groups of ``sizes`` ``(G,)`` reports."""
    sizes = np.asarray(sizes, dtype=np.int64)
    support = oracle._support(np.asarray(tallies, dtype=np.int64), sizes[:, None])
    return oracle.protocol.count_estimates(support, sizes[:, None].astype(np.float64))


@dataclass(frozen=True, eq=False)
class KeyedTallies:
    """A frequency oracle's reports summarised per public key (module docstring).

    Attributes
    ----------
    oracle:
        The collection's oracle (its card's mechanism).
    public_domain_size:
        Number of possible public keys (1 when the schema has no public attribute).
    present_keys:
        ``(G,)`` int64: the public keys that occur, ascending.
    group_sizes:
        ``(G,)`` int64: :math:`n_g`, the reports of each present key (all positive).
    table:
        ``(G, tally_size)`` int64: the tally of each present key's reports (they add across shards).
    """

    oracle: FrequencyOracle
    public_domain_size: int
    present_keys: np.ndarray
    group_sizes: np.ndarray
    table: np.ndarray

    @property
    def domain_size(self) -> int:
        """:math:`|D|`."""
        return self.oracle.domain_size

    @property
    def n(self) -> int:
        """Number of reports."""
        return int(self.group_sizes.sum())

    def count_estimates(self) -> np.ndarray:
        """:func:`count_estimates` of every present key, ``(G, k)``."""
        return count_estimates(self.oracle, self.table, self.group_sizes)

    def restricted(self, kept: np.ndarray) -> KeyedTallies:
        """The tallies of the reports whose public key is kept (``kept``: a mask over :attr:`present_keys`)."""
        if kept.all():
            return self
        return KeyedTallies(self.oracle, self.public_domain_size, self.present_keys[kept], self.group_sizes[kept],
                            self.table[kept])

    @classmethod
    def empty(cls, oracle: FrequencyOracle, public_domain_size: int) -> KeyedTallies:
        """No reports."""
        zero = np.zeros(0, np.int64)
        return cls(oracle, public_domain_size, zero, zero.copy(), np.zeros((0, oracle.tally_size), np.int64))

    @classmethod
    def restore(cls, oracle: FrequencyOracle, public_domain_size: int, present_keys: npt.ArrayLike,
                group_sizes: npt.ArrayLike, table: npt.ArrayLike) -> KeyedTallies:
        """From stored arrays (a snapshot), checked: keys strictly increasing in range, positive sizes, one
        tally row of the oracle's length per key."""
        size = check_int(public_domain_size, "public_domain_size", 1)
        keys = check_codes(present_keys, "present_keys", size, ndim=1)
        sizes = np.asarray(group_sizes, dtype=np.int64)
        tallies = np.asarray(table, dtype=np.int64)
        if sizes.shape != keys.shape or tallies.shape != (len(keys), oracle.tally_size):
            raise ValidationError("tallies", f"one size and one tally of {oracle.tally_size} integers per key "
                                  f"({len(keys)} keys)", f"got shapes {sizes.shape} and {tallies.shape}")
        if (np.diff(keys) <= 0).any() or (sizes <= 0).any():
            raise ValidationError("tallies", "strictly increasing keys with a positive size each",
                                  "not sorted, repeated, or empty")
        return cls(oracle, size, keys.astype(np.int64), sizes, tallies)

    @classmethod
    def from_rows(cls, oracle: FrequencyOracle, public_keys: npt.ArrayLike | None, reports: npt.ArrayLike, *,
                  public_domain_size: int = 1) -> KeyedTallies:
        """Tally ``reports`` (checked by the oracle) by their public keys (``None``: no public attribute)."""
        size = check_int(public_domain_size, "public_domain_size", 1)
        arr = oracle.check_reports(reports)
        if public_keys is None:
            if size != 1:
                raise ValidationError("public_keys", f"one key per report in [0, {size - 1}]", "missing")
            keys = np.zeros(len(arr), np.int64)
        else:
            keys = check_codes(public_keys, "public_keys", size, ndim=1)
            if len(keys) != len(arr):
                raise ValidationError("public_keys", f"one key per report ({len(arr)} reports)", f"got {len(keys)}")
        if not len(arr):
            return cls.empty(oracle, size)
        present, inverse = np.unique(keys, return_inverse=True)
        tallies = oracle.group_tallies(arr, inverse.reshape(-1), len(present))
        return cls(oracle, size, present.astype(np.int64), np.bincount(inverse.reshape(-1), minlength=len(present)),
                   tallies)

    @classmethod
    def merge(cls, parts: Sequence[KeyedTallies]) -> KeyedTallies:
        """The tallies of the union of disjoint sets of reports (e.g. the shards of one collection)."""
        if not parts:
            raise ValidationError("parts", "at least one KeyedTallies", "empty")
        first = parts[0]
        if any(p.oracle != first.oracle or p.public_domain_size != first.public_domain_size for p in parts):
            raise ValidationError("parts", f"tallies of one collection ({first.oracle!r})", "another oracle or schema")
        keys = np.concatenate([p.present_keys for p in parts])
        present, inverse = np.unique(keys, return_inverse=True)
        sizes = np.zeros(len(present), np.int64)
        table = np.zeros((len(present), first.oracle.tally_size), np.int64)
        np.add.at(sizes, inverse, np.concatenate([p.group_sizes for p in parts]))
        start = 0
        for p in parts:
            rows = inverse[start:start + len(p.present_keys)]
            table[rows] += p.table                      # keys are distinct within a part
            start += len(p.present_keys)
        return cls(first.oracle, first.public_domain_size, present.astype(np.int64), sizes, table)

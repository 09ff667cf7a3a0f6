"""Exact in-memory set of 128-bit report ids: the deduplication index of one shard.

Exactly-once delivery (docs/contract.md §7) needs "is this report id already stored?" for every
incoming report. A B-tree on random 128-bit keys on disk rewrites nearly every leaf page at
each group commit once the table outgrows the batch (its rate falls with size), so the shard stores
reports append-only in columnar segments and keeps the
set of stored ids here: 16 bytes per stored report, rebuilt from the segments when the shard
opens, updated only after a commit is durable. Being rebuilt from disk, it can never disagree
with what is stored.

Representation: a few runs sorted by the id's first 64 bits (``hi``) with the last 64 bits
(``lo``) alongside, merged like a binary counter (a run is merged into the previous one when
that one is at most twice its size), so there are :math:`O(\\log n)` runs and each id is
re-sorted :math:`O(\\log n)` times. Membership is a ``searchsorted`` per run on ``hi`` and a
comparison of ``lo``; distinct ids sharing ``hi`` (probability about :math:`n^2/2^{65}`) are
handled exactly by a slower path.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ldpsynth.shared.reports import REPORT_ID_BYTES


class SortedIds(NamedTuple):
    """Ids sorted by (hi, lo): ``hi``/``lo`` are the sorted halves, ``order`` the permutation
    (stable: equal ids keep their original order)."""

    order: np.ndarray
    hi: np.ndarray
    lo: np.ndarray


def sort_ids(report_ids: np.ndarray) -> SortedIds:
    """Split ``(n, 16)`` uint8 ids into their little-endian uint64 halves and sort them by (hi, lo).

    One quicksort on ``hi`` (ids are random, so ``hi`` almost never repeats: 7x faster than a
    two-key lexsort over 10^6 ids), then the positions whose ``hi`` repeats (retried reports,
    or a 2^-64 coincidence) are re-sorted by (hi, lo, arrival): equal ids keep their arrival order.
    Ids already in order (a record's, stored in id order) are not sorted again: one comparison pass.
    """
    hi, lo = _halves(report_ids)
    if bool(np.all(hi[1:] > hi[:-1])):  # strictly increasing hi: sorted, and no tie to order by lo
        return SortedIds(np.arange(hi.size), hi, lo)
    return _sorted(np.argsort(hi), hi, lo)


def merge_sorted_ids(report_ids: np.ndarray) -> SortedIds:
    """:func:`sort_ids` of ids that are runs already in order one after another (a collection's
    sections, each stored in id order, or the shards' parts): a stable sort on ``hi`` (timsort) merges
    :math:`k` runs of :math:`n` ids in :math:`O(n \\log k)`, where a quicksort sorts again."""
    hi, lo = _halves(report_ids)
    return _sorted(np.argsort(hi, kind="stable"), hi, lo)


def _halves(report_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The little-endian uint64 halves ``(hi, lo)`` of ``(n, 16)`` uint8 ids."""
    words = np.ascontiguousarray(report_ids, dtype=np.uint8).reshape(-1, REPORT_ID_BYTES).view("<u8")
    return words[:, 0], words[:, 1]


def _sorted(order: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> SortedIds:
    """``order`` (ids ranked by ``hi``) with the runs of equal ``hi`` ranked by (lo, arrival)."""
    ranked = hi[order]
    ties = np.flatnonzero(ranked[1:] == ranked[:-1])
    if ties.size:
        tied = np.zeros(len(order), bool)
        tied[ties] = tied[ties + 1] = True
        at = np.flatnonzero(tied)                      # runs of equal hi, each contiguous, in hi order
        rows = order[at]
        order[at] = rows[np.lexsort((rows, lo[rows], hi[rows]))]
    return SortedIds(order, hi[order], lo[order])


def repeats(ids: SortedIds) -> np.ndarray:
    """Mask (in sorted order) of the ids equal to the one before: all but the first of each id."""
    same = np.zeros(ids.hi.size, bool)
    same[1:] = (ids.hi[1:] == ids.hi[:-1]) & (ids.lo[1:] == ids.lo[:-1])
    return same


def run_contains(run_hi: np.ndarray, run_lo: np.ndarray, ids: SortedIds) -> np.ndarray:
    """Mask (in sorted order) of the ids found in one run sorted by ``hi`` (``run_lo`` alongside).

    ``run_hi``/``run_lo`` may be memory maps of a run on disk: sorted queries make the binary
    searches a near-linear sweep over the pages they touch.
    """
    hi, lo = ids.hi, ids.lo
    found = np.zeros(hi.size, bool)
    if run_hi.size == 0 or hi.size == 0:
        return found
    left = np.searchsorted(run_hi, hi, side="left")
    at = np.minimum(left, run_hi.size - 1)
    hit = (left < run_hi.size) & (run_hi[at] == hi)
    # Usual case: one entry with this hi. Check lo there; the next entry tells whether the hi
    # repeats (then the slow path scans the whole run of equal hi).
    nxt = np.minimum(at + 1, run_hi.size - 1)
    repeated = hit & (at + 1 < run_hi.size) & (run_hi[nxt] == hi)
    found |= hit & ~repeated & (run_lo[at] == lo)
    for i in np.flatnonzero(repeated & ~found):
        right = int(np.searchsorted(run_hi, hi[i], side="right"))
        found[i] = bool(np.any(run_lo[left[i]:right] == lo[i]))
    return found


class IdIndex:
    """A set of report ids supporting vectorised membership and insertion of sorted ids."""

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(hi.size for hi, _ in self._runs)

    def contains(self, ids: SortedIds) -> np.ndarray:
        """Mask (in sorted order) of the ids that are in the set."""
        found = np.zeros(ids.hi.size, bool)
        for run_hi, run_lo in self._runs:
            found |= run_contains(run_hi, run_lo, ids)
        return found

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """All ids as one run sorted by ``hi`` (``(hi, lo)``), e.g. to write it to disk."""
        if not self._runs:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        hi = np.concatenate([h for h, _ in self._runs])
        lo = np.concatenate([low for _, low in self._runs])
        order = np.argsort(hi, kind="stable")
        return hi[order], lo[order]

    def add(self, ids: SortedIds) -> None:
        """Insert sorted ids that are distinct and not yet in the set (the caller filtered them)."""
        if ids.hi.size == 0:
            return
        self._runs.append((ids.hi.copy(), ids.lo.copy()))
        while len(self._runs) > 1 and self._runs[-2][0].size <= 2 * self._runs[-1][0].size:
            (hi_b, lo_b), (hi_a, lo_a) = self._runs.pop(), self._runs.pop()
            hi_m, lo_m = np.concatenate((hi_a, hi_b)), np.concatenate((lo_a, lo_b))
            order = np.argsort(hi_m, kind="stable")  # merges two sorted runs in linear time
            self._runs.append((hi_m[order], lo_m[order]))

"""A shard's running statistics of one collection: :class:`StatsAccumulator` (E), :class:`TallyAccumulator`.

The counts per (public key, private code) are the sufficient statistics of every query of the
design (:mod:`ldpsynth.shared.estimators.statistics`). A shard keeps them in memory, updated after each
durable commit and rebuilt from its snapshot when the shard opens; :meth:`StatsAccumulator.snapshot`
gives them as the one :class:`~ldpsynth.shared.estimators.statistics.SufficientStatistics` that shards
exchange, snapshots store and queries merge (:meth:`SufficientStatistics.merge`). A collection of a
frequency oracle keeps, per public key, its reports' number and tally instead
(:class:`~ldpsynth.shared.estimators.tallies.KeyedTallies`; :func:`accumulator_for` picks).
"""

from __future__ import annotations

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.statistics import SufficientStatistics, aggregate_cells
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle

#: A shard keeps a dense count matrix when it has at most this many cells, else sparse runs.
DENSE_MAX_CELLS = 1 << 20
#: Committed reports a sparse accumulator keeps unsorted (16 bytes each) before it compacts on its own;
#: reads (:meth:`StatsAccumulator.snapshot`) compact at once. Large enough that ingest rarely sorts.
PENDING_ROWS = 1 << 22


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
        self._compact = SufficientStatistics.empty(self._p, self._d)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    @classmethod
    def restore(cls, stats: SufficientStatistics) -> StatsAccumulator:
        """An accumulator holding the counts ``stats`` (e.g. read from a snapshot)."""
        accumulator = cls(stats.public_domain_size, stats.domain_size)
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
        self._compact = SufficientStatistics(self._p, self._d, *aggregate_cells(keys, codes, counts))
        self._pending = []
        self._pending_rows = 0

    def snapshot(self) -> SufficientStatistics:
        """The current counts (unaffected by later commits)."""
        if self._dense is not None:
            cells = np.flatnonzero(self._dense)
            return SufficientStatistics(self._p, self._d, cells // self._d, cells % self._d, self._dense[cells])
        if self._pending:
            self._compaction()
        return self._compact


class TallyAccumulator:
    """A frequency oracle's running tallies of one collection in one shard: per public key that occurs, its
    reports and their tally (a row of ``tally_size`` int64, rows in order of first appearance, grown by
    doubling); :meth:`snapshot` sorts them by key."""

    def __init__(self, oracle: FrequencyOracle, public_domain_size: int):
        self._oracle = oracle
        self._p = int(public_domain_size)
        self._row: dict[int, int] = {}
        self._keys = np.zeros(0, np.int64)
        self._sizes = np.zeros(0, np.int64)
        self._table = np.zeros((0, oracle.tally_size), np.int64)

    @classmethod
    def restore(cls, stats: KeyedTallies) -> TallyAccumulator:
        """An accumulator holding ``stats`` (e.g. read from a snapshot)."""
        accumulator = cls(stats.oracle, stats.public_domain_size)
        accumulator._keys = stats.present_keys.copy()
        accumulator._sizes = stats.group_sizes.copy()
        accumulator._table = stats.table.copy()
        accumulator._row = {int(key): i for i, key in enumerate(stats.present_keys.tolist())}
        return accumulator

    def _rows_of(self, keys: np.ndarray) -> np.ndarray:
        """The rows of distinct ``keys``, made for those not seen yet."""
        fresh = [key for key in keys.tolist() if key not in self._row]
        if fresh:
            used = len(self._row)
            if used + len(fresh) > len(self._keys):
                capacity = max(2 * len(self._keys), used + len(fresh), 16)
                grow = capacity - len(self._keys)
                self._keys = np.concatenate([self._keys, np.zeros(grow, np.int64)])
                self._sizes = np.concatenate([self._sizes, np.zeros(grow, np.int64)])
                self._table = np.concatenate([self._table, np.zeros((grow, self._table.shape[1]), np.int64)])
            for i, key in enumerate(fresh):
                self._row[key] = used + i
            self._keys[used:used + len(fresh)] = fresh
        return np.fromiter((self._row[key] for key in keys.tolist()), np.int64, len(keys))

    def add(self, keys: np.ndarray, reports: np.ndarray) -> None:
        """Tally one committed report per (keys[i], reports[i])."""
        if keys.size == 0:
            return
        present, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        tallies = self._oracle.group_tallies(reports, inverse, len(present))
        rows = self._rows_of(present)
        self._table[rows] += tallies
        self._sizes[rows] += np.bincount(inverse, minlength=len(present))

    def snapshot(self) -> KeyedTallies:
        """The current tallies (unaffected by later commits)."""
        used = len(self._row)
        order = np.argsort(self._keys[:used], kind="stable")
        return KeyedTallies(self._oracle, self._p, self._keys[:used][order], self._sizes[:used][order],
                            self._table[:used][order])


def accumulator_for(card: MechanismCard) -> StatsAccumulator | TallyAccumulator:
    """The running statistics of ``card``'s collection: E's counts, or a frequency oracle's tallies."""
    schema = card.schema
    if isinstance(card.mechanism, FrequencyOracle):
        return TallyAccumulator(card.mechanism, schema.public_domain_size)
    return StatsAccumulator(schema.public_domain_size, schema.private_domain_size)

"""Per-credential quotas: reports a credential may store in a collection (``max_rows_per_client``).

The persistent truth is each shard's quota counters, whose charges are written in the same log
record as the reports they count (:mod:`ldpsynth.aggregator.storage.log_records`; counted by
:mod:`ldpsynth.aggregator.storage.shard_state`), so it equals what is stored even after a crash
between any two instructions — no recovery step, no under- or over-count. The server keeps a
mirror here:

* ``used``: per shard, the last counter value that shard reported (absolute, monotone), so
  merging by ``max`` is exact whatever order replies arrive in; loaded from every shard at
  start. If a shard fails mid-commit (its reply lost, its commit maybe durable), the shard is
  marked *stale* and re-read before the next admission that needs an exact figure.
* ``reserved``: reports of admitted batches still being committed, so concurrent batches of
  one credential cannot together pass the limit.

Admission asks ``used + reserved + new <= limit`` where ``new`` is an upper bound on the
batch's new reports (its size, or its size minus the reports already stored, when that
matters): duplicates of stored reports do not count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

QuotaKey = tuple[str, str]  # (collection, credential id)


class QuotaBook:
    """Mirror of the shards' quota counters plus in-flight reservations."""

    def __init__(self, num_shards: int):
        self._num_shards = num_shards
        self._used: dict[QuotaKey, list[int]] = defaultdict(lambda: [0] * self._num_shards)
        self._reserved: dict[QuotaKey, int] = defaultdict(int)
        self.stale: set[int] = set()

    def observe(self, shard: int, counters: Mapping[QuotaKey, int]) -> None:
        """Merge counter values reported by ``shard`` (absolute values; the larger wins)."""
        for key, value in counters.items():
            per_shard = self._used[key]
            per_shard[shard] = max(per_shard[shard], int(value))

    def used(self, key: QuotaKey) -> int:
        """Stored reports of ``key`` over all shards, as last reported."""
        return sum(self._used[key]) if key in self._used else 0

    def available(self, key: QuotaKey, limit: int) -> int:
        """Reports ``key`` may still add under ``limit``, net of reservations."""
        return limit - self.used(key) - self._reserved.get(key, 0)

    def reserve(self, key: QuotaKey, count: int) -> None:
        self._reserved[key] += count

    def release(self, key: QuotaKey, count: int) -> None:
        self._reserved[key] -= count
        if not self._reserved[key]:
            del self._reserved[key]

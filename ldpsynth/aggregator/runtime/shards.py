"""The shards as the ingest path and the query engine use them: the :class:`Shards` protocol.

Each shard has one worker (:class:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker`), reached
through one primitive, :meth:`Shards.call`: a worker method by name (one of
:data:`~ldpsynth.aggregator.storage.shard_worker.CALLS`) within a deadline. The other methods are
written here once, over it: per shard for the ingest path (a group commit, quota admission) and over
every shard's pin for the query engine (pins, statistics, pair totals, rows, dense sums). Two
transports subclass the protocol and give only ``num_shards`` and ``call`` (PEP 544: a protocol's
methods are the defaults of the classes that name it as a base), as PipelineDP keeps its local
backend beside Beam's: :class:`~ldpsynth.aggregator.runtime.ray_cluster.RayWorkers` (the workers
as Ray actors) and :class:`~ldpsynth.aggregator.runtime.local_shards.LocalShards` (workers on the
caller's event loop, no Ray).

Every method raises :class:`~ldpsynth.aggregator.errors.ShardUnavailable` when a shard cannot answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ldpsynth.aggregator.errors import ShardUnavailable
from ldpsynth.aggregator.storage.segments import CommitOutcome, Pin, QuotaKey, RowChunk, Segment, SegmentPack
from ldpsynth.shared.estimators.engine import Statistics
from ldpsynth.shared.estimators.formulas import BlockSums

#: Deadlines of worker calls (seconds): commits, quick status calls, and reads of whole shards.
COMMIT_DEADLINE = 60.0
STATUS_DEADLINE = 10.0
READ_DEADLINE = 900.0

Pins = Sequence[Pin]


class Shards(Protocol):
    """The shards, wherever their workers run (see the module docstring)."""

    @property
    def num_shards(self) -> int: ...

    async def call(self, shard: int, method: str, *args: Any, deadline: float) -> Any:
        """The worker method ``method`` of ``shard`` on ``args``, within ``deadline`` seconds."""
        ...

    def share(self, value: np.ndarray) -> Any:
        """``value`` as an argument of calls to every shard (Ray ships it once, through its object store)."""
        return value

    # ----- ingest ------------------------------------------------------------------------------
    async def commit(self, shard: int, segments: list[Segment], trace: dict[str, str]) -> CommitOutcome:
        """One group commit of ``shard`` (:meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.commit_pack`)."""
        return await self.call(shard, "commit_pack", SegmentPack.of(segments), trace, deadline=COMMIT_DEADLINE)

    async def close_collection(self, collection: str) -> None:
        """Every shard's worker refuses ``collection``'s reports from now on, its commits before applied
        (:meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.close_collection`)."""
        await asyncio.gather(*(self.call(shard, "close_collection", collection, deadline=COMMIT_DEADLINE)
                               for shard in range(self.num_shards)))

    async def reopen_collection(self, collection: str) -> None:
        """Every shard's worker takes ``collection``'s reports again."""
        await asyncio.gather(*(self.call(shard, "reopen_collection", collection, deadline=COMMIT_DEADLINE)
                               for shard in range(self.num_shards)))

    async def count_existing(self, shard: int, collection: str, report_ids: np.ndarray) -> int:
        return await self.call(shard, "count_existing", collection, report_ids, deadline=COMMIT_DEADLINE)

    async def quota_usage(self, shard: int) -> dict[QuotaKey, int]:
        return await self.call(shard, "quota_usage", deadline=STATUS_DEADLINE)

    async def quota_of(self, shard: int, collection: str, credential: str) -> int:
        return await self.call(shard, "quota_of", collection, credential, deadline=STATUS_DEADLINE)

    # ----- queries -----------------------------------------------------------------------------
    async def pin(self, collection: str) -> list[Pin]:
        """Pin ``collection`` in every shard (one :class:`Pin` per shard, in shard order)."""
        return list(await asyncio.gather(*(self.call(shard, "pin", collection, deadline=STATUS_DEADLINE)
                                           for shard in range(self.num_shards))))

    async def unpin(self, pins: Pins) -> None:
        try:
            await _on_pins(self, pins, "unpin", deadline=STATUS_DEADLINE)
        except ShardUnavailable:
            pass  # a pin of a worker that is gone is gone with it; the others expire in time

    async def pinned_stats(self, pins: Pins, collection: str) -> list[Statistics]:
        return await _on_pins(self, pins, "pinned_stats", collection)

    async def cut_totals(self, pins: Pins, collection: str, source: str, target: str, edge: str,
                         sources: np.ndarray, targets: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
        return await _on_pins(self, pins, "cut_totals", collection, source, target, edge, self.share(sources),
                              self.share(targets))

    async def rows(self, pins: Pins, collection: str) -> list[RowChunk]:
        return await _on_pins(self, pins, "rows", collection)

    async def row_ids(self, pins: Pins, collection: str) -> list[np.ndarray]:
        return await _on_pins(self, pins, "row_ids", collection)

    async def dense_sums(self, pins: Pins, collection: str, weights: Sequence[np.ndarray | None]
                         ) -> list[BlockSums | None]:
        """Each shard's sums of a dense block over its pinned rows, ``weights[s]`` their weight lists
        (``None``: the shard has no rows, and is not asked)."""
        async def one(shard: int, pin: Pin, part: np.ndarray | None) -> BlockSums | None:
            if part is None:
                return None
            return await self.call(shard, "dense_sums", pin.id, collection, part, deadline=READ_DEADLINE)
        return list(await asyncio.gather(*(one(s, pin, part) for s, (pin, part) in enumerate(zip(pins, weights)))))


async def _on_pins(shards: Shards, pins: Pins, method: str, *args: Any, deadline: float = READ_DEADLINE) -> list[Any]:
    """``method`` of every shard's worker, on the shard's pin id and ``args``."""
    return list(await asyncio.gather(*(shards.call(shard, method, pin.id, *args, deadline=deadline)
                                       for shard, pin in enumerate(pins))))

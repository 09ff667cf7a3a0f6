"""The shards without Ray: one shard worker per shard on the caller's event loop.

The same :class:`~ldpsynth.aggregator.runtime.shards.Shards` protocol as
:class:`~ldpsynth.aggregator.runtime.ray_cluster.RayWorkers`, each call made to the worker directly
(by name, :meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.call`): what the ingest path
and the query engine are tested over without a Ray runtime. A call here has no deadline (it is the
caller's own coroutine) and an error comes back as the worker raised it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ldpsynth.aggregator.runtime.shards import Shards
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.shard_worker import ShardWorker, WorkerSpec

L = TypeVar("L", bound="LocalShards")


class LocalShards(Shards):
    """The shards of ``workers`` (shard ``k`` is ``workers[k]``), on this event loop."""

    def __init__(self, workers: list[ShardWorker]):
        self.workers = workers

    @classmethod
    async def open(cls: type[L], directory: Path, settings: LogSettings, cards: Mapping[str, str], shards: int) -> L:
        """Open the log's layout of ``shards`` shards (made if the log has none), register ``cards``
        (collection name -> card JSON), and start a worker per shard in ``directory/shard-K``."""
        replicated = await ReplicatedLog.connect(settings, "ldpsynth-local-shards")
        try:
            layout = await replicated.open_layout(shards)
            for name, card in cards.items():
                await replicated.register_card(name, card)
        finally:
            await replicated.close()
        workers = [ShardWorker(WorkerSpec(layout, k, settings, str(directory / f"shard-{k}"))) for k in range(shards)]
        for worker in workers:
            await worker.start()
        return cls(workers)

    @property
    def num_shards(self) -> int:
        return len(self.workers)

    async def call(self, shard: int, method: str, *args: Any, deadline: float) -> Any:
        return await self.workers[shard].call(method, *args)

    async def close(self) -> None:
        """Close every worker (queued commits, a last snapshot)."""
        for worker in self.workers:
            await worker.close()

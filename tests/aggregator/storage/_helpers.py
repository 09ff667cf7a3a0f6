"""Helpers of the storage tests: an embedded NATS log (127.0.0.1) in the test's directory with the
test collections registered, segments of ratings reports, and shard workers run to their status."""

from __future__ import annotations

import asyncio
import glob
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LogSettings
from ldpsynth.aggregator.storage.segments import Segment
from ldpsynth.aggregator.storage.shard_worker import ShardWorker, WorkerSpec
from ldpsynth.shared.reports import new_report_ids

from ..conftest import GRAPH_CARD, RATINGS_CARD

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class Log:
    """An embedded NATS log in a directory, with the test collections registered."""

    def __init__(self, directory: Path, shards: int = 1):
        self.directory = directory
        self.nats = EmbeddedNats(directory / "log")
        self.settings = LogSettings((self.nats.start(),))
        self.layout = run(self._open(shards))

    async def _open(self, shards: int) -> Layout:
        log = await ReplicatedLog.connect(self.settings, "test")
        try:
            layout = await log.open_layout(shards)
            for card in (RATINGS_CARD, GRAPH_CARD):
                await log.register_card(card.schema.name, card.dumps())
            return layout
        finally:
            await log.close()

    def spec(self, shard: int = 0, name: str = "w", **changes: Any) -> WorkerSpec:
        return WorkerSpec(self.layout, shard, self.settings, str(self.directory / name), **changes)

    def restart(self) -> None:
        self.nats.stop()
        self.settings = LogSettings((self.nats.start(),))

    def block_files(self) -> list[str]:
        return glob.glob(str(self.directory / "log" / "jetstream" / "$G" / "streams" / f"LDPSYNTH_{self.layout.id}_*"
                             / "msgs" / "*.blk"))


def segment(n: int, rng: np.random.Generator, ids: np.ndarray | None = None, credential: str = "dev") -> Segment:
    ids = new_report_ids(n) if ids is None else ids
    return Segment("ratings", credential, ids, rng.integers(0, 100, len(ids)), rng.integers(0, 5, len(ids)))


async def _status_after(spec: WorkerSpec, action: Callable[[ShardWorker], Coroutine[Any, Any, Any]] | None = None
                        ) -> dict[str, Any]:
    worker = ShardWorker(spec)
    try:
        await worker.start()
        if action is not None:
            await action(worker)
        return await worker.status()
    finally:
        await worker.close()

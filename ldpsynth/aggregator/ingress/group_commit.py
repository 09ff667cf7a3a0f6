"""Group commit: one shard transaction for many concurrently submitted batches.

A replica has one :class:`GroupCommitter` per shard: the one place reports are grouped (the shard
worker commits each group it receives as one unit). Batches (their part for this shard) queue up
while the shard commits the previous group; when it returns, everything queued so far (up to
``max_group_rows`` reports) goes into the next commit. Under load one fsync thus serves many
batches; when idle a batch is committed at once (no fixed waiting window). One commit per shard
is in flight at a time from each replica (two in flight cost more CPU per report on a loaded
machine: smaller groups, more appends; benchmarks/bench_scale.py), and the worker appends one
group at a time, so a shard has exactly one writer.

A failed commit fails every batch of its group (the server answers UNAVAILABLE and clients
retry with the same ids, which is safe: duplicates are ignored).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ldpsynth.aggregator.storage.segments import CommitOutcome, QuotaKey, Segment

SegmentResult = tuple[tuple[int, int], dict[QuotaKey, int]]
#: A committer that committed this recently is busy: it waits ``linger`` before its next commit.
BUSY_SECONDS = 0.05


class GroupCommitter:
    """Queues segments for one shard and commits them in groups.

    ``commit`` stores a group durably and returns its :class:`CommitOutcome`. ``linger``: when the
    committer is busy (it committed within :data:`BUSY_SECONDS`), it waits this long before taking
    the next group, so more batches share one commit (a replica's group is one Ray call: fewer,
    larger calls cost less CPU per batch); an idle committer commits at once.
    """

    def __init__(self, commit: Callable[[list[Segment]], Awaitable[CommitOutcome]], max_group_rows: int,
                 linger: float = 0.0):
        self._commit = commit
        self._max_group_rows = max_group_rows
        self._linger = linger
        self._last_commit = 0.0
        self._queue: list[tuple[Segment, asyncio.Future[SegmentResult]]] = []
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self.commits = 0  # number of group commits issued (observability, tests)

    def enqueue(self, segment: Segment) -> asyncio.Future[SegmentResult]:
        """Queue ``segment`` for the next commit; the future resolves to its ``(accepted,
        duplicates)`` and the quota counters the commit reported (a future, not a coroutine: a
        batch spread over many shards awaits them together without a task per shard)."""
        if self._closing:
            raise RuntimeError("GroupCommitter is closed")
        future: asyncio.Future[SegmentResult] = asyncio.get_running_loop().create_future()
        self._queue.append((segment, future))
        self._wakeup.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run())
        return future

    async def submit(self, segment: Segment) -> SegmentResult:
        """Commit ``segment`` (with others): :meth:`enqueue`, then wait."""
        return await self.enqueue(segment)

    def _take_group(self) -> list[tuple[Segment, asyncio.Future[SegmentResult]]]:
        rows = 0
        count = 0
        for segment, _ in self._queue:
            if count and rows + len(segment) > self._max_group_rows:
                break
            rows += len(segment)
            count += 1
        group, self._queue = self._queue[:count], self._queue[count:]
        return group

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                if self._linger and time.monotonic() - self._last_commit < BUSY_SECONDS:
                    await asyncio.sleep(self._linger)  # busy: let more batches join this commit
                group = self._take_group()
                self.commits += 1
                self._last_commit = time.monotonic()
                try:
                    outcome = await self._commit([segment for segment, _ in group])
                except Exception as exc:  # noqa: BLE001 - handed to every waiting batch
                    for _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), result in zip(group, outcome.results):
                    if not future.done():
                        future.set_result((result, outcome.quota))
            if self._closing:
                return

    async def close(self) -> None:
        """Commit what is queued, then stop."""
        self._closing = True
        self._wakeup.set()
        if self._worker is not None:
            await self._worker

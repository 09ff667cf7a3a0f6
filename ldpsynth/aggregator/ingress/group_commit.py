"""Group commit: one shard transaction for many concurrently submitted batches.

A replica has one :class:`GroupCommitter` per shard: the one place reports are grouped (the shard
worker commits each group it receives as one unit). Batches (their part for this shard) queue up
while the shard commits the previous group; when it returns, everything queued so far (up to
``max_group_rows`` reports) goes into the next commit. Under load one fsync thus serves many
batches; when idle a batch is committed at once (no fixed waiting window). One commit per shard
is in flight at a time from each replica (two in flight cost more CPU per report on a loaded
machine: smaller groups, more appends; benchmarks/bench_scale.py), and the worker appends one
group at a time, so a shard has exactly one writer.

Each queued part settles itself (:meth:`Part.settle`) with its ``(accepted, duplicates)`` or the
error of its group: no future per part, so a batch spread over many shards costs one future. A
failed commit fails every part of its group (the server answers UNAVAILABLE and clients retry with
the same ids, which is safe: duplicates are ignored).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from ldpsynth.aggregator.errors import ClosedToReports
from ldpsynth.aggregator.storage.segments import CommitOutcome


class Part(Protocol):
    """What a group commit carries for one batch: its reports bound for this shard."""

    def __len__(self) -> int: ...

    def settle(self, outcome: tuple[int, int] | BaseException) -> None:
        """This part's ``(accepted, duplicates)``, or the error that failed its group."""


P = TypeVar("P", bound=Part)


class GroupCommitter(Generic[P]):
    """Queues one shard's parts and commits them in groups.

    ``commit`` stores a group durably and returns its :class:`CommitOutcome` (``results[i]`` is the
    i-th part's). ``interval()``: the time between two commits under load, asked before each (the
    caller lets it grow with the load); a part queued less than that after the last commit began waits
    for the next tick of a clock shared by every committer (:meth:`_wait`), so a group holds what arrives
    in an interval (every commit costs the replica a Ray call and the worker, the log and Ray a fixed
    amount), while a part reaching an idle committer is committed at once.
    """

    def __init__(self, commit: Callable[[list[P]], Awaitable[CommitOutcome]], max_group_rows: int,
                 interval: Callable[[], float] = lambda: 0.0):
        self._commit = commit
        self._max_group_rows = max_group_rows
        self._interval = interval
        self._last_commit = -math.inf
        self._queue: list[P] = []
        self._queued_rows = 0
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self.commits = 0  # number of group commits issued (observability, tests)

    def enqueue(self, part: P) -> None:
        """Queue ``part`` for the next commit; it is settled once that commit ends."""
        if self._closing:
            raise RuntimeError("GroupCommitter is closed")
        self._queue.append(part)
        self._queued_rows += len(part)
        self._wakeup.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run())

    def _take_group(self) -> list[P]:
        if self._queued_rows <= self._max_group_rows:
            group, self._queue, self._queued_rows = self._queue, [], 0
            return group
        rows = 0
        count = 0
        for part in self._queue:
            if count and rows + len(part) > self._max_group_rows:
                break
            rows += len(part)
            count += 1
        group, self._queue = self._queue[:count], self._queue[count:]
        self._queued_rows -= rows
        return group

    def _wait(self) -> float:
        """Seconds until the next commit: none after an idle interval, else until the next tick of a clock
        every committer of the process shares (``interval()`` seconds apart): a batch's parts for
        different shards then wait for the same tick, not each for its own shard's."""
        interval = self._interval()
        now = time.monotonic()
        if interval <= 0 or now - self._last_commit >= interval:
            return 0.0
        return interval - now % interval

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                wait = self._wait()
                if wait > 0:
                    await asyncio.sleep(wait)  # busy: let more batches join this commit
                group = self._take_group()
                self.commits += 1
                self._last_commit = time.monotonic()
                try:
                    outcome = await self._commit(group)
                except Exception as exc:  # noqa: BLE001 - handed to every part of the group
                    for part in group:
                        part.settle(exc)
                    continue
                for i, (part, result) in enumerate(zip(group, outcome.results)):
                    part.settle(ClosedToReports() if i in outcome.closed else result)
            if self._closing:
                return

    async def close(self) -> None:
        """Commit what is queued, then stop."""
        self._closing = True
        self._wakeup.set()
        if self._worker is not None:
            await self._worker

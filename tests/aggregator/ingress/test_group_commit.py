"""The replica's group committer on its own: what goes into a group, when, and how parts are settled."""

from __future__ import annotations

import asyncio
import time

import pytest

from ldpsynth.aggregator.errors import ShardUnavailable
from ldpsynth.aggregator.ingress.group_commit import GroupCommitter
from ldpsynth.aggregator.storage.segments import CommitOutcome


class Part:
    def __init__(self, rows: int):
        self.rows = rows
        self.outcome: tuple[int, int] | BaseException | None = None

    def __len__(self) -> int:
        return self.rows

    def settle(self, outcome: tuple[int, int] | BaseException) -> None:
        assert self.outcome is None, "settled twice"
        self.outcome = outcome


class Shard:
    """Records each group (its parts' sizes and when it began); accepts every report, or fails."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.groups: list[tuple[float, list[int]]] = []
        self.fail = False

    async def commit(self, parts: list[Part]) -> CommitOutcome:
        self.groups.append((time.monotonic(), [len(p) for p in parts]))
        await asyncio.sleep(self.seconds)
        if self.fail:
            raise ShardUnavailable("shard 0 down")
        return CommitOutcome(tuple((len(p), 0) for p in parts), {})


def test_an_idle_committer_commits_at_once_and_busy_ones_commit_together_on_the_next_tick() -> None:
    async def scenario() -> tuple[list[Shard], list[Part], float]:
        shards = [Shard(), Shard()]
        committers = [GroupCommitter(shard.commit, max_group_rows=1000, interval=lambda: 1.0) for shard in shards]
        await asyncio.sleep(1.01 - time.monotonic() % 1.0)  # just after a tick: the next one is a second away
        started = time.monotonic()
        first = Part(1)
        committers[0].enqueue(first)
        await asyncio.sleep(0.005)  # committed at once: the committer was idle
        later = [Part(2) for _ in range(4)]
        committers[0].enqueue(later[0])  # busy: waits for the next tick, and takes what arrives meanwhile
        committers[1].enqueue(later[1])  # idle: at once
        await asyncio.sleep(0.005)
        for part in later[2:]:
            committers[1].enqueue(part)  # busy now: the same tick as the first committer's
        for committer in committers:
            await committer.close()
        return shards, [first, *later], started

    shards, parts, started = asyncio.run(scenario())
    assert [sizes for _, sizes in shards[0].groups] == [[1], [2]]
    assert [sizes for _, sizes in shards[1].groups] == [[2], [2, 2]]
    assert shards[0].groups[0][0] - started < 0.1 and shards[1].groups[0][0] - started < 0.1
    ticks = [shards[0].groups[1][0], shards[1].groups[1][0]]
    assert abs(ticks[0] - ticks[1]) < 0.02  # one clock: a batch spanning both shards waits once
    assert all(0.9 < t - started < 1.1 and min(t % 1.0, 1.0 - t % 1.0) < 0.05 for t in ticks)
    assert [p.outcome for p in parts] == [(1, 0)] + [(2, 0)] * 4


def test_a_group_holds_at_most_max_group_rows_unless_one_part_is_larger() -> None:
    async def scenario() -> Shard:
        shard = Shard(seconds=0.01)
        committer = GroupCommitter(shard.commit, max_group_rows=10)
        for rows in (4, 4, 4, 25, 3, 3):
            committer.enqueue(Part(rows))
        await committer.close()
        return shard

    assert [sizes for _, sizes in asyncio.run(scenario()).groups] == [[4, 4], [4], [25], [3, 3]]


def test_a_failed_commit_fails_every_part_of_its_group_only() -> None:
    async def scenario() -> list[Part]:
        shard = Shard(seconds=0.01)
        committer = GroupCommitter(shard.commit, max_group_rows=1000)
        first, second = Part(1), Part(2)
        shard.fail = True
        committer.enqueue(first)
        committer.enqueue(second)
        await asyncio.sleep(0.05)
        shard.fail = False
        third = Part(3)
        committer.enqueue(third)
        await committer.close()
        return [first, second, third]

    first, second, third = asyncio.run(scenario())
    assert isinstance(first.outcome, ShardUnavailable) and first.outcome is second.outcome
    assert third.outcome == (3, 0)


def test_a_closed_committer_takes_no_more_parts() -> None:
    async def scenario() -> None:
        committer = GroupCommitter(Shard().commit, max_group_rows=10)
        await committer.close()
        with pytest.raises(RuntimeError, match="closed"):
            committer.enqueue(Part(1))

    asyncio.run(scenario())

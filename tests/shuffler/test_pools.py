"""Pools (ldpsynth.shuffler.pools) without a network: a pool per public key, its threshold over distinct sealed
reports, and a pool whose forward fails part-way answering each call by the parts that hold its reports."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ldpsynth.serving.errors import TryLater, WrongState
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shuffler import pools
from ldpsynth.shuffler.directory import Route
from ldpsynth.shuffler.forward import part_bounds

ROUTE = Route("ratings", bytes(16), 84, 1, Limits(max_batch_reports=4), public_keys=10)


class ScriptedForwarder:
    """Cuts a pool as the Forwarder does and answers each part with the next scripted outcome (None: an ack)."""

    def __init__(self, outcomes: list[Exception | None]):
        self.outcomes = outcomes
        self.forwarded: list[tuple[int, np.ndarray]] = []

    async def forward(self, route: Route, pool_key: int, rows: np.ndarray) -> tuple[np.ndarray, list[object]]:
        self.forwarded.append((pool_key, rows))
        bounds = part_bounds(len(rows), route.limits.max_batch_reports)
        answers: list[object] = []
        for i in range(len(bounds) - 1):
            outcome = self.outcomes[i] if i < len(self.outcomes) else None
            answers.append(outcome if outcome is not None else pb.ShuffledAck(accepted=int(bounds[i + 1] - bounds[i])))
        return bounds, answers


def rows(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 84), dtype=np.uint8)


async def submit_all(pool_set: pools.Pools, calls: list[tuple[int, np.ndarray]]) -> list[BaseException | None]:
    tasks = [asyncio.ensure_future(pool_set.submit(ROUTE, key, part)) for key, part in calls]
    return [r if isinstance(r, BaseException) else None for r in await asyncio.gather(*tasks, return_exceptions=True)]


@pytest.fixture
def threshold(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    value = [6]
    monkeypatch.setattr(pools, "draw_threshold", lambda t, m: value[0])
    return value


def test_a_call_is_answered_by_the_parts_that_hold_its_reports(threshold: list[int],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """6 reports of 3 calls in one pool, forwarded in 2 parts of 3 (at most 4 a part), the second refused: the
    calls whose reports all lie in the first part are acknowledged, the others get the second part's error."""
    monkeypatch.setattr(pools, "uniform_permutation", lambda n: np.arange(n))  # the forwarded order is known
    forwarder = ScriptedForwarder([None, WrongState("refused")])
    a, b, c = rows(1, 2), rows(2, 1), rows(3, 3)

    async def run() -> list[BaseException | None]:
        return await submit_all(pools.Pools(forwarder, 1, 10.0), [(5, a), (5, b), (5, c)])

    outcomes = asyncio.run(run())
    (key, forwarded), = forwarder.forwarded
    assert key == 5 and len(forwarded) == 6
    part_of = {forwarded[i].tobytes(): i // 3 for i in range(6)}
    for call, outcome in zip((a, b, c), outcomes):
        parts = {part_of[r.tobytes()] for r in call}
        assert (outcome is None) == (parts == {0}), (parts, outcome)
        if outcome is not None:
            assert isinstance(outcome, WrongState)


def test_pools_are_per_public_key_and_count_distinct_reports(threshold: list[int]) -> None:
    """Threshold 6: 4 reports of key 1 and 4 of key 2 make no pool; the same 4 of key 1 sent again add nothing;
    2 more of key 1 release key 1's pool alone, its 6 distinct reports forwarded once each."""
    forwarder = ScriptedForwarder([])
    first, more = rows(4, 4), rows(5, 2)

    async def run() -> tuple[list[BaseException | None], list[BaseException | None]]:
        pool_set = pools.Pools(forwarder, 1, 0.5)
        waiting = asyncio.ensure_future(submit_all(pool_set, [(1, first), (2, rows(6, 4)), (1, first.copy())]))
        await asyncio.sleep(0.1)
        assert forwarder.forwarded == []
        released = await submit_all(pool_set, [(1, more)])
        return await waiting, released

    waited, released = asyncio.run(run())
    assert released == [None] and waited[0] is None and waited[2] is None
    assert isinstance(waited[1], TryLater)                     # key 2's pool expired below its threshold
    (key, forwarded), = forwarder.forwarded
    assert key == 1 and len(forwarded) == 6
    assert {r.tobytes() for r in forwarded} == {r.tobytes() for r in (*first, *more)}


def test_distinct_rows_keeps_one_of_each_and_maps_every_row_back() -> None:
    data = rows(7, 5)
    doubled = np.concatenate([data, data[[0, 3]]])
    distinct, inverse = pools.distinct_rows(doubled)
    assert len(distinct) == 5 and np.array_equal(distinct[inverse], doubled)

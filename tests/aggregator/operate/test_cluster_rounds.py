"""A discovery on a cluster (without Ray or a server: two replicas on this event loop, each with its own catalog,
intake, log connection and keeper, over one NATS log and one set of shard workers, as a cluster's replicas share
the named workers): AdvanceRound on one closes the round for both, the other's late batches are refused by the
workers and not stored, the round is decoded from exactly the acknowledged reports, the state is one key in the
log's KV bucket (compare-and-set: two replicas closing at once store one state), the other replica serves the
next round once it reads the key, and a replica or a worker started later agrees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.errors import ClosedToReports
from ldpsynth.aggregator.ingress.ingest import Ingestor
from ldpsynth.aggregator.ingress.quota import QuotaBook
from ldpsynth.aggregator.operate.rounds import RoundKeeper
from ldpsynth.aggregator.operate.states import LogStates, cluster_states
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand
from ldpsynth.aggregator.runtime.local_shards import LocalShards
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.segments import Segment
from ldpsynth.serving.auth import ANONYMOUS
from ldpsynth.serving.errors import TryLater
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema, DiscoveryState
from ldpsynth.shared.protocol import Limits, reports_to_proto
from ldpsynth.shared.wire import collection_pb2 as pb

from ..conftest import RATINGS_CARD, make_reports

#: Four rounds, each with small domains (E's reports, which the test makes as uniform codes).
SCHEMA = DiscoverySchema.from_json({
    "name": "words", "epsilon": 6.0,
    "attributes": [{"name": "word", "type": "string", "max_length": 3, "alphabet": "abcd"}],
    "discovery": {"first_bits": 4, "fragment_bits": 2, "top_k": 2, "salt": "5a" * 16, "min_reports_per_round": 1}})

ROUND0, ROUND1 = "words/round-0", "words/round-1"


class Replica:
    """One replica's parts: its catalog (built from the log's state), intake, log connection and keeper."""

    def __init__(self, catalog: Catalog, ingestor: Ingestor, log: ReplicatedLog, keeper: RoundKeeper):
        self.catalog, self.ingestor, self.log, self.keeper = catalog, ingestor, log, keeper

    @classmethod
    async def start(cls, settings: LogSettings, shards: LocalShards) -> Replica:
        states = await cluster_states(settings, [SCHEMA])
        cards, discoveries = expand([RATINGS_CARD, SCHEMA], None, states)
        catalog = Catalog(cards, Limits(max_rows_per_client=10_000), discoveries=discoveries)
        ingestor = Ingestor(catalog, shards, QuotaBook(shards.num_shards), 1 << 20, sole_replica=False)
        log = await ReplicatedLog.connect(settings, "test-replica")
        for card in cards:
            await log.register_card(card.schema.name, card.dumps())
        keeper = await RoundKeeper.open(LogStates(log), discoveries, catalog, ingestor, shards, log)
        return cls(catalog, ingestor, log, keeper)

    async def send(self, n: int, rng: np.random.Generator) -> pb.BatchAck:
        """A batch of ``n`` reports for the round this replica serves (admitted, committed, acknowledged)."""
        admitted = await self.ingestor.admit(ANONYMOUS, self.batch(n, rng))
        return await self.ingestor.commit(admitted)

    def batch(self, n: int, rng: np.random.Generator) -> pb.ReportBatch:
        served = self.catalog.discovery("words")
        assert served is not None and served.card is not None
        card = served.card
        return reports_to_proto(make_reports(card.schema, n, rng), card.schema.name, card.version, 0)

    async def stop(self) -> None:
        await self.ingestor.close()
        await self.log.close()


class Cluster:
    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.loop = asyncio.new_event_loop()
        self.nats = EmbeddedNats(tmp_path / "log")
        self.settings = LogSettings((self.nats.start(),))
        self.shards = self.run(LocalShards.open(tmp_path / "workers", self.settings, {}, 2))
        self.replicas = [self.run(Replica.start(self.settings, self.shards)) for _ in range(2)]

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    async def stored(self, collection: str) -> int:
        return sum([(await worker.status()).rows.get(collection, 0) for worker in self.shards.workers])

    async def stored_state(self) -> DiscoveryState:
        return await LogStates(self.replicas[0].log).read(SCHEMA)

    def close(self) -> None:
        for replica in self.replicas:
            self.run(replica.stop())
        self.run(self.shards.close())
        self.loop.close()
        self.nats.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path)
    yield opened
    opened.close()


def test_a_round_closed_on_one_replica_is_closed_on_every_replica(cluster: Cluster, rng: np.random.Generator) -> None:
    a, b = cluster.replicas

    async def scenario() -> None:
        acked = sum([(await a.send(n, rng)).accepted for n in (30, 12)] + [(await b.send(25, rng)).accepted])
        late = await b.ingestor.admit(ANONYMOUS, b.batch(9, rng))  # admitted by b before the close, sent after
        done = await a.keeper.advance("words")
        assert done["closed_round"] == 0 and done["reports"] == acked == 67 and done["open_round"] == 1
        assert (await cluster.stored_state()).closed[0][1] == 67      # the one commit point: the log's KV key
        with pytest.raises(ClosedToReports):                          # refused by the shard workers ...
            await b.ingestor.commit(late)
        with pytest.raises(ClosedToReports):                          # ... while b still serves round 0
            await b.send(5, rng)
        assert await cluster.stored(ROUND0) == 67                     # nothing of them stored
        served = b.catalog.discovery("words")
        assert served is not None and served.round == 0
        await b.keeper.refresh()                                      # b reads the state: serves round 1
        served, ours = b.catalog.discovery("words"), a.catalog.discovery("words")
        assert served is not None and ours is not None and served.dumps() == ours.dumps() and served.round == 1
        assert (await b.send(21, rng)).accepted == 21 and (await a.send(20, rng)).accepted == 20
        assert await cluster.stored(ROUND1) == 41

        # a replica started now serves the agreed round
        c = await Replica.start(cluster.settings, cluster.shards)
        try:
            card = c.catalog.discovery("words")
            assert card is not None and card.dumps() == ours.dumps()
        finally:
            await c.stop()

        # both replicas close round 1 at once: one state is stored, both serve it
        first, second = await asyncio.gather(a.keeper.advance("words"), b.keeper.advance("words"))
        assert first == second and first["closed_round"] == 1 and first["reports"] == 41
        stored = await cluster.stored_state()
        assert stored.round == 2 and [n for _, n in stored.closed] == [67, 41]
        cards = [r.catalog.discovery("words") for r in (a, b)]
        assert all(card is not None and card.dumps() == stored.card().dumps() for card in cards)

    cluster.run(scenario())


def test_a_worker_started_after_the_close_refuses_the_round(cluster: Cluster, rng: np.random.Generator) -> None:
    a, b = cluster.replicas

    async def scenario() -> None:
        await a.send(10, rng)
        await a.keeper.advance("words")
        await cluster.shards.close()
        cluster.shards.workers[:] = (await LocalShards.open(cluster.tmp_path / "workers", cluster.settings, {},
                                                            2)).workers
        with pytest.raises(ClosedToReports):                          # b still serves round 0
            await b.send(5, rng)
        assert await cluster.stored(ROUND0) == 10
        # one group with a closed round's segment and another collection's: only the closed one is refused
        ids = rng.integers(0, 256, (4, 16), dtype=np.uint8)
        codes = np.zeros(4, np.int64)
        outcome = await cluster.shards.workers[0].commit([Segment(ROUND0, "x", ids[:2], codes[:2], codes[:2]),
                                                          Segment("ratings", "x", ids[2:], codes[2:], codes[2:])])
        assert outcome.closed == frozenset({0}) and outcome.results == ((0, 0), (2, 0))
        assert ("words/round-0", "x") not in outcome.quota

    cluster.run(scenario())


def test_a_state_not_stored_reopens_the_round_everywhere(cluster: Cluster, rng: np.random.Generator,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = cluster.replicas

    async def unavailable(self: LogStates, state: DiscoveryState) -> None:
        raise LogUnavailable("the log did not answer (TimeoutError)")

    async def scenario() -> None:
        await b.send(8, rng)
        monkeypatch.setattr(LogStates, "store", unavailable)
        with pytest.raises(TryLater, match="could not be stored"):
            await a.keeper.advance("words")
        assert (await cluster.stored_state()).round == 0
        assert not await a.log.is_closed(ROUND0)                      # the log's record of the close removed
        assert (await a.send(3, rng)).accepted == 3 and (await b.send(4, rng)).accepted == 4  # workers take it
        monkeypatch.undo()
        assert (await b.keeper.advance("words"))["reports"] == 15

    cluster.run(scenario())


def test_an_advance_on_a_replica_behind_closes_the_agreed_round(cluster: Cluster, rng: np.random.Generator) -> None:
    a, b = cluster.replicas

    async def scenario() -> None:
        await a.send(7, rng)
        await a.keeper.advance("words")                               # b has not read the state yet
        await a.send(6, rng)
        done = await b.keeper.advance("words")
        assert done["closed_round"] == 1 and done["reports"] == 6 and done["open_round"] == 2
        assert [n for _, n in (await cluster.stored_state()).closed] == [7, 6]

    cluster.run(scenario())


@pytest.mark.parametrize("sole", [False, True], ids=["cluster", "one machine"])
def test_a_round_a_crash_left_closed(cluster: Cluster, rng: np.random.Generator, sole: bool) -> None:
    """A close that stopped between the workers' close and the commit point (a crash): a cluster keeps the round
    closed (another replica may be closing it) and the next advance decodes it; a sole replica reopens it."""
    a, b = cluster.replicas

    async def scenario() -> None:
        await a.send(4, rng)
        await a.log.close_collection(ROUND0)
        await cluster.shards.close_collection(ROUND0)
        states = await cluster_states(cluster.settings, [SCHEMA])
        _, discoveries = expand([SCHEMA], None, states)
        await RoundKeeper.open(LogStates(b.log), discoveries, b.catalog, b.ingestor, cluster.shards, b.log,
                               sole_replica=sole)
        if sole:
            assert (await b.send(3, rng)).accepted == 3
        else:
            with pytest.raises(ClosedToReports):
                await b.send(3, rng)
        assert (await a.keeper.advance("words"))["reports"] == (7 if sole else 4)

    cluster.run(scenario())


def test_a_replica_refused_by_the_workers_reads_the_state_before_it_answers(cluster: Cluster,
                                                                            rng: np.random.Generator) -> None:
    """As ``serve --nats`` wires it: the device that fetches the card again after the refusal gets round 1."""
    a, b = cluster.replicas
    b.ingestor.on_closed = b.keeper.refresh

    async def scenario() -> None:
        await a.send(5, rng)
        await a.keeper.advance("words")
        with pytest.raises(ClosedToReports):
            await b.send(2, rng)                                      # b served round 0 until then
        served = b.catalog.discovery("words")
        assert served is not None and served.round == 1
        assert await cluster.stored(ROUND0) == 5

    cluster.run(scenario())

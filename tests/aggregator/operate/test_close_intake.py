"""Closing a round's intake loses no acknowledged report (without a server or Ray: shard workers on this event
loop, an embedded NATS log): a batch admitted while the round closes is refused once its quota is settled, with
its reservation released and nothing stored; a batch being committed when the round closes is waited for, and
is in the statistics the round is then decoded from."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.ingress.ingest import Ingestor
from ldpsynth.aggregator.ingress.quota import QuotaBook
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand
from ldpsynth.aggregator.runtime.local_shards import LocalShards
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.segments import CommitOutcome, Segment
from ldpsynth.serving.auth import ANONYMOUS
from ldpsynth.serving.errors import WrongState
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.protocol import Limits, reports_to_proto
from ldpsynth.shared.wire import collection_pb2 as pb

from ..conftest import RATINGS_CARD, make_reports

SCHEMA = DiscoverySchema.from_json({
    "name": "words", "epsilon": 6.0,
    "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
    "discovery": {"first_bits": 10, "fragment_bits": 15, "top_k": 2, "salt": "5a" * 16,
                  "min_reports_per_round": 1}})
ROUND = "words/round-0"


class HeldShards(LocalShards):
    """LocalShards whose quota reads and commits wait until the test lets them go."""

    quota_gate: asyncio.Event
    commit_gate: asyncio.Event

    async def quota_of(self, shard: int, collection: str, credential: str) -> int:
        await self.quota_gate.wait()
        return await super().quota_of(shard, collection, credential)

    async def commit(self, shard: int, segments: list[Segment], trace: dict[str, str]) -> CommitOutcome:
        await self.commit_gate.wait()
        return await super().commit(shard, segments, trace)


class Intake:
    """An Ingestor of another replica's kind (it reads the quota from the shards before each batch, an await
    inside admission) over HeldShards, with a discovery's round 0 served."""

    def __init__(self, tmp_path: Path):
        self.loop = asyncio.new_event_loop()
        cards, discoveries = expand([RATINGS_CARD, SCHEMA], tmp_path / "data")
        self.card = next(card for card in cards if card.schema.name == ROUND)
        self.catalog = Catalog(cards, Limits(max_rows_per_client=1000), discoveries=discoveries)
        self.nats = EmbeddedNats(tmp_path / "log")
        url = self.nats.start()
        self.shards = self.run(HeldShards.open(tmp_path, LogSettings((url,)), self.catalog.cards_json(), 2))
        self.shards.quota_gate, self.shards.commit_gate = self.run(self._events())
        self.quota = QuotaBook(2)
        self.ingestor = Ingestor(self.catalog, self.shards, self.quota, 1 << 20, sole_replica=False)

    @staticmethod
    async def _events() -> tuple[asyncio.Event, asyncio.Event]:
        return asyncio.Event(), asyncio.Event()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def batch(self, n: int, rng: np.random.Generator, card: MechanismCard | None = None) -> pb.ReportBatch:
        card = card or self.card
        return reports_to_proto(make_reports(card.schema, n, rng), card.schema.name, card.version, 0)

    async def stored(self) -> int:
        return sum([(await worker.status()).rows.get(ROUND, 0) for worker in self.shards.workers])

    def close(self) -> None:
        self.shards.quota_gate.set()
        self.shards.commit_gate.set()
        self.run(self.ingestor.close())
        self.run(self.shards.close())
        self.loop.close()
        self.nats.stop()


@pytest.fixture
def intake(tmp_path: Path) -> Iterator[Intake]:
    opened = Intake(tmp_path)
    yield opened
    opened.close()


async def _turns(count: int = 20) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_a_batch_admitted_while_the_round_closes_is_refused(intake: Intake, rng: np.random.Generator) -> None:
    intake.shards.commit_gate.set()

    async def scenario() -> None:
        admission = asyncio.ensure_future(intake.ingestor.admit(ANONYMOUS, intake.batch(30, rng)))
        await _turns()
        assert not admission.done()           # past the round's check, reading the quota
        intake.catalog.close_round("words")
        intake.shards.quota_gate.set()
        with pytest.raises(WrongState, match="closed round of the discovery 'words'"):
            await admission
        assert intake.quota.available((ROUND, ANONYMOUS.id), 1000) == 1000   # its reservation released
        assert await intake.stored() == 0

    intake.run(scenario())


def test_the_close_waits_for_the_batches_being_committed(intake: Intake, rng: np.random.Generator) -> None:
    intake.shards.quota_gate.set()

    async def scenario() -> None:
        admitted = await intake.ingestor.admit(ANONYMOUS, intake.batch(40, rng))
        ack = intake.ingestor.commit(admitted)
        other = intake.ingestor.commit(await intake.ingestor.admit(
            ANONYMOUS, intake.batch(5, rng, RATINGS_CARD)))
        intake.catalog.close_round("words")
        settled = asyncio.ensure_future(intake.ingestor.settled(ROUND))
        await _turns()
        assert not settled.done() and not ack.done()      # the batch waits for its shards' commit
        intake.shards.commit_gate.set()
        await settled
        assert ack.done() and (await ack).accepted == 40
        assert await intake.stored() == 40                 # in the statistics the round is decoded from
        await other
        with pytest.raises(WrongState, match="closed round"):
            await intake.ingestor.admit(ANONYMOUS, intake.batch(3, rng))
        intake.catalog.reopen_round("words")               # a refused close takes reports again
        assert (await intake.ingestor.commit(await intake.ingestor.admit(ANONYMOUS, intake.batch(3, rng)))
                ).accepted == 3

    intake.run(scenario())

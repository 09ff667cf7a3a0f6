"""Closing a round's intake loses no acknowledged report (without a server or Ray: shard workers on this event
loop, an embedded NATS log): a batch admitted while the round closes is refused once its quota is settled, with
its reservation released and nothing stored; a batch being committed when the round closes is waited for, and
is in the statistics the round is then decoded from; a close whose caller goes away still ends (stored,
registered, served); a store that fails is judged by the state file (the commit point)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.ingress.ingest import Ingestor
from ldpsynth.aggregator.ingress.quota import QuotaBook
from ldpsynth.aggregator.operate import states
from ldpsynth.aggregator.operate.rounds import RoundKeeper
from ldpsynth.aggregator.operate.states import FileStates
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand, state_file, store
from ldpsynth.aggregator.runtime.local_shards import LocalShards
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.datadir import DataDirError
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.segments import CommitOutcome, Segment
from ldpsynth.serving.auth import ANONYMOUS
from ldpsynth.serving.errors import TryLater, WrongState
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema, DiscoveryState
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
        self.data_dir, self.discoveries = tmp_path / "data", discoveries
        self.nats = EmbeddedNats(tmp_path / "log")
        url = self.nats.start()
        self.settings = LogSettings((url,))
        self.shards = self.run(HeldShards.open(tmp_path, self.settings, self.catalog.cards_json(), 2))
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


def taking_reports(catalog: Catalog) -> bool:
    try:
        catalog.get(ROUND)
    except WrongState:
        return False
    return True


def test_a_close_goes_to_its_end_when_its_caller_goes_away(intake: Intake, rng: np.random.Generator,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    intake.shards.quota_gate.set()
    intake.shards.commit_gate.set()
    written = threading.Event()

    def slow_store(path: Path, state: DiscoveryState) -> dict[str, Any]:
        time.sleep(0.3)                                    # the state's write, in its thread
        done = store(path, state)
        written.set()
        return done

    monkeypatch.setattr(states, "store", slow_store)

    async def scenario() -> None:
        log = await ReplicatedLog.connect(intake.settings, "test-rounds")
        try:
            keeper = await RoundKeeper.open(FileStates(intake.data_dir), intake.discoveries, intake.catalog,
                                            intake.ingestor, intake.shards, log)
            await intake.ingestor.commit(await intake.ingestor.admit(ANONYMOUS, intake.batch(7, rng)))
            call = asyncio.ensure_future(keeper.advance("words"))
            while taking_reports(intake.catalog):
                await asyncio.sleep(0.01)                  # the round's intake is closed: the close has begun
            call.cancel()                                  # the caller goes away
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(100):                           # 5 s at most
                served = intake.catalog.discovery("words")
                if served is not None and served.round == 1:
                    break
                await asyncio.sleep(0.05)
            assert served is not None and served.round == 1, "the close did not end"
            assert written.is_set() and await log.card("words/round-1") is not None
            assert json.loads(state_file(intake.data_dir, "words").read_text())["closed"][0]["n"] == 7
        finally:
            await log.close()

    intake.run(scenario())


@pytest.mark.parametrize("lands", [False, True], ids=["write lost", "write landed"])
def test_a_failed_store_is_judged_by_the_state_file(intake: Intake, rng: np.random.Generator,
                                                     monkeypatch: pytest.MonkeyPatch, lands: bool) -> None:
    intake.shards.quota_gate.set()
    intake.shards.commit_gate.set()

    def failing_store(path: Path, state: DiscoveryState) -> dict[str, Any]:
        if lands:                       # the state file was renamed into place, then the directory's fsync failed
            store(path, state)
        raise DataDirError("cannot write the state (Input/output error)")

    monkeypatch.setattr(states, "store", failing_store)

    async def scenario() -> None:
        log = await ReplicatedLog.connect(intake.settings, "test-rounds")
        try:
            keeper = await RoundKeeper.open(FileStates(intake.data_dir), intake.discoveries, intake.catalog,
                                            intake.ingestor, intake.shards, log)
            await intake.ingestor.commit(await intake.ingestor.admit(ANONYMOUS, intake.batch(4, rng)))
            if lands:                   # stored: the round is closed after all, and the next one served
                assert (await keeper.advance("words"))["open_round"] == 1
                assert not taking_reports(intake.catalog)
            else:                       # not stored: refused, the round takes reports again
                with pytest.raises(TryLater, match="could not be stored"):
                    await keeper.advance("words")
                assert taking_reports(intake.catalog)
            served = intake.catalog.discovery("words")
            stored = json.loads(state_file(intake.data_dir, "words").read_text())["round"]
            assert served is not None and served.round == stored == (1 if lands else 0)
        finally:
            await log.close()

    intake.run(scenario())

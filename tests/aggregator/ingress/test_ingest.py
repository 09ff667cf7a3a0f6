"""The ingest handler without a server or Ray: shard workers on this event loop behind the
Shards protocol (LocalShards), writing to an embedded NATS log (127.0.0.1) in the test's directory."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.errors import ShardUnavailable
from ldpsynth.aggregator.ingress.ingest import Ingestor, route, split_by_shard
from ldpsynth.aggregator.ingress.quota import QuotaBook, QuotaKey
from ldpsynth.aggregator.query.engine import QueryEngine
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.local_shards import LocalShards
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.idindex import sort_ids
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.segments import CommitOutcome, Segment
from ldpsynth.aggregator.storage.shard_worker import CALLS, ShardWorker
from ldpsynth.serving.auth import ANONYMOUS, Credential
from ldpsynth.serving.status import status_of
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2 as pb

from ..conftest import GRAPH, GRAPH_CARD, RATINGS, RATINGS_CARD, batch, make_reports

T = TypeVar("T")


class FailingShards(LocalShards):
    """LocalShards that can fail a shard before or after it commits."""

    def __init__(self, workers: list[ShardWorker]):
        super().__init__(workers)
        self.fail_before: set[int] = set()
        self.fail_after: set[int] = set()

    async def commit(self, shard: int, segments: list[Segment], trace: dict[str, str]) -> CommitOutcome:
        if shard in self.fail_before:
            raise ShardUnavailable(f"shard {shard} down")
        await asyncio.sleep(0.002)  # let concurrent batches queue up, as a real commit does
        outcome = await super().commit(shard, segments, trace)
        if shard in self.fail_after:
            raise ShardUnavailable(f"shard {shard}: reply lost")
        return outcome

    async def quota_usage(self, shard: int) -> dict[QuotaKey, int]:
        if shard in self.fail_before:
            raise ShardUnavailable(f"shard {shard} down")
        return await super().quota_usage(shard)

    async def quota_of(self, shard: int, collection: str, credential: str) -> int:
        if shard in self.fail_before:
            raise ShardUnavailable(f"shard {shard} down")
        return await super().quota_of(shard, collection, credential)

    async def rows_of(self, shard: int, collection: str = "ratings") -> int:
        return (await self.workers[shard].status()).rows.get(collection, 0)

    async def stored(self, collection: str = "ratings") -> int:
        return sum([await self.rows_of(k, collection) for k in range(self.num_shards)])


class Harness:
    """An Ingestor over FailingShards (and their embedded log), driven on one event loop of its own."""

    def __init__(self, tmp_path: Path, limits: Limits | None = None, shards: int = 3, sole_replica: bool = True):
        self.loop = asyncio.new_event_loop()
        self.catalog = Catalog([RATINGS_CARD, GRAPH_CARD], limits or Limits())
        self.nats = EmbeddedNats(tmp_path / "log")
        url = self.nats.start()
        self.backend = self.run(FailingShards.open(tmp_path, LogSettings((url,)), self.catalog.cards_json(), shards))
        self.quota = QuotaBook(shards)
        self.ingestor = Ingestor(self.catalog, self.backend, self.quota, max_group_rows=1 << 20,
                                 sole_replica=sole_replica)

    def stored(self, collection: str = "ratings") -> int:
        return self.run(self.backend.stored(collection))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.run(self.ingestor.close())
        self.run(self.backend.close())
        self.loop.close()
        self.nats.stop()

    async def submit(self, message: pb.ReportBatch, credential: Credential = ANONYMOUS) -> pb.BatchAck:
        return await self.ingestor.commit(await self.ingestor.admit(credential, message))

    def status(self, message: pb.ReportBatch, credential: Credential = ANONYMOUS) -> grpc.StatusCode:
        with pytest.raises(LdpsynthError) as info:
            self.run(self.submit(message, credential))
        return status_of(info.value, '')[0]


@pytest.fixture
def open_harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    """Opens harnesses on ``tmp_path``; each is closed at teardown, also when the test fails (its
    log connections would otherwise be collected, with warnings, during a later test)."""
    opened: list[Harness] = []

    def open_one(limits: Limits | None = None, shards: int = 3, sole_replica: bool = True) -> Harness:
        opened.append(Harness(tmp_path, limits, shards, sole_replica))
        return opened[-1]

    yield open_one
    for h in opened:
        h.close()


@pytest.fixture
def harness(open_harness: Callable[..., Harness]) -> Harness:
    return open_harness()


def test_accept_then_duplicates(harness: Harness, rng: np.random.Generator) -> None:
    reports = make_reports(RATINGS, 500, rng)
    ack = harness.run(harness.submit(batch(reports, sequence=7)))
    assert (ack.sequence, ack.accepted, ack.duplicates) == (7, 500, 0)
    ack = harness.run(harness.submit(batch(reports, sequence=8)))
    assert (ack.accepted, ack.duplicates) == (0, 500)
    assert harness.stored() == 500
    # Every shard got the reports routed to it, and only those.
    shards = route(reports.report_ids, 3)
    assert [harness.run(harness.backend.rows_of(k)) for k in range(3)] == np.bincount(shards, minlength=3).tolist()


def _mutate(reports: Reports, **fields: object) -> pb.ReportBatch:
    message = batch(reports)
    for name, value in fields.items():
        if name == "public_codes":
            del message.public_codes[:]
            message.public_codes.extend(value)  # type: ignore[arg-type]
        else:
            setattr(message, name, value)
    return message


def _codes(values: list[int]) -> bytes:
    return np.asarray(values, "<u8").tobytes()


BAD_BATCHES: dict[str, tuple[Callable[[Reports], pb.ReportBatch], grpc.StatusCode, str]] = {
    "private code out of domain": (lambda r: _mutate(r, private_codes=_codes([0, 5, 1])),
                                   grpc.StatusCode.INVALID_ARGUMENT, "private_codes at position 1"),
    "public code out of domain": (lambda r: _mutate(r, public_codes=[_codes([0, 1, 100])]),
                                  grpc.StatusCode.INVALID_ARGUMENT, "public_codes[movie] at position 2"),
    "code above 2^62": (lambda r: _mutate(r, private_codes=_codes([0, 2**63, 1])),
                        grpc.StatusCode.INVALID_ARGUMENT, "private_codes"),
    "id length": (lambda r: _mutate(r, report_ids=r.report_ids.tobytes()[:-1]),
                  grpc.StatusCode.INVALID_ARGUMENT, "report_ids"),
    "column count": (lambda r: _mutate(r, public_codes=[_codes([0, 1, 2])] * 2),
                     grpc.StatusCode.INVALID_ARGUMENT, "public_codes"),
    "column length": (lambda r: _mutate(r, private_codes=_codes([0, 1])),
                      grpc.StatusCode.INVALID_ARGUMENT, "private_codes"),
    "empty batch": (lambda r: _mutate(r, report_ids=b"", private_codes=b"", public_codes=[b""]),
                    grpc.StatusCode.INVALID_ARGUMENT, "empty batch"),
    "unknown collection": (lambda r: _mutate(r, collection="nope"),
                           grpc.StatusCode.FAILED_PRECONDITION, "'nope' is not served"),
    "mechanism version": (lambda r: _mutate(r, mechanism_version="E/0"),
                          grpc.StatusCode.FAILED_PRECONDITION, "mechanism_version"),
    "too many reports": (lambda r: _mutate(r, report_ids=bytes(16 * 65537)),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "max_batch_reports = 65536"),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_rejected_whole(harness: Harness, rng: np.random.Generator, case: str) -> None:
    harness.run(harness.submit(batch(make_reports(RATINGS, 20, rng))))
    make, code, fragment = BAD_BATCHES[case]
    reports = make_reports(RATINGS, 3, rng)
    reports = Reports(reports.report_ids, np.array([0, 4, 1]), np.array([[0], [1], [2]]))
    with pytest.raises(LdpsynthError) as info:
        harness.run(harness.submit(make(reports)))
    assert status_of(info.value, '')[0] == code
    assert fragment in status_of(info.value, '')[1]
    assert harness.stored() == 20
    assert harness.quota.available(("ratings", "anonymous"), 10**6) == 10**6 - 20


def test_messages_never_echo_a_private_value(harness: Harness) -> None:
    reports = Reports(np.zeros((2, 16), np.uint8) + np.arange(2, dtype=np.uint8)[:, None],
                      np.array([3, 987654321]), np.array([[1], [2]]))
    with pytest.raises(LdpsynthError) as info:
        harness.run(harness.submit(batch(reports)))
    assert "987654321" not in status_of(info.value, '')[1]
    assert "legal range" in status_of(info.value, '')[1]


def test_permission_per_collection(harness: Harness, rng: np.random.Generator) -> None:
    graph_only = Credential("g", frozenset({"submit"}), frozenset({"graph"}))
    assert harness.status(batch(make_reports(RATINGS, 5, rng)), graph_only) == grpc.StatusCode.PERMISSION_DENIED
    # Unknown collections are not revealed to a credential restricted to others.
    assert harness.status(_mutate(make_reports(RATINGS, 5, rng), collection="nope"),
                          graph_only) == grpc.StatusCode.PERMISSION_DENIED
    ack = harness.run(harness.submit(batch(make_reports(GRAPH, 5, rng), GRAPH), graph_only))
    assert ack.accepted == 5
    assert harness.stored() == 0


def test_quota_counts_new_reports_only_and_survives_restart(open_harness: Callable[..., Harness],
                                                            rng: np.random.Generator) -> None:
    h = open_harness(Limits(max_rows_per_client=100))
    alice = Credential("alice", frozenset({"submit"}), None)
    first = make_reports(RATINGS, 60, rng)
    assert h.run(h.submit(batch(first), alice)).accepted == 60
    assert h.status(batch(make_reports(RATINGS, 41, rng)), alice) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # A retry of stored reports is not charged, even at the limit; a mix is charged its new part.
    ack = h.run(h.submit(batch(Reports.concat([first, make_reports(RATINGS, 40, rng)], 1)), alice))
    assert (ack.accepted, ack.duplicates) == (40, 60)
    assert h.run(h.submit(batch(first), alice)).duplicates == 60
    assert h.status(batch(make_reports(RATINGS, 1, rng)), alice) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert h.run(h.submit(batch(make_reports(RATINGS, 100, rng)))).accepted == 100  # another credential
    assert h.stored() == 200
    h.close()

    # A new server on the same files knows alice's usage before she sends anything.
    again = open_harness(Limits(max_rows_per_client=100))
    again.run(again.ingestor.load_quota())
    assert again.quota.used(("ratings", "alice")) == 100
    assert again.status(batch(make_reports(RATINGS, 1, rng)), alice) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_concurrent_batches_of_one_credential_cannot_pass_the_limit(open_harness: Callable[..., Harness],
                                                                     rng: np.random.Generator) -> None:
    h = open_harness(Limits(max_rows_per_client=250))

    async def many() -> list[object]:
        return await asyncio.gather(*(h.submit(batch(make_reports(RATINGS, 50, rng))) for _ in range(8)),
                                    return_exceptions=True)

    outcomes = h.run(many())
    acks = [o for o in outcomes if isinstance(o, pb.BatchAck)]
    refused = [o for o in outcomes if isinstance(o, LdpsynthError)]
    assert len(acks) == 5 and len(refused) == 3
    assert all(status_of(e, '')[0] == grpc.StatusCode.RESOURCE_EXHAUSTED for e in refused)
    assert h.stored() == 250


@pytest.mark.parametrize("reader", ["count_existing", "pin"])
def test_a_reader_meeting_a_new_collection_keeps_its_first_commit(harness: Harness, rng: np.random.Generator,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   reader: str) -> None:
    """A reader (quota admission, a query's pin) that asks a shard worker for a collection it does not
    hold yet, and waits for the card while the collection's first commit lands, must find that commit's
    rows: were the collection made a second time, the rows and the ids that find duplicates would be
    lost from memory (the log keeps them). CI once saw 162 of 250 acknowledged rows this way."""
    worker = harness.backend.workers[0]
    log = worker._log
    assert log is not None
    fetch_card = log.card
    release = asyncio.Event()
    calls: list[str] = []

    async def first_card_waits(name: str) -> str | None:
        calls.append(name)
        if len(calls) == 1:
            await release.wait()
        return await fetch_card(name)

    monkeypatch.setattr(log, "card", first_card_waits)
    reports = make_reports(RATINGS, 100, rng)
    segment = Segment("ratings", "anonymous", reports.report_ids, reports.public_keys(RATINGS),
                      reports.private_codes)

    readers = {"count_existing": lambda: worker.count_existing("ratings", reports.report_ids),
               "pin": lambda: worker.pin("ratings")}

    async def race() -> tuple[CommitOutcome, CommitOutcome]:
        read = asyncio.ensure_future(readers[reader]())
        await asyncio.sleep(0.01)  # the reader now waits for the card
        first = await worker.commit([segment])
        release.set()
        await read
        return first, await worker.commit([segment])

    first, again = harness.run(race())
    assert calls == ["ratings", "ratings"]
    assert first.results == ((100, 0),)
    assert again.results == ((0, 100),)
    assert harness.run(harness.backend.rows_of(0)) == 100


def test_concurrent_batches_share_group_commits(harness: Harness, rng: np.random.Generator) -> None:
    async def many() -> list[pb.BatchAck]:
        return await asyncio.gather(*(harness.submit(batch(make_reports(RATINGS, 100, rng), sequence=i))
                                      for i in range(40)))

    acks = harness.run(many())
    assert sorted(a.sequence for a in acks) == list(range(40))
    assert sum(a.accepted for a in acks) == 4000 == harness.stored()
    commits = [c.commits for c in harness.ingestor.committers]
    assert all(0 < c < 10 for c in commits), commits


def test_the_commit_interval_grows_with_the_batches_in_flight(harness: Harness, rng: np.random.Generator) -> None:
    """Under load a shard's commits are spaced by 4 ms per batch in flight (up to the replica's
    ``max_commit_interval``), so groups grow; a lone device sending batch after batch waits 4 ms at most."""
    harness.ingestor = Ingestor(harness.catalog, harness.backend, harness.quota, max_group_rows=1 << 20,
                                max_commit_interval=1.0)

    async def one_by_one() -> float:
        started = time.monotonic()
        for i in range(10):
            assert (await harness.submit(batch(make_reports(RATINGS, 30, rng), sequence=i))).accepted == 30
        return time.monotonic() - started

    assert harness.run(one_by_one()) < 3.0  # a fixed 1 s interval would take 9 s or more
    before = [c.commits for c in harness.ingestor.committers]

    async def many() -> float:
        started = time.monotonic()
        await asyncio.gather(*(harness.submit(batch(make_reports(RATINGS, 30, rng), sequence=i)) for i in range(200)))
        return time.monotonic() - started

    seconds = harness.run(many())
    commits = [c.commits - b for c, b in zip(harness.ingestor.committers, before)]
    assert all(1 <= c <= 3 for c in commits), commits  # 200 in flight: commits 0.8 s apart, each carrying
    assert seconds < 5.0  # all that arrived meanwhile
    assert harness.stored() == 300 + 6000


def test_shard_failure_is_unavailable_and_retry_is_exact(harness: Harness, rng: np.random.Generator) -> None:
    reports = make_reports(RATINGS, 300, rng)
    harness.backend.fail_before.add(1)
    assert harness.status(batch(reports)) == grpc.StatusCode.UNAVAILABLE
    assert harness.stored() < 300  # shards 0 and 2 committed their parts
    harness.backend.fail_before.clear()
    ack = harness.run(harness.submit(batch(reports)))
    assert ack.accepted + ack.duplicates == 300
    assert harness.stored() == 300
    assert ack.accepted == np.sum(route(reports.report_ids, 3) == 1)


def test_lost_reply_resyncs_quota(open_harness: Callable[..., Harness], rng: np.random.Generator) -> None:
    h = open_harness(Limits(max_rows_per_client=200), shards=2)
    h.backend.fail_after.add(0)  # shard 0 commits, but its reply is lost
    assert h.status(batch(make_reports(RATINGS, 100, rng))) == grpc.StatusCode.UNAVAILABLE
    h.backend.fail_after.clear()
    assert h.quota.stale == {0}
    assert h.run(h.backend.rows_of(0)) > 0
    assert h.stored() == 100  # both parts are durable, the batch was not acknowledged
    # The next admission re-reads shard 0's counter first: exactly 100 more fit (without the
    # re-read, the mirror would miss shard 0's part and let more through).
    assert h.status(batch(make_reports(RATINGS, 101, rng))) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert h.quota.stale == set()
    assert h.run(h.submit(batch(make_reports(RATINGS, 100, rng)))).accepted == 100
    assert sum(h.run(h.backend.quota_usage(k))[("ratings", "anonymous")] for k in range(2)) == 200


def test_resync_while_shard_down_is_unavailable(open_harness: Callable[..., Harness], rng: np.random.Generator) -> None:
    h = open_harness(Limits(max_rows_per_client=10), shards=2)
    h.quota.stale.add(1)
    h.backend.fail_before.add(1)
    assert h.status(batch(make_reports(RATINGS, 1, rng))) == grpc.StatusCode.UNAVAILABLE


def test_local_shards_answer_the_query_engine_and_call_only_the_workers_calls(harness: Harness,
                                                                                rng: np.random.Generator) -> None:
    """The query side of the Shards protocol over LocalShards (pins, statistics, rows in id order), and
    a worker reached by name answers only its CALLS, each one of its coroutine methods."""
    reports = make_reports(RATINGS, 300, rng)
    harness.run(harness.submit(batch(reports)))
    engine = QueryEngine(harness.catalog, harness.backend)
    rows = harness.run(engine.export_rows("ratings"))
    assert np.array_equal(rows.report_ids, reports.report_ids[sort_ids(reports.report_ids).order])
    pins = harness.run(harness.backend.pin("ratings"))
    assert sum(s.n for s in harness.run(harness.backend.pinned_stats(pins, "ratings"))) == 300
    harness.run(harness.backend.unpin(pins))
    assert all(inspect.iscoroutinefunction(getattr(ShardWorker, name)) for name in CALLS)
    with pytest.raises(AttributeError, match="not one of its calls"):
        harness.run(harness.backend.call(0, "start", deadline=1.0))


def test_route_is_stable_and_spread(rng: np.random.Generator) -> None:
    ids = make_reports(RATINGS, 40000, rng).report_ids
    shards = route(ids, 4)
    assert np.array_equal(shards, route(ids.copy(), 4))
    assert np.array_equal(shards, np.frombuffer(ids[:, :8].tobytes(), "<u8") % 4)
    counts = np.bincount(shards, minlength=4)
    assert counts.min() > 9000, counts


@pytest.mark.parametrize("num_shards", [1, 3, 7])
def test_split_by_shard_is_the_mask_partition_in_arrival_order(num_shards: int, rng: np.random.Generator) -> None:
    """Each shard's part is exactly its reports (by :func:`route`) in arrival order; shards without
    reports get no part (7 shards, 5 reports: some are empty)."""
    for count in (5, 3000):
        reports = make_reports(RATINGS, count, rng)
        keys, codes = rng.integers(0, 10**9, count), reports.private_codes
        shards = route(reports.report_ids, num_shards)
        parts = split_by_shard(reports.report_ids, keys, codes, num_shards)
        assert [shard for shard, _ in parts] == sorted(set(shards.tolist()))
        for shard, (ids, part_keys, part_codes) in parts:
            mask = shards == shard
            assert ids.shape == (mask.sum(), 16) and ids.dtype == np.uint8
            assert np.array_equal(ids, reports.report_ids[mask])
            assert np.array_equal(part_keys, keys[mask]) and np.array_equal(part_codes, codes[mask])


def test_config_limits_published(tmp_path: Path) -> None:
    catalog = Catalog([RATINGS_CARD], replace(Limits(), max_rows_per_client=5))
    message = catalog.proto("ratings")
    assert message.limits.max_rows_per_client == 5
    assert message.mechanism_version == RATINGS_CARD.version
    with pytest.raises(LdpsynthError) as info:
        catalog.proto("graph")
    assert status_of(info.value, '')[0] == grpc.StatusCode.FAILED_PRECONDITION


def test_quota_charges_a_repeated_id_once(open_harness: Callable[..., Harness], rng: np.random.Generator) -> None:
    """A batch [id, id] stores one report, so with room for one more report it is admitted
    (it used to be refused as "this batch adds 2")."""
    h = open_harness(Limits(max_rows_per_client=10), shards=2)
    assert h.run(h.submit(batch(make_reports(RATINGS, 9, rng)))).accepted == 9
    one = make_reports(RATINGS, 1, rng)
    ack = h.run(h.submit(batch(Reports.concat([one, one], 1))))
    assert (ack.accepted, ack.duplicates) == (1, 1)
    assert h.status(batch(make_reports(RATINGS, 1, rng))) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_replicas_share_the_quota(open_harness: Callable[..., Harness], rng: np.random.Generator) -> None:
    """Two replicas (two ingestors, each with its own mirror) over the same shard workers: what one
    stored counts against the credential at the other, which reads the counters before admitting."""
    h = open_harness(Limits(max_rows_per_client=100), shards=2, sole_replica=False)
    other = Ingestor(h.catalog, h.backend, QuotaBook(2), max_group_rows=1 << 20, sole_replica=False)
    alice = Credential("alice", frozenset({"submit"}), None)
    assert h.run(h.submit(batch(make_reports(RATINGS, 70, rng)), alice)).accepted == 70

    async def through_other(reports: Reports) -> pb.BatchAck:
        return await other.commit(await other.admit(alice, batch(reports)))

    with pytest.raises(LdpsynthError) as info:
        h.run(through_other(make_reports(RATINGS, 31, rng)))
    assert status_of(info.value, '')[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert h.run(through_other(make_reports(RATINGS, 30, rng))).accepted == 30
    assert h.status(batch(make_reports(RATINGS, 1, rng)), alice) == grpc.StatusCode.RESOURCE_EXHAUSTED
    h.run(other.close())



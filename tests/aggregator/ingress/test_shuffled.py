"""Sealed reports through a shuffler, end to end: devices seal with the SDK, a test stand-in for the
shuffler mixes and forwards them, the replica opens, validates and stores them (docs/contract.md §16).

The stand-in (:class:`StandInShuffler`) is a test harness, not the product shuffler: a few lines of
``grpc.aio`` that pool what devices send, permute it, forward it to ``SubmitShuffled`` in batches, and
acknowledge the devices once the replica acknowledged everything."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_records import decode
from ldpsynth.aggregator.storage.sealing_key import FILE_NAME, read_key_file
from ldpsynth.client import Client, PrivacyLedger, QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits, reports_to_proto
from ldpsynth.shared.queries.builders import marginal
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import (
    ENC_BYTES,
    OpeningKey,
    SealingKey,
    encode_plaintexts,
    seal_reports,
    sealed_report_bytes,
)
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import shuffler_pb2 as spb

from ..conftest import (
    GRAPH,
    RATINGS,
    RATINGS_CARD,
    VERSION,
    ServerThread,
    make_reports,
    stored_ids,
    stored_rows,
    verify,
)

StartServer = Callable[..., ServerThread]
DEVICE, MIXER, MIXER_RATINGS, ANALYST = "device-token-1", "mixer-token-1", "mixer-ratings-token", "analyst-token"
SHUFFLED_METHOD = "/ldpsynth.v1.CollectionService/SubmitShuffled"


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"clients": [
        {"id": "device-1", "token": DEVICE, "collections": "*", "roles": ["submit", "query"]},
        {"id": "mixer", "token": MIXER, "collections": "*", "roles": ["shuffler"]},
        {"id": "mixer-ratings", "token": MIXER_RATINGS, "collections": ["ratings"], "roles": ["shuffler"]},
        {"id": "analyst", "token": ANALYST, "collections": "*", "roles": ["query"]},
    ]}))
    path.chmod(0o600)
    return path


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> ServerThread:
    return start_server(tokens_file=tokens_file(tmp_path))


def collection_of(server: ServerThread, name: str = "ratings", token: str = MIXER) -> CollectionInfo:
    stub = pb_grpc.CollectionServiceStub(server.channel())
    return CollectionInfo.from_proto(stub.GetCollection(pb.GetCollectionRequest(collection=name),
                                                        metadata=bearer(token)))


def shuffled(server: ServerThread, batch: pb.SealedBatch | bytes, token: str | None = MIXER
             ) -> tuple[pb.ShuffledAck | None, grpc.StatusCode, str]:
    """One raw SubmitShuffled call: the ack, or the status it ended with."""
    raw = batch if isinstance(batch, bytes) else batch.SerializeToString()
    call = server.channel().unary_unary(SHUFFLED_METHOD, response_deserializer=pb.ShuffledAck.FromString)
    try:
        return call(raw, metadata=bearer(token) if token else None, timeout=60), grpc.StatusCode.OK, ""
    except grpc.RpcError as exc:
        return None, exc.code(), exc.details() or ""


def one_key(schema: Schema, n: int, rng: np.random.Generator) -> Reports:
    """``n`` valid reports of one public key (every public code 0, so pool key 0): what one pool holds."""
    reports = make_reports(schema, n, rng)
    return Reports(reports.report_ids, reports.private_codes, np.zeros_like(reports.public_codes))


def sealed_batch(key: SealingKey, reports: Reports, collection: str = "ratings", sequence: int = 0,
                 key_id: bytes | None = None, pool_key: int = 0) -> pb.SealedBatch:
    sealed = seal_reports(key, collection, VERSION, reports)
    return pb.SealedBatch(collection=collection, key_id=key.key_id if key_id is None else key_id,
                          sequence=sequence, reports=sealed.tobytes(), pool_key=pool_key)


class StandInShuffler:
    """Test harness: pools devices' sealed reports per (collection, key, public key), permutes them, forwards
    them in batches of ``forward_batch`` to the replica's ``SubmitShuffled`` and acknowledges each device once
    every forwarded batch was acknowledged. Flushes every ``linger`` seconds the pools of at least ``threshold``
    reports. Records what it saw. ``schema``: a collection's besides ratings and graph (its sealed reports' width)."""

    def __init__(self, replica: str, token: str, forward_batch: int = 50, linger: float = 0.3, seed: int = 7,
                 schema: Schema = GRAPH, threshold: int = 1):
        self.replica, self.token, self.forward_batch, self.linger = replica, token, forward_batch, linger
        self.threshold = threshold
        self.schema = schema
        self.rng = np.random.default_rng(seed)
        self.received: list[bytes] = []  # every sealed report a device sent, as sent
        self.acks: list[pb.ShuffledAck] = []
        self.orders: list[np.ndarray] = []
        self._pool: list[tuple[asyncio.Future[None], np.ndarray, tuple[str, bytes, int]]] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.address = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> str:
        self._server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(self._submit, request_deserializer=pb.SealedBatch.FromString,
                                                      response_serializer=spb.SealedAck.SerializeToString)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "ldpsynth.v1.ShufflerService", {"SubmitSealed": handler}),))
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self._channel = grpc.aio.insecure_channel(self.replica)
        self._forward = self._channel.unary_unary(SHUFFLED_METHOD, request_serializer=pb.SealedBatch.SerializeToString,
                                                  response_deserializer=pb.ShuffledAck.FromString)
        self._flusher = asyncio.create_task(self._flush_forever())
        return f"127.0.0.1:{port}"

    async def _submit(self, batch: pb.SealedBatch, context: grpc.aio.ServicerContext) -> spb.SealedAck:
        width = sealed_report_bytes(RATINGS if batch.collection == "ratings" else self.schema, VERSION)
        rows = np.frombuffer(batch.reports, np.uint8).reshape(-1, width)
        self.received += [row.tobytes() for row in rows]
        done = asyncio.get_running_loop().create_future()
        self._pool.append((done, rows, (batch.collection, bytes(batch.key_id), batch.pool_key)))
        await done  # acknowledged once the replica acknowledged every forwarded batch
        return spb.SealedAck(sequence=batch.sequence, accepted=len(rows))

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self.linger)
            pool = self._pool
            ready = {where for _, _, where in pool
                     if sum(len(p[1]) for p in pool if p[2] == where) >= self.threshold}
            self._pool = [p for p in pool if p[2] not in ready]
            for collection, key_id, pool_key in ready:
                mine = [p for p in pool if p[2] == (collection, key_id, pool_key)]
                rows = np.concatenate([p[1] for p in mine])
                order = self.rng.permutation(len(rows))  # the stand-in's "shuffle"
                self.orders.append(order)
                rows = rows[order]
                for i, start in enumerate(range(0, len(rows), self.forward_batch)):
                    part = rows[start:start + self.forward_batch]
                    ack = await self._forward(pb.SealedBatch(collection=collection, key_id=key_id, sequence=i,
                                                             reports=part.tobytes(), pool_key=pool_key),
                                              metadata=bearer(self.token), timeout=60)
                    self.acks.append(ack)
                for done, _, _ in mine:
                    done.set_result(None)

    def stop(self) -> None:
        async def stop() -> None:
            self._flusher.cancel()
            await self._server.stop(0)
            await self._channel.close()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


@pytest.fixture
def stand_in(server: ServerThread) -> Iterator[StandInShuffler]:
    shuffler = StandInShuffler(server.address, MIXER)
    yield shuffler
    shuffler.stop()


# ----- devices through the stand-in ------------------------------------------------------------------


def test_the_ledger_records_the_central_guarantee_the_server_states_for_the_minimum_batch(
        start_server: StartServer, tmp_path: Path, rng: np.random.Generator) -> None:
    """Issue 27 item 4, through a real server: a device reporting to a shuffled collection through the
    shuffler records with its spend the central guarantee of a release of the collection's minimum batch,
    and the server, once exactly that many reports are in, states the same one for its answers."""
    schema = Schema.from_json({
        "name": "shuffled", "epsilon": 2.0,
        "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 3, "public": True},
                       {"name": "rating", "type": "integer", "min": 1, "max": 5}],
        "shuffle": {"delta": 1e-9, "min_batch": 500, "shuffler": "independent"}})
    server = start_server(collections=(MechanismCard.for_schema(schema),), tokens_file=tokens_file(tmp_path))
    shuffler = StandInShuffler(server.address, MIXER, schema=schema, threshold=500, forward_batch=500)
    others = one_key(schema, 499, rng)
    others = Reports(others.report_ids, others.private_codes, np.ones_like(others.public_codes))  # movie 1 too
    outcome: list = []

    def device() -> None:  # waits in the pool of movie 1 until the other 499 reports join it
        with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger, \
                Client(server.address, token=DEVICE, shuffler=shuffler.address) as client:
            outcome.append(client.submit("shuffled", {"movie": [1], "rating": [4]}, ledger=ledger))
            outcome.append(ledger.guarantees("shuffled"))

    try:
        waiting = threading.Thread(target=device)
        waiting.start()
        time.sleep(0.5)
        with Client(server.address, token=DEVICE, shuffler=shuffler.address) as client:
            rest = client.submit_reports(collection_of(server, "shuffled", DEVICE), others)
        waiting.join(60)
    finally:
        shuffler.stop()
    result, recorded = outcome
    assert result.shuffled and result.acknowledged == 1 and rest.acknowledged == 499
    assert recorded is not None and (recorded.min_batch, recorded.rows_per_device, recorded.delta) == (500, 1, 1e-9)
    assert (result.central_epsilon, result.central_delta) == (recorded.central_epsilon, recorded.central_delta)
    with QueryClient(server.address, token=ANALYST) as analyst:
        answers = analyst.estimate("shuffled", queries=[marginal("rating")])
    stated = answers.guarantees
    assert stated is not None and stated.counts.tolist() == [500]
    assert stated.central == (recorded.central_epsilon, 1e-9) and stated.evaluated_at == 499  # the pool floor
    assert recorded.central_epsilon is not None and recorded.central_epsilon < stated.local_epsilon


def test_devices_seal_through_the_sdk_and_exactly_what_was_acknowledged_is_stored(
        server: ServerThread, stand_in: StandInShuffler, rng: np.random.Generator) -> None:
    info = collection_of(server, token=DEVICE)
    assert info.sealing is not None and info.sealing.key_id == server.server.backend.opening_key.key_id
    devices = [make_reports(RATINGS, n, rng) for n in (1, 40, 130, 7)]
    results = []

    def device(reports: Reports) -> None:
        with Client(server.address, token=DEVICE, shuffler=stand_in.address) as client:
            results.append(client.submit_reports(info, reports, batch_size=25))

    threads = [threading.Thread(target=device, args=(r,)) for r in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(r.acknowledged for r in results) == [1, 7, 40, 130] and all(r.duplicates == 0 for r in results)
    # What the stand-in saw: sealed reports only (no report id or code in clear), in an order it permuted.
    everything = Reports.concat(devices, 1)
    assert len(stand_in.received) == len(everything)
    assert all(len(r) == info.to_proto().sealing.sealed_report_bytes for r in stand_in.received)
    seen = b"".join(stand_in.received)
    assert not any(bytes(i) in seen for i in everything.report_ids)
    assert sum(a.accepted for a in stand_in.acks) == len(everything)
    assert all(a.undecryptable == a.invalid == a.duplicates == 0 for a in stand_in.acks)
    # The replica stored exactly the devices' reports, each once, codes and all.
    assert stored_rows(server, "ratings") == len(everything)
    assert stored_ids(server, "ratings") == set(map(bytes, everything.report_ids))
    rows = server.run(server.server._queries.engine.export_rows("ratings"))
    stored = {bytes(i): (int(c), int(k)) for i, c, k in zip(rows.report_ids, rows.private_codes, rows.public_keys)}
    keys = everything.public_keys(RATINGS)
    assert all(stored[bytes(i)] == (int(c), int(k))
               for i, c, k in zip(everything.report_ids, everything.private_codes, keys))


def test_the_ledger_and_memoization_are_as_today_and_a_memoized_row_is_sealed_afresh(
        server: ServerThread, stand_in: StandInShuffler, tmp_path: Path) -> None:
    rows = {"movie": [3, 3, 9], "rating": [4, 4, 1]}
    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger, \
            Client(server.address, token=DEVICE, shuffler=stand_in.address) as client:
        first = client.submit("ratings", rows, ledger=ledger)
        sent_first = list(stand_in.received)
        again = client.submit("ratings", rows, ledger=ledger)
    assert first.shuffled and again.shuffled
    assert (first.sent, first.acknowledged, first.memoized) == (2, 2, 1)
    assert first.epsilon_spent == pytest.approx(2 * RATINGS_CARD.mechanism.epsilon)
    assert (again.sent, again.acknowledged, again.memoized, again.epsilon_spent) == (2, 2, 3, 0.0)
    assert again.epsilon_total == first.epsilon_total
    resent = stand_in.received[len(sent_first):]
    assert len(resent) == 2 and not set(resent) & set(sent_first)  # new ciphertexts, not the old bytes
    assert not {r[:ENC_BYTES] for r in resent} & {r[:ENC_BYTES] for r in sent_first}
    assert stored_rows(server, "ratings") == 2  # the same report ids: duplicates at the replica
    assert sum(a.duplicates for a in stand_in.acks[-2:]) == 2  # one batch per public key (movies 3 and 9)


def test_a_shuffler_refuses_a_collection_without_a_key_before_charging(
        server: ServerThread, stand_in: StandInShuffler) -> None:
    info = collection_of(server, token=DEVICE)
    unsealed = CollectionInfo(info.card, info.limits, None)
    ledger = PrivacyLedger.for_simulation()
    with Client(server.address, token=DEVICE, shuffler=stand_in.address) as client:
        with pytest.raises(Exception, match="takes no sealed reports"):
            client.submit(unsealed, {"movie": [1], "rating": [2]}, ledger=ledger)
    assert ledger.spent("ratings") == 0


# ----- SubmitShuffled: statuses and counts ----------------------------------------------------------


def test_who_may_call_submit_shuffled(server: ServerThread, rng: np.random.Generator) -> None:
    key = collection_of(server).sealing
    batch = sealed_batch(key, one_key(RATINGS, 3, rng))
    assert shuffled(server, batch, token=None)[1] == grpc.StatusCode.UNAUTHENTICATED
    assert shuffled(server, batch, token="nope")[1] == grpc.StatusCode.UNAUTHENTICATED
    assert shuffled(server, batch, token=DEVICE)[1] == grpc.StatusCode.PERMISSION_DENIED
    assert shuffled(server, batch, token=ANALYST)[1] == grpc.StatusCode.PERMISSION_DENIED
    graph = pb.SealedBatch(collection="graph", key_id=key.key_id,
                           reports=seal_reports(key, "graph", VERSION, one_key(GRAPH, 2, rng)).tobytes())
    assert shuffled(server, graph, token=MIXER_RATINGS)[1] == grpc.StatusCode.PERMISSION_DENIED
    assert stored_rows(server, "ratings") == stored_rows(server, "graph") == 0
    ack, code, _ = shuffled(server, graph, token=MIXER)
    assert code == grpc.StatusCode.OK and ack.accepted == 2
    ack, code, _ = shuffled(server, batch, token=MIXER_RATINGS)
    assert code == grpc.StatusCode.OK and (ack.sequence, ack.accepted) == (0, 3)


def test_batches_bad_as_a_whole_are_refused_and_nothing_is_stored(server: ServerThread,
                                                                   rng: np.random.Generator) -> None:
    key = collection_of(server).sealing
    reports = one_key(RATINGS, 4, rng)
    good = sealed_batch(key, reports)
    other_key = OpeningKey.generate().public
    cases = [
        (b"\xff\x00garbage", grpc.StatusCode.INVALID_ARGUMENT, "SealedBatch"),
        (pb.SealedBatch(collection="nope", key_id=key.key_id, reports=good.reports),
         grpc.StatusCode.FAILED_PRECONDITION, "not served"),
        (sealed_batch(other_key, reports), grpc.StatusCode.FAILED_PRECONDITION, "key_id"),
        (pb.SealedBatch(collection="ratings", key_id=key.key_id, reports=good.reports[:-1]),
         grpc.StatusCode.INVALID_ARGUMENT, "multiple of 84"),
        (pb.SealedBatch(collection="ratings", key_id=key.key_id), grpc.StatusCode.INVALID_ARGUMENT, "multiple of 84"),
        (pb.SealedBatch(collection="ratings", reports=good.reports), grpc.StatusCode.FAILED_PRECONDITION, "key_id"),
    ]
    for batch, code, words in cases:
        ack, found, details = shuffled(server, batch)
        assert (found, ack) == (code, None), (batch, details)
        assert words in details
    assert stored_rows(server, "ratings") == 0


def test_over_the_limits_is_resource_exhausted(start_server: StartServer, tmp_path: Path,
                                               rng: np.random.Generator) -> None:
    server = start_server(tokens_file=tokens_file(tmp_path), limits=Limits(max_batch_reports=10))
    key = collection_of(server).sealing
    ack, code, details = shuffled(server, sealed_batch(key, one_key(RATINGS, 11, rng)))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_batch_reports = 10" in details
    ack, code, _ = shuffled(server, sealed_batch(key, one_key(RATINGS, 10, rng)))
    assert code == grpc.StatusCode.OK and ack.accepted == 10


def test_undecryptable_and_invalid_reports_are_dropped_and_counted_the_rest_stored(
        server: ServerThread, rng: np.random.Generator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ldpsynth")
    key = collection_of(server).sealing
    width = sealed_report_bytes(RATINGS, VERSION)
    valid = one_key(RATINGS, 5, rng)
    stored_before = one_key(RATINGS, 2, rng)
    assert shuffled(server, sealed_batch(key, stored_before))[0].accepted == 2
    tampered = seal_reports(key, "ratings", VERSION, one_key(RATINGS, 3, rng)).copy()
    tampered[:, -1] ^= 0x80
    other_collection = seal_reports(key, "graph", VERSION, one_key(RATINGS, 2, rng))
    other_key = seal_reports(OpeningKey.generate().public, "ratings", VERSION, one_key(RATINGS, 2, rng))
    garbage = np.frombuffer(os.urandom(2 * width), np.uint8).reshape(2, width)
    out_of_range = Reports(new_report_ids(3), np.array([5, 0, 2**63 + 1]), np.array([[0], [100], [1]]))
    invalid = seal_reports(key, "ratings", VERSION, out_of_range)
    other_version = _seal_plain(key, encode_plaintexts(one_key(RATINGS, 1, rng), "E/9"))
    replayed = seal_reports(key, "ratings", VERSION, stored_before)  # the same ids, sealed again
    parts = [seal_reports(key, "ratings", VERSION, valid), tampered, other_collection, other_key, garbage, invalid,
             other_version, replayed]
    rows = np.concatenate(parts)
    rows = rows[rng.permutation(len(rows))]
    batch = pb.SealedBatch(collection="ratings", key_id=key.key_id, sequence=41, reports=rows.tobytes())
    ack, code, _ = shuffled(server, batch)
    assert code == grpc.StatusCode.OK
    assert (ack.sequence, ack.accepted, ack.duplicates, ack.undecryptable, ack.invalid) == (41, 5, 2, 9, 4)
    assert stored_ids(server, "ratings") == set(map(bytes, Reports.concat([stored_before, valid], 1).report_ids))
    # The same batch again (a retry, through this or another replica): all duplicates, nothing new.
    ack, code, _ = shuffled(server, batch)
    assert (ack.accepted, ack.duplicates, ack.undecryptable, ack.invalid) == (0, 7, 9, 4)
    # Nothing valid at all: acknowledged with the counts, nothing stored.
    ack, code, _ = shuffled(server, pb.SealedBatch(collection="ratings", key_id=key.key_id,
                                                   reports=garbage.tobytes()))
    assert code == grpc.StatusCode.OK and (ack.accepted, ack.undecryptable) == (0, 2)
    assert stored_rows(server, "ratings") == 7
    # The replica's log: the counts and the shuffler's credential, no token, address or report bytes.
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "did not open" in said and "'mixer'" in said
    host, port = server.address.rsplit(":", 1)
    assert MIXER not in said and f":{port}" not in said and "ipv4:" not in said
    assert not any(row[:8].tobytes().hex() in said or repr(row[:8].tobytes())[2:-1] in said for row in rows)


SURVEY = Schema.from_json({"name": "survey", "epsilon": 2.0, "opens": "2026-01-01T00:00:00Z", "attributes": [
    {"name": "region", "type": "integer", "min": 0, "max": 3, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}],
    "shuffle": {"delta": 1e-9, "min_batch": 20, "shuffler": "independent"}})


def survey_reports(n: int, rng: np.random.Generator, region: int = 2) -> Reports:
    reports = make_reports(SURVEY, n, rng)
    return Reports(reports.report_ids, reports.private_codes, np.full_like(reports.public_codes, region))


def test_a_shuffled_collection_takes_no_report_in_clear(start_server: StartServer, tmp_path: Path,
                                                          rng: np.random.Generator) -> None:
    """Reports in clear to a shuffled collection are refused whole, FAILED_PRECONDITION, nothing stored: by the
    replica (SubmitBatch, SubmitReports) and, before anything is charged, by the SDK without a shuffler."""
    server = start_server(collections=(MechanismCard.for_schema(SURVEY),), tokens_file=tokens_file(tmp_path))
    stub = pb_grpc.CollectionServiceStub(server.channel())
    batch = reports_to_proto(survey_reports(30, rng), "survey", VERSION, 0)
    with pytest.raises(grpc.RpcError) as caught:
        stub.SubmitBatch(batch, metadata=bearer(DEVICE), timeout=30)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "'survey' is shuffled" in caught.value.details() and "never in clear" in caught.value.details()
    stream = stub.SubmitReports(iter([batch]), metadata=bearer(DEVICE), timeout=30)
    with pytest.raises(grpc.RpcError) as caught:
        list(stream)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    ledger = PrivacyLedger.for_simulation()
    with Client(server.address, token=DEVICE) as client:
        with pytest.raises(ValidationError, match="shuffler"):
            client.submit("survey", {"region": [1], "rating": [3]}, ledger=ledger)
    assert ledger.spent("survey") == 0 and stored_rows(server, "survey") == 0


def test_a_forwarded_pool_below_the_minimum_batch_once_opened_is_aborted_and_nothing_stored(
        start_server: StartServer, tmp_path: Path, rng: np.random.Generator) -> None:
    """min_batch 20 per forwarded batch of one public key, counted once opened: 19 valid reports (ABORTED), 18
    valid + 2 undecryptable, 18 + 2 of another region, 18 + 2 repeating an id (each ABORTED, nothing stored);
    20 valid, stored; the shuffler's devices would send theirs again into another pool."""
    server = start_server(collections=(MechanismCard.for_schema(SURVEY),), tokens_file=tokens_file(tmp_path))
    key = collection_of(server, "survey").sealing

    def pool(*parts: np.ndarray) -> pb.SealedBatch:
        return pb.SealedBatch(collection="survey", key_id=key.key_id, pool_key=2,
                              reports=np.concatenate(parts).tobytes())

    def seal(reports: Reports) -> np.ndarray:
        return seal_reports(key, "survey", VERSION, reports)

    width = sealed_report_bytes(SURVEY, VERSION)
    eighteen = survey_reports(18, rng)
    again = Reports(eighteen.report_ids[:2], eighteen.private_codes[:2], eighteen.public_codes[:2])
    for batch in (pool(seal(survey_reports(19, rng))),
                  pool(seal(eighteen), np.frombuffer(os.urandom(2 * width), np.uint8).reshape(2, width)),
                  pool(seal(eighteen), seal(survey_reports(2, rng, region=3))),
                  pool(seal(eighteen), seal(again))):
        ack, code, details = shuffled(server, batch)
        assert (ack, code) == (None, grpc.StatusCode.ABORTED), details
        assert "18 distinct valid" in details or "19 distinct valid" in details
        assert "minimum batch of 20 (shuffle.min_batch)" in details and "nothing was stored" in details
    assert stored_rows(server, "survey") == 0
    twenty = survey_reports(20, rng)
    ack, code, _ = shuffled(server, pool(seal(twenty), seal(Reports(twenty.report_ids[:1], twenty.private_codes[:1],
                                                                    twenty.public_codes[:1]))))
    assert code == grpc.StatusCode.OK and (ack.accepted, ack.duplicates) == (20, 1)   # the repeated id: once
    assert stored_rows(server, "survey") == 20


def test_a_closed_collection_takes_no_shuffled_report(start_server: StartServer, tmp_path: Path,
                                                      rng: np.random.Generator) -> None:
    """The lifecycle holds on the shuffler's path as on a device's: a shuffled batch after ``closes`` is refused
    FAILED_PRECONDITION naming the field; nothing stored."""
    closed = Schema.from_json({**SURVEY.to_json(), "closes": "2026-02-01T00:00:00Z"})
    server = start_server(collections=(MechanismCard.for_schema(closed),), tokens_file=tokens_file(tmp_path))
    key = collection_of(server, "survey").sealing
    batch = pb.SealedBatch(collection="survey", key_id=key.key_id, pool_key=2,
                           reports=seal_reports(key, "survey", VERSION, survey_reports(20, rng)).tobytes())
    ack, code, details = shuffled(server, batch)
    assert (ack, code) == (None, grpc.StatusCode.FAILED_PRECONDITION) and "(closes)" in details
    assert stored_rows(server, "survey") == 0


def _seal_plain(key: SealingKey, plaintexts: np.ndarray, collection: str = "ratings") -> np.ndarray:
    from cryptography.hazmat.primitives import hpke

    from ldpsynth.shared.sealing import info
    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    out = [suite.encrypt(row.tobytes(), key._pyca(), info=info(collection)) for row in plaintexts]
    return np.frombuffer(b"".join(out), np.uint8).reshape(len(out), -1)


def test_the_log_holds_no_metadata_of_the_shufflers_connection(
        server: ServerThread, stand_in: StandInShuffler, rng: np.random.Generator) -> None:
    reports = make_reports(RATINGS, 60, rng)
    with Client(server.address, token=DEVICE, shuffler=stand_in.address) as client:
        client.submit_reports(collection_of(server, token=DEVICE), reports)
    backend = server.server.backend

    async def records() -> list[bytes]:
        replicated = await ReplicatedLog.connect(backend.log.settings, name="test-read")
        try:
            await replicated.open_layout(None, create=False)
            found = []
            for shard in range(backend.layout.shards):
                last = (await replicated.state(shard)).last
                found += [data async for _, data in replicated.read(shard, 1, last)]
            return found
        finally:
            await replicated.close()

    raw = server.run(records())
    decoded = [decode(d, layout=backend.layout.id, shard=s, sequence=q)
               for d, s, q in _positions(raw, backend)]
    sections = [s for r in decoded for s in r.sections]
    assert sum(len(s) for s in sections) == 60
    assert {c for s in sections for c in s.quota} == {"mixer"}  # the shuffler's credential, no device's
    blob = b"".join(raw)
    host, port = stand_in.address.rsplit(":", 1)
    for secret in (MIXER.encode(), DEVICE.encode(), b"device-1", host.encode(), f":{port}".encode(),
                   server.address.encode()):
        assert secret not in blob, secret
    for sealed in stand_in.received:  # no ciphertext, no ephemeral key
        assert sealed[:ENC_BYTES] not in blob and sealed[ENC_BYTES:ENC_BYTES + 24] not in blob


def _positions(raw: list[bytes], backend) -> Iterator[tuple[bytes, int, int]]:
    """(record, shard, sequence) of the records read shard by shard, in order."""
    import json as _json
    import struct
    for data in raw:
        (length,) = struct.unpack_from("<I", data, 8)
        header = _json.loads(data[12:12 + length])
        yield data, int(header["shard"]), int(header["sequence"])


# ----- the key: kept, published, refused when damaged -------------------------------------------------


def test_the_key_is_created_once_owner_only_and_kept_across_restarts(start_server: StartServer,
                                                                    tmp_path: Path) -> None:
    data = tmp_path / "kept"
    first = start_server(data_dir=data)
    key_id = collection_of(first, token=MIXER).sealing.key_id
    path = data / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_key_file(path, "--data-dir").key_id == key_id
    first.stop(0)
    second = start_server(data_dir=data)
    assert collection_of(second).sealing.key_id == key_id


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "group-readable", "missing", "other-key"])
def test_a_damaged_foreign_or_missing_key_file_is_refused_never_replaced(
        start_server: StartServer, tmp_path: Path, damage: str) -> None:
    data = tmp_path / "kept"
    start_server(data_dir=data).stop(0)
    path = data / FILE_NAME
    original = path.read_bytes()
    if damage == "flip":
        data_ = bytearray(original)
        data_[-10] ^= 1
        path.write_bytes(bytes(data_))
    elif damage == "truncate":
        path.write_bytes(original[:40])
    elif damage == "foreign":
        path.write_bytes(b"-----BEGIN PRIVATE KEY-----\n...\n")
    elif damage == "group-readable":
        path.chmod(0o640)
    elif damage == "missing":
        path.unlink()
    elif damage == "other-key":
        path.unlink()
        from ldpsynth.aggregator.storage.sealing_key import write_key_file
        write_key_file(path, OpeningKey.generate())
    with pytest.raises(Exception) as info:
        start_server(data_dir=data)
    message = str(info.value)
    assert str(path) in message or FILE_NAME in message, message
    expected = {"flip": "checksum", "truncate": "truncated", "foreign": "not an ldpsynth checked file",
                "group-readable": "chmod 600", "missing": "missing, but the log is served with sealing key",
                "other-key": "the file was replaced"}[damage]
    assert expected in message
    if damage not in ("missing", "other-key"):
        assert path.exists() and (path.read_bytes() != original or damage == "group-readable")
    report = verify(data)  # verify makes serve's check, in serve's words
    assert not report.ok and message in report.problems, (message, report.problems)

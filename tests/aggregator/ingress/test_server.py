"""End to end through real sockets: an in-process server on port 0, raw generated stubs, shard
workers in Ray actors, the embedded NATS log."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import numpy as np
import pytest
import ray
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldpsynth.client import RetryPolicy
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import (
    GRAPH,
    RATINGS,
    RATINGS_CARD,
    ServerThread,
    batch,
    make_reports,
    stored_ids,
    stored_rows,
    submit,
    verify,
    verify_running,
)
from .test_ingest import BAD_BATCHES

StartServer = Callable[..., ServerThread]
SUBMIT_METHOD = "/ldpsynth.v1.CollectionService/SubmitReports"
GET_METHOD = "/ldpsynth.v1.CollectionService/GetCollection"


def counts_of(reports: list[Reports], schema=RATINGS) -> np.ndarray:
    dense = np.zeros((schema.public_domain_size, schema.private_domain_size), np.int64)
    for r in reports:
        np.add.at(dense, (r.public_keys(schema), r.private_codes), 1)
    return dense


def test_every_acknowledged_report_stored_once(start_server: StartServer, rng: np.random.Generator) -> None:
    server = start_server()
    stub = pb_grpc.CollectionServiceStub(server.channel())
    info = CollectionInfo.from_proto(stub.GetCollection(pb.GetCollectionRequest(collection="ratings")))
    assert info.card.dumps() == RATINGS_CARD.dumps() and info.limits == Limits()

    streams = [[make_reports(RATINGS, n, rng) for n in (1, 700, 3000, 50)] for _ in range(4)]
    results: list[tuple[list[pb.BatchAck], grpc.StatusCode, str]] = []

    def send(reports: list[Reports]) -> None:
        results.append(submit(stub, [batch(r, sequence=i) for i, r in enumerate(reports)]))

    threads = [threading.Thread(target=send, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(code == grpc.StatusCode.OK for _, code, _ in results)
    for acks, _, _ in results:
        assert [a.sequence for a in acks] == [0, 1, 2, 3]
        assert [a.accepted for a in acks] == [1, 700, 3000, 50]
    accepted = sum(a.accepted for acks, _, _ in results for a in acks)
    assert stored_rows(server, "ratings") == accepted == 4 * 3751

    # Resending everything stores nothing new.
    acks, code, _ = submit(stub, [batch(r) for s in streams for r in s])
    assert code == grpc.StatusCode.OK
    assert sum(a.accepted for a in acks) == 0 and sum(a.duplicates for a in acks) == accepted
    assert stored_rows(server, "ratings") == accepted

    # The shards' sufficient statistics are exactly the counts of what was sent.
    everything = [r for s in streams for r in s]
    stats = server.run(server.server.statistics("ratings"))
    assert np.array_equal(stats.dense(), counts_of(everything))
    status = server.run(server.server.workers.status())
    assert len(status) == 2 and all(s.rows["ratings"] > 0 for s in status)

    # A new server on the same data directory recovers it all.
    server.stop()
    again = start_server(data_dir=server.config.data_dir)
    assert np.array_equal(again.run(again.server.statistics("ratings")).dense(), counts_of(everything))
    acks, _, _ = submit(pb_grpc.CollectionServiceStub(again.channel()), [batch(everything[1])])
    assert acks[0].duplicates == 700
    again.stop()
    verification = verify(server.config.data_dir)
    assert verification.ok and verification.rows["ratings"] == accepted


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_status_and_nothing_stored(start_server: StartServer, rng: np.random.Generator,
                                             case: str) -> None:
    server = start_server(shards=1)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    make, code, fragment = BAD_BATCHES[case]
    good = make_reports(RATINGS, 10, rng)
    reports = Reports(make_reports(RATINGS, 3, rng).report_ids, np.array([0, 4, 1]), np.array([[0], [1], [2]]))
    later = make_reports(RATINGS, 5, rng)
    acks, status, details = submit(stub, [batch(good), make(reports), batch(later)])
    assert status == code, details
    assert fragment in details
    # The batch before the bad one was acknowledged and stays; the bad one and those after it are not stored.
    assert [a.accepted for a in acks] == [10]
    assert stored_rows(server, "ratings") == 10


def test_quota_and_size_limits(start_server: StartServer, rng: np.random.Generator) -> None:
    server = start_server(limits=Limits(max_rows_per_client=100, max_batch_reports=64, max_message_bytes=16 * 1024))
    stub = pb_grpc.CollectionServiceStub(server.channel())
    assert stub.GetCollection(pb.GetCollectionRequest(collection="graph")).limits.max_rows_per_client == 100
    first = make_reports(RATINGS, 60, rng)
    assert submit(stub, [batch(first)])[1] == grpc.StatusCode.OK
    _, status, details = submit(stub, [batch(make_reports(RATINGS, 41, rng))])
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_rows_per_client" in details
    assert submit(stub, [batch(first)])[0][0].duplicates == 60  # duplicates do not count
    _, status, details = submit(stub, [batch(make_reports(GRAPH, 65, rng), GRAPH)])
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_batch_reports = 64" in details
    # A message over the byte limit: RESOURCE_EXHAUSTED from the transport, nothing stored.
    big = batch(make_reports(GRAPH, 60, rng), GRAPH)
    big.collection = "graph" + "x" * 20000
    assert submit(stub, [big])[1] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stored_rows(server, "ratings") == 60
    assert stored_rows(server, "graph") == 0


def test_get_collection_errors(start_server: StartServer) -> None:
    server = start_server()
    channel = server.channel()
    stub = pb_grpc.CollectionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.GetCollection(pb.GetCollectionRequest(collection="nope"))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    raw = channel.unary_unary(GET_METHOD)
    with pytest.raises(grpc.RpcError) as info:
        raw(b"\x0a\x05\xff\xfe\xfd\xfc\xfb")  # field 1 with invalid UTF-8
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    card = MechanismCard.from_json(stub.GetCollection(pb.GetCollectionRequest(collection="graph")).card_json)
    assert card.schema == GRAPH


@pytest.fixture(scope="module")
def shared_server(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    from ..conftest import base_config
    server = ServerThread(base_config(tmp_path_factory.mktemp("fuzz") / "data"))
    yield server
    server.stop(0)


garbage = st.binary(max_size=300)
u64_column = st.binary(max_size=64) | st.lists(st.integers(0, 2**64 - 1), max_size=6).map(
    lambda v: np.asarray(v, "<u8").tobytes())
malformed = st.builds(
    pb.ReportBatch,
    collection=st.sampled_from(["ratings", "graph", "", "nope"]),
    mechanism_version=st.sampled_from([RATINGS_CARD.version, "", "E/9"]),
    sequence=st.integers(0, 2**64 - 1),
    report_ids=st.binary(max_size=100),
    private_codes=u64_column,
    public_codes=st.lists(u64_column, max_size=3),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(garbage, malformed.map(lambda m: m.SerializeToString())), as_get=st.booleans())
def test_fuzz_never_unknown_or_internal(shared_server: ServerThread, data: bytes, as_get: bool) -> None:
    channel = shared_server.channel()
    try:
        if as_get:
            channel.unary_unary(GET_METHOD)(data, timeout=30)
        else:
            list(channel.stream_stream(SUBMIT_METHOD)(iter([data, data]), timeout=30))
    except grpc.RpcError as exc:
        assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), exc.details()
    finally:
        channel.close()


def test_fuzz_left_the_store_consistent(shared_server: ServerThread) -> None:
    assert verify_running(shared_server).ok


def test_health_then_graceful_stop(start_server: StartServer, rng: np.random.Generator) -> None:
    server = start_server(grace_seconds=5.0)
    channel = server.channel()
    health = health_pb2_grpc.HealthStub(channel)
    assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
    service = health.Check(health_pb2.HealthCheckRequest(service="ldpsynth.v1.CollectionService"))
    assert service.status == health_pb2.HealthCheckResponse.SERVING
    watch = health.Watch(health_pb2.HealthCheckRequest())
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

    # A stream open while the stop begins: its next batch is refused with UNAVAILABLE.
    outbox: queue.Queue[pb.ReportBatch | None] = queue.Queue()
    first = make_reports(RATINGS, 20, rng)
    outbox.put(batch(first))
    responses = pb_grpc.CollectionServiceStub(channel).SubmitReports(iter(outbox.get, None))
    assert next(responses).accepted == 20

    stopper = threading.Thread(target=server.stop)
    stopper.start()
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    outbox.put(batch(make_reports(RATINGS, 5, rng)))
    with pytest.raises(grpc.RpcError) as info:
        next(responses)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    watch.cancel()
    stopper.join(30)
    assert not stopper.is_alive()
    with pytest.raises(grpc.RpcError) as info:
        health.Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert verify(server.config.data_dir).rows == {"ratings": 20}


def list_services(channel: grpc.Channel) -> list[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    return sorted(s.name for s in next(replies).list_services_response.service)


def test_reflection_off_by_default_on_with_flag(start_server: StartServer) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list_services(start_server().channel())
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    services = list_services(start_server(reflection=True).channel())
    assert "ldpsynth.v1.CollectionService" in services and "grpc.health.v1.Health" in services


def send_until_acked(stub: pb_grpc.CollectionServiceStub, message: pb.ReportBatch, deadline: float) -> pb.BatchAck:
    """A client's retry loop: the same batch (same report ids) until it is acknowledged."""
    while True:
        acks, code, details = submit(stub, [message], timeout=30)
        if code == grpc.StatusCode.OK:
            return acks[0]
        assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
        assert time.monotonic() < deadline, "shard did not come back"
        time.sleep(0.1)


def test_shard_worker_killed_mid_ingest_loses_nothing_acknowledged(start_server: StartServer,
                                                                    rng: np.random.Generator) -> None:
    server = start_server()
    stub = pb_grpc.CollectionServiceStub(server.channel())
    batches = [make_reports(RATINGS, 2000, rng) for _ in range(60)]
    acked: list[tuple[Reports, pb.BatchAck]] = []
    deadline = time.monotonic() + 120
    work: queue.Queue[Reports] = queue.Queue()
    for b in batches:
        work.put(b)

    def client() -> None:
        while True:
            try:
                reports = work.get_nowait()
            except queue.Empty:
                return
            acked.append((reports, send_until_acked(stub, batch(reports), deadline)))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    actor = server.server.workers.actor(0)
    for _ in range(2):
        while len(acked) < 10 * (_ + 1):
            time.sleep(0.01)
        ray.kill(actor, no_restart=False)
    for t in threads:
        t.join(150)
    assert len(acked) == 60
    # Each report counted exactly once over acks (retries see the parts committed before a kill).
    assert all(a.accepted + a.duplicates == 2000 for _, a in acked)
    assert sum(a.accepted for _, a in acked) <= 60 * 2000
    sent_ids = {bytes(i) for r in batches for i in r.report_ids}
    assert stored_ids(server, "ratings") == sent_ids
    assert stored_rows(server, "ratings") == 60 * 2000
    # The restarted worker restored its snapshot and replayed the log: statistics match what was sent.
    stats = server.run(server.server.statistics("ratings"))
    assert np.array_equal(stats.dense(), counts_of(batches))
    assert verify_running(server).ok


def test_server_side_failure_is_internal_and_not_acknowledged(start_server: StartServer,
                                                              rng: np.random.Generator) -> None:
    """A bug (an unexpected exception) answers INTERNAL without its details and acknowledges nothing."""
    server = start_server(shards=1)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    assert submit(stub, [batch(make_reports(RATINGS, 5, rng))])[1] == grpc.StatusCode.OK
    backend = server.server._ingestor._backend

    async def broken(shard: int, segments: list) -> None:
        raise RuntimeError("refused")

    original, backend.commit = backend.commit, broken
    acks, code, details = submit(stub, [batch(make_reports(RATINGS, 5, rng))])
    assert (acks, code) == ([], grpc.StatusCode.INTERNAL)
    assert "refused" not in details
    backend.commit = original
    assert submit(stub, [batch(make_reports(RATINGS, 5, rng))])[1] == grpc.StatusCode.OK
    assert stored_rows(server, "ratings") == 10


def test_log_down_is_unavailable_and_nothing_is_acknowledged(start_server: StartServer,
                                                           rng: np.random.Generator) -> None:
    """The log's server stops: batches are UNAVAILABLE (never acknowledged, never INTERNAL), health
    says NOT_SERVING; once it is back the same batch is stored, once."""
    server = start_server(shards=2)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    health = health_pb2_grpc.HealthStub(server.channel())
    embedded = server.server.backend.embedded
    embedded.stop()
    reports = make_reports(RATINGS, 50, rng)
    acks, code, details = submit(stub, [batch(reports)], timeout=60)
    assert (acks, code) == ([], grpc.StatusCode.UNAVAILABLE), details
    embedded.restart()
    ack = send_until_acked(stub, batch(reports), time.monotonic() + 60)
    assert ack.accepted + ack.duplicates == 50
    assert stored_rows(server, "ratings") == 50
    deadline = time.monotonic() + 30
    while health.Check(health_pb2.HealthCheckRequest()).status != health_pb2.HealthCheckResponse.SERVING:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_shard_worker_down_is_not_serving_and_unavailable_never_internal(start_server: StartServer,
                                                                            rng: np.random.Generator) -> None:
    """A shard worker that is gone for good: health NOT_SERVING, ingest and queries UNAVAILABLE (issue 16, item 7)."""
    server = start_server(shards=2)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    assert submit(stub, [batch(make_reports(RATINGS, 20, rng))])[1] == grpc.StatusCode.OK
    ray.kill(server.server.workers.actor(1), no_restart=True)
    health = health_pb2_grpc.HealthStub(server.channel())
    deadline = time.monotonic() + 30
    while health.Check(health_pb2.HealthCheckRequest()).status != health_pb2.HealthCheckResponse.NOT_SERVING:
        assert time.monotonic() < deadline, "health stayed SERVING"
        time.sleep(0.2)
    acks, code, details = submit(stub, [batch(make_reports(RATINGS, 200, rng))])
    assert (acks, code) == ([], grpc.StatusCode.UNAVAILABLE), details
    with QueryClient(server.address, retry=RetryPolicy(max_attempts=1)) as analyst:
        with pytest.raises(QueryError) as info:
            analyst.estimate(RATINGS.name, queries=[{"kind": "marginal", "attributes": ["rating"]}])
    assert info.value.status == "UNAVAILABLE"

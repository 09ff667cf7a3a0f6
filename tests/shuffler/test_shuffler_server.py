"""The shuffler (ldpsynth.shuffler) in front of a real replica, its service: the statuses of bad batches, the
devices' tokens, bad ciphertexts, what reaches the log and the shuffler's own log, TLS, a dead replica passed over,
the metrics, the health service. Shufflers run in process on 127.0.0.1 (their logs are captured); devices use
the SDK. Pools: test_shuffler_pools.py; the per-device quota: test_shuffler_quota.py."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.client import AsyncClient, RetryPolicy, Shuffler, SubmitError
from ldpsynth.serving.errors import ConfigError
from ldpsynth.serving.tls import TlsFiles
from ldpsynth.shared.sealing import ENC_BYTES
from tests.aggregator.conftest import ServerThread, stored_ids
from tests.aggregator.scrape import scrape, value

from .conftest import (
    ANALYST,
    DEVICE,
    MIXER,
    ShufflerThread,
    collection_info,
    devices,
    log_sections,
    one_movie,
    sealed,
    stored,
    write_tokens,
)


@pytest.mark.parametrize("change, code, words", [
    (lambda b: b"\xff\x01garbage", grpc.StatusCode.INVALID_ARGUMENT, ["not a valid ldpsynth.v1.SealedBatch"]),
    (lambda b: b.__setattr__("collection", "nope") or b, grpc.StatusCode.FAILED_PRECONDITION, ["collection", "nope"]),
    (lambda b: b.__setattr__("collection", "") or b, grpc.StatusCode.INVALID_ARGUMENT, ["collection", "1 to 256"]),
    (lambda b: b.__setattr__("key_id", os.urandom(16)) or b, grpc.StatusCode.FAILED_PRECONDITION,
     ["key_id", "fetch the collection again"]),
    (lambda b: b.__setattr__("key_id", b"\x01" * 5) or b, grpc.StatusCode.INVALID_ARGUMENT, ["key_id", "16 bytes"]),
    (lambda b: b.__setattr__("reports", b.reports + bytes(16)) or b, grpc.StatusCode.INVALID_ARGUMENT,
     ["reports", "multiple of 84 bytes", "got 100 bytes"]),
    (lambda b: b.__setattr__("reports", b"") or b, grpc.StatusCode.INVALID_ARGUMENT, ["reports", "non-zero multiple"]),
    (lambda b: b.__setattr__("pool_key", 100) or b, grpc.StatusCode.INVALID_ARGUMENT, ["pool_key", "[0, 100)"]),
    (lambda b: b.__setattr__("reports", b.reports * 65) or b, grpc.StatusCode.RESOURCE_EXHAUSTED,
     ["max_batch_reports = 64", "got 65"]),
])
def test_a_bad_batch_gets_its_status_naming_the_field_and_nothing_is_stored(
        replica: ServerThread, shuffler: ShufflerThread, rng: np.random.Generator, change, code: grpc.StatusCode,
        words: list[str]) -> None:
    before = stored(replica)
    batch = change(sealed(replica, one_movie(1, rng)))
    ack, got, details = shuffler.submit(batch)
    assert (ack, got) == (None, code), details
    assert all(w in details for w in words), details
    assert stored(replica) == before


def test_the_devices_tokens_are_checked_as_on_the_replicas(replica: ServerThread, tmp_path: Path,
                                                            rng: np.random.Generator) -> None:
    mixer = ShufflerThread(replica, threshold=1, max_wait=2.0, tokens_file=write_tokens(tmp_path / "devices.json"))
    try:
        batch = sealed(replica, one_movie(3, rng))
        assert mixer.submit(batch, token=None)[1] == grpc.StatusCode.UNAUTHENTICATED
        assert mixer.submit(batch, token="not-a-token")[1] == grpc.StatusCode.UNAUTHENTICATED
        assert mixer.submit(batch, token=ANALYST)[1:] == (grpc.StatusCode.PERMISSION_DENIED,
                                                         "credential 'analyst' lacks the role submit")
        ack, code, _ = mixer.submit(batch, token=DEVICE)
        assert code == grpc.StatusCode.OK and ack.accepted == 3
    finally:
        mixer.stop()


def test_bad_ciphertexts_are_forwarded_and_dropped_and_a_replayed_batch_is_stored_once(
        replica: ServerThread, shuffler: ShufflerThread, rng: np.random.Generator) -> None:
    """The shuffler cannot open reports: it takes 10 good and 3 garbage ones (accepted 13); the replica
    stores the 10. The same bytes again: accepted again, nothing stored twice."""
    good = one_movie(10, rng)
    batch = sealed(replica, good, sequence=5)
    garbage = np.frombuffer(rng.bytes(3 * 84), np.uint8)
    batch.reports = batch.reports + garbage.tobytes()
    before = stored(replica)
    for _ in range(2):
        ack, code, _ = shuffler.submit(batch)
        assert code == grpc.StatusCode.OK and (ack.sequence, ack.accepted) == (5, 13)
        assert stored(replica) == before + 10
    assert {bytes(r) for r in good.report_ids} <= stored_ids(replica, "ratings")


def test_neither_the_log_nor_the_shufflers_log_holds_device_metadata_tokens_or_ciphertexts(
        replica: ServerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture, rng: np.random.Generator) -> None:
    caplog.set_level(logging.DEBUG)
    mixer = ShufflerThread(replica, threshold=1, max_wait=0.5, tokens_file=write_tokens(tmp_path / "devices.json"))
    try:
        reports = one_movie(30, rng)
        batch = sealed(replica, reports, sequence=987654321)
        assert mixer.submit(batch)[1] == grpc.StatusCode.OK
        assert mixer.submit(batch, token="wrong-token-123")[1] == grpc.StatusCode.UNAUTHENTICATED
        wrong_key = sealed(replica, reports)
        wrong_key.key_id = os.urandom(16)
        assert mixer.submit(wrong_key)[1] == grpc.StatusCode.FAILED_PRECONDITION
        assert asyncio.run(devices(mixer.address, replica, [one_movie(5, rng)], 5)) == [5]
    finally:
        mixer.stop()
    said = caplog.text
    assert "forwarded a pool" in said  # the log is captured
    rows = np.frombuffer(batch.reports, np.uint8).reshape(-1, 84)
    port = mixer.address.rsplit(":", 1)[1]
    for secret in (DEVICE, MIXER, "wrong-token-123", "device-7", "ipv4:", "ipv6:"):  # gRPC's peer addresses
        assert secret not in said, secret
    assert not any(row[:8].tobytes().hex() in said or repr(row[:8].tobytes())[2:-1] in said for row in rows)
    sections, raw = log_sections(replica)
    blob = b"".join(raw)
    for secret in (DEVICE.encode(), MIXER.encode(), b"device-7", f":{port}".encode(), mixer.address.encode(),
                   (987654321).to_bytes(8, "little"), (987654321).to_bytes(8, "big")):
        assert secret not in blob, secret
    for row in rows:
        assert row[:ENC_BYTES].tobytes() not in blob and row[ENC_BYTES:ENC_BYTES + 24].tobytes() not in blob
    assert {c for s in sections for c in s.quota} == {"mixer"}


def test_devices_reach_a_tls_shuffler_with_its_ca_and_not_in_clear(
        replica: ServerThread, certs: Path, rng: np.random.Generator) -> None:
    mixer = ShufflerThread(replica, threshold=1, max_wait=2.0, tls=TlsFiles(certs / "server.pem", certs / "server.key"))
    try:
        info = collection_info(replica)

        async def device(root: Path | None) -> int:
            shuffler = Shuffler(mixer.address, token=DEVICE, root_certificates=root)
            async with AsyncClient(replica.address, token=DEVICE, shuffler=shuffler, retry=RetryPolicy(max_attempts=1),
                                   deadline=5.0) as client:
                return (await client.submit_reports(info, one_movie(4, rng))).acknowledged

        assert asyncio.run(device(certs / "ca.pem")) == 4
        with pytest.raises(SubmitError):
            asyncio.run(device(None))  # in clear to a TLS port: refused
    finally:
        mixer.stop()


def test_a_shuffler_refuses_tls_files_that_do_not_match_naming_the_flag(replica: ServerThread, certs: Path) -> None:
    with pytest.raises(ConfigError, match="--tls-key .*not the private key of the certificate"):
        ShufflerThread(replica, threshold=1, max_wait=1.0, tls=TlsFiles(certs / "server.pem", certs / "client.key"))


def test_with_several_replicas_a_dead_one_is_passed_over(replica: ServerThread, rng: np.random.Generator) -> None:
    """--aggregator 127.0.0.1:1,REPLICA (nothing listens on port 1): round robin over the replicas that
    answer; every batch is forwarded and stored."""
    mixer = ShufflerThread(replica, threshold=1, max_wait=5.0, aggregator=f"127.0.0.1:1,{replica.address}")
    try:
        parts = [one_movie(3, rng) for _ in range(6)]
        assert [mixer.submit(sealed(replica, p))[1] for p in parts] == [grpc.StatusCode.OK] * 6
    finally:
        mixer.stop()
    assert {bytes(r) for p in parts for r in p.report_ids} <= stored_ids(replica, "ratings")


def test_the_metrics_count_what_the_devices_sent_and_name_no_device(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """--metrics-port: 3 devices x 10 reports acknowledged in one pool of 30, then 5 reports of a pool that
    misses its threshold; the counters move by exactly that, and no label holds a token or an address."""
    fixed_threshold[0] = 30
    mixer = ShufflerThread(replica, threshold=30, max_wait=0.5, metrics_port=0)
    try:
        url = mixer.server.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        parts = [one_movie(10, rng) for _ in range(3)]
        assert asyncio.run(devices(mixer.address, replica, parts, batch_size=10)) == [10] * 3
        fixed_threshold[0] = 40
        assert mixer.submit(sealed(replica, one_movie(5, rng)))[1] == grpc.StatusCode.UNAVAILABLE
        samples = scrape(url)
    finally:
        mixer.stop()
    assert value(samples, "ldpsynth_shuffler_reports_total", collection="ratings", outcome="acknowledged") == 30
    assert value(samples, "ldpsynth_shuffler_reports_total", collection="ratings", outcome="not_acknowledged") == 5
    assert value(samples, "ldpsynth_shuffler_pooled_reports", collection="ratings") == 0
    assert value(samples, "ldpsynth_shuffler_wait_seconds_count", collection="ratings") == 3
    assert value(samples, "grpc_server_handled_total", grpc_method="SubmitSealed", grpc_code="OK") == 3
    assert value(samples, "grpc_server_handled_total", grpc_method="SubmitSealed", grpc_code="UNAVAILABLE") == 1
    labels = {text for (_, have), _ in samples.items() for _, text in have}
    assert not any(DEVICE in text or MIXER in text or "127.0.0.1" in text for text in labels)


def test_the_health_service_is_serving_until_the_shuffler_stops(replica: ServerThread) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    mixer = ShufflerThread(replica, threshold=1, max_wait=1.0)
    with grpc.insecure_channel(mixer.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "ldpsynth.v1.ShufflerService"):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        # A grace above 0, as deployed: with 0 the server cancels every call at once, the watch
        # included, and NOT_SERVING may not reach it first (a race seen in CI).
        mixer.stop(grace=1.0)
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING

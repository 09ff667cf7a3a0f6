"""The shuffler (ldpsynth.shuffler) in front of a real replica: pooling across devices per public key, the
threshold over distinct reports, the permutation end to end, the statuses of bad batches, what reaches the log
and the shuffler's own log, the per-device quota, the health service. Shufflers run in process on 127.0.0.1
(their logs are captured); devices use the SDK.

α of the χ² check: 1e-3, with a seeded permutation source (deterministic)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest
from scipy import stats

from ldpsynth.client import AsyncClient, RetryPolicy, Shuffler, SubmitError
from ldpsynth.serving.errors import ConfigError
from ldpsynth.serving.tls import TlsFiles
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import ENC_BYTES, seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shuffler import permutation, pools
from ldpsynth.shuffler.quota_nats import LEASE_MARGIN, NatsQuotas, quota_key
from tests.aggregator.conftest import RATINGS, VERSION, ServerThread, make_reports, stored_ids
from tests.aggregator.scrape import scrape, value

from .conftest import (
    ANALYST,
    DEVICE,
    MIXER,
    QUOTA_TOKEN,
    SEALED_METHOD,
    SURVEY,
    QuotaServer,
    ShufflerThread,
    bearer,
    collection_info,
    log_sections,
    needs_nats,
    shuffler_process,
    write_tokens,
)

ALPHA = 1e-3


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261126)


@pytest.fixture
def fixed_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every pool's threshold is ``value[0]`` (the noise is tested in test_permutation.py)."""
    value = [1]
    monkeypatch.setattr(pools, "draw_threshold", lambda threshold, min_batch: value[0])
    yield value


@pytest.fixture
def seeded_permutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shuffler's permutation drawn from a seeded word source instead of os.urandom (deterministic)."""
    generator = np.random.default_rng(77)

    def words(k: int) -> np.ndarray:
        return generator.integers(0, 2**64, size=k, dtype=np.uint64, endpoint=False)

    monkeypatch.setattr(pools, "uniform_permutation", lambda n: permutation.uniform_permutation(n, words))


@pytest.fixture
def shuffler(replica: ServerThread) -> Iterator[ShufflerThread]:
    mixer = ShufflerThread(replica, threshold=1, max_wait=2.0)
    yield mixer
    mixer.stop()


def one_movie(n: int, rng: np.random.Generator, movie: int = 7) -> Reports:
    """``n`` valid reports of one public key (movie code ``movie``): what one pool holds."""
    reports = make_reports(RATINGS, n, rng)
    return Reports(reports.report_ids, reports.private_codes, np.full_like(reports.public_codes, movie))


def sealed(replica: ServerThread, reports: Reports, sequence: int = 0, pool_key: int | None = None
           ) -> pb.SealedBatch:
    """A SealedBatch of ``reports``, its pool key their first report's (they share one) unless given."""
    key = collection_info(replica).sealing_key()
    keys = RATINGS.fold_public_codes(reports.public_codes)
    return pb.SealedBatch(collection="ratings", key_id=key.key_id, sequence=sequence,
                          reports=seal_reports(key, "ratings", VERSION, reports).tobytes(),
                          pool_key=int(keys[0]) if pool_key is None else pool_key)


def stored(replica: ServerThread) -> int:
    return replica.run(replica.server.stored("ratings"))


async def devices(address: str, replica: ServerThread, parts: list[Reports], batch_size: int) -> list[int]:
    """Every device submits its reports through the shuffler at once; the reports each got acknowledged."""
    info = collection_info(replica)

    async def one(reports: Reports) -> int:
        async with AsyncClient(replica.address, token=DEVICE, shuffler=Shuffler(address, token=DEVICE)) as client:
            return (await client.submit_reports(info, reports, batch_size=batch_size)).acknowledged

    return list(await asyncio.gather(*(one(r) for r in parts)))


def test_devices_are_pooled_permuted_forwarded_in_batches_and_stored_once(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """7 devices x 20 reports of one movie, one pool of threshold 140: released once, forwarded as 46 + 47 + 47
    (three parts of equal size within the replica's max_batch_reports of 64), every device acknowledged, every
    report stored once."""
    fixed_threshold[0] = 140
    mixer = ShufflerThread(replica, threshold=100, max_wait=20.0)
    try:
        parts = [one_movie(20, rng) for _ in range(7)]
        before = stored(replica)
        assert asyncio.run(devices(mixer.address, replica, parts, batch_size=20)) == [20] * 7
    finally:
        mixer.stop()
    ids = {bytes(row) for part in parts for row in part.report_ids}
    assert ids <= stored_ids(replica, "ratings") and stored(replica) == before + 140
    sections, _ = log_sections(replica)
    mine = [s for s in sections if {bytes(r) for r in s.report_ids} & ids]
    assert sorted(len(s) for s in mine) == [46, 47, 47] and all(dict(s.quota) == {"mixer": len(s)} for s in mine)
    forwarded = np.concatenate([s.report_ids for s in mine])
    sent = np.concatenate([p.report_ids for p in parts])
    assert not np.array_equal(forwarded, sent)  # not in the devices' order


def test_below_its_threshold_a_pool_forwards_nothing_and_its_devices_get_unavailable(
        replica: ServerThread, rng: np.random.Generator) -> None:
    """T = 40 (the noise only adds): 39 reports wait max_wait, then UNAVAILABLE; nothing stored."""
    mixer = ShufflerThread(replica, threshold=40, max_wait=0.5)
    try:
        before = stored(replica)
        reports = one_movie(39, rng)
        ack, code, details = mixer.submit(sealed(replica, reports))
        assert (ack, code) == (None, grpc.StatusCode.UNAVAILABLE) and "threshold" in details
        assert "nothing was forwarded" in details
    finally:
        mixer.stop()
    assert stored(replica) == before and not {bytes(r) for r in reports.report_ids} & stored_ids(replica, "ratings")


def test_the_forwarded_order_is_independent_of_the_arrival_order(
        replica: ServerThread, fixed_threshold: list[int], seeded_permutation: None) -> None:
    """60 pools of 10 reports each arriving in a known order (one call): the position of the first to
    arrive among the 10 stored reports is uniform on 0..9 (6 expected per position), α = 1e-3."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=20.0)
    rng = np.random.default_rng(11)
    tagged = []
    try:
        for _ in range(60):
            reports = one_movie(10, rng)
            tagged.append((bytes(reports.report_ids[0]), {bytes(r) for r in reports.report_ids}))
            assert mixer.submit(sealed(replica, reports))[1] == grpc.StatusCode.OK
    finally:
        mixer.stop()
    sections, _ = log_sections(replica)
    where = {}
    for section in sections:
        ids = [bytes(r) for r in section.report_ids]
        where.update({report: (i, frozenset(ids)) for i, report in enumerate(ids)})
    positions = []
    for first, ids in tagged:
        position, section = where[first]
        assert section == ids  # one pool, one forwarded batch, one section
        positions.append(position)
    counts = np.bincount(positions, minlength=10)
    assert stats.chisquare(counts).pvalue > ALPHA, counts


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


def test_a_call_that_ends_while_waiting_leaves_the_pool_and_is_not_forwarded(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """Threshold 10: B (4 reports) waits, A (4) waits after it and its deadline passes; C (6) makes
    B + C = 10: released without A's reports (a gone call's reports do not count towards the threshold)."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=20.0)
    try:
        a, b, c = (one_movie(k, rng) for k in (4, 4, 6))
        results: list = []
        waiting_b = threading.Thread(target=lambda: results.append(mixer.submit(sealed(replica, b))))
        waiting_b.start()
        time.sleep(0.3)
        assert mixer.submit(sealed(replica, a), timeout=0.5)[1] == grpc.StatusCode.DEADLINE_EXCEEDED
        time.sleep(0.2)
        code_c = mixer.submit(sealed(replica, c))[1]
        waiting_b.join(30)
        assert code_c == grpc.StatusCode.OK and results[0][1] == grpc.StatusCode.OK
    finally:
        mixer.stop()
    held = stored_ids(replica, "ratings")
    assert {bytes(r) for r in (*b.report_ids, *c.report_ids)} <= held
    assert not {bytes(r) for r in a.report_ids} & held


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


def test_a_device_over_its_quota_is_refused_naming_the_flag_and_an_unacknowledged_call_gives_it_back(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator, tmp_path: Path) -> None:
    """--max-reports-per-device 30: 20 acknowledged; 15 more refused (RESOURCE_EXHAUSTED, nothing pooled);
    10 whose pool misses its threshold are given back, so 10 more still fit."""
    fixed_threshold[0] = 20
    mixer = ShufflerThread(replica, threshold=1, max_wait=0.5, tokens_file=write_tokens(tmp_path / "tokens.json"),
                           max_reports_per_device=30)
    try:
        assert mixer.submit(sealed(replica, one_movie(20, rng)))[1] == grpc.StatusCode.OK
        before = stored(replica)
        ack, code, details = mixer.submit(sealed(replica, one_movie(15, rng), sequence=1))
        assert (ack, code) == (None, grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert "--max-reports-per-device" in details and "at most 30" in details and "20 were taken" in details
        fixed_threshold[0] = 40
        assert mixer.submit(sealed(replica, one_movie(10, rng), sequence=2))[1] == \
            grpc.StatusCode.UNAVAILABLE
        fixed_threshold[0] = 10
        assert mixer.submit(sealed(replica, one_movie(10, rng), sequence=3))[1] == grpc.StatusCode.OK
        assert stored(replica) == before + 10
    finally:
        mixer.stop()


@needs_nats
def test_two_shufflers_sharing_a_quota_store_count_a_device_once(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator, tmp_path: Path,
        quota_server: QuotaServer, caplog: pytest.LogCaptureFixture) -> None:
    """Two shuffler processes' worth (each its own event loop, its own connection) on one quota store, limit 30:
    20 acknowledged through A; 15 more through B refused (RESOURCE_EXHAUSTED naming the flag); 10 through B whose
    pool misses its threshold are leased meanwhile (for max_wait + patience + the margin), then given back; 10
    more through B fit; the next one through A does not."""
    caplog.set_level(logging.INFO)
    tokens = write_tokens(tmp_path / "tokens.json")
    fixed_threshold[0] = 20
    a, b = (ShufflerThread(replica, threshold=1, max_wait=2.0, tokens_file=tokens, max_reports_per_device=30,
                           quota_nats=quota_server.settings) for _ in range(2))
    store = b.run(NatsQuotas.connect(quota_server.settings, 60.0))  # the test's own view of the bucket
    try:
        assert a.submit(sealed(replica, one_movie(20, rng)))[1] == grpc.StatusCode.OK
        before = stored(replica)
        ack, code, details = b.submit(sealed(replica, one_movie(15, rng), sequence=1))
        assert (ack, code) == (None, grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert "--max-reports-per-device" in details and "at most 30" in details and "20 were taken" in details
        fixed_threshold[0] = 40
        waiting = threading.Thread(target=lambda: b.submit(sealed(replica, one_movie(10, rng), sequence=2)))
        waiting.start()
        key = quota_key("device-7", "ratings")
        while b.run(store.usage("device-7", "ratings")) != (20, 10):
            time.sleep(0.05)
        leases = json.loads(b.run(store._bucket.get(key)).value or b"")["leases"]
        [(reports, expires)] = leases.values()
        assert reports == 10 and 2.0 + 5.0 + LEASE_MARGIN - 5 < expires - time.time() <= 2.0 + 5.0 + LEASE_MARGIN
        waiting.join(30)
        assert b.run(store.usage("device-7", "ratings")) == (20, 0)  # UNAVAILABLE: given back
        fixed_threshold[0] = 10
        assert b.submit(sealed(replica, one_movie(10, rng), sequence=3))[1] == grpc.StatusCode.OK
        assert stored(replica) == before + 10
        ack, code, details = a.submit(sealed(replica, one_movie(1, rng), sequence=4))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "30 were taken" in details
        assert b.run(store.usage("device-7", "ratings")) == (30, 0)
    finally:
        b.run(store.close())
        a.stop()
        b.stop()
    assert caplog.text.count("per-device quotas are counted in the bucket LDPSYNTH_SHUFFLER_QUOTA") == 3  # and ours
    assert "counted in this process only" not in caplog.text


def test_without_a_quota_store_the_shuffler_says_once_that_the_quota_is_per_process(
        replica: ServerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    mixer = ShufflerThread(replica, threshold=1, max_wait=1.0, tokens_file=write_tokens(tmp_path / "tokens.json"),
                           max_reports_per_device=None)
    mixer.stop()
    assert caplog.text.count("the per-device quota is counted in this process only") == 1
    assert "--quota-nats" in caplog.text


@needs_nats
def test_a_quota_store_that_stops_answering_ends_calls_unavailable_never_internal(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator, tmp_path: Path,
        quota_server: QuotaServer) -> None:
    fixed_threshold[0] = 5
    mixer = ShufflerThread(replica, threshold=1, max_wait=2.0, tokens_file=write_tokens(tmp_path / "tokens.json"),
                           max_reports_per_device=30, quota_nats=replace(quota_server.settings, timeout=1.0))
    try:
        assert mixer.submit(sealed(replica, one_movie(5, rng)))[1] == grpc.StatusCode.OK
        quota_server.stop()
        ack, code, details = mixer.submit(sealed(replica, one_movie(5, rng), sequence=1))
        assert (ack, code) == (None, grpc.StatusCode.UNAVAILABLE) and "quota store did not answer" in details
        assert mixer.submit(sealed(replica, one_movie(5, rng), sequence=2), timeout=10)[1] == \
            grpc.StatusCode.UNAVAILABLE
    finally:
        mixer.stop()


@needs_nats
def test_two_shuffler_processes_with_quota_nats_share_one_quota(
        replica: ServerThread, rng: np.random.Generator, tmp_path: Path, quota_server: QuotaServer,
        mixer_token_file: Path) -> None:
    """``ldpsynth shuffler serve --quota-nats URL`` twice (its token from $LDPSYNTH_QUOTA_NATS_TOKEN): a device
    that took 20 of its 30 reports through one is refused 15 more through the other."""
    flags = ["--tokens", str(write_tokens(tmp_path / "tokens.json")), "--max-reports-per-device", "30",
             "--quota-nats", quota_server.url]
    env = {**os.environ, "LDPSYNTH_QUOTA_NATS_TOKEN": QUOTA_TOKEN}
    first, second = (shuffler_process(replica, mixer_token_file, tmp_path / f"shuffler{i}.log", threshold=1,
                                      max_wait=5.0, flags=flags, env=env) for i in range(2))
    try:
        with grpc.insecure_channel(first.address) as one, grpc.insecure_channel(second.address) as other:
            def call(channel: grpc.Channel, batch: pb.SealedBatch) -> tuple[grpc.StatusCode, str]:
                try:
                    channel.unary_unary(SEALED_METHOD)(batch.SerializeToString(), metadata=bearer(DEVICE), timeout=30)
                    return grpc.StatusCode.OK, ""
                except grpc.RpcError as exc:
                    return exc.code(), exc.details() or ""

            assert call(one, sealed(replica, one_movie(20, rng))) == (grpc.StatusCode.OK, "")
            code, details = call(other, sealed(replica, one_movie(15, rng), sequence=1))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "--max-reports-per-device" in details
            assert "20 were taken" in details
            assert call(other, sealed(replica, one_movie(10, rng), sequence=2)) == (grpc.StatusCode.OK, "")
    finally:
        assert first.terminate() == 0 and second.terminate() == 0
    assert "counted in the bucket" in first.log() and "counted in this process only" not in first.log()


def test_a_per_device_quota_needs_device_credentials(replica: ServerThread) -> None:
    with pytest.raises(ConfigError, match="--max-reports-per-device"):
        ShufflerThread(replica, threshold=1, max_wait=1.0, max_reports_per_device=5)


def test_pools_are_per_public_key_and_count_distinct_sealed_reports(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """Threshold 10: 6 reports of movie 7 and 6 of movie 8 do not make a pool (each key waits for its own 10);
    5 reports of movie 9 sent twice, the same sealed bytes, count 5 (a copy adds nothing) and wait too. Then 4
    more of movie 7 release movie 7's pool alone: its 10 reports are one forwarded batch of one key."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=3.0)
    try:
        first = one_movie(6, rng, movie=7)
        results: dict[str, tuple] = {}

        def call(name: str, batch: pb.SealedBatch) -> None:
            results[name] = mixer.submit(batch)

        copies = sealed(replica, one_movie(5, rng, movie=9))
        waiting = [threading.Thread(target=call, args=(name, batch)) for name, batch in (
            ("7a", sealed(replica, first)), ("8", sealed(replica, one_movie(6, rng, movie=8))),
            ("9a", copies), ("9b", copies))]
        for thread in waiting:
            thread.start()
        time.sleep(0.5)
        more = one_movie(4, rng, movie=7)
        assert mixer.submit(sealed(replica, more))[1] == grpc.StatusCode.OK
        for thread in waiting:
            thread.join(30)
    finally:
        mixer.stop()
    assert results["7a"][1] == grpc.StatusCode.OK
    assert results["8"][1] == results["9a"][1] == results["9b"][1] == grpc.StatusCode.UNAVAILABLE
    sections, _ = log_sections(replica)
    mine = {bytes(r) for r in (*first.report_ids, *more.report_ids)}
    holding = [s for s in sections if {bytes(r) for r in s.report_ids} & mine]
    assert len(holding) == 1 and {bytes(r) for r in holding[0].report_ids} == mine
    assert set(holding[0].public_keys.tolist()) == {7}


def test_copies_of_a_sealed_report_travel_once(replica: ServerThread, fixed_threshold: list[int],
                                              rng: np.random.Generator) -> None:
    """Threshold 8: 8 distinct reports, 3 of them also sent by a second call, byte for byte: one pool of 8 is
    forwarded, every call acknowledged, the replica receives each report once (no duplicates to count)."""
    fixed_threshold[0] = 8
    mixer = ShufflerThread(replica, threshold=8, max_wait=10.0)
    reports = one_movie(8, rng, movie=11)
    batch = sealed(replica, reports)
    rows = np.frombuffer(batch.reports, np.uint8).reshape(8, -1)
    replay = pb.SealedBatch(collection="ratings", key_id=batch.key_id, sequence=1, reports=rows[:3].tobytes(),
                            pool_key=batch.pool_key)
    try:
        results: list = []
        waiting = threading.Thread(target=lambda: results.append(mixer.submit(replay)))
        waiting.start()
        time.sleep(0.3)
        assert mixer.submit(batch)[1] == grpc.StatusCode.OK
        waiting.join(30)
    finally:
        mixer.stop()
    assert results[0][1] == grpc.StatusCode.OK
    sections, _ = log_sections(replica)
    ids = {bytes(r) for r in reports.report_ids}
    holding = [s for s in sections if {bytes(r) for r in s.report_ids} & ids]
    assert sum(len(s) for s in holding) == 8 and {bytes(r) for s in holding for r in s.report_ids} == ids


def test_a_report_of_another_public_key_is_dropped_by_the_replica(
        replica: ServerThread, shuffler: ShufflerThread, rng: np.random.Generator) -> None:
    """A batch declared movie 3 holding 4 reports of movie 3 and 2 of movie 4: the shuffler cannot tell (it takes
    6), the replica stores the 4 and drops the 2 as invalid."""
    ours, theirs = one_movie(4, rng, movie=3), one_movie(2, rng, movie=4)
    batch = sealed(replica, Reports.concat([ours, theirs], 1), pool_key=3)
    ack, code, _ = shuffler.submit(batch)
    assert code == grpc.StatusCode.OK and ack.accepted == 6
    held = stored_ids(replica, "ratings")
    assert {bytes(r) for r in ours.report_ids} <= held and not {bytes(r) for r in theirs.report_ids} & held


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
        mixer.stop()
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING


def survey_batch(replica: ServerThread, n: int, rng: np.random.Generator, sequence: int = 0) -> pb.SealedBatch:
    """``n`` reports of the shuffled collection ``survey``, all of region code 2."""
    key = collection_info(replica, "survey").sealing_key()
    reports = make_reports(SURVEY, n, rng)
    reports = Reports(reports.report_ids, reports.private_codes, np.full_like(reports.public_codes, 2))
    return pb.SealedBatch(collection="survey", key_id=key.key_id, sequence=sequence, pool_key=2,
                          reports=seal_reports(key, "survey", VERSION, reports).tobytes())


def test_a_shuffled_collection_needs_devices_the_shuffler_can_tell_apart(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """Without device credentials a shuffled collection's batch is refused FAILED_PRECONDITION naming the flags
    (its guarantee assumes a per-device bound); --anonymous-devices forwards it; an unshuffled one is not
    concerned."""
    fixed_threshold[0] = 2
    mixer = ShufflerThread(replica, threshold=1, max_wait=5.0)
    try:
        ack, code, details = mixer.submit(survey_batch(replica, 2, rng), token=None)
        assert (ack, code) == (None, grpc.StatusCode.FAILED_PRECONDITION)
        assert "'survey' is shuffled" in details and "--tokens" in details and "--anonymous-devices" in details
        assert mixer.submit(sealed(replica, one_movie(2, rng)), token=None)[1] == grpc.StatusCode.OK
    finally:
        mixer.stop()
    fixed_threshold[0] = 5
    anonymous = ShufflerThread(replica, threshold=1, max_wait=5.0, anonymous_devices=True,
                               max_reports_per_device=None)  # the default: anonymous devices share no quota
    try:
        assert anonymous.submit(survey_batch(replica, 5, rng), token=None)[1] == grpc.StatusCode.OK
        assert anonymous.submit(survey_batch(replica, 5, rng, 1), token=None)[1] == grpc.StatusCode.OK
    finally:
        anonymous.stop()


def test_a_shuffled_collections_devices_are_held_to_its_rows_per_device_by_default(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator, tmp_path: Path) -> None:
    """survey's rows_per_device is 2: with device tokens and no --max-reports-per-device, a device's third report
    is refused (RESOURCE_EXHAUSTED naming the flag); reports of a pool that missed its threshold are given back."""
    fixed_threshold[0] = 5
    mixer = ShufflerThread(replica, threshold=1, max_wait=0.5, tokens_file=write_tokens(tmp_path / "tokens.json"),
                           max_reports_per_device=None)
    try:
        ack, code, details = mixer.submit(survey_batch(replica, 3, rng))
        assert (ack, code) == (None, grpc.StatusCode.RESOURCE_EXHAUSTED) and "at most 2" in details
        assert mixer.submit(survey_batch(replica, 2, rng, 1))[1] == grpc.StatusCode.UNAVAILABLE  # below 5: given back
        assert mixer.submit(survey_batch(replica, 2, rng, 2))[1] == grpc.StatusCode.UNAVAILABLE  # so it fits again
        assert mixer.submit(sealed(replica, one_movie(30, rng)))[1] == grpc.StatusCode.OK  # ratings: no limit
    finally:
        mixer.stop()

"""The shuffler (ldpsynth.shuffler) in front of a real replica, its per-device quota: refusals naming the flag,
unacknowledged reports given back, a quota store (NATS on 127.0.0.1) shared by two shufflers, a store that stops
answering, and a shuffled collection's devices held to its rows per device. Shufflers run in process on
127.0.0.1 (their logs are captured) or as ``ldpsynth shuffler serve`` subprocesses."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.serving.errors import ConfigError
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shuffler.quota_nats import LEASE_MARGIN, NatsQuotas, quota_key
from tests.aggregator.conftest import VERSION, ServerThread, make_reports

from .conftest import (
    DEVICE,
    QUOTA_TOKEN,
    SEALED_METHOD,
    SURVEY,
    QuotaServer,
    ShufflerThread,
    bearer,
    collection_info,
    needs_nats,
    one_movie,
    sealed,
    shuffler_process,
    stored,
    write_tokens,
)


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

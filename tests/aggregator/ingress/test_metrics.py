"""A replica's ``/metrics`` under load: every counter moves by exactly what was sent (acknowledged,
duplicates, refused by reason, quota), the shard workers' numbers come through the replica, a killed
worker shows up as a restart and as lag, and no label carries a token, a peer address or a report."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest
import ray
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ldpsynth.aggregator.errors import ShardUnavailable
from ldpsynth.aggregator.ingress.replica_metrics import ShardCollector
from ldpsynth.aggregator.storage.segments import WorkerStatus
from ldpsynth.client import RetryPolicy
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, ServerThread, batch, make_reports, stored_rows, submit
from ..scrape import Samples, delta, scrape, value
from .test_auth import write_tokens

StartServer = Callable[..., ServerThread]
DEVICE_TOKEN = "metrics-device-token-7f3a"
ANALYST_TOKEN = "metrics-analyst-token-91bc"
DEVICE = [("authorization", f"Bearer {DEVICE_TOKEN}")]
#: Label values a replica may show: names it serves, fixed vocabularies, numbers.
FIXED_VALUES = {"ratings", "graph", "unknown", "accepted", "duplicate", "stored", "estimate", "export", "all",
                "ldpsynth.v1.CollectionService", "ldpsynth.v1.QueryService", "SubmitReports", "SubmitBatch",
                "SubmitShuffled", "GetCollection",
                "Estimate", "Export", "AdvanceRound", "ready", "starting", "damaged", "unreachable", "+Inf",
                "quota", "too_large", "lifecycle", "wrong_state", "invalid", "unauthenticated", "permission_denied",
                "storage_full", "shard_damaged", "try_later", "shard_unavailable", "other",
                *(code.name for code in grpc.StatusCode)}


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path, [
        {"id": "device-m", "token": DEVICE_TOKEN, "collections": ["ratings", "graph"], "roles": ["submit"]},
        {"id": "analyst-m", "token": ANALYST_TOKEN, "collections": "*", "roles": ["query"]}])


def labels_are_clean(samples: Samples, secrets: list[str]) -> None:
    for (_, labels), _ in samples.items():
        for key, text in labels:
            assert not any(secret in text for secret in secrets), (key, text)
            assert text in FIXED_VALUES or text.replace(".", "").replace("e+", "").isdigit() or key in ("version",), \
                (key, text)


def test_counters_move_by_exactly_what_was_sent(start_server: StartServer, rng: np.random.Generator,
                                                tmp_path: Path) -> None:
    server = start_server(metrics_port=0, tokens_file=tokens(tmp_path),
                          limits=Limits(max_rows_per_client=9000, max_batch_reports=2000))
    url = server.server.metrics_url
    assert url is not None and url.startswith("http://127.0.0.1:")
    stub = pb_grpc.CollectionServiceStub(server.channel())
    before = scrape(url)

    # Load: 4 concurrent streams of 5 batches of 400 new reports each.
    streams = [[make_reports(RATINGS, 400, rng) for _ in range(5)] for _ in range(4)]
    results: list[tuple[list[pb.BatchAck], grpc.StatusCode, str]] = []
    threads = [threading.Thread(target=lambda s=s: results.append(
        submit(stub, [batch(r, sequence=i) for i, r in enumerate(s)], metadata=DEVICE))) for s in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [code for _, code, _ in results] == [grpc.StatusCode.OK] * 4
    # Duplicates: two batches sent again, and a batch of 100 old and 100 new reports.
    old = streams[0][0]
    fresh = make_reports(RATINGS, 100, rng)
    mixed = replace(old, report_ids=np.concatenate([old.report_ids[:100], fresh.report_ids]),
                    private_codes=np.concatenate([old.private_codes[:100], fresh.private_codes]),
                    public_codes=np.concatenate([old.public_codes[:100], fresh.public_codes]))
    acks, code, _ = submit(stub, [batch(streams[1][0]), batch(streams[1][1]), batch(mixed)], metadata=DEVICE)
    assert code == grpc.StatusCode.OK and [(a.accepted, a.duplicates) for a in acks] == [(0, 400), (0, 400), (100, 100)]
    accepted, duplicates, acknowledged_batches = 8100, 900, 23

    # Refusals, one stream each: a code out of range, another mechanism version, an unknown collection,
    # a batch over max_batch_reports, a batch over the quota (8100 stored + 1000 > 9000).
    bad = make_reports(RATINGS, 50, rng)
    bad.private_codes[7] = 987654321
    wrong_version = batch(make_reports(RATINGS, 30, rng))
    wrong_version.mechanism_version = "0"
    unknown = batch(make_reports(RATINGS, 20, rng))
    unknown.collection = "nope"
    refused = [(batch(bad), grpc.StatusCode.INVALID_ARGUMENT), (wrong_version, grpc.StatusCode.FAILED_PRECONDITION),
               (unknown, grpc.StatusCode.PERMISSION_DENIED),
               (batch(make_reports(RATINGS, 2001, rng)), grpc.StatusCode.RESOURCE_EXHAUSTED),
               (batch(make_reports(RATINGS, 1000, rng)), grpc.StatusCode.RESOURCE_EXHAUSTED)]
    for message, expected in refused:
        assert submit(stub, [message], metadata=DEVICE)[1] == expected
    assert stored_rows(server, "ratings") == accepted

    with QueryClient(server.address, token=ANALYST_TOKEN, retry=RetryPolicy(max_attempts=1)) as analyst:
        answers = analyst.estimate("ratings", queries=[{"kind": "marginal", "attributes": ["rating"]}])
    assert answers.n == accepted

    # The workers' numbers reach the replica within a health check or two.
    wait_for(lambda: value(scrape(url), "ldpsynth_collection_rows", collection="ratings") == accepted,
             what="ldpsynth_collection_rows")
    after = scrape(url)

    def d(name: str, **labels: str) -> float:
        return delta(after, before, name, **labels)

    assert d("ldpsynth_ingest_reports_total", collection="ratings", outcome="accepted") == accepted
    assert d("ldpsynth_ingest_reports_total", collection="ratings", outcome="duplicate") == duplicates
    assert d("ldpsynth_ingest_batch_reports_count", collection="ratings") == acknowledged_batches
    assert d("ldpsynth_ingest_batch_reports_sum", collection="ratings") == accepted + duplicates
    assert d("ldpsynth_ingest_commit_duration_seconds_count", collection="ratings") == acknowledged_batches
    for reason, collection, reports in (("invalid", "ratings", 50), ("wrong_state", "ratings", 30),
                                        ("too_large", "ratings", 2001), ("quota", "ratings", 1000)):
        assert d("ldpsynth_ingest_rejected_batches_total", collection=collection, reason=reason) == 1, reason
        assert d("ldpsynth_ingest_rejected_reports_total", collection=collection, reason=reason) == reports, reason
    # The unknown collection is refused before it is looked up (the credential may not use it): its batch is
    # counted under "unknown", never under the name the client sent.
    assert d("ldpsynth_ingest_rejected_reports_total", collection="unknown", reason="permission_denied") == 20
    assert d("ldpsynth_ingest_rejected_reports_total") == 50 + 30 + 20 + 2001 + 1000
    assert d("ldpsynth_quota_refusals_total", collection="ratings") == 1
    assert d("ldpsynth_ingest_unacknowledged_reports_total") == 0
    handled = {code: d("grpc_server_handled_total", grpc_method="SubmitReports", grpc_code=code)
               for code in ("OK", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED")}
    assert handled == {"OK": 5, "INVALID_ARGUMENT": 1, "FAILED_PRECONDITION": 1, "PERMISSION_DENIED": 1,
                       "RESOURCE_EXHAUSTED": 2}
    assert d("grpc_server_started_total", grpc_method="SubmitReports") == 10
    assert value(after, "grpc_server_in_flight_calls", grpc_method="SubmitReports") == 0
    assert d("grpc_server_handled_total", grpc_service="ldpsynth.v1.QueryService", grpc_method="Estimate",
             grpc_code="OK") == 1
    assert d("ldpsynth_query_rows_scanned_total", collection="ratings", kind="estimate") == accepted
    assert d("ldpsynth_query_duration_seconds_count", collection="ratings", kind="estimate") == 1
    # The shard workers' own counters, through the replica: what they stored and found stored already.
    assert d("ldpsynth_shard_reports_total", outcome="stored") == accepted
    assert d("ldpsynth_shard_reports_total", outcome="duplicate") == duplicates
    assert value(after, "ldpsynth_shard_worker_state", state="ready") == 2
    assert value(after, "ldpsynth_shard_lag_records") == 0
    assert value(after, "ldpsynth_shard_log_sequence") == value(after, "ldpsynth_shard_applied_sequence") > 2
    assert value(after, "ldpsynth_log_append_duration_seconds_count") >= 2
    assert value(after, "ldpsynth_shard_commit_duration_seconds_count") == value(after,
                                                                                 "ldpsynth_shard_group_commits_total")
    assert value(after, "ldpsynth_collection_epsilon", collection="ratings") == pytest.approx(1.0, rel=1e-3)
    assert value(after, "ldpsynth_collection_open", collection="ratings") == 1
    assert value(after, "ldpsynth_replica_serving", service="all") == 1
    secrets = [DEVICE_TOKEN, ANALYST_TOKEN, "127.0.0.1", "987654321", "device-m", "analyst-m",
               *(bytes(i).hex() for i in old.report_ids[:20])]
    labels_are_clean(after, secrets)


def test_lag_is_the_log_ahead_of_what_a_restoring_worker_applied() -> None:
    """The shard gauges of a worker restoring its state, without a cluster: lag = log's last sequence -
    the sequence applied, the state ``starting``; an unreachable worker has a state and no lag."""
    collector = ShardCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    restoring = WorkerStatus(0, "w0", 7, 0, {"ratings": 10}, 0, 0, 6, (), state="starting")
    collector.update([restoring, ShardUnavailable("shard 1: worker unavailable")], [40, 12], [1, 0])
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}
    assert samples[("ldpsynth_shard_lag_records", (("shard", "0"),))] == 33
    assert samples[("ldpsynth_shard_worker_state", (("shard", "0"), ("state", "starting")))] == 1
    assert samples[("ldpsynth_shard_worker_state", (("shard", "1"), ("state", "unreachable")))] == 1
    assert ("ldpsynth_shard_lag_records", (("shard", "1"),)) not in samples
    assert samples[("ldpsynth_shard_log_sequence", (("shard", "1"),))] == 12


def test_a_killed_worker_shows_up_as_a_restart_and_as_lag(start_server: StartServer,
                                                          rng: np.random.Generator) -> None:
    """No snapshot is written (--snapshot-every above what is sent), so the restarted worker replays its
    whole log: the replica's first look at it finds it restoring, behind the log."""
    server = start_server(metrics_port=0, snapshot_ids=1 << 30)
    url = server.server.metrics_url
    stub = pb_grpc.CollectionServiceStub(server.channel())
    for _ in range(4):
        assert submit(stub, [batch(make_reports(RATINGS, 300, rng), sequence=i) for i in range(10)])[1] == \
            grpc.StatusCode.OK
    wait_for(lambda: value(scrape(url), "ldpsynth_collection_rows", collection="ratings") == 12000,
             what="rows before the kill")
    before = scrape(url)
    shard = "0"
    last = value(before, "ldpsynth_shard_log_sequence", shard=shard)
    assert last > 10 and value(before, "ldpsynth_shard_worker_restarts_total", shard=shard) == 0

    ray.kill(server.server.workers.actor(0), no_restart=False)
    lags: list[float] = []
    states: set[str] = set()

    def restarted_and_caught_up() -> bool:
        now = scrape(url)
        lags.append(value(now, "ldpsynth_shard_lag_records", shard=shard))
        states.update(s for s in ("starting", "unreachable")
                      if value(now, "ldpsynth_shard_worker_state", shard=shard, state=s) == 1)
        return (value(now, "ldpsynth_shard_worker_restarts_total", shard=shard) == 1 and lags[-1] == 0
                and value(now, "ldpsynth_shard_worker_state", shard=shard, state="ready") == 1 and bool(states))

    wait_for(restarted_and_caught_up, timeout=60, what="a restart, then caught up")
    # The replica looks at its workers once a second: it sees the new worker restoring (starting, behind
    # the log by every record after the genesis) unless Ray had not restarted it yet (unreachable) and the
    # restore was over by the next look (a loaded machine; the lag gauge itself: test_lag_is_the_log_...).
    assert "starting" in states and max(lags) == last - 1 or "unreachable" in states and max(lags) in (0, last - 1)
    after = scrape(url)
    assert value(after, "ldpsynth_shard_replayed_records", shard=shard) == last - 1
    assert value(after, "ldpsynth_shard_worker_restarts_total", shard="1") == 0
    assert stored_rows(server, "ratings") == 12000

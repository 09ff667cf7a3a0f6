"""SIGTERM under load: the replica turns NOT_SERVING, refuses new streams, drains the open ones (their
admitted batches acknowledged, then UNAVAILABLE) within ``--grace`` and exits 0; every stream ends with a
status, and every acknowledged report is in the log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import ServerProcess

from ..conftest import RATINGS, batch, make_reports, verify

StartProcess = Callable[..., ServerProcess]
STREAMS, BATCHES, REPORTS = 4, 400, 250


class Device(threading.Thread):
    """One report stream sending batches until the server ends it; keeps the ids acknowledged."""

    def __init__(self, address: str, seed: int):
        super().__init__(daemon=True)
        self.stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(address))
        rng = np.random.default_rng(seed)
        self.batches = [make_reports(RATINGS, REPORTS, rng) for _ in range(BATCHES)]
        self.acknowledged: list[bytes] = []
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def requests(self) -> Iterator[pb.ReportBatch]:
        for i, reports in enumerate(self.batches):
            yield batch(reports, sequence=i)
            time.sleep(0.01)

    def run(self) -> None:
        try:
            for ack in self.stub.SubmitReports(self.requests(), timeout=120):
                assert ack.accepted == REPORTS
                self.acknowledged += [bytes(i) for i in self.batches[ack.sequence].report_ids]
            self.code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            self.code, self.details = exc.code(), exc.details() or ""


def test_sigterm_under_load_drains_every_stream_and_loses_nothing(start_process: StartProcess,
                                                                  collection_files: list[Path],
                                                                  tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ["--data-dir", str(data), "--port", "0", "--shards", "2", "--grace", "10", "--log-format", "json"]
    for path in collection_files:
        args += ["--collection", str(path)]
    proc = start_process(*args)
    devices = [Device(proc.address, seed) for seed in range(STREAMS)]
    for device in devices:
        device.start()
    deadline = time.monotonic() + 60
    while min(len(d.acknowledged) for d in devices) < 5 * REPORTS:  # every stream is under way
        assert time.monotonic() < deadline
        time.sleep(0.05)
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(proc.address))
    watch = health.Watch(health_pb2.HealthCheckRequest())
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

    proc.proc.terminate()  # SIGTERM
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    late = pb_grpc.CollectionServiceStub(grpc.insecure_channel(proc.address))
    try:  # a stream opened now is refused (or finds the port closed): never taken
        list(late.SubmitReports(iter([batch(make_reports(RATINGS, 10, np.random.default_rng(9)))]), timeout=30))
        raise AssertionError("a stream opened during the stop was taken")
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
    assert proc.wait(60) == 0
    for device in devices:
        device.join(60)
        assert not device.is_alive()
        assert device.code == grpc.StatusCode.UNAVAILABLE and "shutting down" in device.details, \
            (device.code, device.details)
        assert 0 < len(device.acknowledged) < BATCHES * REPORTS
    log = proc.log()
    assert '"event": "replica.stopping"' in log and '"event": "replica.stopped"' in log
    assert "drain_incomplete" not in log  # the streams drained well within the grace

    stored = verify(data, keep_rows=True)
    assert stored.ok
    ids = {bytes(i) for (_, collection), rows in stored.stored.items() if collection == "ratings"
           for i in rows.report_ids}
    acknowledged = {i for device in devices for i in device.acknowledged}
    assert acknowledged <= ids  # no acknowledged report lost
    assert len(ids) == stored.rows["ratings"]

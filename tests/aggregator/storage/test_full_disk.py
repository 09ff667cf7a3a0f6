"""A full disk is named as a full disk: the data directory on a small tmpfs.

When the log's storage runs out, a batch is refused RESOURCE_EXHAUSTED at once (nothing of it is
acknowledged), the server's log names the store and the shard, ingest is NOT_SERVING while queries
go on, the reports acknowledged before stay stored, and ingest resumes by itself once there is room.
A new data directory on a full disk is refused at start with one line saying so.
Needs root to mount the tmpfs (the CI machine runs as root); without it the test is skipped, saying why.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ldpsynth.aggregator.ingress.query_service import QUERY_SERVICE_NAME
from ldpsynth.aggregator.ingress.server import SERVICE_NAME
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, ServerThread, batch, make_reports, stored_rows, submit, verify_running

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
#: Seconds an append waits for the log's answer.
APPEND_TIMEOUT = LogSettings(("nats://127.0.0.1:1",)).timeout

pytestmark = pytest.mark.ray


@pytest.fixture
def small_disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A tmpfs mounted in the test's directory: 4 MiB, or the size the test asks for (indirect)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    size = getattr(request, "param", "4m")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_log_storage_is_resource_exhausted_and_named(small_disk: Path, start_server: Callable[..., ServerThread],
                                                         rng: np.random.Generator,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    server = start_server(data_dir=small_disk / "data", shards=1)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    acknowledged = 0
    with caplog.at_level("ERROR"):
        for _ in range(400):
            acks, code, details = submit(stub, [batch(make_reports(RATINGS, 2000, rng))])
            if code != grpc.StatusCode.OK:
                break
            acknowledged += acks[0].accepted
        else:
            pytest.fail("the 4 MiB disk never filled")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and acks == [], (code, details)
    assert "storage is full" in details
    assert acknowledged > 0 and stored_rows(server, "ratings") == acknowledged
    assert "storage is full" in caplog.text


def test_a_new_data_dir_on_a_full_disk_is_one_line(small_disk: Path, collection_files: list[Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (small_disk / "filler").write_bytes(b"\0" * (4 * 1024 * 1024 - 8192))  # leave less than a block or two
    with pytest.raises(OSError):
        (small_disk / "more").write_bytes(b"\0" * 65536)
    args = ["serve", "--data-dir", str(small_disk / "data"), "--port", "0"]
    for f in collection_files:
        args += ["--collection", str(f)]
    assert aggregator_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "no space left" in err.lower(), err


def health_of(server: ServerThread) -> dict[str, int]:
    stub = health_pb2_grpc.HealthStub(server.channel())
    return {name: stub.Check(health_pb2.HealthCheckRequest(service=name)).status
            for name in ("", SERVICE_NAME, QUERY_SERVICE_NAME)}


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Seconds until ``condition()`` held (polled every 0.1 s); fails after ``seconds``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"{what}: not within {seconds:g} s"
        time.sleep(0.1)
    return time.monotonic() - started


@pytest.mark.parametrize("small_disk", ["64m"], indirect=True)
def test_a_disk_filled_by_something_else_is_named_at_once_and_ingest_resumes_when_space_is_freed(
        small_disk: Path, start_server: Callable[..., ServerThread], rng: np.random.Generator,
        caplog: pytest.LogCaptureFixture) -> None:
    """The fault campaign's scenario on main 5612345: the log's file system filled by another file (not
    JetStream's own limit). Then a batch waited 10 s for UNAVAILABLE "append not confirmed", health
    stayed SERVING, and after the file was removed ingest stayed UNAVAILABLE until a restart."""
    server = start_server(data_dir=small_disk / "data", shards=1)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    first = make_reports(RATINGS, 1000, rng)
    assert submit(stub, [batch(first)])[0][0].accepted == 1000
    with open(small_disk / "filler", "wb") as filler, pytest.raises(OSError):
        while True:
            filler.write(b"\0" * 65536)
            filler.flush()
    refused = [make_reports(RATINGS, 1000, rng) for _ in range(2)]
    with caplog.at_level("INFO"):
        started = time.monotonic()
        acks, code, details = submit(stub, [batch(refused[0])])
        took = time.monotonic() - started
        assert (code, acks) == (grpc.StatusCode.RESOURCE_EXHAUSTED, []) and "log storage is full" in details
        assert took < APPEND_TIMEOUT, f"{took:.1f} s: the refusal waited for the append's timeout"
        wait_for(lambda: health_of(server) == {"": NOT_SERVING, SERVICE_NAME: NOT_SERVING,
                                               QUERY_SERVICE_NAME: SERVING}, 10, "ingest NOT_SERVING")
        started = time.monotonic()
        acks, code, details = submit(stub, [batch(refused[1])])
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() - started < 2.0
        assert stored_rows(server, "ratings") == 1000  # queries go on
        assert re.search(r"the log's storage is full \(.*/data/log: \d+ bytes free; shard 0: .*no space left on "
                         r"device\): batches are refused", caplog.text), caplog.text
        (small_disk / "filler").unlink()
        took = wait_for(lambda: health_of(server)[""] == SERVING, 30, "SERVING again")
        assert "the log's storage has room again" in caplog.text
    acks, code, _ = submit(stub, [batch(reports) for reports in refused])  # retried with the same ids
    assert code == grpc.StatusCode.OK and sum(a.accepted + a.duplicates for a in acks) == 2000
    assert submit(stub, [batch(first)])[0][0].duplicates == 1000  # nothing acknowledged was lost
    assert stored_rows(server, "ratings") == 3000
    verification = verify_running(server)
    assert verification.ok and verification.rows == {"ratings": 3000}, verification.problems

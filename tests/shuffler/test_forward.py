"""Forwarding (ldpsynth.shuffler.forward) against a scripted stand-in replica on 127.0.0.1: a batch the
replica answers UNAVAILABLE is sent again byte for byte, a pool is cut into parts of equal size (none
small) within the collection's limits, every part is sent whatever became of the others, refusals reach
the devices with their status; and the CLI's refusals of its own flags."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.serving.errors import LimitExceeded, TryLater, WrongState
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shuffler.directory import Route, forward_batch_reports
from ldpsynth.shuffler.forward import Forwarder, ForwardFailed, part_bounds

ROUTE = Route("ratings", bytes(range(16)), 84, 1, Limits(max_batch_reports=10))


async def scripted_replica(answers: list[grpc.StatusCode], received: list[bytes]) -> tuple[grpc.aio.Server, str]:
    """SubmitShuffled answers ``answers`` in turn (OK: an ack), then OK; keeps every request's bytes."""

    async def shuffled(raw: bytes, context: grpc.aio.ServicerContext) -> pb.ShuffledAck:
        received.append(raw)
        code = answers.pop(0) if answers else grpc.StatusCode.OK
        if code != grpc.StatusCode.OK:
            await context.abort(code, f"scripted {code.name}")
        batch = pb.SealedBatch.FromString(raw)
        return pb.ShuffledAck(sequence=batch.sequence, accepted=len(batch.reports) // 84)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("ldpsynth.v1.CollectionService", {
        "SubmitShuffled": grpc.unary_unary_rpc_method_handler(
            shuffled, response_serializer=pb.ShuffledAck.SerializeToString)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def forward(answers: list[grpc.StatusCode], rows: np.ndarray, patience: float = 5.0
                  ) -> tuple[list[pb.ShuffledAck | BaseException], list[bytes]]:
    """The outcome of every forwarded part (an ack or the error it ended with), and what the replica received."""
    received: list[bytes] = []
    server, address = await scripted_replica(answers, received)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            forwarder = Forwarder(channel, (("authorization", "Bearer mixer"),), patience)
            bounds, outcomes = await forwarder.forward(ROUTE, 3, rows)
            assert bounds[0] == 0 and bounds[-1] == len(rows) and len(bounds) == len(outcomes) + 1
            return list(outcomes), received
    finally:
        await server.stop(0)


def rows_of(n: int) -> np.ndarray:
    return np.random.default_rng(n).integers(0, 256, (n, 84), dtype=np.uint8)


def test_a_batch_answered_unavailable_is_sent_again_with_the_same_bytes() -> None:
    rows = rows_of(25)
    acks, received = asyncio.run(forward([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED], rows))
    assert [a.accepted for a in acks] == [8, 8, 9]  # three parts of equal size within max_batch_reports, in order
    assert received[0] == received[1] == received[2]  # the first batch, three times, byte for byte
    batches = [pb.SealedBatch.FromString(r) for r in received[2:]]
    assert b"".join(b.reports for b in batches) == rows.tobytes()
    assert {(b.collection, bytes(b.key_id), b.pool_key) for b in batches} == {("ratings", bytes(range(16)), 3)}
    assert len({b.sequence for b in batches}) == 3


@pytest.mark.parametrize("reports, largest", [(1, 1), (1, 10), (10, 10), (11, 10), (25, 10), (65_537, 65_536),
                                              (131_071, 65_536), (999, 7)])
def test_a_pool_is_cut_into_parts_of_equal_size_none_below_half_the_largest(reports: int, largest: int) -> None:
    bounds = part_bounds(reports, largest)
    sizes = np.diff(bounds)
    assert bounds[0] == 0 and bounds[-1] == reports and len(sizes) == -(-reports // largest)
    assert sizes.max() <= largest and sizes.max() - sizes.min() <= 1
    assert len(sizes) == 1 or sizes.min() >= largest // 2


def test_every_part_is_sent_and_answered_on_its_own() -> None:
    outcomes, received = asyncio.run(forward([grpc.StatusCode.OK, grpc.StatusCode.FAILED_PRECONDITION], rows_of(25)))
    assert len(received) == 3 and isinstance(outcomes[1], WrongState)
    assert [o.accepted for o in (outcomes[0], outcomes[2])] == [8, 9]  # type: ignore[union-attr]


@pytest.mark.parametrize("code, error, words", [
    (grpc.StatusCode.FAILED_PRECONDITION, WrongState, "scripted FAILED_PRECONDITION"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, LimitExceeded, "retry later"),
    (grpc.StatusCode.PERMISSION_DENIED, ForwardFailed, "the shuffler cannot forward now"),
    (grpc.StatusCode.UNAUTHENTICATED, ForwardFailed, "retry the batch later"),
])
def test_a_refused_forward_reaches_the_devices_with_its_status(code: grpc.StatusCode, error: type,
                                                               words: str) -> None:
    (exc,), received = asyncio.run(forward([code], rows_of(3)))
    assert type(exc) is error and words in str(exc) and len(received) == 1
    assert isinstance(ForwardFailed("x"), TryLater)  # the shuffler's own credential: UNAVAILABLE to devices


def test_a_pool_the_replicas_find_too_small_sends_its_devices_back_unavailable() -> None:
    (exc,), received = asyncio.run(forward([grpc.StatusCode.ABORTED], rows_of(3)))
    assert type(exc) is TryLater and "same reports" in str(exc) and len(received) == 1


def test_replicas_unavailable_beyond_the_patience_give_unavailable() -> None:
    (exc,), received = asyncio.run(forward([grpc.StatusCode.UNAVAILABLE] * 100, rows_of(3), patience=0.3))
    assert type(exc) is TryLater and "same reports" in str(exc) and 2 <= len(received) < 100


def test_a_forwarded_batch_fits_the_message_limit() -> None:
    small = Route("ratings", bytes(16), 84, 1, Limits(max_batch_reports=1000, max_message_bytes=512 + 7 + 84 * 3))
    assert forward_batch_reports(small) == 3 and forward_batch_reports(ROUTE) == 10


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldpsynth.cli.shuffler_cmd", "serve", *args], capture_output=True,
                          text=True, timeout=60)


def test_the_cli_refuses_bad_flags_naming_them(tmp_path: Path) -> None:
    token = tmp_path / "mixer.token"
    token.write_text("mixer\n")
    token.chmod(0o644)
    base = ["--listen", "127.0.0.1:0", "--aggregator", "127.0.0.1:1"]
    done = run_cli(*base, "--token-file", str(token), "--threshold", "10", "--max-wait", "5")
    assert done.returncode == 2 and "--token-file" in done.stderr and "chmod 600" in done.stderr
    done = run_cli(*base, "--threshold", "0", "--max-wait", "5")
    assert done.returncode == 2 and "--threshold" in done.stderr and "[1, " in done.stderr
    done = run_cli(*base, "--threshold", "10", "--max-wait", "-1")
    assert done.returncode == 2 and "--max-wait" in done.stderr
    assert "Traceback" not in done.stderr

"""256 device streams at once through one replica and 16 shards (issue 29's load shape): every batch
acknowledged or refused whole, each report stored once, and the quota exact under concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import numpy as np

from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.wire import collection_pb2 as pb

from ..conftest import RATINGS, ServerThread, batch, make_reports, stored_ids, verify_running

STREAMS = 256
REPORTS = 10
LIMIT = 2000  # room for 200 of the 256 batches


async def _submit_all(address: str, batches: list[pb.ReportBatch]) -> list[tuple[grpc.StatusCode, pb.BatchAck | None]]:
    """Every batch in a stream of its own, all at once over 8 channels; each stream's status and ack."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(8)]

    async def one(i: int, message: pb.ReportBatch) -> tuple[grpc.StatusCode, pb.BatchAck | None]:
        call = channels[i % 8].stream_stream("/ldpsynth.v1.CollectionService/SubmitReports",
                                             request_serializer=pb.ReportBatch.SerializeToString,
                                             response_deserializer=pb.BatchAck.FromString)
        try:
            acks = [ack async for ack in call(iter([message]), timeout=120)]
        except grpc.aio.AioRpcError as exc:
            return exc.code(), None
        assert len(acks) == 1
        return grpc.StatusCode.OK, acks[0]

    try:
        return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(batches))))
    finally:
        await asyncio.gather(*(channel.close() for channel in channels))


def test_256_concurrent_streams_through_16_shards_are_stored_exactly_once_within_the_quota(
        start_server: Callable[..., ServerThread]) -> None:
    server = start_server(shards=16, limits=Limits(max_rows_per_client=LIMIT))
    rng = np.random.default_rng(29)
    reports = [make_reports(RATINGS, REPORTS, rng) for _ in range(STREAMS)]
    batches = [batch(r, sequence=i) for i, r in enumerate(reports)]

    first = asyncio.run(_submit_all(server.address, batches))
    accepted = [i for i, (code, _) in enumerate(first) if code == grpc.StatusCode.OK]
    refused = [i for i, (code, _) in enumerate(first) if code != grpc.StatusCode.OK]
    assert {first[i][0] for i in refused} <= {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert len(accepted) == LIMIT // REPORTS  # the sole replica's quota mirror is exact
    assert all(first[i][1].accepted == REPORTS and first[i][1].duplicates == 0 for i in accepted)
    assert all(first[i][1].sequence == i for i in accepted)
    expected = {bytes(i) for k in accepted for i in reports[k].report_ids}
    assert stored_ids(server, "ratings") == expected  # refused batches left nothing

    again = asyncio.run(_submit_all(server.address, batches))  # every stream retried at once
    for i in accepted:
        code, ack = again[i]
        assert code == grpc.StatusCode.OK and ack is not None and (ack.accepted, ack.duplicates) == (0, REPORTS)
    assert {again[i][0] for i in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert stored_ids(server, "ratings") == expected
    check = verify_running(server)
    assert not check.problems and check.rows == {"ratings": LIMIT}

"""The load client (its own process, ``bench_scale.py --drive``): one-batch device streams, shared among client
processes, their outcomes merged; and the bare server's handler it is compared against."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np

from ldpsynth.client.transport import DEFAULT_MAX_MESSAGE_BYTES, grpc_target
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.wire import collection_pb2 as pb
from scale.common import BARE_ACK, CARD, SCHEMA


async def ack_each(requests: Any, context: grpc.aio.ServicerContext) -> None:
    """The bare server's one stream-stream method: reads each request's bytes and writes an ack-sized
    message for it."""
    async for _ in requests:
        await context.write(BARE_ACK)


@dataclass(frozen=True)
class Drive:
    """What one client process sends (JSON on its command line)."""

    target: str
    method: str
    streams: int
    reports: int
    concurrency: int
    connect_each: bool
    warmup: int
    replica: bool  # acks are BatchAcks to check (else the bare server's fixed reply)


def _channel(target: str) -> grpc.aio.Channel:
    """The SDK's channel settings (message limits; round robin over several targets), each channel
    with connections of its own (gRPC would otherwise share one per target across channels)."""
    resolved, balancing = grpc_target(target)
    return grpc.aio.insecure_channel(resolved, options=[
        ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.use_local_subchannel_pool", 1), *balancing])


def _batches(count: int, reports: int, rng: np.random.Generator) -> list[bytes]:
    """``count`` serialized one-batch device streams of ``reports`` fresh reports each."""
    out = []
    for _ in range(count):
        batch = Reports(new_report_ids(reports), rng.integers(0, SCHEMA.private_domain_size, reports),
                        rng.integers(0, SCHEMA.public_domain_size, (reports, 1)))
        out.append(reports_to_proto(batch, SCHEMA.name, CARD.version, 0).SerializeToString())
    return out


async def drive_streams(drive: Drive) -> dict[str, Any]:
    """The client process: warm up, say ready, wait for "go" on stdin, send the measured streams;
    the outcome (when the last ack came, reports acknowledged as new, each stream's latency, errors)."""
    rng = np.random.default_rng()  # codes only (data); ids come from the OS CSPRNG
    warm, measured = _batches(drive.warmup, drive.reports, rng), _batches(drive.streams, drive.reports, rng)
    lanes = [] if drive.connect_each else [_channel(drive.target) for _ in range(drive.concurrency)]
    outcome: dict[str, Any] = {"accepted": 0, "errors": [], "latencies": []}

    async def stream(channel: grpc.aio.Channel, data: bytes) -> None:
        started = time.perf_counter()
        try:
            answers = [a async for a in channel.stream_stream(drive.method)(iter([data]))]
        except grpc.aio.AioRpcError as exc:
            outcome["errors"].append(f"{exc.code().name}: {exc.details()}")
            return
        outcome["latencies"].append(time.perf_counter() - started)
        if len(answers) != 1:
            outcome["errors"].append(f"{len(answers)} answers to one batch")
        elif drive.replica:
            outcome["accepted"] += pb.BatchAck.FromString(answers[0]).accepted
        elif answers[0] != BARE_ACK:
            outcome["errors"].append("unexpected answer from the bare server")

    async def lane(index: int, batches: list[bytes]) -> None:
        for data in batches[index::drive.concurrency]:
            if drive.connect_each:
                async with _channel(drive.target) as channel:
                    await stream(channel, data)
            else:
                await stream(lanes[index], data)

    try:
        await asyncio.gather(*(lane(i, warm) for i in range(drive.concurrency)))
        warm_errors = list(outcome["errors"])
        outcome.update(accepted=0, errors=[], latencies=[], warm_accepted=outcome["accepted"])
        if warm_errors:
            outcome["errors"] = [f"warm-up: {e}" for e in warm_errors[:5]]
        print(json.dumps({"event": "ready"}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await asyncio.gather(*(lane(i, measured) for i in range(drive.concurrency)))
        outcome["finished"] = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on Linux
    finally:
        await asyncio.gather(*(channel.close() for channel in lanes))
    outcome["event"] = "done"
    return outcome


def split_drive(drive: Drive, clients: int) -> list[Drive]:
    """``drive`` shared by ``clients`` processes: each takes its share of the streams, the warm-up
    streams and the lanes (``clients <= drive.concurrency``)."""
    return [dataclasses.replace(drive, streams=s, warmup=w, concurrency=c) for s, w, c in
            zip(shares(drive.streams, clients), shares(drive.warmup, clients), shares(drive.concurrency, clients))]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers (the larger ones first)."""
    return [total // parts + (i < total % parts) for i in range(parts)]


@dataclass(frozen=True)
class Outcome:
    """What the client processes of one run did, merged."""

    streams: int  # acknowledged measured streams
    seconds: float  # from the go to the last process's last ack
    accepted: int  # reports acknowledged as new, warm-up included
    p50_ms: float
    p99_ms: float
    errors: list[str]


def merge_outcomes(outcomes: Sequence[dict[str, Any]], go_at: float) -> Outcome:
    """Merge the ``done`` lines of the client processes of one run, sent the go at ``go_at``
    (``time.monotonic()``): the latencies of all of them, the wall time to the last ack."""
    latencies = np.asarray([x for o in outcomes for x in o["latencies"]] or [math.nan]) * 1e3
    errors = [e for o in outcomes for e in o["errors"]]
    return Outcome(sum(len(o["latencies"]) for o in outcomes), max(o["finished"] for o in outcomes) - go_at,
                   sum(o["accepted"] + o["warm_accepted"] for o in outcomes),
                   float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99)),
                   errors[:20] + ([f"... {len(errors) - 20} more"] if len(errors) > 20 else []))

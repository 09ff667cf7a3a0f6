"""Test doubles for the client tests: a fake aggregator over real sockets, and sample collections.

:class:`FakeCollectionService` is a ``grpc.aio`` servicer that stores reports by id (a retried id
is counted as a duplicate, never stored twice) and injects the faults of :class:`Faults`.
:class:`FakeQueryService` answers ``Estimate`` and ``Export`` from fixed rows and fails its first
calls as told. :class:`FakeServer` serves them on ``127.0.0.1:0``; :class:`ServerThread` runs one
on its own event loop in a thread, for blocking code (the sync client, the CLI).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.protocol import CollectionInfo, Limits, reports_from_proto
from ldpsynth.shared.queries.wire import BatchReader, answer_pages
from ldpsynth.shared.schema import BinaryAttribute, CategoricalAttribute, IntegerAttribute, Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.shared.wire import query_pb2_grpc as qpb_grpc
from ldpsynth.shared.wire import shuffler_pb2 as spb
from ldpsynth.shared.wire import shuffler_pb2_grpc as spb_grpc

REGIONS = ("eu", "us", "asia")


def ratings_schema(epsilon: float = 1.0, name: str = "ratings") -> Schema:
    """Two public attributes (movie, region) and two private ones (rating 1..5, watched): |D| = 10."""
    return Schema(name, epsilon, (
        IntegerAttribute("movie", public=True, min=0, max=99),
        CategoricalAttribute("region", public=True, values=REGIONS),
        IntegerAttribute("rating", public=False, min=1, max=5),
        BinaryAttribute("watched", public=False),
    ))


def ratings_info(epsilon: float = 1.0, limits: Limits | None = None, name: str = "ratings") -> CollectionInfo:
    return CollectionInfo(MechanismCard.for_schema(ratings_schema(epsilon, name)), limits or Limits())


def ratings_rows(n: int, seed: int = 0, start: int = 0) -> dict[str, list]:
    """``n`` rows with distinct public keys (rows ``start .. start+n-1`` of a fixed sequence; n <= 300)."""
    rng = np.random.default_rng(seed)
    index = range(start, start + n)
    return {
        "movie": [i % 100 for i in index],
        "region": [REGIONS[(i // 100) % 3] for i in index],
        "rating": [int(r) for r in rng.integers(1, 6, n)],
        "watched": [int(w) for w in rng.integers(0, 2, n)],
    }


@dataclass
class Faults:
    """What the fake server does wrong. Attempts and batches are counted from 0."""

    #: The first k SubmitReports attempts end with UNAVAILABLE before reading anything.
    unavailable_attempts: int = 0
    #: Every SubmitReports attempt ends with this status before reading anything (like an auth check).
    refuse_on_open: grpc.StatusCode | None = None
    #: attempt -> commit this many batches on that attempt, acknowledge all but the last, then drop.
    drop_after: dict[int, int] = field(default_factory=dict)
    drop_status: grpc.StatusCode = grpc.StatusCode.CANCELLED
    #: SubmitReports never answers.
    hang: bool = False
    #: Seconds to wait before each acknowledgement.
    ack_delay: float = 0.0
    #: End the stream with ``reject_status`` when the batch with this index (over all attempts) arrives.
    reject_at: int | None = None
    reject_status: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT
    reject_details: str = "batch rejected"
    #: The only bearer token accepted (None: any caller).
    token: str | None = None
    #: The first k GetCollection calls end with UNAVAILABLE.
    get_collection_unavailable: int = 0


class FakeCollectionService(pb_grpc.CollectionServiceServicer):
    """Stores reports by id, records what it saw, injects :class:`Faults`."""

    def __init__(self, info: CollectionInfo, faults: Faults | None = None):
        self.info = info
        self.faults = faults or Faults()
        self.stored: dict[bytes, tuple[int, tuple[int, ...]]] = {}
        self.offered: Counter[bytes] = Counter()
        self.received: list[tuple[int, pb.ReportBatch]] = []
        self.metadata: list[dict[str, str]] = []
        self.time_remaining: list[float | None] = []
        self.peer_common_names: list[bytes] = []
        self.attempts = 0
        self.get_collection_calls = 0
        self.on_batch: Callable[[pb.ReportBatch], None] | None = None

    async def _admit(self, context: grpc.aio.ServicerContext) -> None:
        metadata = {k: v for k, v in context.invocation_metadata()}
        self.metadata.append(metadata)
        self.time_remaining.append(context.time_remaining())
        self.peer_common_names.extend(context.auth_context().get("x509_common_name", []))
        token = self.faults.token
        if token is not None and metadata.get("authorization") != f"Bearer {token}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or unknown token")

    async def GetCollection(self, request: pb.GetCollectionRequest, context: grpc.aio.ServicerContext) -> pb.Collection:
        await self._admit(context)
        self.get_collection_calls += 1
        if self.get_collection_calls <= self.faults.get_collection_unavailable:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "server starting")
        if request.collection != self.info.schema.name:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"unknown collection {request.collection!r}")
        return self.info.to_proto()

    async def SubmitReports(self, request_iterator: AsyncIterator[pb.ReportBatch],
                            context: grpc.aio.ServicerContext) -> AsyncIterator[pb.BatchAck]:
        await self._admit(context)
        attempt = self.attempts
        self.attempts += 1
        faults = self.faults
        if attempt < faults.unavailable_attempts:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "server restarting")
        if faults.refuse_on_open is not None:
            await context.abort(faults.refuse_on_open, "refused")
        if faults.hang:
            await asyncio.sleep(3600)
        committed = 0
        async for batch in request_iterator:
            index = len(self.received)
            self.received.append((attempt, batch))
            if self.on_batch is not None:
                self.on_batch(batch)
            if faults.reject_at is not None and index >= faults.reject_at:
                await context.abort(faults.reject_status, faults.reject_details)
            if batch.mechanism_version != self.info.card.version:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "mechanism version mismatch")
            try:
                reports = reports_from_proto(batch, self.info.schema)
            except ValidationError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            accepted = duplicates = 0
            for i in range(len(reports)):
                report_id = reports.report_ids[i].tobytes()
                self.offered[report_id] += 1
                if report_id in self.stored:
                    duplicates += 1
                else:
                    self.stored[report_id] = (int(reports.private_codes[i]),
                                              tuple(int(c) for c in reports.public_codes[i]))
                    accepted += 1
            committed += 1
            if faults.ack_delay:
                await asyncio.sleep(faults.ack_delay)
            if faults.drop_after.get(attempt) == committed:
                await context.abort(faults.drop_status, "connection dropped")
            yield pb.BatchAck(sequence=batch.sequence, accepted=accepted, duplicates=duplicates)


class FakeQueryService(qpb_grpc.QueryServiceServicer):
    """Answers ``Estimate`` with the offline estimator over ``codes`` (public keys and private codes
    of the rows) and pages sized to the collection's message limit; ``Export`` sends the card and
    the rows, ``chunk_rows`` at a time.

    The first ``len(failures)`` calls of each method end with those statuses: an ``Estimate`` after
    reading the whole batch, an ``Export`` after sending its first chunk (a drop in mid-stream).
    ``starts[method]`` holds the monotonic time of every call, ``batches`` the requests of every
    Estimate call.
    """

    def __init__(self, info: CollectionInfo, public_keys: np.ndarray, private_codes: np.ndarray, *,
                 failures: Sequence[grpc.StatusCode] = (), chunk_rows: int = 7):
        self.info = info
        self.public_keys, self.private_codes = public_keys, private_codes
        self.failures = list(failures)
        self.chunk_rows = chunk_rows
        self.starts: dict[str, list[float]] = {"Estimate": [], "Export": []}
        self.batches: list[list[qpb.EstimateRequest]] = []

    def _failure(self, method: str) -> grpc.StatusCode | None:
        calls = self.starts[method]
        calls.append(time.monotonic())
        return self.failures[len(calls) - 1] if len(calls) <= len(self.failures) else None

    async def Estimate(self, request_iterator: AsyncIterator[qpb.EstimateRequest],
                       context: grpc.aio.ServicerContext) -> AsyncIterator[qpb.EstimateResponse]:
        failure = self._failure("Estimate")
        schema = self.info.schema
        reader = BatchReader(schema, max_queries=1 << 22, max_weights=1 << 28)
        received: list[qpb.EstimateRequest] = []
        async for request in request_iterator:
            received.append(request)
            try:
                reader.add(request)
            except ValidationError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self.batches.append(received)
        if failure is not None:
            await context.abort(failure, "injected failure")
        stats = SufficientStatistics.from_schema(schema, self.public_keys, self.private_codes)
        answers = estimate(reader.batch(), stats, self.info.card.mechanism, level=received[0].level or 0.95)
        for page in answer_pages(answers, max_bytes=self.info.limits.max_message_bytes):
            yield page

    async def Export(self, request: qpb.ExportRequest,
                     context: grpc.aio.ServicerContext) -> AsyncIterator[qpb.ExportChunk]:
        failure = self._failure("Export")
        schema = self.info.schema
        yield qpb.ExportChunk(card_json=self.info.card.dumps(), rows=len(self.private_codes))
        if failure is not None:
            await context.abort(failure, "injected failure")
        for start in range(0, len(self.private_codes), self.chunk_rows):
            part = slice(start, start + self.chunk_rows)
            digits = schema.public_digits(self.public_keys[part])
            yield qpb.ExportChunk(
                public_codes=[digits[a.name].astype("<u8").tobytes() for a in schema.public_attributes],
                private_codes=self.private_codes[part].astype("<u8").tobytes())


class FakeShufflerService(spb_grpc.ShufflerServiceServicer):
    """A shuffler that keeps what devices send (``batches``: every SealedBatch, ``sealed``: every sealed
    report as sent) and acknowledges it; the first ``unavailable_calls`` calls end UNAVAILABLE, and a
    call whose index is in ``refuse`` ends with ``refuse_status``."""

    def __init__(self, width: int, token: str | None = None, unavailable_calls: int = 0,
                 refuse: frozenset[int] = frozenset(),
                 refuse_status: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT):
        self.width, self.token = width, token
        self.unavailable_calls, self.refuse, self.refuse_status = unavailable_calls, refuse, refuse_status
        self.calls = 0
        self.batches: list[pb.SealedBatch] = []
        self.sealed: list[bytes] = []
        self.metadata: list[dict[str, str]] = []

    async def SubmitSealed(self, request: pb.SealedBatch, context: grpc.aio.ServicerContext) -> spb.SealedAck:
        index = self.calls
        self.calls += 1
        metadata = {k: v for k, v in context.invocation_metadata()}
        self.metadata.append(metadata)
        if self.token is not None and metadata.get("authorization") != f"Bearer {self.token}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or unknown token")
        if index < self.unavailable_calls:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "shuffler restarting")
        if index in self.refuse:
            await context.abort(self.refuse_status, "refused")
        if not request.reports or len(request.reports) % self.width:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "reports: not a multiple of the report size")
        self.batches.append(request)
        self.sealed += [request.reports[i:i + self.width] for i in range(0, len(request.reports), self.width)]
        return spb.SealedAck(sequence=request.sequence, accepted=len(request.reports) // self.width)


class FakeServer:
    """A ``grpc.aio`` server for one :class:`FakeCollectionService` (and optionally a
    :class:`FakeQueryService`, a :class:`FakeShufflerService`) on ``127.0.0.1`` (port 0 at first)."""

    def __init__(self, service: FakeCollectionService | None, *, credentials: grpc.ServerCredentials | None = None,
                 max_receive_message_bytes: int | None = None, queries: FakeQueryService | None = None,
                 shuffler: FakeShufflerService | None = None):
        self.service = service
        self.queries = queries
        self.shuffler = shuffler
        self._credentials = credentials
        self._options = ([("grpc.max_receive_message_length", max_receive_message_bytes)]
                         if max_receive_message_bytes else [])
        self.port = 0
        self._server: grpc.aio.Server | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> FakeServer:
        server = grpc.aio.server(options=self._options)
        if self.service is not None:
            pb_grpc.add_CollectionServiceServicer_to_server(self.service, server)
        if self.shuffler is not None:
            spb_grpc.add_ShufflerServiceServicer_to_server(self.shuffler, server)
        if self.queries is not None:
            qpb_grpc.add_QueryServiceServicer_to_server(self.queries, server)
        address = f"127.0.0.1:{self.port}"
        if self._credentials is None:
            self.port = server.add_insecure_port(address)
        else:
            self.port = server.add_secure_port(address, self._credentials)
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
            self._server = None

    async def __aenter__(self) -> FakeServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class ServerThread:
    """A :class:`FakeServer` on its own event loop in a daemon thread (for blocking clients)."""

    def __init__(self, service: FakeCollectionService | None, **server_options: Any):
        self.server = FakeServer(service, **server_options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def target(self) -> str:
        return self.server.target

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

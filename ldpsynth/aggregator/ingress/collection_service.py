"""The handlers of ``ldpsynth.v1.CollectionService`` (proto/ldpsynth/v1/collection.proto) on one replica,
whatever the transport: gRPC (:meth:`CollectionServicer.handlers`) and the web port
(:mod:`~ldpsynth.aggregator.ingress.web`, through :meth:`~CollectionServicer.collection` and
:meth:`~CollectionServicer.submit_batch`).

* The gRPC handlers receive raw request bytes and parse them themselves, so garbage bytes end as
  INVALID_ARGUMENT rather than the INTERNAL a failing deserializer produces; every error ends the call
  through :func:`~ldpsynth.serving.status.rpc`.
* ``SubmitReports`` reads batches in order, admits each (validation, authorization, quota), lets up
  to ``max_inflight_batches`` of them commit concurrently, and writes one ``BatchAck`` per batch, in
  order, each after its batch is durable in the replicated log. A rejected batch ends the stream with
  its status after the acks of the batches before it; nothing of it is stored.
* ``SubmitBatch``: one batch, admitted and committed as a batch of ``SubmitReports``.
* ``SubmitShuffled`` (role ``shuffler``) takes one shuffled batch of sealed reports, opens them with
  the deployment's sealing key (:mod:`~ldpsynth.aggregator.ingress.shuffled`), and admits and commits
  what opened valid through the same :class:`~ldpsynth.aggregator.ingress.ingest.Ingestor`; one
  ``ShuffledAck`` once durable, with the reports dropped as undecryptable or invalid.
* A graceful stop (:meth:`CollectionServicer.drain`, called by
  :meth:`~ldpsynth.aggregator.ingress.server.AggregatorServer.stop`): every open report stream ends once
  the batches it had admitted are committed and acknowledged, with UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import NamedTuple

import grpc

from ldpsynth.aggregator.errors import ShardFull
from ldpsynth.aggregator.ingress.ingest import Admitted, Ingestor
from ldpsynth.aggregator.ingress.replica_metrics import ReplicaMetrics
from ldpsynth.aggregator.ingress.shuffled import ShuffledIngest
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.serving.auth import OPERATE, QUERY, SHUFFLER, SUBMIT, Authenticator, Credential
from ldpsynth.serving.errors import TryLater
from ldpsynth.serving.observe.metrics import ServiceCalls
from ldpsynth.serving.status import COLLECTION_NOT_READ, NOT_ACKNOWLEDGED, parse, rpc
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.reports import REPORT_ID_BYTES
from ldpsynth.shared.wire import collection_pb2 as pb

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["CollectionService"].full_name
METHODS = ("GetCollection", "SubmitReports", "SubmitBatch", "SubmitShuffled")
#: The message a graceful stop cancels a stream's reader with while it waits for the next batch.
_DRAIN = "ldpsynth: draining"


class _Pending(NamedTuple):
    """A stream's batch being committed: what it is and its ack (a future)."""

    admitted: Admitted
    ack: asyncio.Future[pb.BatchAck]


def _drained() -> TryLater:
    return TryLater("the server is shutting down; resend the unacknowledged batches to another replica or later")


def _retrieve(future: asyncio.Future[pb.BatchAck]) -> None:
    """Mark the outcome of a commit nobody waits for any more as seen (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()


class CollectionServicer:
    """The collection service of one replica (see the module docstring).

    ``calls`` records the gRPC calls, ``metrics`` the batches; ``stopping`` says whether a stop has
    begun (new batches are refused UNAVAILABLE), ``serving`` whether batches can be stored now (the
    ingest side's health), ``storage_full`` why the log's storage is full (``None``: it has room).
    """

    def __init__(self, catalog: Catalog, ingestor: Ingestor, shuffled: ShuffledIngest, authenticator: Authenticator,
                 calls: ServiceCalls, metrics: ReplicaMetrics, max_inflight_batches: int, *,
                 stopping: Callable[[], bool], serving: Callable[[], bool], storage_full: Callable[[], str | None]):
        self.catalog = catalog
        self.calls = calls
        self.metrics = metrics
        self._ingestor = ingestor
        self._shuffled = shuffled
        self._authenticator = authenticator
        self._max_inflight_batches = max_inflight_batches
        self._stopping = stopping
        self._serving = serving
        self._storage_full = storage_full
        self._draining = asyncio.Event()  # set as a graceful stop begins: open report streams end
        self._idle_readers: set[asyncio.Task[LdpsynthError | None]] = set()  # streams' readers awaiting a batch
        self._streams = 0  # report streams open
        self._no_streams = asyncio.Event()
        self._no_streams.set()

    def handlers(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "GetCollection": grpc.unary_unary_rpc_method_handler(
                self._get_collection, response_serializer=pb.Collection.SerializeToString),
            "SubmitReports": grpc.stream_stream_rpc_method_handler(
                self._submit_reports, response_serializer=pb.BatchAck.SerializeToString),
            "SubmitBatch": grpc.unary_unary_rpc_method_handler(
                self._submit_batch, response_serializer=pb.BatchAck.SerializeToString),
            "SubmitShuffled": grpc.unary_unary_rpc_method_handler(
                self._submit_shuffled, response_serializer=pb.ShuffledAck.SerializeToString),
        })

    # ----- a graceful stop ---------------------------------------------------------------------
    @property
    def streams(self) -> int:
        """Report streams open now."""
        return self._streams

    def drain(self) -> None:
        """End every open report stream once what it admitted is acknowledged (UNAVAILABLE): the readers
        waiting for a batch are cancelled now, the others stop at their next batch."""
        self._draining.set()
        for reader in list(self._idle_readers):
            reader.cancel(_DRAIN)

    async def drained(self, grace: float) -> int:
        """Wait up to ``grace`` seconds for the open report streams to end; the number still open then."""
        try:
            if self._streams:
                await asyncio.wait_for(self._no_streams.wait(), grace)
        except asyncio.TimeoutError:
            return self._streams
        return 0

    # ----- the collection service, whatever the transport (gRPC here, the web port in web.py) --------
    @property
    def serving(self) -> bool:
        """Whether batches can be stored now (the health of ``ldpsynth.v1.CollectionService``)."""
        return self._serving()

    def authenticate(self, context: grpc.aio.ServicerContext) -> Credential:
        """The credential of a gRPC call (its metadata, its TLS peer identity)."""
        return self._authenticator.authenticate(context.invocation_metadata() or (), context.auth_context())

    def authenticate_headers(self, headers: Sequence[tuple[str, str]]) -> Credential:
        """The credential of a web call's HTTP headers (no TLS peer identity on the web port)."""
        return self._authenticator.authenticate(headers, {})

    def collection(self, credential: Credential, request: pb.GetCollectionRequest) -> pb.Collection:
        """GetCollection: the collection the request names, if the credential may read it."""
        credential.require_role(SUBMIT, QUERY, SHUFFLER, OPERATE)
        credential.require_collection(request.collection)
        return self.catalog.proto(request.collection)

    async def submit_batch(self, credential: Credential, batch: pb.ReportBatch) -> pb.BatchAck:
        """SubmitBatch: one batch, admitted and committed exactly as a batch of SubmitReports; its ack
        once every report of it is durable. Raises the error (with its status) that refuses it."""
        credential.require_role(SUBMIT)
        try:
            admitted = await self._admit(credential, batch)
        except LdpsynthError as exc:
            self.metrics.rejected(batch.collection, len(batch.report_ids) // REPORT_ID_BYTES, exc)
            raise
        return await self._commit_counted(admitted)

    async def _commit_counted(self, admitted: Admitted) -> pb.BatchAck:
        """:meth:`_commit` of a batch admitted outside a report stream, counted in the metrics
        as a stream's batches are."""
        collection = admitted.quota_key[0]
        self.metrics.admitted(collection, admitted.reports)
        try:
            ack = await self._commit(admitted)
        except LdpsynthError as exc:
            self.metrics.not_acknowledged(collection, admitted.reports, exc)
            raise
        self.metrics.acknowledged(collection, ack.accepted, ack.duplicates)
        return ack

    async def _admit(self, credential: Credential, batch: pb.ReportBatch) -> Admitted:
        """A batch's admission: refused while stopping (UNAVAILABLE) or while the log is full, then
        :meth:`Ingestor.admit` (validation, authorization, quota)."""
        if self._stopping():
            raise TryLater("the server is shutting down; retry the batch")
        self._refuse_if_full()
        return await self._ingestor.admit(credential, batch)

    # ----- gRPC handlers ---------------------------------------------------------------------------
    @rpc("GetCollection", COLLECTION_NOT_READ)
    async def _get_collection(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.Collection:
        credential = self.authenticate(context)
        return self.collection(credential, parse(pb.GetCollectionRequest, raw))

    @rpc("SubmitBatch", NOT_ACKNOWLEDGED)
    async def _submit_batch(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.BatchAck:
        credential = self.authenticate(context)
        return await self.submit_batch(credential, parse(pb.ReportBatch, raw))

    @rpc("SubmitReports", NOT_ACKNOWLEDGED)
    async def _submit_reports(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        if self._stopping():
            raise TryLater("the server is shutting down; send the batches to another replica or retry later")
        credential = self.authenticate(context)
        credential.require_role(SUBMIT)
        self._streams += 1
        self._no_streams.clear()
        self.metrics.streams.inc()
        try:
            failure = await self._stream(credential, requests, context)
        finally:
            self._streams -= 1
            self.metrics.streams.dec()
            if not self._streams:
                self._no_streams.set()
        if failure is not None:
            raise failure

    @rpc("SubmitShuffled", NOT_ACKNOWLEDGED)
    async def _submit_shuffled(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.ShuffledAck:
        """One shuffled batch of sealed reports (:mod:`~ldpsynth.aggregator.ingress.shuffled`): opened,
        validated, admitted and committed by the device path's admission and commit; acknowledged once durable."""
        credential = self.authenticate(context)
        credential.require_role(SHUFFLER)
        if self._stopping():
            raise TryLater("the server is shutting down; retry the batch")
        self._refuse_if_full()
        admission = await self._shuffled.admit(credential, parse(pb.SealedBatch, raw))
        if admission.admitted is None:
            return admission.ack()
        ack = await self._commit_counted(admission.admitted)
        return admission.ack(ack.accepted, ack.duplicates)

    async def _stream(self, credential: Credential, requests: AsyncIterator[bytes],
                      context: grpc.aio.ServicerContext) -> LdpsynthError | None:
        """Admit batches in order, commit up to ``max_inflight_batches`` at once, ack in order.

        One reader task admits; this task writes the acks as the commits (futures, no task each) end.
        Returns the error that ends the stream (``None``: the client closed it)."""
        commits: asyncio.Queue[_Pending | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read(credential, requests, commits))
        failure: LdpsynthError | None = None
        try:
            while (item := await commits.get()) is not None:
                try:
                    ack = await item.ack
                except LdpsynthError as exc:
                    self.metrics.not_acknowledged(item.admitted.quota_key[0], item.admitted.reports, exc)
                    failure = exc
                    break
                await context.write(ack)
                self.metrics.acknowledged(item.admitted.quota_key[0], ack.accepted, ack.duplicates)
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            while not commits.empty():  # batches admitted after a failed one: never acknowledged
                if (item := commits.get_nowait()) is not None:
                    self.metrics.not_acknowledged(item.admitted.quota_key[0], item.admitted.reports,
                                                  failure or TryLater("the stream ended"))
                    item.ack.add_done_callback(_retrieve)
        return failure if failure is not None else reader.result()

    def _refuse_if_full(self) -> None:
        """RESOURCE_EXHAUSTED at once while the log's storage is full (nothing of the batch is stored)."""
        full = self._storage_full()
        if full is not None:
            raise ShardFull(full)

    async def _read(self, credential: Credential, requests: AsyncIterator[bytes],
                    commits: asyncio.Queue[_Pending | None]) -> LdpsynthError | None:
        """Read and admit the stream's batches until it ends, one is refused, or a graceful stop
        begins (then :class:`TryLater`: what was admitted is still committed and acknowledged). At most
        ``max_inflight_batches`` of them are being committed: the reader waits for the oldest first.
        While it waits for the next batch a graceful stop cancels it (:data:`_DRAIN`)."""
        batches = requests.__aiter__()
        window: deque[asyncio.Future[pb.BatchAck]] = deque()
        task = asyncio.current_task()
        assert task is not None
        try:
            while True:
                while window and window[0].done():
                    window.popleft()
                if len(window) >= self._max_inflight_batches:
                    await asyncio.wait((window[0],))
                    continue
                if self._draining.is_set():
                    return _drained()
                self._idle_readers.add(task)
                try:
                    raw = await batches.__anext__()
                except StopAsyncIteration:
                    return None
                except asyncio.CancelledError as exc:
                    if exc.args == (_DRAIN,):
                        return _drained()
                    raise
                finally:
                    self._idle_readers.discard(task)
                collection, reports = "", 0
                try:
                    batch = parse(pb.ReportBatch, raw)
                    collection, reports = batch.collection, len(batch.report_ids) // REPORT_ID_BYTES
                    admitted = await self._admit(credential, batch)
                except LdpsynthError as exc:
                    self.metrics.rejected(collection, reports, exc)
                    return exc
                self.metrics.admitted(collection, admitted.reports)
                pending = _Pending(admitted, self._commit(admitted))
                window.append(pending.ack)
                commits.put_nowait(pending)
        finally:
            commits.put_nowait(None)

    def _commit(self, admitted: Admitted) -> asyncio.Future[pb.BatchAck]:
        """The batch's commit (:meth:`Ingestor.commit`): its ack once durable, the commit's duration
        observed when it is acknowledged (:meth:`ReplicaMetrics.committed`)."""
        ack = self._ingestor.commit(admitted)
        ack.add_done_callback(partial(self.metrics.committed, admitted.quota_key[0], time.perf_counter()))
        return ack

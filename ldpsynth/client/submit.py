"""Stream a submission's reports over ``SubmitReports``: batches, acknowledgements, retries.

The reports are cut once into batches numbered ``0, 1, ...`` (the ``sequence`` of each
``ReportBatch``); the server answers each batch with a ``BatchAck`` only after every report of it
is durably committed (docs/contract.md). An attempt writes every unacknowledged batch and reads
acknowledgements as they come; when it fails with a retryable status the next attempt, after a
backoff, resends exactly the batches still unacknowledged, with the same report ids, so the
server stores every report once whatever happened to the connection.

Through a shuffler (:class:`SealedSender`, docs/contract.md §16) the same machinery sends sealed
reports, one unary ``ShufflerService.SubmitSealed`` call per batch: a retry resends the same sealed
bytes, whose report ids the replicas deduplicate once the shuffler has forwarded them.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import grpc
import numpy as np

from ldpsynth.client.errors import SubmitError
from ldpsynth.client.retry import RetryPolicy, is_retryable
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import private_wire
from ldpsynth.shared.protocol import (
    FIELD_HEADER_BYTES,
    CollectionInfo,
    report_bytes,
    reports_to_proto,
    rows_that_fit,
)
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import KEY_ID_BYTES, sealed_report_bytes
from ldpsynth.shared.validation import check_int
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import shuffler_pb2_grpc as shuffler_grpc

__all__ = [
    "StreamResult",
    "batch_capacity",
    "sealed_batch_capacity",
    "ReportStreamer",
    "SealedSender",
]


@dataclass(frozen=True)
class StreamResult:
    """Outcome of streaming one submission.

    Attributes
    ----------
    sent:
        Reports in the submission (each counted once, however often it was resent).
    acknowledged:
        Reports the server newly committed.
    duplicates:
        Reports the server already held (an earlier submission or a retried batch).
    batches:
        Batches the reports were cut into.
    retries:
        Attempts after the first.
    """

    sent: int
    acknowledged: int
    duplicates: int
    batches: int
    retries: int


def batch_capacity(info: CollectionInfo, channel_limit: int, batch_size: int | None = None) -> int:
    """Reports per batch: at most ``batch_size``, the collection's ``max_batch_reports``, and as
    many as fit in the smaller of its ``max_message_bytes`` and the channel's limit.

    A limit of 0 in the collection means "not set".
    """
    schema = info.schema
    public = len(schema.public_attributes)
    limit = min(x for x in (info.limits.max_message_bytes, channel_limit) if x > 0)
    envelope = pb.ReportBatch(collection=schema.name, mechanism_version=info.card.version,
                              sequence=2**64 - 1).ByteSize()
    private, private_columns = private_wire(info.card.mechanism)   # E: 8 bytes; an oracle: its report's fields
    columns = 1 + private_columns + public  # the ids, the private part's fields and one column per public attribute
    fit = rows_that_fit(limit, envelope, report_bytes(public, private), columns)
    if fit < 1:
        needed = envelope + columns * FIELD_HEADER_BYTES + report_bytes(public, private)
        raise ValidationError("max_message_bytes", f"at least {needed} bytes (one report)", f"got {limit}")
    caps = [fit, info.limits.max_batch_reports or fit]
    if batch_size is not None:
        caps.append(check_int(batch_size, "batch_size", 1))
    return min(caps)


class _Delivery:
    """The retry machinery every submission shares: batches numbered ``0, 1, ...`` once, attempts that
    each send the batches still unacknowledged (the same reports, the same report ids), a backoff
    between attempts, and :class:`SubmitError` once ``retry.max_attempts`` attempts in a row made no
    progress or a status is final. Subclasses say what one attempt is (:meth:`_attempt`)."""

    method = ""

    def __init__(self, batches: dict[int, object], sent: int, *, deadline: float,
                 metadata: tuple[tuple[str, str], ...], retry: RetryPolicy, rng: random.Random):
        self._sent = sent
        self._pending = batches
        self._batches = len(self._pending)
        self._deadline = deadline
        self._metadata = metadata
        self._retry = retry
        self._rng = rng
        self._acknowledged = 0
        self._duplicates = 0
        self._lockstep = False

    async def run(self) -> StreamResult:
        """Send until every batch is acknowledged; raise :class:`SubmitError` on a final failure."""
        attempts = stalled = 0
        while self._pending:
            attempts += 1
            before = len(self._pending)
            status, details, write_failed = await self._attempt()
            if not self._pending:
                break
            # grpcio (aio) reports INTERNAL "Internal error from Core" instead of the server's status
            # when a write races with the server ending the stream. Resending is safe (same ids), so
            # go again in lockstep, where a write can be in flight only while the server has not
            # answered the previous batch: the first such attempt is free; later ones (a race on
            # the very first write) count against max_attempts like any retryable failure.
            masked = status == "INTERNAL" and write_failed
            if masked and not self._lockstep:
                self._lockstep = True
                continue
            if status is None:
                status, details = "ABORTED", (f"the server closed the stream with {len(self._pending)} "
                                              "batches unacknowledged")
            stalled = 0 if len(self._pending) < before else stalled + 1
            if not (is_retryable(status) or masked) or stalled >= self._retry.max_attempts:
                raise SubmitError(self.method, status, details, attempts=attempts, sent=self._sent,
                                  acknowledged=self._acknowledged, duplicates=self._duplicates)
            await asyncio.sleep(self._retry.backoff(max(stalled, 1), self._rng))
        return StreamResult(self._sent, self._acknowledged, self._duplicates, self._batches, max(attempts - 1, 0))

    async def _attempt(self) -> tuple[str | None, str, bool]:
        """One attempt: ``(status name of its failure, details, whether a write failed)``; ``(None, "",
        False)`` when it ended without an error."""
        raise NotImplementedError


class ReportStreamer(_Delivery):
    """Delivers one submission's reports over ``SubmitReports``, retrying until every batch is acknowledged.

    Parameters
    ----------
    stub:
        The collection service stub on an open ``grpc.aio`` channel.
    info:
        The collection (its name and mechanism version go into every batch).
    reports:
        The reports, already perturbed.
    capacity:
        Reports per batch (:func:`batch_capacity`).
    deadline:
        Seconds each ``SubmitReports`` attempt may take (gRPC deadline; a passed deadline is
        retried, and a retry only resends what is still unacknowledged).
    metadata:
        Call metadata (the bearer token).
    retry:
        When to give up and how long to wait between attempts.
    rng:
        Draws the backoff jitter.
    """

    method = "SubmitReports"

    def __init__(self, stub: pb_grpc.CollectionServiceStub, info: CollectionInfo, reports: Reports, *,
                 capacity: int, deadline: float, metadata: tuple[tuple[str, str], ...], retry: RetryPolicy,
                 rng: random.Random):
        super().__init__({seq: reports.slice(start, start + capacity)
                          for seq, start in enumerate(range(0, len(reports), capacity))}, len(reports),
                         deadline=deadline, metadata=metadata, retry=retry, rng=rng)
        self._stub = stub
        self._collection = info.schema.name
        self._version = info.card.version
        self._mechanism = info.card.mechanism

    async def _attempt(self) -> tuple[str | None, str, bool]:
        """One stream: write the unacknowledged batches while reading acknowledgements.

        Returns the failure's ``(status name, details)`` (``(None, "")`` if the stream ended OK) and
        whether a write failed. Batches are pipelined, or in lockstep (the next batch is written
        only after the previous one is acknowledged) once :meth:`run` asked for it.
        """
        batches = list(self._pending.items())
        window = asyncio.Semaphore(1 if self._lockstep else len(batches))
        call = self._stub.SubmitReports(timeout=self._deadline, metadata=self._metadata)
        closing = False
        write_failed = False

        async def write_all() -> None:
            nonlocal write_failed
            try:
                for sequence, part in batches:
                    await window.acquire()
                    if closing:
                        return
                    assert isinstance(part, Reports)
                    await call.write(reports_to_proto(part, self._collection, self._version, sequence,
                                                      self._mechanism))
                await window.acquire()  # half-close once a batch is acknowledged (the last one in lockstep)
                if not closing:
                    await call.done_writing()
            except Exception:  # noqa: BLE001 - a failed write ends the call; its status is read below
                write_failed = True

        writer = asyncio.create_task(write_all())
        status: str | None = None
        details = ""
        try:
            while (ack := await call.read()) is not grpc.aio.EOF:
                if self._pending.pop(ack.sequence, None) is not None:
                    self._acknowledged += ack.accepted
                    self._duplicates += ack.duplicates
                    window.release()
        except grpc.aio.AioRpcError as exc:
            status, details = exc.code().name, exc.details() or ""
        finally:
            closing = True
            window.release()
            call.cancel()
            # A write blocked on flow control may never return once the call is cancelled (seen with
            # grpcio aio when the caller's task is cancelled mid-stream), so end the writer too.
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        return status, details, write_failed


def sealed_batch_capacity(info: CollectionInfo, channel_limit: int, batch_size: int | None = None) -> int:
    """Sealed reports per ``SealedBatch``: at most ``batch_size``, the collection's ``max_batch_reports``,
    and as many as fit in the smaller of its ``max_message_bytes`` and the channel's limit (one
    column: the sealed reports back to back)."""
    schema = info.schema
    width = sealed_report_bytes(schema, info.card.version)
    limit = min(x for x in (info.limits.max_message_bytes, channel_limit) if x > 0)
    envelope = pb.SealedBatch(collection=schema.name, key_id=b"\xff" * KEY_ID_BYTES, sequence=2**64 - 1,
                              pool_key=2**64 - 1).ByteSize()
    fit = rows_that_fit(limit, envelope, width, 1)
    if fit < 1:
        raise ValidationError("max_message_bytes", f"at least {envelope + FIELD_HEADER_BYTES + width} bytes (one "
                              "sealed report)", f"got {limit}")
    caps = [fit, info.limits.max_batch_reports or fit]
    if batch_size is not None:
        caps.append(check_int(batch_size, "batch_size", 1))
    return min(caps)


def sealed_parts(sealed: np.ndarray, public_keys: np.ndarray, capacity: int) -> list[tuple[int, np.ndarray]]:
    """``sealed`` cut into batches of at most ``capacity`` reports of one public key each: ``(pool_key,
    rows)`` per batch, the keys in order of first appearance, each key's reports in their order."""
    keys = np.asarray(public_keys, np.int64)
    _, first = np.unique(keys, return_index=True)
    parts = []
    for key in keys[np.sort(first)].tolist():
        rows = sealed[keys == key]
        parts += [(int(key), rows[start:start + capacity]) for start in range(0, len(rows), capacity)]
    return parts


class SealedSender(_Delivery):
    """Delivers one submission's sealed reports to a shuffler (``ShufflerService.SubmitSealed``, one
    unary call per batch, up to ``concurrency`` at once), retrying with the same machinery as
    :class:`ReportStreamer`: an attempt resends every batch not yet acknowledged, with the same
    sealed bytes (so the same report ids: stored once, whoever forwards them how often).

    ``sealed`` is ``(n, sealed_report_bytes)`` uint8 (:func:`ldpsynth.shared.sealing.seal_reports`);
    ``key_id`` the key they are sealed to; ``public_keys`` each report's public key (folded public
    codes). A batch holds reports of one public key (its ``pool_key``: the shuffler pools per public
    key), so the reports are sent in batches per key, in order of first appearance. A shuffler cannot
    tell duplicates (it cannot open the reports): what it acknowledges counts as ``acknowledged``, and
    ``duplicates`` stays 0."""

    method = "SubmitSealed"

    def __init__(self, stub: shuffler_grpc.ShufflerServiceStub, collection: str, key_id: bytes, sealed: np.ndarray,
                 public_keys: np.ndarray, *, capacity: int, deadline: float, metadata: tuple[tuple[str, str], ...],
                 retry: RetryPolicy, rng: random.Random, concurrency: int = 4):
        super().__init__(dict(enumerate(sealed_parts(sealed, public_keys, capacity))), len(sealed),
                         deadline=deadline, metadata=metadata, retry=retry, rng=rng)
        self._stub = stub
        self._collection = collection
        self._key_id = key_id
        self._concurrency = check_int(concurrency, "concurrency", 1, 1024)

    async def _attempt(self) -> tuple[str | None, str, bool]:
        window = asyncio.Semaphore(self._concurrency)
        failure: tuple[str, str] | None = None

        async def send(sequence: int, part: object) -> None:
            nonlocal failure
            assert isinstance(part, tuple)
            async with window:
                if failure is not None:
                    return
                pool_key, rows = part
                batch = pb.SealedBatch(collection=self._collection, key_id=self._key_id, sequence=sequence,
                                       reports=rows.tobytes(), pool_key=pool_key)
                try:
                    ack = await self._stub.SubmitSealed(batch, timeout=self._deadline, metadata=self._metadata)
                except grpc.aio.AioRpcError as exc:
                    if failure is None:
                        failure = (exc.code().name, exc.details() or "")
                    return
                if self._pending.pop(sequence, None) is not None:
                    self._acknowledged += ack.accepted

        await asyncio.gather(*(send(sequence, part) for sequence, part in list(self._pending.items())))
        if failure is None:
            return None, "", False
        return failure[0], failure[1], False

"""Forwarding a released pool to the replicas (``CollectionService.SubmitShuffled``, docs/contract.md §16).

A pool's permuted reports are cut, in their new order, into ``q = ⌈n / s⌉`` ``SealedBatch`` messages of
sizes ``⌊n/q⌋`` or ``⌈n/q⌉`` (``s``: the most the collection's ``max_batch_reports`` and
``max_message_bytes`` allow, :func:`~ldpsynth.shuffler.directory.forward_batch_reports`), so no part is
small: every part holds at least ``⌊s/2⌋`` reports when ``q > 1`` (the replicas check each forwarded
batch against the minimum batch). Cutting a uniformly permuted multiset is a random split independent
of the data, so the parts together show no more than the pool's multiset (docs/shuffle-accountant.md
§6). Each message is built here from nothing but the collection, its key id, the pool's public key,
the reports and a sequence number counted by this process: no peer address, metadata, token, device
sequence or arrival order of the devices' calls reaches it. The call carries only the shuffler's own
credential. A message the replicas do not acknowledge with UNAVAILABLE or DEADLINE_EXCEEDED is sent
again, byte for byte the same (the report ids inside make a repeat harmless: the replicas count it as
duplicates), with exponential backoff, for at most ``patience`` seconds. Every part is sent whatever
became of the others, and the outcome of each is returned: a device is answered by the parts that
hold its reports (:mod:`~ldpsynth.shuffler.pools`).
"""

from __future__ import annotations

import asyncio
import itertools
import time

import grpc
import numpy as np

from ldpsynth.serving.errors import LimitExceeded, TryLater, WrongState
from ldpsynth.serving.observe import events
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shuffler.directory import Route, forward_batch_reports

log = events.get(__name__)

SHUFFLED_METHOD = "/ldpsynth.v1.CollectionService/SubmitShuffled"
#: Codes after which the same bytes are sent again.
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
#: Seconds one SubmitShuffled attempt may take.
ATTEMPT_DEADLINE = 60.0
#: First and largest pause between two attempts, in seconds.
FIRST_BACKOFF, MAX_BACKOFF = 0.05, 2.0


class ForwardFailed(TryLater):
    """The replicas refused a forwarded batch with a status no device caused (the shuffler's own
    credential, its configuration, a pool the replicas found below the minimum batch): logged for the
    operator; the devices get UNAVAILABLE and retry later."""


def part_bounds(reports: int, largest: int) -> np.ndarray:
    """Where a pool of ``reports`` reports is cut: ``q + 1`` increasing offsets from 0 to ``reports``,
    ``q = ⌈reports / largest⌉`` parts whose sizes differ by at most one.

    Parameters
    ----------
    reports : int
        The pool's reports, >= 1.
    largest : int
        The most reports one forwarded batch may hold, >= 1.

    Returns
    -------
    numpy.ndarray
        The offsets (int64).

    >>> part_bounds(25, 10).tolist()
    [0, 8, 16, 25]
    """
    parts = -(-reports // largest)
    return (np.arange(parts + 1, dtype=np.int64) * reports) // parts


class Forwarder:
    """Sends shuffled reports to the replicas under the shuffler's credential."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...], patience: float):
        self._call = channel.unary_unary(SHUFFLED_METHOD, request_serializer=pb.SealedBatch.SerializeToString,
                                         response_deserializer=pb.ShuffledAck.FromString)
        self._metadata = metadata
        self._patience = patience
        self._sequence = itertools.count()

    async def forward(self, route: Route, pool_key: int, rows: np.ndarray
                      ) -> tuple[np.ndarray, list[pb.ShuffledAck | LdpsynthError]]:
        """Send ``rows`` (``(n, sealed_report_bytes)`` uint8, already permuted) in parts, in order; return
        where each part starts and ends, and each part's ack or the error it ended with.

        Parameters
        ----------
        route : Route
            The collection.
        pool_key : int
            The public key every report of the pool holds (``SealedBatch.pool_key``).
        rows : numpy.ndarray
            The sealed reports, one per row, in the order they are to be forwarded.

        Returns
        -------
        tuple of numpy.ndarray and list
            The parts' offsets (:func:`part_bounds`), and per part its ``ShuffledAck`` or its error.
        """
        bounds = part_bounds(len(rows), forward_batch_reports(route))
        outcomes: list[pb.ShuffledAck | LdpsynthError] = []
        for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            part = pb.SealedBatch(collection=route.name, key_id=route.key_id, sequence=next(self._sequence),
                                  reports=rows[start:end].tobytes(), pool_key=pool_key)
            try:
                outcomes.append(await self._send(part))
            except LdpsynthError as exc:
                outcomes.append(exc)
        return bounds, outcomes

    async def _send(self, batch: pb.SealedBatch) -> pb.ShuffledAck:
        give_up = time.monotonic() + self._patience
        backoff = FIRST_BACKOFF
        while True:
            try:
                return await self._call(batch, metadata=self._metadata, timeout=ATTEMPT_DEADLINE)
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code not in RETRIED:
                    raise refused(code, exc.details() or "") from None
                if time.monotonic() + backoff > give_up:
                    raise TryLater(f"the aggregator did not acknowledge the shuffled batch ({code.name}); retry the "
                                   "batch with the same reports") from None
            await asyncio.sleep(backoff)
            backoff = min(2 * backoff, MAX_BACKOFF)


def refused(code: grpc.StatusCode, details: str) -> LdpsynthError:
    """The error the devices of a pool get when the replicas refused its forward with ``code``.

    Parameters
    ----------
    code : grpc.StatusCode
        The replicas' status (not a retried one).
    details : str
        Their message (it names fields and ranges, never a token or an address).

    Returns
    -------
    LdpsynthError
        FAILED_PRECONDITION (another key, a collection no longer served: the device reads the
        collection again), RESOURCE_EXHAUSTED (the log is full, a quota), ABORTED (a pool the replicas
        found below the minimum batch once opened: :class:`TryLater`, the devices send again into a
        new pool), else :class:`ForwardFailed`.
    """
    if code == grpc.StatusCode.ABORTED:
        log.warning("shuffler.pool_refused", f"SubmitShuffled: the aggregator refused a pool: {details}",
                    code=code.name)
        return TryLater("the aggregator refused the pool that held these reports (too few valid reports of one "
                        "public key once opened); nothing of it was stored: retry the batch with the same reports")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return WrongState(f"the aggregator refused the shuffled batch: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return LimitExceeded(f"the aggregator refused the shuffled batch: {details}; retry later")
    log.error("shuffler.forward_refused", f"SubmitShuffled: the aggregator refused a shuffled batch with "
              f"{code.name} (the shuffler's credential or configuration): {details}", code=code.name)
    return ForwardFailed(f"the shuffler cannot forward now (the aggregator answered {code.name}; its operator "
                         "must fix it); retry the batch later")

"""Forwarding a released pool to the replicas (``CollectionService.SubmitShuffled``, docs/contract.md §16).

The permuted reports are cut, in their new order, into ``SealedBatch`` messages of at most the
collection's ``max_batch_reports`` reports and ``max_message_bytes`` bytes. Each message is built
here from nothing but the collection, its key id, the reports and a sequence number counted by this
process: no peer address, metadata, token, device sequence or arrival order of the devices' calls
reaches it. The call carries only the shuffler's own credential. A message the replicas do not
acknowledge with UNAVAILABLE or DEADLINE_EXCEEDED is sent again, byte for byte the same (the report
ids inside make a repeat harmless: the replicas count it as duplicates), with exponential backoff,
for at most ``patience`` seconds; then the devices get UNAVAILABLE (they retry, with the same bytes).
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
from ldpsynth.shuffler.directory import Route

log = events.get(__name__)

SHUFFLED_METHOD = "/ldpsynth.v1.CollectionService/SubmitShuffled"
#: Codes after which the same bytes are sent again.
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
#: Bytes of a SealedBatch besides its reports, at most (collection name, key id, sequence, tags, lengths).
ENVELOPE_BYTES = 512
#: Seconds one SubmitShuffled attempt may take.
ATTEMPT_DEADLINE = 60.0
#: First and largest pause between two attempts, in seconds.
FIRST_BACKOFF, MAX_BACKOFF = 0.05, 2.0


class ForwardFailed(TryLater):
    """The replicas refused a forwarded batch with a status no device caused (the shuffler's own
    credential, its configuration): logged for the operator; the devices get UNAVAILABLE and retry later."""


def forward_batch_reports(route: Route) -> int:
    """Most reports of ``route``'s collection in one forwarded ``SealedBatch``.

    Parameters
    ----------
    route : Route
        The collection.

    Returns
    -------
    int
        ``min(max_batch_reports, (max_message_bytes - ENVELOPE_BYTES) // sealed_report_bytes)``, at least 1.
    """
    fit = (route.limits.max_message_bytes - ENVELOPE_BYTES - len(route.name.encode())) // route.sealed_report_bytes
    return max(1, min(route.limits.max_batch_reports, fit))


class Forwarder:
    """Sends shuffled reports to the replicas under the shuffler's credential."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...], patience: float):
        self._call = channel.unary_unary(SHUFFLED_METHOD, request_serializer=pb.SealedBatch.SerializeToString,
                                         response_deserializer=pb.ShuffledAck.FromString)
        self._metadata = metadata
        self._patience = patience
        self._sequence = itertools.count()

    async def forward(self, route: Route, rows: np.ndarray) -> list[pb.ShuffledAck]:
        """Send ``rows`` (``(n, sealed_report_bytes)`` uint8, already permuted) in order; return the acks
        once the replicas acknowledged every part.

        Parameters
        ----------
        route : Route
            The collection.
        rows : numpy.ndarray
            The sealed reports, one per row, in the order they are to be forwarded.

        Returns
        -------
        list of ShuffledAck
            One per forwarded ``SealedBatch``.
        """
        size = forward_batch_reports(route)
        parts = [pb.SealedBatch(collection=route.name, key_id=route.key_id, sequence=next(self._sequence),
                                reports=rows[start:start + size].tobytes())
                 for start in range(0, len(rows), size)]
        return [await self._send(part) for part in parts]

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
        collection again), RESOURCE_EXHAUSTED (the log is full, a quota), else :class:`ForwardFailed`.
    """
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return WrongState(f"the aggregator refused the shuffled batch: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return LimitExceeded(f"the aggregator refused the shuffled batch: {details}; retry later")
    log.error("shuffler.forward_refused", f"SubmitShuffled: the aggregator refused a shuffled batch with "
              f"{code.name} (the shuffler's credential or configuration): {details}", code=code.name)
    return ForwardFailed(f"the shuffler cannot forward now (the aggregator answered {code.name}; its operator "
                         "must fix it); retry the batch later")

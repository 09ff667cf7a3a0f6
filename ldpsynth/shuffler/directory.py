"""What the shuffler knows of each collection, learnt from the replicas' ``GetCollection`` (docs/contract.md
§6, §16): its sealing key id, the size of a sealed report, its minimum batch, limits, public domain size
and (shuffled) reports per device.

The shuffler is configured with no collection: it asks the replicas (under its own credential) the
first time a device names one, and keeps the answer (the key never changes while a deployment runs;
a forward the replicas refuse with FAILED_PRECONDITION drops it, :meth:`Directory.forget`). A
collection the replicas do not serve, or do not let this shuffler use, or that takes no sealed
reports, is refused FAILED_PRECONDITION; replicas that do not answer give UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from ldpsynth.serving.errors import TryLater, WrongState
from ldpsynth.serving.observe import events
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.sealing import sealed_report_bytes
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

log = events.get(__name__)

#: Seconds a ``GetCollection`` call to the replicas may take.
LOOKUP_DEADLINE = 10.0
#: Longest collection name the shuffler asks the replicas about (a schema's name is shorter).
MAX_NAME_CHARACTERS = 256
#: Bytes of a SealedBatch besides its reports, at most (collection name, key id, sequence, pool key, tags, lengths).
ENVELOPE_BYTES = 512


@dataclass(frozen=True)
class Route:
    """One collection as the shuffler pools and forwards it.

    ``public_keys``: the public domain size (a batch's ``pool_key`` lies below it); ``min_batch``: the
    fewest reports of one public key a pool is released with (the schema's minimum batch, 1 when it
    has none), which the replicas check again per forwarded batch; ``rows_per_device``: a shuffled
    collection's ``shuffle.rows_per_device`` (the default per-device quota), ``None`` for a collection
    without a shuffle block (no central guarantee, no default quota).
    """

    name: str
    key_id: bytes
    sealed_report_bytes: int
    min_batch: int
    limits: Limits
    public_keys: int = 1
    rows_per_device: int | None = None

    @property
    def shuffled(self) -> bool:
        """Whether the collection states a central guarantee (its schema has a shuffle block)."""
        return self.rows_per_device is not None

    @classmethod
    def of(cls, info: CollectionInfo) -> Route:
        """The route of a collection the replicas described; WrongState when it takes no sealed reports,
        or when its minimum batch could not be kept by every forwarded batch (over half the largest one).

        Parameters
        ----------
        info : CollectionInfo
            The replicas' ``GetCollection`` answer.

        Returns
        -------
        Route
            Its key id, report size, minimum batch, limits, public domain size and reports per device.
        """
        name = info.schema.name
        try:
            key = info.sealing_key()
        except ValidationError as exc:
            raise WrongState(f"collection: {name!r} takes no sealed reports this shuffler can forward "
                             f"({exc.problem})") from None
        shuffle = info.schema.shuffle
        minimum, field = info.schema.minimum_batch
        route = cls(name, key.key_id, sealed_report_bytes(info.schema, info.card.version), minimum, info.limits,
                    info.schema.public_domain_size, None if shuffle is None else shuffle.rows_per_device)
        largest = forward_batch_reports(route)
        if minimum > largest // 2:
            raise WrongState(f"collection: {name!r} has a minimum batch of {minimum} reports ({field}), over half "
                             f"the {largest} reports the replicas take in one batch (max_batch_reports, "
                             "max_message_bytes): a pool cut in two could not keep it; the replicas' operator must "
                             "raise --max-batch-reports")
        return route


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


class Directory:
    """The routes of the collections devices named, asked of the replicas once each."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]):
        self._stub = pb_grpc.CollectionServiceStub(channel)
        self._metadata = metadata
        self._routes: dict[str, asyncio.Task[Route]] = {}

    async def route(self, collection: str) -> Route:
        """The route of ``collection`` (asked of the replicas the first time; concurrent askers share the answer).

        Parameters
        ----------
        collection : str
            The name a device's batch gives.

        Returns
        -------
        Route
            How its reports are pooled and forwarded.
        """
        if not collection or len(collection) > MAX_NAME_CHARACTERS:
            raise ValidationError("collection", f"a collection's name, 1 to {MAX_NAME_CHARACTERS} characters",
                                  f"got {len(collection)} characters")
        task = self._routes.get(collection)
        if task is None:
            task = self._routes[collection] = asyncio.ensure_future(self._lookup(collection))
        try:
            return await asyncio.shield(task)
        except BaseException:
            if task.done() and self._routes.get(collection) is task:  # failures are not kept: asked again next time
                del self._routes[collection]
            raise

    def forget(self, collection: str) -> None:
        """Drop what is known of ``collection`` (the replicas refused a forward: ask again).

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        None
        """
        self._routes.pop(collection, None)

    async def _lookup(self, collection: str) -> Route:
        try:
            message = await self._stub.GetCollection(pb.GetCollectionRequest(collection=collection),
                                                     metadata=self._metadata, timeout=LOOKUP_DEADLINE)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED):
                raise WrongState(f"collection: {collection[:128]!r} is not forwarded by this shuffler (the "
                                 f"aggregator answered {code.name}: it does not serve it to the shuffler)") from None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise TryLater("the shuffler could not reach the aggregator to read the collection; retry "
                               "the batch") from None
            log.warning("shuffler.collection_refused", f"GetCollection: the aggregator answered {code.name} to "
                        "this shuffler's credential", code=code.name)
            raise TryLater(f"the shuffler could not read the collection (the aggregator answered {code.name}); "
                           "retry the batch later") from None
        return Route.of(CollectionInfo.from_proto(message))

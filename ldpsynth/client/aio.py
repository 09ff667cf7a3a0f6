"""The asyncio client: fetch a collection, then submit a device's rows through its ledger.

One :class:`AsyncClient` holds one ``grpc.aio`` channel and may serve many devices at once
(each :meth:`~AsyncClient.submit` names the device's own :class:`PrivacyLedger`), e.g. thousands
of simulated clients as asyncio tasks in one process. Every call carries a deadline and the
bearer token; retryable failures are retried with backoff (:mod:`.retry`).

The path of a row (docs/contract.md §5–§7): validate and encode on the device (:mod:`.rows`) →
memoize or perturb with :meth:`MechanismE.perturb_secure` and charge ε, durably, before sending
(:mod:`.device`, :mod:`.ledger`) → stream in batches until every batch is acknowledged after
durable commit (:mod:`.submit`). Only perturbed codes, public codes and random ids are sent.

With a shuffler (``shuffler=``, docs/contract.md §16) the collection still comes from the
aggregator (its card and its sealing key, over the aggregator's TLS), but the reports go to the
shuffler, each sealed on its own to the aggregator's key (:func:`~ldpsynth.shared.sealing.seal_reports`,
the ``[shuffle]`` extra): the shuffler sees who sends, not what; the aggregator what, not who.
Ledger and memoization are the same either way: a memoized row is sealed afresh (a new ciphertext)
around its memoized report id and perturbed code; a memoized report is only resent the way it was
first sent, sealed or in clear (docs/contract.md §14).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from typing import TypedDict

import grpc

from ldpsynth.client.device import PreparedReports, prepare_reports
from ldpsynth.client.errors import SubmitError
from ldpsynth.client.ledger import PrivacyLedger
from ldpsynth.client.result import SubmitResult
from ldpsynth.client.retry import RetryPolicy, is_retryable
from ldpsynth.client.rows import Rows, load_rows, read_csv
from ldpsynth.client.submit import ReportStreamer, SealedSender, StreamResult, batch_capacity, sealed_batch_capacity
from ldpsynth.client.transport import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Shuffler,
    bearer_metadata,
    channel_credentials,
    open_channel,
)
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import MECHANISM_VERSION as DISCOVERY_VERSION
from ldpsynth.shared.heavy_hitters.collection import REPORT, DiscoveryCard, device_turn, round_rows
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import require_hpke, seal_reports
from ldpsynth.shared.validation import check_seconds
from ldpsynth.shared.wide.collection import SEPARATOR, VIEWS_VERSION, WideCard
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import shuffler_pb2_grpc as shuffler_grpc

__all__ = [
    "ClientOptions",
    "AsyncClient",
]

#: Default deadline of every call, in seconds.
DEFAULT_DEADLINE = 30.0



class ClientOptions(TypedDict, total=False):
    """The keyword arguments of :class:`AsyncClient` (documented there), by name and type, so that
    :class:`~ldpsynth.client.sync.Client` forwards them typed (PEP 692)."""

    token: str | None
    root_certificates: str | os.PathLike | None
    certificate_chain: str | os.PathLike | None
    private_key: str | os.PathLike | None
    deadline: float
    retry: RetryPolicy | None
    max_message_bytes: int
    rng: random.Random | None
    shuffler: str | Shuffler | None


class AsyncClient:
    """A connection to an aggregator, for asyncio code. Create it inside a running event loop.

    Parameters
    ----------
    target : str
        ``HOST:PORT`` of the aggregator, or of several ingress replicas (``a:50051,b:50051``; IPv6
        as ``[::1]:50051``): calls are balanced round-robin over those that are up
        (:func:`~ldpsynth.client.transport.grpc_target`), and a retried batch may reach another
        replica (it is still stored once). Several must resolve, all over IPv4 or all over IPv6.
    token : str or None, default None
        Bearer token sent as ``authorization: Bearer <token>`` on every call: a non-empty string of
        printable ASCII characters without spaces. ``None``: no token.
    root_certificates : str, os.PathLike or None, default None
        PEM file of the CA that signed the server's certificate; turns TLS on.
    certificate_chain, private_key : str, os.PathLike or None, default None
        PEM files of the device's certificate and key, for mutual TLS (together; turn TLS on).
        Without any TLS option the channel is insecure (loopback demos only).
    deadline : float, default 30.0
        Seconds each call may take (``GetCollection``, and each ``SubmitReports`` or ``SubmitSealed``
        attempt): a finite number of seconds > 0.
    retry : RetryPolicy or None, default None
        Retry policy; ``None``: :class:`RetryPolicy()`.
    max_message_bytes : int, default 67108864 (64 MiB)
        The channel's send/receive message limit, an integer in [1024, 2^31 - 1]; batches are cut
        to fit it and the collection's ``max_message_bytes``, whichever is smaller.
    rng : random.Random or None, default None
        Draws the backoff jitter only (no privacy role); ``None``: a fresh ``random.Random()``.
    shuffler : str or Shuffler or None, default None
        Send the reports through this shuffler (``HOST:PORT``, or a :class:`Shuffler` with its own
        token and TLS files) instead of to the aggregator: each report sealed on its own to the key
        the collection publishes (``Collection.sealing``, docs/contract.md §16; needs the
        ``[shuffle]`` extra). A collection that publishes no usable key is refused, never sent in
        clear. ``target`` is still asked for the collection.

    Raises
    ------
    ValidationError
        Naming ``deadline``, ``token``, ``target``, ``max_message_bytes``, ``root_certificates``,
        ``certificate_chain`` or ``private_key`` (a file that cannot be read, or one of the pair
        without the other).
    SealingUnavailable
        With a ``shuffler``, when the ``[shuffle]`` extra (the HPKE library) is not installed.
    """

    def __init__(self, target: str, *, token: str | None = None,
                 root_certificates: str | os.PathLike | None = None,
                 certificate_chain: str | os.PathLike | None = None,
                 private_key: str | os.PathLike | None = None,
                 deadline: float = DEFAULT_DEADLINE, retry: RetryPolicy | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, rng: random.Random | None = None,
                 shuffler: str | Shuffler | None = None):
        self.deadline = check_seconds(deadline, "deadline")
        self.retry = retry if retry is not None else RetryPolicy()
        self._metadata = bearer_metadata(token)
        self.shuffler = Shuffler(shuffler) if isinstance(shuffler, str) else shuffler
        if self.shuffler is not None:
            require_hpke()  # sealing needs the [shuffle] extra: said now, not after ε is charged
        shuffler_credentials = None if self.shuffler is None else self.shuffler.credentials()
        self._shuffler_metadata = () if self.shuffler is None else bearer_metadata(self.shuffler.token)
        credentials = channel_credentials(root_certificates, certificate_chain, private_key)
        self._channel = open_channel(target, credentials, max_message_bytes=max_message_bytes, retry=self.retry)
        self._max_message_bytes = max_message_bytes
        self._stub = pb_grpc.CollectionServiceStub(self._channel)
        self._shuffler_channel: grpc.aio.Channel | None = None
        self._shuffler_stub: shuffler_grpc.ShufflerServiceStub | None = None
        if self.shuffler is not None:
            self._shuffler_channel = open_channel(self.shuffler.target, shuffler_credentials,
                                                  max_message_bytes=max_message_bytes, retry=self.retry)
            self._shuffler_stub = shuffler_grpc.ShufflerServiceStub(self._shuffler_channel)
        self._rng = rng if rng is not None else random.Random()

    async def get_collection(self, name: str) -> CollectionInfo:
        """The collection's verified mechanism card (with its schema) and limits.

        Retryable failures are retried (:attr:`retry`).

        Parameters
        ----------
        name : str
            The collection's name, non-empty.

        Returns
        -------
        CollectionInfo
            Its ``card`` (:class:`~ldpsynth.shared.card.MechanismCard`), ``schema`` and ``limits``.

        Raises
        ------
        ValidationError
            Naming ``collection`` (an empty name, or an answer for another collection) or the card's
            field (``card.*``, a :class:`~ldpsynth.shared.errors.SchemaError`) when it does not verify.
        SubmitError
            The call failed for good, e.g. FAILED_PRECONDITION for an unknown collection.
        """
        return self._info(name, await self._fetch(name))

    async def get_wide_collection(self, name: str) -> WideCard:
        """A wide collection's verified card: its schema, the view assignment, every view's sub-collection and card.

        Retryable failures are retried (:attr:`retry`).

        Parameters
        ----------
        name : str
            The wide collection's name, non-empty.

        Returns
        -------
        WideCard
            :class:`~ldpsynth.shared.wide.collection.WideCard`, verified (recomputed from its schema).

        Raises
        ------
        ValidationError
            As :meth:`get_collection`; naming ``card.format`` when ``name`` is an ordinary collection.
        SubmitError
            The call failed for good, e.g. FAILED_PRECONDITION for an unknown collection.
        """
        return self._wide(name, await self._fetch(name))

    async def get_discovery_collection(self, name: str) -> DiscoveryCard:
        """A discovery collection's verified card: its schema, schedule, open round and candidates.

        Once the discovery is finished the card names no round (docs/heavy-hitters.md, "The card").

        Retryable failures are retried (:attr:`retry`).

        Parameters
        ----------
        name : str
            The discovery collection's name, non-empty.

        Returns
        -------
        DiscoveryCard
            :class:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryCard`, verified (recomputed from its schema).

        Raises
        ------
        ValidationError
            As :meth:`get_collection`; naming ``collection`` when ``name`` is not a discovery collection.
        SubmitError
            The call failed for good, e.g. FAILED_PRECONDITION for an unknown collection.
        """
        message = await self._fetch(name)
        if message.name != name or message.mechanism_version != DISCOVERY_VERSION:
            raise ValidationError("collection", f"the discovery collection asked for ({name!r}, version "
                                  f"{DISCOVERY_VERSION})", "the server answered with another collection")
        card = DiscoveryCard.from_json(message.card_json)
        if card.schema.name != name:
            raise ValidationError("collection", f"the discovery collection asked for ({name!r})",
                                  "the server answered with another collection")
        return card

    async def _fetch(self, name: str) -> pb.Collection:
        """``GetCollection`` of ``name``, retrying retryable failures (:attr:`retry`)."""
        if not isinstance(name, str) or not name:
            raise ValidationError("collection", "a non-empty collection name", "empty")
        request = pb.GetCollectionRequest(collection=name)
        attempts = 0
        while True:
            attempts += 1
            try:
                message: pb.Collection = await self._stub.GetCollection(request, timeout=self.deadline,
                                                                        metadata=self._metadata)
                return message
            except grpc.aio.AioRpcError as exc:
                status = exc.code().name
                if not is_retryable(status) or attempts >= self.retry.max_attempts:
                    raise SubmitError("GetCollection", status, exc.details() or "", attempts=attempts) from None
                await asyncio.sleep(self.retry.backoff(attempts, self._rng))

    @staticmethod
    def _info(name: str, message: pb.Collection) -> CollectionInfo:
        """The verified info of an ordinary collection's ``GetCollection`` answer."""
        if message.mechanism_version == DISCOVERY_VERSION:
            raise ValidationError("collection", "an ordinary collection (a discovery collection takes rows through "
                                  "submit)", f"{name[:128]!r} is a discovery collection")
        info = CollectionInfo.from_proto(message)
        if info.schema.name != name:
            raise ValidationError("collection", f"the collection asked for ({name!r})",
                                  "the server answered with another collection")
        return info

    @staticmethod
    def _wide(name: str, message: pb.Collection) -> WideCard:
        card = WideCard.from_json(message.card_json)
        if card.schema.name != name or message.name != name or message.mechanism_version != VIEWS_VERSION:
            raise ValidationError("collection", f"the wide collection asked for ({name!r}, version {VIEWS_VERSION})",
                                  "the server answered with another collection")
        return card

    async def submit(self, collection: str | CollectionInfo | WideCard, rows: Rows, *, ledger: PrivacyLedger,
                     batch_size: int | None = None) -> SubmitResult:
        """Validate, memoize-or-perturb, charge, and deliver a device's rows.

        A wide collection (docs/wide.md, "The collection mode"): the device's view comes from its ledger
        (:meth:`PrivacyLedger.view_key`, :meth:`WideCard.route`), every row is checked against the wide schema
        and projected on the view (:meth:`WideCard.project`), and the projections are submitted to the view's
        sub-collection, whose card must be the one the wide card states; the ledger charges the wide collection's
        ε under its own name (one budget for all its views).

        Parameters
        ----------
        collection : str, CollectionInfo or WideCard
            The collection's name (its info, or a wide collection's card, is fetched first), its info
            (:meth:`get_collection`) or a wide collection's card (:meth:`get_wide_collection`).
        rows : mapping of str to sequence, str or os.PathLike
            Columns (attribute name → raw values, one column of equal length per attribute of the
            schema), or the path of a CSV file with a header of attribute names.
        ledger : PrivacyLedger
            The device's ledger: charged ε, durably, before anything is sent (through a shuffler to a
            shuffled collection, with the central guarantee the collection promises: ``guarantees``).
        batch_size : int or None, default None
            Most reports per batch, an integer >= 1; ``None``: as many as the limits allow.

        Returns
        -------
        SubmitResult

        Raises
        ------
        ValidationError
            A bad row (naming the attribute and the row, or ``rows``, ``header``, ``row`` for a
            CSV file), ``batch_size``, ``max_message_bytes`` (one report does not fit), or as
            :meth:`get_collection`; nothing is recorded and nothing is sent.
        PrivacyBudgetExceeded
            The ledger refuses: the new reports would exceed the device's budget, or
            (:class:`~ldpsynth.shared.errors.CardChanged`) the collection was re-issued at another
            ε; nothing is recorded and nothing is sent.
        LedgerError
            The ledger cannot be read or written (:class:`~ldpsynth.shared.errors.LedgerError`).
        SubmitError
            Fetching the collection or delivering the reports failed for good: the ε stays
            charged, and submitting the same rows again resends the same memoized reports at no
            further cost.
        """
        if isinstance(collection, str):
            message = await self._fetch(collection)
            if message.mechanism_version == DISCOVERY_VERSION:
                return await self._submit_discovery(collection, message, rows, ledger, batch_size)
            found: CollectionInfo | WideCard = (self._wide(collection, message)
                                                if message.mechanism_version == VIEWS_VERSION
                                                else self._info(collection, message))
        else:
            found = collection
        if isinstance(found, CollectionInfo):
            await self._refuse_a_view(found.schema.name)
            return await self._submit(found, rows, ledger, batch_size)
        index, name = found.route(ledger.view_key(found.schema.name))
        columns = read_csv(rows) if isinstance(rows, (str, os.PathLike)) else rows
        projected = await asyncio.to_thread(found.project, columns, index)
        info = await self.get_collection(name)
        if info.card.to_json() != found.cards[index].to_json():
            raise ValidationError("card", f"the card the wide collection {found.schema.name!r} states for its view "
                                  f"{name!r}", "the server serves another card for the view")
        return await self._submit(info, projected, ledger, batch_size, charge=(found.schema.name, found.schema.epsilon))

    async def _submit_discovery(self, collection: str, message: pb.Collection, rows: Rows, ledger: PrivacyLedger,
                                batch_size: int | None) -> SubmitResult:
        """A discovery collection (docs/heavy-hitters.md, "The collection mode"): the device reports only in its
        round (:meth:`PrivacyLedger.round_key`, :func:`~ldpsynth.shared.heavy_hitters.collection.device_turn`),
        its value's cell to the open round's sub-collection, charged under the discovery's name; otherwise
        nothing is charged or sent and the result's ``status`` says why."""
        card = DiscoveryCard.from_json(message.card_json)
        if card.schema.name != collection:
            raise ValidationError("collection", f"the collection asked for ({collection!r})",
                                  "the server answered with another collection")
        turn = device_turn(card, ledger.round_key(collection))
        if turn.status != REPORT:   # nothing charged, nothing sent
            return SubmitResult(collection=collection, rows=0, sent=0, acknowledged=0, duplicates=0, batches=0,
                                retries=0, memoized=0, epsilon_spent=0.0, epsilon_total=ledger.spent(collection),
                                status=turn.status)
        if not isinstance(rows, Mapping):
            raise ValidationError("rows", "columns (a mapping) for a discovery collection", "a file")
        assert card.card is not None
        before = ledger.spent(collection)
        try:
            info = self._info(card.card.schema.name, await self._fetch(card.card.schema.name))
            return await self._submit(info, round_rows(card, rows), ledger, batch_size,
                                      charge=(collection, card.schema.epsilon))
        except SubmitError as exc:
            if exc.status != "FAILED_PRECONDITION":
                raise
            return await self._round_closed(collection, ledger, exc, before)

    async def _round_closed(self, collection: str, ledger: PrivacyLedger, exc: SubmitError,
                            before: float) -> SubmitResult:
        """A discovery's round refused as closed while this device reported in it (an operator closed it meanwhile,
        docs/heavy-hitters.md): the card fetched again says the device's round has passed (its round is fixed by its
        key, it reports in no other), with what was charged (the reports, randomized, stay memoized). Another
        refusal, or a card that still names the device's round, raises ``exc``."""
        card = DiscoveryCard.from_json((await self._fetch(collection)).card_json)
        turn = device_turn(card, ledger.round_key(collection))
        if turn.status == REPORT:
            raise exc
        return SubmitResult(collection=collection, rows=0, sent=exc.sent, acknowledged=exc.acknowledged,
                            duplicates=exc.duplicates, batches=0, retries=0, memoized=0,
                            epsilon_spent=ledger.spent(collection) - before, epsilon_total=ledger.spent(collection),
                            status=turn.status)

    async def _refuse_a_view(self, name: str) -> None:
        """ValidationError naming ``collection`` when ``name`` is a view sub-collection of a wide collection served
        here (``parent/a+b``): its devices submit to the parent, which routes them and charges its own budget."""
        if SEPARATOR not in name:
            return
        parent = name.rsplit(SEPARATOR, 1)[0]
        try:
            message = await self._fetch(parent)
        except SubmitError:  # no such collection here (or not for this credential): not a view
            return
        if message.mechanism_version == VIEWS_VERSION and name in self._wide(parent, message).names:
            raise ValidationError("collection", f"the wide collection {parent!r} (each device reports the view its "
                                  "key routes it to, charged under the wide collection)",
                                  f"{name!r} is one of its views; nothing was charged or sent")

    async def _submit(self, info: CollectionInfo, rows: Rows, ledger: PrivacyLedger, batch_size: int | None,
                      charge: tuple[str, float] | None = None) -> SubmitResult:
        """Validate, memoize-or-perturb, charge (under ``charge``: :func:`~ldpsynth.client.device.prepare_reports`)
        and deliver ``rows`` to ``info``'s collection."""
        capacity = self._capacity(info, batch_size)
        prepared: PreparedReports = await asyncio.to_thread(
            lambda: prepare_reports(info, load_rows(info.schema, rows), ledger, sealed=self.shuffler is not None,
                                    charge=charge))
        stream = await self._deliver(info, prepared.reports, capacity)
        return SubmitResult(collection=info.schema.name if charge is None else charge[0], rows=prepared.rows,
                            sent=stream.sent, acknowledged=stream.acknowledged, duplicates=stream.duplicates,
                            batches=stream.batches, retries=stream.retries, memoized=prepared.memoized,
                            epsilon_spent=prepared.epsilon_spent, epsilon_total=prepared.epsilon_total,
                            shuffled=self.shuffler is not None,
                            central_epsilon=None if prepared.central is None else prepared.central.central_epsilon,
                            central_delta=None if prepared.central is None else prepared.central.central_delta,
                            part=None if charge is None else info.schema.name)

    async def submit_reports(self, info: CollectionInfo, reports: Reports, *,
                             batch_size: int | None = None) -> StreamResult:
        """Deliver reports that are already perturbed, with no ledger.

        For simulations and benchmarks that perturb with a seeded generator
        (:meth:`MechanismE.perturb`) and account for ε themselves; a device uses :meth:`submit`.

        Parameters
        ----------
        info : CollectionInfo
            The collection (:meth:`get_collection`).
        reports : Reports
            The perturbed reports (:class:`~ldpsynth.shared.reports.Reports`), checked against
            ``info``'s schema: 16-byte ids, codes in their ranges.
        batch_size : int or None, default None
            Most reports per batch, an integer >= 1; ``None``: as many as the limits allow.

        Returns
        -------
        StreamResult
            Reports sent, acknowledged and duplicates, batches and retries.

        Raises
        ------
        ValidationError
            Naming the field of ``reports`` out of its range or shape, ``batch_size`` or
            ``max_message_bytes`` (one report does not fit).
        SubmitError
            Delivery failed for good.
        """
        reports.validate(info.schema)
        return await self._deliver(info, reports, self._capacity(info, batch_size))

    def _capacity(self, info: CollectionInfo, batch_size: int | None) -> int:
        """Reports per batch; through a shuffler, refuses a collection that takes no sealed reports, and
        without one a shuffled collection (before anything is charged: never sent in clear instead)."""
        if self.shuffler is None:
            if info.schema.shuffle is not None:
                raise ValidationError("shuffler", "a shuffler for a shuffled collection (Client(..., shuffler=...)): "
                                      "its reports travel only sealed, never in clear",
                                      f"collection {info.schema.name!r} is shuffled and no shuffler was given")
            return batch_capacity(info, self._max_message_bytes, batch_size)
        info.sealing_key()  # refuses a collection without a usable key
        return sealed_batch_capacity(info, self._max_message_bytes, batch_size)

    async def _deliver(self, info: CollectionInfo, reports: Reports, capacity: int) -> StreamResult:
        if self._shuffler_stub is None:
            streamer = ReportStreamer(self._stub, info, reports, capacity=capacity, deadline=self.deadline,
                                      metadata=self._metadata, retry=self.retry, rng=self._rng)
            return await streamer.run()
        key = info.sealing_key()
        sealed = await asyncio.to_thread(seal_reports, key, info.schema.name, info.card.version, reports)
        sender = SealedSender(self._shuffler_stub, info.schema.name, key.key_id, sealed,
                              info.schema.fold_public_codes(reports.public_codes), capacity=capacity,
                              deadline=self.deadline, metadata=self._shuffler_metadata, retry=self.retry,
                              rng=self._rng)
        return await sender.run()

    async def close(self) -> None:
        """Close the channels (calls in flight are cancelled)."""
        await self._channel.close()
        if self._shuffler_channel is not None:
            await self._shuffler_channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

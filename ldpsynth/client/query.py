"""The analyst's side of the query service: answer statistical queries on the aggregator's live
synthetic database, and export its public release (``proto/ldpsynth/v1/query.proto``).

::

    from ldpsynth import QueryClient, condition, marginal, predicate

    with QueryClient("localhost:50051", token="...") as analyst:
        answers = analyst.estimate("ratings", queries=[marginal("rating"), predicate(condition("rating", ">=", 4)),
                                                       {"kind": "marginal", "attributes": ["rating"]}])
        print(answers.records())                       # the fields of `ldpsynth estimate`
        big = analyst.estimate("ratings", linear=weights)  # a (Q, |D|) array, e.g. Q = 2^20
        analyst.export("ratings").write("release/")

Batches are streamed in chunks of whole queries, each request message within ``chunk_bytes`` and
the message limit of the server (learnt once per collection from ``GetCollection``, which the
``query`` role may call) and of this client; the answers come back in pages that the server
sizes to its own limit (keep ``max_message_bytes`` at least the server's, as by default). An empty
batch answers with no answers. ``UNAVAILABLE`` (and ``ABORTED``, from servers that still send it)
is retried with exponential backoff and jitter (:class:`~ldpsynth.client.retry.RetryPolicy`); every
call only reads, so a repeat is always safe. Querying spends no privacy budget. Needs only the
``[client]`` extra.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
import numpy as np

from ldpsynth.client.errors import QueryError
from ldpsynth.client.retry import RetryPolicy
from ldpsynth.client.transport import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_MESSAGE_BYTES,
    bearer_metadata,
    channel_credentials,
    open_channel,
)
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.protocol import private_from_wire, private_rows
from ldpsynth.shared.queries.json_form import QueryLike, queries_to_json
from ldpsynth.shared.queries.wire import DEFAULT_CHUNK_BYTES, AnswerTable, estimate_requests, guarantees_from_proto
from ldpsynth.shared.release import Release
from ldpsynth.shared.validation import check_int, check_seconds
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.shared.wide.release import WideRelease, is_wide_card
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.shared.wire import query_pb2_grpc as qpb_grpc

__all__ = [
    "QUERY_RETRYABLE_STATUSES",
    "QueryClient",
]

#: Deadline of one query call when none is given (a large batch or export takes a while).
DEFAULT_QUERY_DEADLINE = 600.0
#: Statuses after which a query call is made again: the server is unavailable (starting, shutting
#: down, a shard down) or, from servers that still send it, rows were committed during the
#: evaluation. DEADLINE_EXCEEDED is final here, unlike for ``SubmitReports``: the deadline bounds
#: one whole call, and a repeat would redo the same work without making progress.
QUERY_RETRYABLE_STATUSES = frozenset({"UNAVAILABLE", "ABORTED"})
_U64 = np.dtype("<u8")
_T = TypeVar("_T")


class QueryClient:
    """A blocking client of ``ldpsynth.v1.QueryService`` (TLS, mutual TLS and token as :class:`Client`).

    Parameters
    ----------
    target : str
        ``HOST:PORT`` of the aggregator, or several (as :class:`~ldpsynth.client.aio.AsyncClient`).
    token : str or None, default None
        Bearer token (as :class:`~ldpsynth.client.aio.AsyncClient`).
    root_certificates, certificate_chain, private_key : str, os.PathLike or None, default None
        PEM files for TLS and mutual TLS (as :class:`~ldpsynth.client.aio.AsyncClient`).
    deadline : float, default 600.0
        Seconds each attempt of a call may take: a finite number of seconds > 0.
    max_message_bytes : int, default 67108864 (64 MiB)
        The channel's send and receive limit, an integer in [1024, 2^31 - 1]. Requests are cut to
        the smaller of it and the server's limit; replies are sized by the server to its limit, so
        a smaller value here can make a reply fail with RESOURCE_EXHAUSTED.
    chunk_bytes : int, default 4194304 (4 MiB)
        Preferred size of one request message, an integer >= 1024 (a single JSON query may be
        larger, up to the limit).
    retry : RetryPolicy or None, default None
        Attempts and backoff for retryable statuses (:data:`QUERY_RETRYABLE_STATUSES`); ``None``:
        :class:`RetryPolicy()` (8 attempts, 0.1 s doubling to at most 10 s, equal jitter).
    rng : random.Random or None, default None
        Draws the backoff jitter only; ``None``: a fresh ``random.Random()``.

    Raises
    ------
    ValidationError
        Naming ``max_message_bytes``, ``token``, ``deadline``, ``chunk_bytes``, ``target``,
        ``root_certificates``, ``certificate_chain`` or ``private_key`` (as
        :class:`~ldpsynth.client.aio.AsyncClient`).
    """

    def __init__(self, target: str, *, token: str | None = None, root_certificates: str | os.PathLike | None = None,
                 certificate_chain: str | os.PathLike | None = None, private_key: str | os.PathLike | None = None,
                 deadline: float = DEFAULT_QUERY_DEADLINE, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, retry: RetryPolicy | None = None,
                 rng: random.Random | None = None):
        self._limit = check_int(max_message_bytes, "max_message_bytes", 1024, MAX_MESSAGE_BYTES)
        self._metadata = bearer_metadata(token)
        self._deadline = check_seconds(deadline, "deadline")
        self._chunk_bytes = check_int(chunk_bytes, "chunk_bytes", 1024)
        self.retry = retry if retry is not None else RetryPolicy()
        self._rng = rng if rng is not None else random.Random()
        self._server_limits: dict[str, int] = {}
        credentials = channel_credentials(root_certificates, certificate_chain, private_key)
        self._channel = open_channel(target, credentials, max_message_bytes=self._limit, retry=self.retry,
                                     blocking=True)
        self._stub = qpb_grpc.QueryServiceStub(self._channel)
        self._collections = pb_grpc.CollectionServiceStub(self._channel)

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def _call(self, method: str, attempt: Callable[[], _T]) -> _T:
        """``attempt()``, made again after a retryable status (up to ``retry.max_attempts`` in all,
        waiting ``retry.backoff`` between attempts); any other status raises :class:`QueryError` at once."""
        failures = 0
        while True:
            try:
                return attempt()
            except grpc.RpcError as exc:
                failures += 1
                status, details = exc.code().name, exc.details() or ""
                if status not in QUERY_RETRYABLE_STATUSES or failures >= self.retry.max_attempts:
                    tries = f" (gave up after {failures} attempts)" if failures > 1 else ""
                    raise QueryError(method, status, details + tries) from None
            time.sleep(self.retry.backoff(failures, self._rng))

    def advance_round(self, collection: str) -> dict[str, Any]:
        """Close the open round of the discovery collection ``collection`` on the running server.

        Needs the role ``operate`` (docs/heavy-hitters.md, "The lifecycle on a running server"). Made once,
        never retried: a repeat after a lost answer would close the next round too.

        Parameters
        ----------
        collection : str
            The discovery collection's name (the parent's, e.g. ``"words"``).

        Returns
        -------
        dict
            What ``ldpsynth aggregator advance`` prints: ``collection``, ``closed_round``, ``reports``, then
            ``open_round`` and ``candidates``, or, after the last round, ``results`` (the heavy hitters).

        Raises
        ------
        QueryError
            The call failed: FAILED_PRECONDITION (too few reports, saying how many the round has and needs, the
            round left open; a finished discovery; not a discovery), NOT_FOUND (unknown collection),
            PERMISSION_DENIED (no role ``operate``), UNAVAILABLE.
        """
        try:
            answer = self._stub.AdvanceRound(qpb.AdvanceRoundRequest(collection=collection), timeout=self._deadline,
                                             metadata=self._metadata)
        except grpc.RpcError as exc:
            raise QueryError("AdvanceRound", exc.code().name, exc.details() or "") from None
        done: dict[str, Any] = {"collection": answer.collection, "closed_round": answer.closed_round,
                                "reports": answer.reports}
        if answer.finished:
            done["results"] = json.loads(answer.results_json)
        else:
            done["open_round"], done["candidates"] = answer.open_round, answer.candidates
        return done

    def message_limit(self, collection: str) -> int:
        """Largest request message for ``collection``: the smaller of this channel's and the server's limit.

        The server's is its ``Limits.max_message_bytes``, from ``GetCollection``, asked once per
        collection.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        int
            The limit in bytes.

        Raises
        ------
        QueryError
            ``GetCollection`` failed (after the retries, for a retryable status), e.g.
            FAILED_PRECONDITION for an unknown collection.
        """
        if collection not in self._server_limits:
            request = pb.GetCollectionRequest(collection=collection)
            message = self._call("GetCollection", lambda: self._collections.GetCollection(
                request, timeout=self._deadline, metadata=self._metadata))
            server = message.limits.max_message_bytes
            self._server_limits[collection] = min(self._limit, server) if server > 0 else self._limit
        return self._server_limits[collection]

    def estimate(self, collection: str, *, queries: Sequence[QueryLike] | None = None,
                 linear: np.ndarray | None = None, normalization: str = "range", level: float = 0.95) -> AnswerTable:
        """Answers to ``queries`` and/or a ``(Q, |D|)`` array of ``linear`` weight lists, in that order.

        Each answer: eq. 17 estimate, eq. 21 proper estimate, standard error, interval at
        ``level``, eq. 20/22 bounds, n, delivered ε. The batch is checked and cut before anything
        is sent; the server checks the queries against the schema. No queries at all answers an
        empty table (``n = 0``).

        Parameters
        ----------
        collection : str
            The collection's name.
        queries : sequence of query objects and JSON objects, or None, default None
            JSON objects (:mod:`ldpsynth.shared.queries.json_form`) and query objects (the builders
            of :mod:`ldpsynth.shared.queries.builders`, sent as their JSON form), mixed as wanted.
        linear : numpy.ndarray or None, default None
            A ``(Q, |D|)`` array of weight lists, ``Q >= 1``, sent packed.
        normalization : {"range", "sum", "mean"}, default "range"
            The normaliser of the ``linear`` queries (checked by the server).
        level : float, default 0.95
            Confidence level of the intervals, a number in (0, 1) (checked by the server).

        Returns
        -------
        AnswerTable

        Raises
        ------
        ValidationError
            Naming ``queries[j]`` or ``linear`` (too large for the message limit,
            :meth:`message_limit`; ``linear`` not of shape ``(Q >= 1, |D|)``) or ``collection``
            (a name too long for the limit); nothing is sent.
        QueryError
            A call failed (after the retries, for a retryable status): INVALID_ARGUMENT for a query,
            ``level`` or ``normalization`` out of its legal range, FAILED_PRECONDITION for an
            unknown collection, ...
        """
        limit = self.message_limit(collection)
        requests = estimate_requests(collection, level=level, queries=queries_to_json(queries or ()), linear=linear,
                                     normalization=normalization, chunk_bytes=min(self._chunk_bytes, limit),
                                     max_message_bytes=limit)
        pages = self._call("Estimate", lambda: list(self._stub.Estimate(
            iter(requests), timeout=self._deadline, metadata=self._metadata)))
        return AnswerTable.from_pages(pages)

    def export(self, collection: str) -> Release:
        """The public release of ``collection``: its mechanism card and every stored row.

        A retried call downloads it again from the start.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        Release

        Raises
        ------
        QueryError
            ``Export`` failed (after the retries, for a retryable status), or DATA_LOSS: the stream
            ended early or held another number of rows than announced.
        ValidationError
            The card received does not verify (``card.*``), or a code is out of the domain.
        """
        release = self.export_release(collection)
        if isinstance(release, WideRelease):
            raise ValidationError("collection", "an ordinary collection (a wide collection: export_wide)",
                                  f"{collection!r} is a wide collection")
        return release

    def export_wide(self, collection: str) -> WideRelease:
        """The export of the wide collection ``collection``: its wide card and every view's release.

        Each view sub-collection is exported by :meth:`export` (one snapshot per view). Its
        :meth:`~ldpsynth.shared.wide.release.WideRelease.write` writes the folder ``ldpsynth estimate`` reads.

        Parameters
        ----------
        collection : str
            The wide collection's name (its parent).

        Returns
        -------
        WideRelease
            :class:`~ldpsynth.shared.wide.release.WideRelease`: the verified wide card and one
            :class:`Release` per view, in the card's order.

        Raises
        ------
        ValidationError
            Naming ``collection`` for an ordinary collection; else as :meth:`export`.
        QueryError
            As :meth:`export`.
        """
        release = self.export_release(collection)
        if not isinstance(release, WideRelease):
            raise ValidationError("collection", "a wide collection (an ordinary one: export)",
                                  f"{collection!r} is an ordinary collection")
        return release

    def export_release(self, collection: str) -> Release | WideRelease:
        """:meth:`export` of an ordinary collection, :meth:`export_wide` of a wide one.

        The server's first export chunk says which: a mechanism card or a wide card.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        Release or WideRelease

        Raises
        ------
        QueryError, ValidationError
            As :meth:`export`.
        """
        head = self._call("Export", lambda: self._download(collection))
        if isinstance(head, WideCard):
            return WideRelease(head, tuple(self.export(name) for name in head.names))
        return head

    def _download(self, collection: str) -> Release | WideCard:
        chunks = iter(self._stub.Export(qpb.ExportRequest(collection=collection), timeout=self._deadline,
                                        metadata=self._metadata))
        head = next(chunks, None)
        if head is None:
            raise QueryError("Export", "DATA_LOSS", "the server ended the export without its first chunk")
        if is_wide_card(head.card_json):
            return WideCard.from_json(head.card_json)
        card = MechanismCard.from_json(head.card_json)
        schema = card.schema
        public: list[list[np.ndarray]] = [[] for _ in schema.public_attributes]
        private: list[np.ndarray] = []
        oracle = card.has_reports
        for chunk in chunks:
            for column, raw in zip(public, chunk.public_codes):
                column.append(np.frombuffer(raw, _U64).astype(np.int64))
            if oracle:  # a frequency oracle's reports, in its fields (checked as the server checks a batch)
                private.append(private_from_wire(card.mechanism, chunk, private_rows(card.mechanism, chunk)))
            else:
                private.append(np.frombuffer(chunk.private_codes, _U64).astype(np.int64))
        codes = {a.name: np.concatenate(c) if c else np.zeros(0, np.int64)
                 for a, c in zip(schema.public_attributes, public)}
        guarantees = guarantees_from_proto(head.guarantees) if head.HasField("guarantees") else None
        if oracle:
            reports = np.concatenate(private) if private else layout_of(card.mechanism).empty()
            release = Release(card, codes, guarantees, reports)
        else:
            digits = schema.private_digits(np.concatenate(private) if private else np.zeros(0, np.int64))
            codes.update({a.name: digits[a.name] for a in schema.private_attributes})
            release = Release(card, {a.name: codes[a.name] for a in schema.attributes}, guarantees)
        if len(release) != head.rows:
            raise QueryError("Export", "DATA_LOSS", f"expected {head.rows} rows, received {len(release)}")
        return release

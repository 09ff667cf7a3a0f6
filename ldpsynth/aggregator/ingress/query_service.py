"""gRPC handlers of ``ldpsynth.v1.QueryService`` (proto/ldpsynth/v1/query.proto): ``Estimate`` and ``Export``, and
the operators' ``AdvanceRound`` (role ``operate``; :mod:`ldpsynth.aggregator.operate.rounds`).

Like the collection service, the handlers receive raw bytes and parse them themselves, so
malformed requests end as INVALID_ARGUMENT. Statuses: no "query" role or collection not allowed:
PERMISSION_DENIED; unknown collection or no rows yet: FAILED_PRECONDITION; a bad query (unknown
attribute, weight table of the wrong size, empty or overlapping cut sets, NaN weights, a level
outside (0, 1)): INVALID_ARGUMENT naming ``queries[j]`` (the whole batch is refused, nothing is
answered); a batch over :data:`MAX_BATCH_QUERIES` queries or :data:`MAX_BATCH_WEIGHTS` weights:
RESOURCE_EXHAUSTED; a shard worker unreachable or damaged: UNAVAILABLE (storage full: RESOURCE_EXHAUSTED).
Every batch is evaluated on one snapshot (:mod:`~ldpsynth.aggregator.query.engine`). An empty batch
(``queries_json = "[]"``) answers OK with one page of no answers. A numeric collection (HM or SW reports)
takes JSON queries of the kinds mean, sum, variance, quantiles and histogram only
(:mod:`ldpsynth.shared.queries.numeric`; another kind is INVALID_ARGUMENT naming ``queries[j].kind``, packed weight
arrays naming ``mechanism``), answered in the same answer columns.

Replies honour the server's message limit (``--max-message-bytes``, published as the
collection's ``Limits.max_message_bytes``; gRPC enforces it on what the server sends too): answer
pages (:func:`~ldpsynth.shared.queries.wire.answer_pages`) and export chunks
(:func:`export_chunk_rows`) are sized from the wire bytes per answer / per row so that every
message serializes to at most the limit. What cannot fit (an export head whose mechanism card
alone is over the limit, one answer with an over-long label) is RESOURCE_EXHAUSTED naming the
limit, before anything of the reply is sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from ldpsynth.aggregator.query.engine import QueryEngine
from ldpsynth.serving.auth import OPERATE, QUERY, Credential
from ldpsynth.serving.errors import LimitExceeded
from ldpsynth.serving.observe.metrics import ServiceCalls
from ldpsynth.serving.status import parse, rpc
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import private_wire
from ldpsynth.shared.protocol import FIELD_HEADER_BYTES, private_to_wire, rows_that_fit
from ldpsynth.shared.queries.json_form import queries_from_json
from ldpsynth.shared.queries.model import Query
from ldpsynth.shared.queries.numeric import NumericQuery
from ldpsynth.shared.queries.wire import BatchReader, answer_pages, guarantees_to_proto
from ldpsynth.shared.reports import mechanism_of
from ldpsynth.shared.schema import MAX_BATCH_WEIGHTS, Schema
from ldpsynth.shared.validation import check_probability
from ldpsynth.shared.wire import query_pb2 as qpb

if TYPE_CHECKING:
    from ldpsynth.aggregator.ingress.replica_metrics import ReplicaMetrics
    from ldpsynth.aggregator.operate.rounds import RoundKeeper

QUERY_SERVICE_NAME = qpb.DESCRIPTOR.services_by_name["QueryService"].full_name
QUERY_METHODS = ("Estimate", "Export", "AdvanceRound")
#: Largest batch of one Estimate call: compiled queries, and weights held in memory (float64;
#: MAX_BATCH_WEIGHTS, shared with the schema's limit on |D|).
MAX_BATCH_QUERIES = 1 << 22
#: Most rows per ExportChunk (4 MiB of codes for a collection with three attributes); the message
#: limit may make chunks smaller (:func:`export_chunk_rows`).
EXPORT_CHUNK_ROWS = 1 << 17


def export_chunk_rows(schema: Schema, max_message_bytes: int) -> int:
    """Rows per data ``ExportChunk`` of ``schema``: at most :data:`EXPORT_CHUNK_ROWS`, and as many
    as fit ``max_message_bytes`` at 8 bytes per public code and the private part's bytes (E's code: 8; a
    frequency oracle's report: :func:`~ldpsynth.shared.mechanisms.registry.private_wire`) plus
    :data:`FIELD_HEADER_BYTES` per column. RESOURCE_EXHAUSTED if not even one row fits."""
    private, private_columns = private_wire(mechanism_of(schema))
    columns = len(schema.public_attributes) + private_columns
    row = 8 * len(schema.public_attributes) + private
    fit = rows_that_fit(max_message_bytes, 0, row, columns)
    if fit < 1:
        raise LimitExceeded(f"one exported row of {schema.name!r} needs {row + columns * FIELD_HEADER_BYTES} bytes, "
                            f"over the server's message limit of {max_message_bytes} bytes (--max-message-bytes)")
    return min(EXPORT_CHUNK_ROWS, fit)


def advance_response(done: dict[str, Any]) -> qpb.AdvanceRoundResponse:
    """``AdvanceRound``'s answer of what :meth:`~ldpsynth.aggregator.operate.rounds.RoundKeeper.advance` did."""
    response = qpb.AdvanceRoundResponse(collection=done["collection"], closed_round=done["closed_round"],
                                        reports=done["reports"], finished="results" in done)
    if "results" in done:
        response.results_json = json.dumps(done["results"], sort_keys=True)
    else:
        response.open_round, response.candidates = done["open_round"], done["candidates"]
    return response


class QueryServicer:
    """The handlers; ``authenticate`` maps a call's context to its :class:`Credential`; ``calls`` records
    the calls, ``metrics`` the durations and rows of the answered ones; ``rounds`` closes discovery rounds
    (``AdvanceRound``, role ``operate``)."""

    def __init__(self, engine: QueryEngine, authenticate: Callable[[grpc.aio.ServicerContext], Credential],
                 calls: ServiceCalls, metrics: ReplicaMetrics, rounds: RoundKeeper):
        self.engine = engine
        self._authenticate = authenticate
        self.calls = calls
        self._metrics = metrics
        self._rounds = rounds

    def handlers(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(QUERY_SERVICE_NAME, {
            "Estimate": grpc.stream_stream_rpc_method_handler(
                self.estimate, response_serializer=qpb.EstimateResponse.SerializeToString),
            "Export": grpc.unary_stream_rpc_method_handler(
                self.export, response_serializer=qpb.ExportChunk.SerializeToString),
            "AdvanceRound": grpc.unary_unary_rpc_method_handler(
                self.advance_round, response_serializer=qpb.AdvanceRoundResponse.SerializeToString),
        })

    @rpc("AdvanceRound", "the round was not advanced")
    async def advance_round(self, raw: bytes, context: grpc.aio.ServicerContext) -> qpb.AdvanceRoundResponse:
        """Close a discovery collection's open round (:mod:`ldpsynth.aggregator.operate.rounds`)."""
        request = parse(qpb.AdvanceRoundRequest, raw)
        credential = self._authenticate(context)
        credential.require_role(OPERATE)
        credential.require_collection(request.collection)
        return advance_response(await self._rounds.advance(request.collection))

    def _caller(self, context: grpc.aio.ServicerContext, collection: str) -> None:
        credential = self._authenticate(context)
        credential.require_role(QUERY)
        credential.require_collection(collection)

    @rpc("Estimate", "the query could not be answered")
    async def estimate(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        await self._estimate(requests, context)

    async def _estimate(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        reader: BatchReader | None = None
        collection, level = "", 0.95
        async for raw in requests:
            request = parse(qpb.EstimateRequest, raw)
            if reader is None:
                collection = request.collection
                self._caller(context, collection)
                if self.engine.catalog.wide(collection) is not None:
                    await self._estimate_wide(request, requests, context)
                    return
                info = self.engine.catalog.get(collection)
                if request.level:
                    level = check_probability(request.level, "level")
                reader = BatchReader(info.schema, max_queries=MAX_BATCH_QUERIES, max_weights=MAX_BATCH_WEIGHTS)
            elif request.collection and request.collection != collection:
                raise ValidationError("collection", f"{collection!r} in every chunk of one batch (or empty)",
                                      "another collection")
            reader.add(request)
        if reader is None:
            raise ValidationError("requests", "at least one EstimateRequest naming the collection", "none sent")
        start = time.perf_counter()
        answers = await self.engine.estimate(collection, reader.batch(), level)
        self._metrics.query(collection, "estimate", answers.n, time.perf_counter() - start)
        for page in answer_pages(answers, max_bytes=info.limits.max_message_bytes):
            await context.write(page)

    async def _estimate_wide(self, first: qpb.EstimateRequest, requests: AsyncIterator[bytes],
                             context: grpc.aio.ServicerContext) -> None:
        """A wide collection's parent: query objects (``queries_json`` chunks) answered by the parent's database
        (:meth:`QueryEngine.estimate_wide`), in the same answer pages."""
        card = self.engine.catalog.wide(first.collection)
        assert card is not None
        level = check_probability(first.level, "level") if first.level else 0.95
        queries: list[Query | NumericQuery] = []
        request: qpb.EstimateRequest | None = first
        while request is not None:
            if request.collection and request.collection != first.collection:
                raise ValidationError("collection", f"{first.collection!r} in every chunk of one batch (or empty)",
                                      "another collection")
            kind = request.WhichOneof("queries")
            if kind in ("linear", "grouped"):
                raise ValidationError(f"queries[{len(queries)}:].{kind}", "queries_json: a wide collection answers "
                                      "query objects over its attributes' names and values", f"packed {kind} queries")
            if kind == "queries_json":
                queries.extend(queries_from_json(request.queries_json, first_index=len(queries)))
                if len(queries) > MAX_BATCH_QUERIES:
                    raise LimitExceeded(f"a batch of at most {MAX_BATCH_QUERIES} queries; got more")
            raw = await anext(requests, None)
            request = None if raw is None else parse(qpb.EstimateRequest, raw)
        start = time.perf_counter()
        answers = await self.engine.estimate_wide(card, queries, level)
        self._metrics.query(first.collection, "estimate", answers.n, time.perf_counter() - start)
        for page in answer_pages(answers, max_bytes=self.engine.catalog.limits.max_message_bytes):
            await context.write(page)

    @rpc("Export", "the export could not be read")
    async def export(self, raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[qpb.ExportChunk]:
        request = parse(qpb.ExportRequest, raw)
        self._caller(context, request.collection)
        wide = self.engine.catalog.wide(request.collection)
        if wide is not None:      # a wide parent: its card only (rows 0); the views are exported by their names
            head = qpb.ExportChunk(card_json=wide.dumps(), rows=0)
            limit = self.engine.catalog.limits.max_message_bytes
            if head.ByteSize() > limit:
                raise LimitExceeded(f"the export of {request.collection!r} (its wide card) is {head.ByteSize()} bytes, "
                                    f"over the server's message limit of {limit} bytes (--max-message-bytes)")
            yield head
            return
        info = self.engine.catalog.get(request.collection)
        limit = info.limits.max_message_bytes
        head = qpb.ExportChunk(card_json=info.card.dumps(), rows=2**64 - 1)  # the largest row count
        if head.ByteSize() > limit:
            raise LimitExceeded(f"the first export chunk of {request.collection!r} (its mechanism card) is "
                                f"{head.ByteSize()} bytes, over the server's message limit of {limit} bytes "
                                "(--max-message-bytes)")
        chunk_rows = export_chunk_rows(info.schema, limit)
        start = time.perf_counter()
        rows, guarantees = await self.engine.release(request.collection,  # groups below min_batch withheld
                                                     await self.engine.export_rows(request.collection))
        self._metrics.query(request.collection, "export", len(rows), time.perf_counter() - start)
        head.rows = len(rows)
        if guarantees is not None:
            head.guarantees.CopyFrom(guarantees_to_proto(guarantees))
            if head.ByteSize() > limit:
                raise LimitExceeded(f"the first export chunk of {request.collection!r} (its mechanism card and the "
                                    f"guarantees of {len(guarantees.labels)} public-key groups) is {head.ByteSize()} "
                                    f"bytes, over the server's message limit of {limit} bytes (--max-message-bytes)")
        yield head
        schema = info.schema
        for start in range(0, len(rows), chunk_rows):
            stop = min(start + chunk_rows, len(rows))
            keys = rows.public_keys[start:stop]
            digits = schema.public_digits(keys)
            chunk = qpb.ExportChunk(public_codes=[digits[a.name].astype("<u8").tobytes()
                                                  for a in schema.public_attributes])
            for field, data in private_to_wire(info.card.mechanism, np.asarray(rows.private_codes[start:stop])).items():
                setattr(chunk, field, data)
            yield chunk

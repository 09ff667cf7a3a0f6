"""The web port's ASGI application: the collection service for browsers (docs/contract.md §15).

``POST /ldpsynth.v1.CollectionService/SubmitBatch`` and ``.../GetCollection`` over the Connect
protocol or gRPC-Web (:mod:`~ldpsynth.aggregator.ingress.web_protocol`), on HTTP/1.1 or HTTP/2.
A call is served by the replica's own handlers (:class:`CollectionCalls`: the
:class:`~ldpsynth.aggregator.ingress.collection_service.CollectionServicer`), the ones its gRPC calls
use: the same authentication (the ``authorization`` header), admission, commit and ack, and every error
answered through :func:`~ldpsynth.serving.status.refusal`, the one mapping. Request
bodies are read up to the message limit (RESOURCE_EXHAUSTED past it, before the rest is read).
``SubmitReports`` needs a streamed request body, which browsers cannot send: UNIMPLEMENTED here.

``GET /healthz`` answers 200 ``SERVING`` while the replica stores batches, 503 ``NOT_SERVING``
otherwise (for a load balancer in front). Cross-origin requests: :mod:`~ldpsynth.aggregator.ingress.cors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from ldpsynth.aggregator.errors import NotServed
from ldpsynth.aggregator.ingress.cors import Cors
from ldpsynth.aggregator.ingress.web_protocol import (
    CONTENT_TYPES,
    Headers,
    Unsupported,
    WebCall,
    failure,
    header,
)
from ldpsynth.serving.auth import Credential
from ldpsynth.serving.errors import BadRequest, LimitExceeded
from ldpsynth.serving.status import COLLECTION_NOT_READ, NOT_ACKNOWLEDGED, refusal
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.wire import collection_pb2 as pb

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SERVICE_PATH = "/" + pb.DESCRIPTOR.services_by_name["CollectionService"].full_name + "/"
HEALTH_PATH = "/healthz"


class CollectionCalls(Protocol):
    """What the web port calls: the replica's handlers of the collection service."""

    @property
    def serving(self) -> bool:
        """Whether batches can be stored now (the ingest side's health)."""

    def authenticate_headers(self, headers: Sequence[tuple[str, str]]) -> Credential: ...

    def collection(self, credential: Credential, request: pb.GetCollectionRequest) -> pb.Collection: ...

    async def submit_batch(self, credential: Credential, batch: pb.ReportBatch) -> pb.BatchAck: ...


@dataclass(frozen=True)
class _Method:
    request: type[Message]
    doing: str


METHODS = {
    "GetCollection": _Method(pb.GetCollectionRequest, COLLECTION_NOT_READ),
    "SubmitBatch": _Method(pb.ReportBatch, NOT_ACKNOWLEDGED),
    "SubmitReports": _Method(pb.ReportBatch, NOT_ACKNOWLEDGED),
}


async def _respond(send: Send, status: int, headers: Headers, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, headers: Headers, limit: int) -> bytes:
    """The request body, refused (RESOURCE_EXHAUSTED) as soon as it is known to pass ``limit`` bytes."""
    declared = header(headers, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise LimitExceeded(f"request: at most max_message_bytes = {limit} bytes per request body, "
                            f"got {int(declared)}")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BadRequest("request: the connection closed before the body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise LimitExceeded(f"request: at most max_message_bytes = {limit} bytes per request body, "
                                f"got more")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class WebApp:
    """The ASGI application of one replica's web port."""

    def __init__(self, calls: CollectionCalls, cors: Cors, max_message_bytes: int):
        self._calls = calls
        self._cors = cors
        self._max_message_bytes = max_message_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers: Headers = list(scope["headers"])
        origin = header(headers, b"origin")
        extra: Headers = []
        if origin is not None:
            if scope["method"] == "OPTIONS":
                status, grants = self._cors.preflight(origin, header(headers, b"access-control-request-method"))
                await _respond(send, status, grants, b"")
                return
            if not self._cors.allows(origin):
                await _respond(send, 403, [(b"content-type", b"text/plain"), (b"vary", b"Origin")],
                               b"origin: not among the origins this port allows (--web-origins)\n")
                return
            extra = self._cors.answer_headers(origin)
        status, answer, body = await self._answer(scope, receive, headers)
        await _respond(send, status, answer + extra, body)

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            event = (await receive())["type"]
            if event == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _answer(self, scope: Scope, receive: Receive, headers: Headers) -> tuple[int, Headers, bytes]:
        path, method = scope["path"], scope["method"]
        if path == HEALTH_PATH:
            if method not in ("GET", "HEAD"):
                return 405, [(b"allow", b"GET, HEAD")], b""
            serving = self._calls.serving
            return (200 if serving else 503, [(b"content-type", b"text/plain")],
                    b"SERVING\n" if serving else b"NOT_SERVING\n")
        name = path[len(SERVICE_PATH):] if path.startswith(SERVICE_PATH) else None
        if name not in METHODS:
            return 404, [(b"content-type", b"text/plain")], b"no such method on this port\n"
        if method != "POST":
            return 405, [(b"allow", b"POST")], b""
        try:
            call = WebCall.of(headers)
        except Unsupported as exc:
            return exc.status, [(b"content-type", b"text/plain"), *exc.headers], f"{exc}\n".encode()
        except LdpsynthError as exc:  # a request of the port's protocols, but not one it serves
            media = (header(headers, b"content-type") or "").split(";")[0].strip().lower()
            return failure(CONTENT_TYPES[media][0], *refusal(exc, name, METHODS[name].doing))
        try:
            deadline = call.deadline(headers)
            message = await self._call(call, name, headers, receive) if deadline is None else \
                await asyncio.wait_for(self._call(call, name, headers, receive), deadline)
        except asyncio.TimeoutError:
            return call.failure(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"the call's deadline passed; {METHODS[name].doing}")
        except Exception as exc:  # noqa: BLE001 (every error answers with its status; refusal logs bugs)
            return call.failure(*refusal(exc, name, METHODS[name].doing))
        return call.success(message)

    async def _call(self, call: WebCall, name: str, headers: Headers, receive: Receive) -> Message:
        """Authenticate, read and decode the request, run the replica's handler."""
        if name == "SubmitReports":
            raise NotServed("SubmitReports streams its requests, which the Connect protocol and gRPC-Web cannot "
                            "do from a browser: call SubmitBatch, one batch per call")
        credential = self._calls.authenticate_headers(
            [(key.decode("latin-1"), value.decode("latin-1")) for key, value in headers])
        body = await _read_body(receive, headers, call.body_limit(self._max_message_bytes))
        request = call.request(METHODS[name].request, body, self._max_message_bytes)
        if name == "GetCollection":
            assert isinstance(request, pb.GetCollectionRequest)
            return self._calls.collection(credential, request)
        assert isinstance(request, pb.ReportBatch)
        return await self._calls.submit_batch(credential, request)


"""The one mapping from errors to statuses, used by every handler of every tier that serves calls (the
replicas' and the shuffler's, docs/contract.md §9 and §16), gRPC's and the replicas' web port's (whose
Connect and gRPC-Web codes are gRPC's, :mod:`~ldpsynth.aggregator.ingress.web_protocol`).

An error says how a request ends (:attr:`~ldpsynth.shared.errors.LdpsynthError.refused_as`), what the
caller is told (``told_as``) and whether its refusal is logged as a warning (``warns``); here that
becomes a gRPC code and its details, whichever tier's error it is. Handlers are wrapped by
:func:`rpc`: whatever they raise ends the call with its status and its message (which names the
field and its legal range, never a private value, a token or a peer address), and anything without
a status is a bug: logged, answered INTERNAL. The
same wrapper records every call (:class:`~ldpsynth.serving.observe.metrics.ServiceCalls`: counts
by status code, durations, a trace span continuing the caller's): the servicer that owns a handler
keeps its recorder as ``calls``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from ldpsynth.serving.errors import BadRequest
from ldpsynth.serving.observe import events
from ldpsynth.serving.observe.metrics import Call, ServiceCalls
from ldpsynth.shared.errors import LdpsynthError

log = events.get(__name__)

M = TypeVar("M", bound=Message)
F = TypeVar("F", bound=Callable[..., Any])

#: What a failed call did not do (the ``doing`` of :func:`status_of`), by the collection service's calls.
NOT_ACKNOWLEDGED = "the batch was not acknowledged (retry it with the same report ids)"
COLLECTION_NOT_READ = "the collection could not be read"
#: What an unexpected error (a bug, not the request) answers; the server's log holds the traceback.
INTERNAL = (grpc.StatusCode.INTERNAL, "internal server error (see the server log)")


def status_of(exc: BaseException, doing: str) -> tuple[grpc.StatusCode, str]:
    """``(code, details)`` of a call that ``exc`` ended: its ``refused_as`` and its ``told_as``. ``doing``
    says what was not done, for the errors told with it (a shard's failure: "the batch was not
    acknowledged (retry it with the same report ids): ...")."""
    if isinstance(exc, LdpsynthError) and exc.refused_as is not None:
        return grpc.StatusCode[exc.refused_as.name], exc.told_as.format(message=str(exc), doing=doing)
    return INTERNAL


def parse(message_type: type[M], raw: bytes) -> M:
    """Parse request bytes; :class:`BadRequest` (INVALID_ARGUMENT) if they are not a ``message_type``."""
    try:
        return message_type.FromString(raw)
    except DecodeError:
        raise BadRequest(f"request: not a valid {message_type.DESCRIPTOR.full_name} message") from None


class Served(Protocol):
    """What owns handlers wrapped by :func:`rpc`: the recorder of its service's calls."""

    calls: ServiceCalls


def refusal(exc: BaseException, method: str, doing: str, call: Call | None = None) -> tuple[grpc.StatusCode, str]:
    """:func:`status_of`, logged (INTERNAL with its traceback, an error that ``warns`` as a warning) and recorded on
    ``call``: how every call that ``exc`` ended answers, over gRPC (:func:`abort`) and on the web port
    (:mod:`~ldpsynth.aggregator.ingress.web`)."""
    code, details = status_of(exc, doing)
    if call is not None:
        call.code = code.name
    if code == grpc.StatusCode.INTERNAL:
        log.error("rpc.failed", f"{method} failed", exc_info=exc, method=method, code=code.name)
    elif isinstance(exc, LdpsynthError) and exc.warns:
        log.warning("rpc.unavailable", f"{method}: {details}", method=method, code=code.name, detail=details)
    else:
        log.info("rpc.refused", f"{method} refused: {code.name}", method=method, code=code.name)
    return code, details


async def abort(context: grpc.aio.ServicerContext, exc: BaseException, method: str, doing: str, call: Call) -> None:
    """End the call with ``exc``'s status (:func:`refusal`)."""
    await context.abort(*refusal(exc, method, doing, call))


def rpc(method: str, doing: str) -> Callable[[F], F]:
    """Wrap a ``grpc.aio`` handler (a coroutine, or an async generator for a response stream) of a
    :class:`Served` so that any error ends the call with its status (:func:`status_of`), and the call
    is recorded (its ``calls``)."""

    def wrap(handler: F) -> F:
        if inspect.isasyncgenfunction(handler):
            @functools.wraps(handler)
            async def stream(*args: Any) -> AsyncIterator[Any]:
                owner: Served = args[0]
                context = args[-1]
                with owner.calls.call(method, context.invocation_metadata, current=False) as call:
                    try:
                        async for item in handler(*args):
                            yield item
                    except Exception as exc:  # noqa: BLE001 (every error ends the call with its status; abort logs bugs)
                        await abort(context, exc, method, doing, call)
            return stream  # type: ignore[return-value]

        @functools.wraps(handler)
        async def unary(*args: Any) -> Any:
            owner: Served = args[0]
            context = args[-1]
            with owner.calls.call(method, context.invocation_metadata) as call:
                try:
                    return await handler(*args)
                except Exception as exc:  # noqa: BLE001 (every error ends the call with its status; abort logs bugs)
                    await abort(context, exc, method, doing, call)
        return unary  # type: ignore[return-value]

    return wrap

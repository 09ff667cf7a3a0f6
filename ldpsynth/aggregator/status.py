"""Errors that end a call with a precise gRPC status (docs/contract.md §9).

Handlers raise :class:`StatusError`; the server turns it into ``context.abort(code, details)``.
Details name the field and its legal range and never carry a private value, a token or a peer
address: they travel back over the wire and into the server log.
"""

from __future__ import annotations

from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from ldpsynth.shared.errors import LdpsynthError, ValidationError

M = TypeVar("M", bound=Message)


class StatusError(LdpsynthError):
    """End the call with ``code`` and ``details``."""

    def __init__(self, code: grpc.StatusCode, details: str):
        self.code = code
        self.details = details
        super().__init__(f"{code.name}: {details}")


class ShardUnavailable(LdpsynthError):
    """A storage shard could not commit (actor died or restarting, disk error).

    The batch is not acknowledged; the client retries it with the same report ids, which is
    safe whether or not the shard committed before failing (duplicates are ignored).
    """


class ShardFull(ShardUnavailable):
    """The log's storage is full: nothing more can be stored until an operator adds space."""


class WorkerStartFailed(ShardUnavailable):
    """A shard worker cannot start: it could not be created, its start raised, or it kept dying.
    Waiting does not help; the message names the shard and the cause
    (``shard 3: ModuleNotFoundError: No module named 'x'``)."""


def shard_status(exc: ShardUnavailable, doing: str) -> StatusError:
    """The status of a call that ``exc`` stopped: RESOURCE_EXHAUSTED when storage is full, else
    UNAVAILABLE (retry later, the same report ids: nothing is stored twice)."""
    if isinstance(exc, ShardFull):
        return StatusError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{doing}: the aggregator's log storage is full; "
                                                               "retry later (an operator must add space)")
    return StatusError(grpc.StatusCode.UNAVAILABLE, f"{doing}: {exc}; retry later")


def invalid_argument(exc: ValidationError) -> StatusError:
    """INVALID_ARGUMENT carrying a validation error's message (field, position, legal range)."""
    return StatusError(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


def unavailable(details: str) -> StatusError:
    return StatusError(grpc.StatusCode.UNAVAILABLE, details)


def parse(message_type: type[M], raw: bytes) -> M:
    """Parse request bytes; INVALID_ARGUMENT if they are not a ``message_type``."""
    try:
        return message_type.FromString(raw)
    except DecodeError:
        raise StatusError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"request: not a valid {message_type.DESCRIPTOR.full_name} message") from None

"""The errors that end a request on any tier that serves calls (the aggregator's replicas and the
shuffler), free of any transport: the one error vocabulary of docs/contract.md §9 and §16.

Each says how the request ends (``refused_as``, a :class:`~ldpsynth.shared.errors.Status`; docs/contract.md §9
lists the statuses and what a caller does with each); :mod:`ldpsynth.serving.status` is
the one mapping to gRPC. Messages name the field and its legal range and never carry a private
value, a token or a peer address: they travel back to the caller and into the server's log.
The aggregator's own errors (its shards, its workers, its web port) are :mod:`ldpsynth.aggregator.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from ldpsynth.shared.errors import LdpsynthError, Status, ValidationError

__all__ = ["BadRequest", "NotFound", "WrongState", "LimitExceeded", "QuotaExceeded", "Unauthenticated",
           "PermissionDenied", "TryLater", "ConfigError", "flag_checks"]


class BadRequest(LdpsynthError):
    """The request's bytes are not a message of its type (INVALID_ARGUMENT)."""

    refused_as: ClassVar[Status | None] = Status.INVALID_ARGUMENT


class NotFound(LdpsynthError):
    """An operator call names what this server does not serve (NOT_FOUND). Device and query calls answer an
    unknown collection FAILED_PRECONDITION (:class:`WrongState`), as docs/contract.md §9 says."""

    refused_as: ClassVar[Status | None] = Status.NOT_FOUND


class WrongState(LdpsynthError):
    """Not a request this server can take now: an unknown or closed collection, another mechanism
    version, a query that does not fit the collection's schema (FAILED_PRECONDITION)."""

    refused_as: ClassVar[Status | None] = Status.FAILED_PRECONDITION


class LimitExceeded(LdpsynthError):
    """Over a limit: a batch's size, a credential's quota, the message size (RESOURCE_EXHAUSTED)."""

    refused_as: ClassVar[Status | None] = Status.RESOURCE_EXHAUSTED


class QuotaExceeded(LimitExceeded):
    """A batch that would take a credential over its quota in a collection (RESOURCE_EXHAUSTED)."""


class Unauthenticated(LdpsynthError):
    """No valid credential (UNAUTHENTICATED)."""

    refused_as: ClassVar[Status | None] = Status.UNAUTHENTICATED


class PermissionDenied(LdpsynthError):
    """A valid credential without the role or the collection it asks for (PERMISSION_DENIED)."""

    refused_as: ClassVar[Status | None] = Status.PERMISSION_DENIED


class TryLater(LdpsynthError):
    """The server cannot take the request now (stopping, workers restarted during a query); retry it
    later, with the same report ids (UNAVAILABLE)."""

    refused_as: ClassVar[Status | None] = Status.UNAVAILABLE


class ConfigError(LdpsynthError):
    """A configuration value or file is invalid (a flag, a collection file, a tokens file); the message
    names it and its legal range. Not something a request causes: a server does not start with it."""


@contextmanager
def flag_checks() -> Iterator[None]:
    """Checks of flags (:mod:`ldpsynth.shared.validation`) in a tier's configuration: their
    ValidationError is a ConfigError with the same message (it names the flag)."""
    try:
        yield
    except ValidationError as exc:
        raise ConfigError(str(exc)) from None

"""Errors shared by the client and the aggregator.

Every validation error names the offending *field* and its *legal range*, and never carries a
private value: the message may travel to a server log or back over the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

__all__ = [
    "Status",
    "LdpsynthError",
    "ValidationError",
    "SchemaError",
    "schema_field",
    "LedgerError",
    "PrivacyBudgetExceeded",
    "CardChanged",
]


class Status(enum.Enum):
    """How a request an error refuses ends (docs/contract.md §9 says what a caller does with each),
    named as gRPC names its status codes; the one mapping to gRPC is
    :mod:`ldpsynth.serving.status`."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAVAILABLE = "UNAVAILABLE"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    ABORTED = "ABORTED"


class LdpsynthError(Exception):
    """Base class of all ldpsynth errors.

    ``refused_as``: how a request this error refuses ends (``None``: not something a request can
    cause; a service answers INTERNAL and logs it). ``told_as``: what the caller is told, of
    ``{message}`` (the error's own words) and ``{doing}`` (what the call did not do, e.g. "the batch was
    not acknowledged (retry it with the same report ids)"). ``warns``: a request it refuses is logged as a
    warning (the server's trouble, which an operator may have to see to) rather than as information.
    """

    refused_as: ClassVar[Status | None] = None
    told_as: ClassVar[str] = "{message}"
    warns: ClassVar[bool] = False


class ValidationError(LdpsynthError, ValueError):
    """Bad input: a field out of its legal range or of the wrong shape (INVALID_ARGUMENT).

    Each parameter is kept as the attribute of the same name; the message joins them.

    Parameters
    ----------
    field : str
        Name of the offending field (an attribute, a parameter, a query field).
    legal : str
        Human-readable legal range, e.g. ``"an integer in [1, 5]"``.
    problem : str, default ""
        What is wrong (never the offending private value), e.g. ``"got 7"``, ``"missing"``.
    position : int or None, default None
        Row (or query) index where the problem was found, if any.
    """

    refused_as: ClassVar[Status | None] = Status.INVALID_ARGUMENT

    def __init__(self, field: str, legal: str, problem: str = "", position: int | None = None):
        self.field = field
        self.legal = legal
        self.position = position
        self.problem = problem
        where = f" at position {position}" if position is not None else ""
        what = f": {problem}" if problem else ""
        super().__init__(f"{field}{where}{what}; legal range: {legal}")


class SchemaError(ValidationError):
    """The collection schema itself is malformed."""


@contextmanager
def schema_field() -> Iterator[None]:
    """Checks of a field of the schema itself: their :class:`ValidationError` is a :class:`SchemaError`."""
    try:
        yield
    except ValidationError as exc:
        raise SchemaError(exc.field, exc.legal, exc.problem, exc.position) from None


class LedgerError(ValidationError):
    """The device's privacy ledger is unreadable, damaged, replaced or missing where one existed.

    Never treated as an empty ledger: that would restart the ε spent at 0 and let rows already
    reported be reported afresh, which is what memoization exists to stop. ``field`` is always
    ``"ledger"``; ``legal`` says what a sound ledger is and how to start over knowingly.
    """

    def __init__(self, problem: str, legal: str):
        super().__init__("ledger", legal, problem)


class PrivacyBudgetExceeded(LdpsynthError):
    """A submission would spend more ε than the device's budget allows."""


class CardChanged(PrivacyBudgetExceeded):
    """A collection was re-issued at another ε than the one this device's reports to it were made at.

    Fresh reports of the same rows could be averaged with the old ones, so the device refuses
    until it is started over knowingly (``ldpsynth client reset-ledger``).
    """

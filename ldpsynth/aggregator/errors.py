"""The aggregator's own errors that end a request, free of any transport: its shards, its shard
workers, a query's pins, its web port, a collection's lifecycle.

They extend the vocabulary every serving tier shares (:mod:`ldpsynth.serving.errors`: a bad request,
a wrong state, a limit, a credential, try later, a configuration error) and say how the request
ends as those do (``refused_as``, a :class:`~ldpsynth.shared.errors.Status`; docs/contract.md §9
lists the statuses and what a caller does with each); :mod:`ldpsynth.serving.status` is
the one mapping to gRPC. Messages name the field and its legal range and never carry a private
value, a token or a peer address: they travel back to the caller and into the server's log.
"""

from __future__ import annotations

from typing import ClassVar

from ldpsynth.serving.errors import TryLater, WrongState
from ldpsynth.shared.errors import LdpsynthError, Status

__all__ = ["NotServed", "OutsideLifecycle", "ClosedToReports", "ShardUnavailable", "ShardFull", "ShardDamaged",
           "WorkerStartFailed", "PinExpired"]


class NotServed(LdpsynthError):
    """A call this port does not serve: a method it does not have, a compressed request body (UNIMPLEMENTED)."""

    refused_as: ClassVar[Status | None] = Status.UNIMPLEMENTED


class OutsideLifecycle(WrongState):
    """A report for a collection that does not take reports now: not open yet, or closed
    (FAILED_PRECONDITION; ``state`` is ``"not_open"`` or ``"closed"``, :mod:`ldpsynth.shared.lifecycle`)."""

    def __init__(self, message: str, state: str):
        super().__init__(message)
        self.state = state


class ClosedToReports(WrongState):
    """A batch whose collection the shard workers closed to reports (a discovery's round, closed by
    ``AdvanceRound`` on any replica; :mod:`ldpsynth.aggregator.operate.rounds`): FAILED_PRECONDITION, nothing of
    its part stored."""

    def __init__(self, message: str = "the collection was closed to reports (a discovery's round closed); fetch "
                 "the discovery's card again (GetCollection) and report in its open round"):
        super().__init__(message)


class ShardUnavailable(LdpsynthError):
    """A storage shard could not commit or answer (its worker died or is restarting, the log did not
    answer): UNAVAILABLE. A batch it stopped is not acknowledged; retrying it with the same report ids
    is safe whether or not the shard committed before failing (duplicates are ignored). The caller is
    told what was not done, and the failure is logged as a warning."""

    refused_as: ClassVar[Status | None] = Status.UNAVAILABLE
    told_as: ClassVar[str] = "{doing}: {message}; retry later"
    warns: ClassVar[bool] = True


class ShardFull(ShardUnavailable):
    """The log's storage is full: nothing more can be stored until there is room (RESOURCE_EXHAUSTED).
    The caller is told so without the message, which names the server's paths."""

    refused_as: ClassVar[Status | None] = Status.RESOURCE_EXHAUSTED
    told_as: ClassVar[str] = "{doing}: the aggregator's log storage is full; retry later (an operator must add space)"


class ShardDamaged(ShardUnavailable):
    """A shard's log failed a check (a flipped record, a hole, a record of another layout): the
    shard refuses service until an operator restores the log (UNAVAILABLE)."""


class WorkerStartFailed(ShardUnavailable):
    """A shard worker cannot start: it could not be created, its start raised, or it kept dying.
    Waiting does not help; the message names the shard and the cause
    (``shard 3: ModuleNotFoundError: No module named 'x'``)."""


class PinExpired(TryLater):
    """A query's pin of a shard's state was released (its worker restarted, or it timed out)."""

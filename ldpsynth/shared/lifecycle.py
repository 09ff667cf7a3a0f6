"""A collection's lifecycle: when it takes reports, and how few reports it releases nothing from.

A schema may give (docs/contract.md §2, "Lifecycle"):

``opens``, ``closes``
    RFC 3339 timestamps with a time zone, whole seconds (``"2026-12-01T00:00:00Z"``): the aggregator
    takes reports from ``opens`` on and refuses them from ``closes`` on (FAILED_PRECONDITION naming
    the time), by its own clock at arrival. Queries and exports go on after ``closes``; a closed
    collection can then be retired (``ldpsynth aggregator retire``).
``min_batch``
    The fewest reports an answer or an export is computed from (per public-key group where the
    queries group), in [1, 10^12], default 1: below it the release is refused. A shuffled
    collection's ``shuffle.min_batch`` is the same rule; the larger of the two applies.

Reports carry no timestamp, so there is no time precision (``window``) to state: the lifecycle is
enforced on arrival, and nothing the aggregator stores or releases holds a time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ldpsynth.shared.errors import SchemaError

__all__ = ["TIME_FORMAT", "NOT_OPEN", "OPEN", "CLOSED", "parse_time", "format_time", "Lifecycle"]

TIME_FORMAT = "an RFC 3339 timestamp with a time zone and whole seconds, e.g. 2026-12-01T00:00:00Z"
#: States of a collection at a time.
NOT_OPEN, OPEN, CLOSED = "not_open", "open", "closed"


def parse_time(value: object, field: str) -> int:
    """Seconds since the Unix epoch of an RFC 3339 timestamp (:data:`TIME_FORMAT`).

    >>> parse_time("2026-12-01T01:00:00+01:00", "opens")
    1796083200
    """
    if not isinstance(value, str) or "T" not in value.upper():
        raise SchemaError(field, TIME_FORMAT, f"got {str(value)[:64]!r}")
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise SchemaError(field, TIME_FORMAT, f"got {value[:64]!r}") from None
    if moment.tzinfo is None or moment.microsecond:
        raise SchemaError(field, TIME_FORMAT, f"got {value[:64]!r}")
    return int(moment.timestamp())


def format_time(seconds: int) -> str:
    """The canonical form: UTC with a ``Z``.

    >>> format_time(1796083200)
    '2026-12-01T00:00:00Z'
    """
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Lifecycle:
    """When a collection takes reports: from ``opens`` (None: always has) until ``closes`` (None: never
    closes), in seconds since the epoch."""

    opens: int | None = None
    closes: int | None = None

    def __post_init__(self) -> None:
        if self.opens is not None and self.closes is not None and self.closes <= self.opens:
            raise SchemaError("closes", "a time after opens", f"got {format_time(self.closes)}, opens "
                              f"{format_time(self.opens)}")

    def state(self, now: float) -> str:
        """:data:`NOT_OPEN`, :data:`OPEN` or :data:`CLOSED` at ``now`` (seconds since the epoch)."""
        if self.opens is not None and now < self.opens:
            return NOT_OPEN
        if self.closes is not None and now >= self.closes:
            return CLOSED
        return OPEN

    def refusal(self, name: str, now: float) -> str | None:
        """Why collection ``name`` takes no report at ``now`` (None: it takes them).

        >>> Lifecycle(100, 200).refusal("ratings", 250)
        "collection 'ratings' closed at 1970-01-01T00:03:20Z (closes): it takes no more reports"
        """
        if self.opens is not None and now < self.opens:
            return (f"collection {name!r} opens at {format_time(self.opens)} (opens): it takes no report before; "
                    "retry then")
        if self.closes is not None and now >= self.closes:
            return f"collection {name!r} closed at {format_time(self.closes)} (closes): it takes no more reports"
        return None

"""The per-device quota of the shuffler tier (docs/contract.md §16, "Quotas"; docs/shuffle-accountant.md §6).

Only the shuffler sees device credentials (the replicas see the shuffler's), so it is the shuffler
that bounds what one device may send of a collection. The bound is what a shuffled collection's
central guarantee assumes: a device sends at most ``shuffle.rows_per_device`` reports, and an
adversary's credentials inject at most ``shuffle.assume_injected`` reports into a pool. So the quota
is **on by default** for shuffled collections (``--max-reports-per-device`` unset: the collection's
``rows_per_device``), off for the others (they state no central guarantee), and ``N`` when given
(``0``: off).

A call's reports are reserved before they enter a pool (a :class:`Reservation`), confirmed once the
replicas acknowledged them (they then count for good) and released if the call ends without its
acknowledgement (the pool missed its threshold, the forward failed, the device went away), so a
device that resends after UNAVAILABLE is not charged twice. A device that resends a batch whose
acknowledgement it lost is charged again (the shuffler cannot open the reports to see their ids).

Where the counts live (:class:`QuotaStore`): in this process (:class:`LocalQuotas`), right for one
shuffler process (several processes each count on their own: a credential gets one quota per
process, and the shuffler says so in its log at start); or in a NATS JetStream key-value bucket that
every shuffler process of the tier shares (:class:`~ldpsynth.shuffler.quota_nats.NatsQuotas`,
``--quota-nats``), so that a credential has one quota wherever its calls land.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from ldpsynth.serving.errors import QuotaExceeded
from ldpsynth.shuffler.directory import Route

__all__ = ["QuotaStore", "Reservation", "LocalQuotas", "DeviceQuota", "exceeded"]


@dataclass(frozen=True)
class Reservation:
    """Reports taken for one call, until it is confirmed (acknowledged) or released (not).

    Parameters
    ----------
    device : str
        The device's credential id.
    collection : str
        The collection's name.
    reports : int
        How many reports the call holds.
    lease : str, default ""
        The store's name for this reservation (:class:`~ldpsynth.shuffler.quota_nats.NatsQuotas`: its
        lease id; empty in :class:`LocalQuotas`).
    """

    device: str
    collection: str
    reports: int
    lease: str = ""


class QuotaStore(Protocol):
    """Reports taken per (device credential, collection), shared by the shuffler processes using it."""

    async def reserve(self, device: str, collection: str, reports: int, limit: int) -> Reservation:
        """Take ``reports`` for ``device`` unless that would exceed ``limit`` (raise :class:`QuotaExceeded`,
        :func:`exceeded`); atomic against every other process of the store. A store that cannot
        answer raises :class:`~ldpsynth.serving.errors.TryLater` (the call ends UNAVAILABLE)."""
        ...

    async def confirm(self, reservation: Reservation) -> None:
        """The replicas acknowledged the reservation's reports: they count for good (TryLater if the
        store cannot answer)."""
        ...

    async def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call ended unacknowledged (never raises: a store that cannot
        answer lets the reservation lapse by itself, if it can, or keeps it)."""
        ...

    async def close(self) -> None:
        """Let go of the store's connections."""
        ...


def exceeded(device: str, collection: str, limit: int, used: int, reports: int) -> QuotaExceeded:
    """The refusal of a call that would take ``device`` over ``limit`` (RESOURCE_EXHAUSTED)."""
    return QuotaExceeded(f"--max-reports-per-device: credential {device!r} may send at most {limit} reports of "
                         f"collection {collection!r} through the shuffler tier; {used} were taken and this batch adds "
                         f"{reports}")


class LocalQuotas:
    """A :class:`QuotaStore` in this process's memory (one shuffler process is the whole tier)."""

    def __init__(self) -> None:
        self._taken: Counter[tuple[str, str]] = Counter()

    async def reserve(self, device: str, collection: str, reports: int, limit: int) -> Reservation:
        used = self._taken[device, collection]
        if used + reports > limit:
            raise exceeded(device, collection, limit, used, reports)
        self._taken[device, collection] = used + reports
        return Reservation(device, collection, reports)

    async def confirm(self, reservation: Reservation) -> None:
        return None

    async def release(self, reservation: Reservation) -> None:
        self._taken[reservation.device, reservation.collection] -= reservation.reports

    async def close(self) -> None:
        return None


class DeviceQuota:
    """The per-device limit of each collection, kept in a :class:`QuotaStore`.

    Parameters
    ----------
    limit : int or None
        The most reports one credential may send of one collection; ``None``: a shuffled collection's
        ``rows_per_device`` and no limit for the others; ``0``: no limit.
    store : QuotaStore
        Where the counts live.
    """

    def __init__(self, limit: int | None, store: QuotaStore):
        self.limit = limit
        self.store = store

    def limit_of(self, route: Route) -> int:
        """The limit for ``route``'s collection (0: none).

        Parameters
        ----------
        route : Route
            The collection.

        Returns
        -------
        int
            The most reports one device credential may send of it.
        """
        if self.limit is not None:
            return self.limit
        return route.rows_per_device or 0

    async def reserve(self, device: str, route: Route, reports: int) -> Reservation | None:
        """Take ``reports`` of ``route``'s collection for ``device`` (raise :class:`QuotaExceeded`, nothing
        taken; TryLater: the store did not answer).

        Parameters
        ----------
        device : str
            The device's credential id.
        route : Route
            Its collection.
        reports : int
            Reports of the call.

        Returns
        -------
        Reservation or None
            What was taken, to be confirmed once the call is acknowledged or released if it ends
            unacknowledged; ``None``: the collection has no limit and nothing was taken.
        """
        limit = self.limit_of(route)
        if not limit:
            return None
        return await self.store.reserve(device, route.name, reports, limit)

    async def confirm(self, reservation: Reservation) -> None:
        """Count a reservation whose call was acknowledged for good.

        Parameters
        ----------
        reservation : Reservation
            As :meth:`reserve` returned it.

        Returns
        -------
        None
        """
        await self.store.confirm(reservation)

    async def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call ended unacknowledged.

        Parameters
        ----------
        reservation : Reservation
            As :meth:`reserve` returned it.

        Returns
        -------
        None
        """
        await self.store.release(reservation)

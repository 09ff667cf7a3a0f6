"""The per-device quota of the shuffler tier (docs/contract.md §16, "Quotas"; docs/shuffle-accountant.md §6).

Only the shuffler sees device credentials (the replicas see the shuffler's), so it is the shuffler
that bounds what one device may send of a collection. The bound is what a shuffled collection's
central guarantee assumes: a device sends at most ``shuffle.rows_per_device`` reports, and an
adversary's credentials inject at most ``shuffle.assume_injected`` reports into a pool. So the quota
is **on by default** for shuffled collections (``--max-reports-per-device`` unset: the collection's
``rows_per_device``), off for the others (they state no central guarantee), and ``N`` when given
(``0``: off).

A call's reports are reserved before they enter a pool and released if the call ends without its
acknowledgement (the pool missed its threshold, the forward failed, the device went away), so a
device that resends after UNAVAILABLE is not charged twice. A device that resends a batch whose
acknowledgement it lost is charged again (the shuffler cannot open the reports to see their ids).

Where the counts live (:class:`QuotaStore`): in this process (:class:`LocalQuotas`), right for one
shuffler process; several processes of one tier share one store, so that a credential has one quota
wherever its calls land.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from ldpsynth.serving.errors import QuotaExceeded
from ldpsynth.shuffler.directory import Route

__all__ = ["QuotaStore", "LocalQuotas", "DeviceQuota", "exceeded"]


class QuotaStore(Protocol):
    """Reports reserved per (device credential, collection), shared by the shuffler processes using it."""

    async def reserve(self, device: str, collection: str, reports: int, limit: int) -> None:
        """Take ``reports`` for ``device`` unless that would exceed ``limit`` (raise :class:`QuotaExceeded`,
        :func:`exceeded`); atomic against every other process of the store."""
        ...

    async def release(self, device: str, collection: str, reports: int) -> None:
        """Give back a reservation whose call ended unacknowledged."""
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

    async def reserve(self, device: str, collection: str, reports: int, limit: int) -> None:
        used = self._taken[device, collection]
        if used + reports > limit:
            raise exceeded(device, collection, limit, used, reports)
        self._taken[device, collection] = used + reports

    async def release(self, device: str, collection: str, reports: int) -> None:
        self._taken[device, collection] -= reports

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

    async def reserve(self, device: str, route: Route, reports: int) -> bool:
        """Take ``reports`` of ``route``'s collection for ``device`` (raise :class:`QuotaExceeded`, nothing
        taken); return whether anything was taken (a collection without a limit takes nothing).

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
        bool
            Whether a reservation was made (to be released if the call ends unacknowledged).
        """
        limit = self.limit_of(route)
        if not limit:
            return False
        await self.store.reserve(device, route.name, reports, limit)
        return True

    async def release(self, device: str, route: Route, reports: int) -> None:
        """Give back a reservation whose call ended unacknowledged.

        Parameters
        ----------
        device : str
            As reserved.
        route : Route
            As reserved.
        reports : int
            As reserved.

        Returns
        -------
        None
        """
        await self.store.release(device, route.name, reports)

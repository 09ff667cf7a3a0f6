"""The per-device quota of a shuffler (``--max-reports-per-device``; docs/contract.md §16, "Quotas").

Only the shuffler sees device credentials (the replicas see the shuffler's), so it is the shuffler
that bounds what one device may send of a collection. A call's reports are reserved before they
enter a pool and released if the call ends without its acknowledgement (the pool missed its
threshold, the forward failed, the device went away), so a device that resends after UNAVAILABLE
is not charged twice. The counts live in this process: a device that spreads its calls over k
shufflers can send k times the limit, and a device that resends a batch whose acknowledgement it
lost is charged again (the shuffler cannot open the reports to see their ids).
"""

from __future__ import annotations

from collections import Counter

from ldpsynth.serving.errors import QuotaExceeded
from ldpsynth.shared.validation import check_int

__all__ = ["DeviceQuota"]


class DeviceQuota:
    """Reports each device credential has had taken per collection, against ``limit`` (0: unlimited).

    Parameters
    ----------
    limit : int
        The most reports one credential may send of one collection through this shuffler, an integer
        >= 0 (0: no limit).
    """

    def __init__(self, limit: int):
        self.limit = check_int(limit, "--max-reports-per-device", 0)
        self._taken: Counter[tuple[str, str]] = Counter()

    def reserve(self, device: str, collection: str, reports: int) -> None:
        """Take ``reports`` of ``collection`` for ``device``, or raise :class:`QuotaExceeded`.

        Parameters
        ----------
        device : str
            The device's credential id.
        collection : str
            The collection's name.
        reports : int
            Reports of the call.

        Returns
        -------
        None

        Raises
        ------
        QuotaExceeded
            The call would take the device over the limit (RESOURCE_EXHAUSTED); nothing is taken.
        """
        if not self.limit:
            return
        used = self._taken[device, collection]
        if used + reports > self.limit:
            raise QuotaExceeded(f"--max-reports-per-device: credential {device!r} may send at most {self.limit} "
                                f"reports of collection {collection!r} through this shuffler; {used} were taken and "
                                f"this batch adds {reports}")
        self._taken[device, collection] = used + reports

    def release(self, device: str, collection: str, reports: int) -> None:
        """Give back a reservation whose call ended unacknowledged.

        Parameters
        ----------
        device, collection : str
            As reserved.
        reports : int
            As reserved.

        Returns
        -------
        None
        """
        if self.limit:
            self._taken[device, collection] -= reports

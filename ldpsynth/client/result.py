"""The summary of one submission, as the SDK returns it and the CLI prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "SubmitResult",
]


@dataclass(frozen=True)
class SubmitResult:
    """What one :meth:`AsyncClient.submit` did.

    Attributes
    ----------
    collection : str
        The collection's name (a wide or discovery collection's own: the one the ledger charged).
    rows : int
        Rows given.
    sent : int
        Distinct reports streamed (identical rows share one memoized report).
    acknowledged : int
        Reports the server newly committed; through a shuffler (``shuffled``), the reports the shuffler
        acknowledged (it took charge of them: they cannot be lost).
    duplicates : int
        Reports the server already held: memoized reports it had stored before, or retried batches.
        ``acknowledged + duplicates == sent`` once the submission succeeded. Always 0 through a
        shuffler, which cannot open the reports to tell (the replicas still store each id once).
    batches : int
        ``ReportBatch`` messages the reports were cut into.
    retries : int
        ``SubmitReports`` attempts after the first.
    memoized : int
        Rows that reused a memoized report (docs/contract.md §5) and so cost no ε.
    epsilon_spent : float
        ε this submission charged to the device's ledger (new reports × the collection's ε).
    epsilon_total : float
        ε the device has spent on the collection, this submission included.
    shuffled : bool
        Whether the reports went sealed through a shuffler (docs/contract.md §16) rather than in clear
        to the aggregator.
    central_epsilon : float or None
        Through a shuffler to a shuffled collection: the central ε the collection promises this
        device's reports, that of a release of its minimum batch of reports (the weakest it makes),
        as the ledger recorded it (:meth:`PrivacyLedger.guarantees`); ``None`` when the collection is
        not shuffled, the reports went in clear, some earlier ones did, or the device has no
        accountant (scipy) to compute it.
    central_delta : float or None
        The δ that goes with ``central_epsilon`` (0.0 when that is the local guarantee).
    status : str
        ``"sent"``; for a discovery collection (docs/heavy-hitters.md) whose open round is not this device's,
        ``"not your round yet"`` or ``"your round has passed"``: nothing was sent (nor charged, unless the round
        was closed while this device reported in it: ``epsilon_spent`` then says what was charged).
    part : str or None
        The sub-collection the reports went to: a wide collection's view (docs/wide.md) or a discovery's open
        round (docs/heavy-hitters.md); ``None`` for an ordinary collection, or when nothing was sent.
    """

    collection: str
    rows: int
    sent: int
    acknowledged: int
    duplicates: int
    batches: int
    retries: int
    memoized: int
    epsilon_spent: float
    epsilon_total: float
    shuffled: bool = False
    central_epsilon: float | None = None
    central_delta: float | None = None
    status: str = "sent"
    part: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict.

        Returns
        -------
        dict
            Field name -> value.
        """
        return asdict(self)

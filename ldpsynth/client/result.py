"""The summary of one submission, as the SDK returns it and the CLI prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SubmitResult:
    """What one :meth:`AsyncClient.submit` did.

    Attributes
    ----------
    collection:
        The collection's name.
    rows:
        Rows given.
    sent:
        Distinct reports streamed (identical rows share one memoized report).
    acknowledged:
        Reports the server newly committed; through a shuffler (``shuffled``), the reports the shuffler
        acknowledged (it took charge of them: they cannot be lost).
    duplicates:
        Reports the server already held: memoized reports it had stored before, or retried batches.
        ``acknowledged + duplicates == sent`` once the submission succeeded. Always 0 through a
        shuffler, which cannot open the reports to tell (the replicas still store each id once).
    batches:
        ``ReportBatch`` messages the reports were cut into.
    retries:
        ``SubmitReports`` attempts after the first.
    memoized:
        Rows that reused a memoized report (docs/contract.md §5) and so cost no ε.
    epsilon_spent:
        ε this submission charged to the device's ledger (new reports × the collection's ε).
    epsilon_total:
        ε the device has spent on the collection, this submission included.
    shuffled:
        Whether the reports went sealed through a shuffler (docs/contract.md §15) rather than in clear
        to the aggregator.
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

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)

"""Errors of the client SDK (all subclasses of :class:`~ldpsynth.shared.errors.LdpsynthError`).

Local problems reuse the shared classes: a bad row raises
:class:`~ldpsynth.shared.errors.ValidationError` (field, position and legal range, never the
value) and an over-budget submission raises
:class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded`. A call the server refused, or that
kept failing, raises :class:`SubmitError`.
"""

from __future__ import annotations

from ldpsynth.shared.errors import LdpsynthError

__all__ = [
    "SubmitError",
    "QueryError",
]


class SubmitError(LdpsynthError):
    """A gRPC call failed for good: a final status, or a retryable one after the last attempt.

    Each parameter is kept as the attribute of the same name (``details`` with its runs of
    whitespace made single spaces).

    Parameters
    ----------
    method : str
        The RPC, ``"GetCollection"``, ``"SubmitReports"`` or (through a shuffler) ``"SubmitSealed"``.
    status : str
        The gRPC status name, e.g. ``"INVALID_ARGUMENT"``.
    details : str
        The server's message (the contract forbids it to echo a private value).
    attempts : int
        Calls made, the failing one included.
    sent, acknowledged, duplicates : int, default 0
        Reports of the submission; reports newly committed by the server before the failure
        (they stay committed, docs/contract.md); reports it already held. A later submission of
        the same rows resends the memoized reports with the same ids, so nothing is stored twice.
    """

    def __init__(self, method: str, status: str, details: str, *, attempts: int,
                 sent: int = 0, acknowledged: int = 0, duplicates: int = 0):
        self.method = method
        self.status = status
        self.details = " ".join(details.split())
        self.attempts = attempts
        self.sent = sent
        self.acknowledged = acknowledged
        self.duplicates = duplicates
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        progress = ""
        if method in ("SubmitReports", "SubmitSealed"):
            progress = (f"; {acknowledged + duplicates} of {sent} reports acknowledged before the error "
                        f"({acknowledged} new, {duplicates} duplicates)")
        super().__init__(f"{method} failed with {status}{tries}: {self.details or 'no details'}{progress}")


class QueryError(LdpsynthError):
    """A query-service call (``Estimate``, ``Export`` or ``GetCollection``) failed with a gRPC status.

    Each parameter is kept as the attribute of the same name (``details`` with its runs of
    whitespace made single spaces).

    Parameters
    ----------
    method : str
        The RPC, e.g. ``"Estimate"``.
    status : str
        The gRPC status name, e.g. ``"INVALID_ARGUMENT"`` (``"DATA_LOSS"`` for an incomplete export).
    details : str
        The server's message (for a bad query it names ``queries[j]`` and the legal range).
    """

    def __init__(self, method: str, status: str, details: str):
        self.method = method
        self.status = status
        self.details = " ".join(details.split())
        super().__init__(f"{method} failed with {status}: {self.details or 'no details'}")

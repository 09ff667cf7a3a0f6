"""The rules every privacy ledger keeps, wherever it is stored: the budget, exact basic composition, the
pinned ε, what may be promised, and the keys of the memo.

Pure functions of their arguments (no SQLite, no files), as the TypeScript SDK's
``sdk/typescript/src/ledger-rules.ts``; the reasoning: docs/internals.md, ``ldpsynth.client.ledger``.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ldpsynth.shared.errors import CardChanged, LedgerError, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.validation import check_epsilon

__all__ = [
    "DEFAULT_BUDGET_MULTIPLE",
    "SECRET_BYTES",
    "MEMO_KEY_BYTES",
    "Budget",
    "CentralGuarantee",
    "refused",
    "shown",
    "exact",
    "charge",
    "check_pinned",
    "checked_pin",
    "checked_spend",
    "checked_central",
    "central_row",
    "may_promise",
    "promised",
    "memo_keys",
    "ledger_id",
]

#: Default per-collection budget, in multiples of the collection's ε.
DEFAULT_BUDGET_MULTIPLE = 10
#: Bytes of the device's memo secret.
SECRET_BYTES = 32
#: Bytes of a memo key (HMAC-SHA256).
MEMO_KEY_BYTES = 32

_DOMAIN = b"ldpsynth-memo/1"
_ID_DOMAIN = b"ldpsynth-ledger-id/1"
#: A spend as the ledger writes it: ``str`` of a :class:`~fractions.Fraction`.
_EXACT = re.compile(r"-?[0-9]+(/[0-9]+)?")
_SOUND = ("an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
          "`ldpsynth client reset-ledger` or PrivacyLedger.reset; docs/contract.md)")


def refused(path: Path | str, problem: str) -> LedgerError:
    """The error refusing the ledger at ``path`` for ``problem``."""
    return LedgerError(f"{path}: {problem}", _SOUND)


def shown(value: object) -> str:
    """``repr`` of a stored value, cut to 40 characters (a damaged file may hold anything)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def exact(text: object) -> Fraction | None:
    """``text`` as the exact rational the ledger writes (``p`` or ``p/q``), or ``None``."""
    if not isinstance(text, str) or not _EXACT.fullmatch(text):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):  # over Python's integer digit limit, or q = 0
        return None


@dataclass(frozen=True)
class Budget:
    """The budget a ledger was created with: an ε per collection, or a multiple of each collection's ε."""

    epsilon: Fraction | None = None
    multiple: int = DEFAULT_BUDGET_MULTIPLE

    @classmethod
    def of(cls, budget: float | None) -> Budget:
        """``budget`` ε per collection, or the default multiple when ``None``."""
        return cls() if budget is None else cls(Fraction(check_epsilon(budget, "budget")))

    def for_collection(self, collection_epsilon: Fraction) -> Fraction:
        """The stored budget of a collection released at ``collection_epsilon``."""
        return self.epsilon if self.epsilon is not None else self.multiple * collection_epsilon

    def effective(self, collection_epsilon: Fraction, session: Fraction | None) -> Fraction:
        """The budget of a collection released at ``collection_epsilon`` in a session that asked for ``session``
        (``None``: the stored one); a session budget above the stored one is refused."""
        stored = self.for_collection(collection_epsilon)
        if session is None:
            return stored
        if session > stored:
            raise _higher_budget(stored, session)
        return session

    def check_session(self, session: Fraction | None) -> None:
        """Refuse a session budget above a stored ε per collection (a multiple is checked per collection)."""
        if session is not None and self.epsilon is not None and session > self.epsilon:
            raise _higher_budget(self.epsilon, session)

    def describe(self) -> str:
        """The budget in words (a reset's record)."""
        if self.epsilon is not None:
            return f"epsilon {float(self.epsilon):.6g} per collection"
        return f"{self.multiple} x each collection's epsilon"

    def to_bytes(self) -> bytes:
        """The budget as the ledger stores it: ``{"epsilon": "p/q"}`` or ``{"multiple": m}`` in JSON."""
        record = {"epsilon": str(self.epsilon)} if self.epsilon is not None else {"multiple": self.multiple}
        return json.dumps(record, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, path: Path | str, value: object) -> Budget:
        """The stored budget; :class:`LedgerError` unless it is one the ledger writes."""
        try:
            record = json.loads(value) if isinstance(value, bytes) else None
        except ValueError:
            record = None
        if isinstance(record, dict) and set(record) == {"epsilon"}:
            epsilon = exact(record["epsilon"])
            if epsilon is not None and epsilon > 0:
                return cls(epsilon)
        if isinstance(record, dict) and set(record) == {"multiple"} and type(record["multiple"]) is int \
                and record["multiple"] > 0:
            return cls(multiple=record["multiple"])
        raise refused(path, f"its budget is {shown(value)}, not a budget the ledger writes")


def _higher_budget(stored: Fraction, session: Fraction) -> ValidationError:
    return ValidationError("budget", f"at most {float(stored):.6g}, the budget this ledger was created with (a "
                                     "higher one needs `ldpsynth client reset-ledger --budget EPS`, which starts "
                                     "this device over)", f"got {float(session):.6g}")


def charge(collection: str, spent: Fraction, epsilon: Fraction, budget: Fraction, count: int) -> Fraction:
    """The ε spent after ``count`` new reports at ``epsilon`` each (basic composition, exactly);
    :class:`PrivacyBudgetExceeded` if it passes ``budget``."""
    total = spent + count * epsilon
    if total > budget:
        raise PrivacyBudgetExceeded(
            f"collection {collection!r}: {count} new reports at epsilon {float(epsilon):.6g} each "
            f"would bring the epsilon spent to {float(total):.6g}, over this device's budget of "
            f"{float(budget):.6g} (spent so far {float(spent):.6g}; basic composition)")
    return total


def check_pinned(collection: str, pinned: Fraction, epsilon: Fraction) -> None:
    """Refuse a collection re-issued at another ε than the one pinned at its first report."""
    if pinned != epsilon:
        raise CardChanged(
            f"collection {collection!r} is now released at epsilon {float(epsilon):.6g}, but this device's "
            f"reports to it were made at epsilon {float(pinned):.6g}: the same rows would get fresh reports "
            "that could be averaged with the old ones. To report to the re-issued collection, start this "
            "device over knowingly: `ldpsynth client reset-ledger` (PrivacyLedger.reset)")


def checked_pin(value: object) -> Fraction | None:
    """A stored pinned ε (an exact rational > 0), or ``None`` if it is not one."""
    pinned = exact(value)
    return pinned if pinned is not None and pinned > 0 else None


def checked_spend(path: Path | str, collection: object, epsilon: object, reports: object) -> tuple[Fraction, int]:
    """A stored spend as ``(ε spent, reports)``; :class:`LedgerError` unless it is one the ledger writes."""
    spent = exact(epsilon)
    if spent is None or spent < 0:
        raise refused(path, f"collection {shown(collection)}: the epsilon spent is {shown(epsilon)}, "
                            "not an exact number >= 0")
    if type(reports) is not int or reports < 0:
        raise refused(path, f"collection {shown(collection)}: the reports count is {shown(reports)}, "
                            "not an integer >= 0")
    if (spent == 0) != (reports == 0):
        raise refused(path, f"collection {shown(collection)}: epsilon spent {shown(epsilon)} for {reports} "
                            "reports (every report costs epsilon > 0)")
    return spent, reports


@dataclass(frozen=True)
class CentralGuarantee:
    """The central guarantee a shuffled collection promised this device's reports, as its ledger records it.

    Recorded for a collection every one of whose reports this device charged for a shuffler, in the
    transaction of each such submission (docs/contract.md §14). With the card's ε0 and |D| it is
    reproducible: ``ldpsynth.shared.guarantees.compute`` of one group of ``min_batch`` reports at
    ``rows_per_device`` (docs/contract.md §2).

    Attributes
    ----------
    delta : float
        The collection's δ (``shuffle.delta``).
    min_batch : int
        The fewest reports of a group the aggregator releases or answers from (the schema's
        minimum batch: the larger of ``min_batch`` and ``shuffle.min_batch``), so the weakest release.
    rows_per_device : int
        The reports per device the guarantee composes over: the collection's
        ``shuffle.rows_per_device``, or this device's reports when it has sent more.
    central_epsilon : float or None
        The central ε of a group of ``min_batch`` reports (the rows_per_device × ε0 of the local
        guarantee when that shuffle amplifies nothing); ``None``: not computed, the device had no
        accountant (scipy).
    central_delta : float or None
        ``delta``, or 0.0 with the local ε; ``None`` when ``central_epsilon`` is.
    """

    delta: float
    min_batch: int
    rows_per_device: int
    central_epsilon: float | None
    central_delta: float | None


def central_row(guarantee: CentralGuarantee) -> tuple[str, int, int, str | None, str | None]:
    """The fields the ledger stores of ``guarantee`` (exact rationals as text, like a spend)."""
    def stored(value: float | None) -> str | None:
        return None if value is None else str(Fraction(value))
    return (str(Fraction(guarantee.delta)), guarantee.min_batch, guarantee.rows_per_device,
            stored(guarantee.central_epsilon), stored(guarantee.central_delta))


def checked_central(path: Path | str, collection: object, delta: object, min_batch: object,
                    rows_per_device: object, central_epsilon: object, central_delta: object) -> CentralGuarantee:
    """A stored central guarantee; :class:`LedgerError` unless it is one the ledger writes."""
    def bad(field: str, value: object, legal: str) -> LedgerError:
        return refused(path, f"collection {shown(collection)}: the central guarantee's {field} is {shown(value)}, "
                             f"not {legal}")

    target = exact(delta)
    if target is None or not 0 < target < 1:
        raise bad("delta", delta, "an exact number in (0, 1)")
    for field, value in (("min_batch", min_batch), ("rows_per_device", rows_per_device)):
        if type(value) is not int or value < 1:
            raise bad(field, value, "an integer >= 1")
    eps = None if central_epsilon is None else exact(central_epsilon)
    if central_epsilon is not None and (eps is None or eps <= 0):
        raise bad("central_epsilon", central_epsilon, "an exact number > 0 (or none: not computed)")
    dlt = None if central_delta is None else exact(central_delta)
    if (dlt is None) != (eps is None) or (dlt is not None and dlt not in (0, target)):
        raise bad("central_delta", central_delta, "its delta or 0 (none only with central_epsilon)")
    assert isinstance(min_batch, int) and isinstance(rows_per_device, int)
    return CentralGuarantee(float(target), min_batch, rows_per_device, None if eps is None else float(eps),
                            None if dlt is None else float(dlt))


def may_promise(reported_before: bool, promised_before: Callable[[], bool]) -> bool:
    """Whether a guarantee may be recorded: every report charged before was charged for a shuffler (there was
    none, or ``promised_before()``: a guarantee is recorded for them)."""
    return not reported_before or promised_before()


def promised(guarantee: CentralGuarantee | None, reports: int,
             promisable: Callable[[], bool]) -> CentralGuarantee | None:
    """What a submission leaves recorded: ``guarantee`` (its reports went through a shuffler) when the collection
    has reports and ``promisable()``; else none (with ``None``: sent in clear, known to be this device's)."""
    return None if guarantee is None or not reports or not promisable() else guarantee


def memo_keys(secret: bytes, collection_fingerprint: bytes, public_codes: np.ndarray,
              private_codes: np.ndarray) -> list[bytes]:
    """HMAC-SHA256 under ``secret`` of a domain tag, the fingerprint and each row's codes (little-endian uint64)."""
    rows = np.ascontiguousarray(np.column_stack([public_codes, private_codes]), dtype="<u8")
    width = rows.shape[1] * 8
    data = rows.tobytes()
    prefix = _DOMAIN + collection_fingerprint
    return [hmac.digest(secret, prefix + data[i:i + width], "sha256") for i in range(0, len(data), width)]


def ledger_id(secret: bytes) -> str:
    """The id a marker records: HMAC-SHA256 of a constant under the memo secret (reveals nothing of it)."""
    return hmac.digest(secret, _ID_DOMAIN, "sha256")[:16].hex()

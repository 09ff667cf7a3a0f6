"""The rules every privacy ledger keeps, wherever it is stored: the budget, exact basic composition, the
pinned ε, what may be promised (and against whom), the path a memoized report keeps, and the keys of the memo.

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
    "check_path",
    "memo_keys",
    "device_key",
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
    """What a shuffled collection promised this device's reports, per party, as its ledger records it.

    Against analysts always, and against the aggregator's operator when ``operator`` (an independent
    shuffler), the central guarantee ``(central_epsilon, central_delta)`` per device at the pool floor;
    the shuffler, which sees who sends each sealed report, gets the local guarantee only
    (``rows_per_device`` × ε0, δ = 0; docs/shuffle-accountant.md §6).

    Recorded for a collection every one of whose reports this device charged for a shuffler, in the
    transaction of each such submission, recomputed with each (docs/contract.md §14). With the card's ε0
    and |D| it is reproducible: ``composed_epsilon(ε0, |D|, (min_batch − F) // m, delta, m)`` for
    F = ``assume_injected`` and m = ``rows_per_device`` (``ldpsynth.shared.guarantees.compute``), or the
    local (m × ε0, 0) when that is no better.

    Attributes
    ----------
    delta : float
        The collection's δ (``shuffle.delta``).
    min_batch : int
        The shuffle block's ``shuffle.min_batch``: the fewest reports of one public key in any pool the
        aggregator stores.
    rows_per_device : int
        The reports per device the guarantee composes over: the collection's
        ``shuffle.rows_per_device``, or this device's reports when it has sent more.
    central_epsilon : float or None
        The central ε at the pool floor (the rows_per_device × ε0 of the local guarantee when that
        shuffle amplifies nothing); ``None``: not computed, the device had no accountant (scipy).
    central_delta : float or None
        ``delta``, or 0.0 with the local ε; ``None`` when ``central_epsilon`` is.
    assume_injected : int or None, default None
        F, the reports per pool the guarantee assumes are not honest (``shuffle.assume_injected``, by
        default ``rows_per_device`` clipped to ``min_batch`` − 1), in [0, min_batch − 1]. ``None``: a
        promise carried over from ledger format 4, made by the former rule (one group of ``min_batch``
        reports, no injected report counted).
    operator : bool, default False
        Whether the central guarantee holds against the aggregator's operator too
        (``shuffle.shuffler == "independent"``); else against analysts only. Always ``False`` for a
        promise carried over from format 4.
    """

    delta: float
    min_batch: int
    rows_per_device: int
    central_epsilon: float | None
    central_delta: float | None
    assume_injected: int | None = None
    operator: bool = False


def central_row(guarantee: CentralGuarantee) -> tuple[str, int, int | None, int, str | None, str | None, int]:
    """The columns the ledger stores of ``guarantee``, in the order of its table (format 5, ``promise``):
    delta, min_batch, assume_injected, rows_per_device, central_epsilon, central_delta, operator (exact
    rationals as text, like a spend; ``operator`` as 0 or 1)."""
    def stored(value: float | None) -> str | None:
        return None if value is None else str(Fraction(value))
    return (str(Fraction(guarantee.delta)), guarantee.min_batch, guarantee.assume_injected, guarantee.rows_per_device,
            stored(guarantee.central_epsilon), stored(guarantee.central_delta), int(guarantee.operator))


def checked_central(path: Path | str, collection: object, delta: object, min_batch: object, assume_injected: object,
                    rows_per_device: object, central_epsilon: object, central_delta: object,
                    operator: object) -> CentralGuarantee:
    """A stored promise (the columns of :func:`central_row`); :class:`LedgerError` unless it is one the ledger
    writes:

    * ``delta`` an exact rational in (0, 1); ``min_batch`` and ``rows_per_device`` integers >= 1;
    * ``assume_injected`` an integer in [0, min_batch − 1], or none (carried over from format 4);
    * ``central_epsilon`` an exact rational > 0, or none (not computed); ``central_delta`` ``delta`` or 0,
      none exactly when ``central_epsilon`` is;
    * ``operator`` 0 or 1, and 0 when ``assume_injected`` is none (the former rule promised nothing
      against the operator).
    """
    def bad(field: str, value: object, legal: str) -> LedgerError:
        return refused(path, f"collection {shown(collection)}: the central guarantee's {field} is {shown(value)}, "
                             f"not {legal}")

    target = exact(delta)
    if target is None or not 0 < target < 1:
        raise bad("delta", delta, "an exact number in (0, 1)")
    for field, value in (("min_batch", min_batch), ("rows_per_device", rows_per_device)):
        if type(value) is not int or value < 1:
            raise bad(field, value, "an integer >= 1")
    assert isinstance(min_batch, int) and isinstance(rows_per_device, int)
    if assume_injected is not None and (type(assume_injected) is not int or not 0 <= assume_injected < min_batch):
        raise bad("assume_injected", assume_injected, f"an integer in [0, {min_batch - 1}] (min_batch - 1; or none: "
                                                      "a promise carried over from format 4)")
    eps = None if central_epsilon is None else exact(central_epsilon)
    if central_epsilon is not None and (eps is None or eps <= 0):
        raise bad("central_epsilon", central_epsilon, "an exact number > 0 (or none: not computed)")
    dlt = None if central_delta is None else exact(central_delta)
    if (dlt is None) != (eps is None) or (dlt is not None and dlt not in (0, target)):
        raise bad("central_delta", central_delta, "its delta or 0 (none only with central_epsilon)")
    if type(operator) is not int or operator not in (0, 1):
        raise bad("operator", operator, "0 or 1")
    if operator and assume_injected is None:
        raise bad("operator", operator, "0 for a promise carried over from format 4 (assume_injected none: "
                                        "against analysts only)")
    assert assume_injected is None or isinstance(assume_injected, int)
    return CentralGuarantee(float(target), min_batch, rows_per_device, None if eps is None else float(eps),
                            None if dlt is None else float(dlt), assume_injected, bool(operator))


def may_promise(reported_before: bool, promised_before: Callable[[], bool]) -> bool:
    """Whether a guarantee may be recorded: every report charged before was charged for a shuffler (there was
    none, or ``promised_before()``: a guarantee is recorded for them)."""
    return not reported_before or promised_before()


def promised(guarantee: CentralGuarantee | None, sealed: bool, reports: int,
             promisable: Callable[[], bool]) -> CentralGuarantee | None:
    """What a submission leaves recorded for its collection (the promise rule).

    ``guarantee`` when the submission went through a shuffler (``sealed``), the collection has reports and
    ``promisable()`` (:func:`may_promise`: every earlier report went through one too); else none, and any
    promise recorded before is removed: a submission in clear (or ``guarantee`` ``None``) leaves reports the
    aggregator knows are this device's, and no later sealed submission brings the promise back.
    """
    return None if guarantee is None or not sealed or not reports or not promisable() else guarantee


def check_path(collection: str, sealed: bool, switched: int) -> None:
    """The memo path rule: a memoized report is always resent the way it was first sent.

    Each memoized report records whether it was first sent sealed (through a shuffler) or in clear, in the
    transaction that memoizes it. A report memoized in clear is never later sealed (its sealed copy would be
    matched to the clear one, which the aggregator knows is this device's), and a report first sent sealed
    never later goes in clear (that links the device to its sealed report). ``switched``: the rows of a
    submission sent ``sealed`` (or not) whose memoized reports were first sent the other way; any refuses the
    whole submission with :class:`ValidationError` naming ``rows``, before anything is charged or recorded.
    """
    if switched:
        first, now = ("in clear", "sealed") if sealed else ("sealed, through a shuffler", "in clear")
        raise ValidationError(
            "rows", "rows sent the way their memoized reports were first sent (a report memoized in clear is "
                    "never sealed later, nor a sealed one sent in clear)",
            f"collection {collection!r}: {switched} of these rows have a report first sent {first}; sending it "
            f"{now} would link the report to this device (nothing was charged or sent)")


def memo_keys(secret: bytes, collection_fingerprint: bytes, public_codes: np.ndarray,
              private_codes: np.ndarray) -> list[bytes]:
    """HMAC-SHA256 under ``secret`` of a domain tag, the fingerprint and each row's codes (little-endian uint64)."""
    rows = np.ascontiguousarray(np.column_stack([public_codes, private_codes]), dtype="<u8")
    width = rows.shape[1] * 8
    data = rows.tobytes()
    prefix = _DOMAIN + collection_fingerprint
    return [hmac.digest(secret, prefix + data[i:i + width], "sha256") for i in range(0, len(data), width)]


def device_key(secret: bytes, tag: bytes, collection: str) -> bytes:
    """A device's key for splitting a collection's devices into parts (a wide collection's views: ``tag``
    :data:`~ldpsynth.shared.wide.collection.VIEW_KEY_TAG`; a discovery's rounds:
    :data:`~ldpsynth.shared.heavy_hitters.collection.ROUND_KEY_CONTEXT`): HMAC-SHA256 under ``secret`` of ``tag``
    and the collection's name (UTF-8). Stable for the ledger's life, so the device always lands in the same part,
    and unlinkable across devices, collections and purposes."""
    if not isinstance(collection, str) or not collection:
        raise ValidationError("collection", "a non-empty collection name", "empty or not a string")
    return hmac.digest(secret, tag + collection.encode("utf-8"), "sha256")


def ledger_id(secret: bytes) -> str:
    """The id a marker records: HMAC-SHA256 of a constant under the memo secret (reveals nothing of it)."""
    return hmac.digest(secret, _ID_DOMAIN, "sha256")[:16].hex()

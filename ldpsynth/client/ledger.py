"""The on-device privacy ledger: ε spent per collection, the budget, the memoized reports, and the central
guarantee each shuffled collection promised.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.client.ledger``.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np

from ldpsynth.shared.errors import CardChanged, LedgerError, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.files import fsync_directory
from ldpsynth.shared.reports import REPORT_ID_BYTES
from ldpsynth.shared.validation import check_epsilon

__all__ = [
    "LEDGER_ENV",
    "DEFAULT_BUDGET_MULTIPLE",
    "default_ledger_path",
    "Budget",
    "CentralGuarantee",
    "marker_path",
    "LedgerTransaction",
    "PrivacyLedger",
]

#: Environment variable naming the default ledger file.
LEDGER_ENV = "LDPSYNTH_LEDGER"
#: Default per-collection budget, in multiples of the collection's ε.
DEFAULT_BUDGET_MULTIPLE = 10
#: SQLite's name of a database in memory: refused as a ledger path (see :meth:`PrivacyLedger.for_simulation`).
IN_MEMORY = ":memory:"
#: Suffix of the marker written next to a ledger when it is created: ``ledger.sqlite.created``.
MARKER_SUFFIX = ".created"
#: Suffixes of the files SQLite keeps next to a ledger in WAL mode.
SQLITE_SUFFIXES = ("-wal", "-shm")

_FORMAT = 4
_SECRET_BYTES = 32
_MEMO_KEY_BYTES = 32  # HMAC-SHA256
_DOMAIN = b"ldpsynth-memo/1"
_ID_DOMAIN = b"ldpsynth-ledger-id/1"
_MARKER_FORMAT = "ldpsynth-ledger-marker/1"
_SQLITE_HEADER = b"SQLite format 3\x00"
_LOOKUP_CHUNK = 500
#: The tables as SQLite records them (``sqlite_master.sql``) for a ledger of format 1 ...
_TABLES_1 = {
    "device": "CREATE TABLE device (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
    "spend": "CREATE TABLE spend (collection TEXT PRIMARY KEY, epsilon TEXT NOT NULL,"
             " reports INTEGER NOT NULL) WITHOUT ROWID",
    "memo": "CREATE TABLE memo (memo_key BLOB PRIMARY KEY, collection TEXT NOT NULL,"
            " report_id BLOB NOT NULL, private_code INTEGER NOT NULL) WITHOUT ROWID",
}
#: ... and of format 2: the ε each collection is released at, pinned at the first report ...
_PINNED = "CREATE TABLE pinned (collection TEXT PRIMARY KEY, epsilon TEXT NOT NULL) WITHOUT ROWID"
_TABLES_2 = {**_TABLES_1, "pinned": _PINNED}
#: ... and of format 3: a frequency oracle's bit-set reports (OUE, SS), beside their memo row (whose
#: private_code is then 0).
_MEMO_REPORT = ("CREATE TABLE memo_report (memo_key BLOB PRIMARY KEY, report BLOB NOT NULL)"
                " WITHOUT ROWID")
_TABLES_3 = {**_TABLES_2, "memo_report": _MEMO_REPORT}
#: ... and of format 4: the central guarantee a shuffled collection promised the device's reports
#: (:class:`CentralGuarantee`), written in the transaction of the spend it belongs to.
_CENTRAL = ("CREATE TABLE central (collection TEXT PRIMARY KEY, delta TEXT NOT NULL, min_batch INTEGER NOT NULL,"
            " rows_per_device INTEGER NOT NULL, central_epsilon TEXT, central_delta TEXT) WITHOUT ROWID")
_CENTRAL_COLUMNS = "delta, min_batch, rows_per_device, central_epsilon, central_delta"
_TABLES = {**_TABLES_3, "central": _CENTRAL}
_TABLES_OF = {1: _TABLES_1, 2: _TABLES_2, 3: _TABLES_3, _FORMAT: _TABLES}
#: SQL condition: a memo row has the shape the ledger writes.
_MEMO_ROW_SOUND = (f"(typeof(memo_key) = 'blob' AND length(memo_key) = {_MEMO_KEY_BYTES} AND typeof(report_id) = 'blob'"
                   f" AND length(report_id) = {REPORT_ID_BYTES} AND typeof(private_code) = 'integer'"
                   f" AND private_code >= 0)")
#: A spend as the ledger writes it: ``str`` of a :class:`~fractions.Fraction`.
_EXACT = re.compile(r"-?[0-9]+(/[0-9]+)?")
_SOUND = ("an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
          "`ldpsynth client reset-ledger` or PrivacyLedger.reset; docs/contract.md)")


def default_ledger_path() -> Path:
    """``$LDPSYNTH_LEDGER``, else ``$XDG_DATA_HOME/ldpsynth/ledger.sqlite`` (``~/.local/share`` by default).

    Returns
    -------
    pathlib.Path
        The default ledger file (``~`` expanded in ``$LDPSYNTH_LEDGER``); it need not exist.
    """
    explicit = os.environ.get(LEDGER_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "ldpsynth" / "ledger.sqlite"


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
        return self.epsilon if self.epsilon is not None else self.multiple * collection_epsilon

    def describe(self) -> str:
        if self.epsilon is not None:
            return f"epsilon {float(self.epsilon):.6g} per collection"
        return f"{self.multiple} x each collection's epsilon"

    def to_bytes(self) -> bytes:
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
            epsilon = _exact(record["epsilon"])
            if epsilon is not None and epsilon > 0:
                return cls(epsilon)
        if isinstance(record, dict) and set(record) == {"multiple"} and type(record["multiple"]) is int \
                and record["multiple"] > 0:
            return cls(multiple=record["multiple"])
        raise _refused(path, f"its budget is {_shown(value)}, not a budget the ledger writes")


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

    def _row(self) -> tuple[str, int, int, str | None, str | None]:
        """The columns the ledger stores (exact rationals as text, like a spend)."""
        def exact(value: float | None) -> str | None:
            return None if value is None else str(Fraction(value))
        return (str(Fraction(self.delta)), self.min_batch, self.rows_per_device, exact(self.central_epsilon),
                exact(self.central_delta))


def _checked_central(path: Path | str, collection: object, delta: object, min_batch: object,
                     rows_per_device: object, central_epsilon: object, central_delta: object) -> CentralGuarantee:
    """A stored central guarantee; raise :class:`LedgerError` unless it is one the ledger writes."""
    def bad(field: str, value: object, legal: str) -> LedgerError:
        return _refused(path, f"collection {_shown(collection)}: the central guarantee's {field} is {_shown(value)}, "
                              f"not {legal}")

    target = _exact(delta)
    if target is None or not 0 < target < 1:
        raise bad("delta", delta, "an exact number in (0, 1)")
    for field, value in (("min_batch", min_batch), ("rows_per_device", rows_per_device)):
        if type(value) is not int or value < 1:
            raise bad(field, value, "an integer >= 1")
    eps = None if central_epsilon is None else _exact(central_epsilon)
    if central_epsilon is not None and (eps is None or eps <= 0):
        raise bad("central_epsilon", central_epsilon, "an exact number > 0 (or none: not computed)")
    dlt = None if central_delta is None else _exact(central_delta)
    if (dlt is None) != (eps is None) or (dlt is not None and dlt not in (0, target)):
        raise bad("central_delta", central_delta, "its delta or 0 (none only with central_epsilon)")
    assert isinstance(min_batch, int) and isinstance(rows_per_device, int)
    return CentralGuarantee(float(target), min_batch, rows_per_device, None if eps is None else float(eps),
                            None if dlt is None else float(dlt))


def marker_path(path: str | os.PathLike) -> Path:
    """The marker of the ledger at ``path``: ``<path>.created``."""
    return Path(f"{os.fspath(path)}{MARKER_SUFFIX}")


def _refused(path: Path | str, problem: str) -> LedgerError:
    return LedgerError(f"{path}: {problem}", _SOUND)


@contextmanager
def _ledger_errors(path: Path | str, doing: str) -> Iterator[None]:
    """Turn a file system or SQLite error into a :class:`LedgerError` saying what was being done."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise _refused(path, f"{doing} ({exc})") from None


def _shown(value: object) -> str:
    """``repr`` of a stored value, cut to 40 characters (a damaged file may hold anything)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _exact(text: object) -> Fraction | None:
    """``text`` as the exact rational the ledger writes (``p`` or ``p/q``), or ``None``."""
    if not isinstance(text, str) or not _EXACT.fullmatch(text):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):  # over Python's integer digit limit, or q = 0
        return None


def _checked_spend(path: Path | str, collection: object, epsilon: object, reports: object) -> tuple[Fraction, int]:
    """A stored spend row as ``(ε spent, reports)``; raise :class:`LedgerError` unless it is one the ledger writes."""
    spent = _exact(epsilon)
    if spent is None or spent < 0:
        raise _refused(path, f"collection {_shown(collection)}: the epsilon spent is {_shown(epsilon)}, "
                             "not an exact number >= 0")
    if type(reports) is not int or reports < 0:
        raise _refused(path, f"collection {_shown(collection)}: the reports count is {_shown(reports)}, "
                             "not an integer >= 0")
    if (spent == 0) != (reports == 0):
        raise _refused(path, f"collection {_shown(collection)}: epsilon spent {_shown(epsilon)} for {reports} "
                             "reports (every report costs epsilon > 0)")
    return spent, reports


def _ledger_id(secret: bytes) -> str:
    """The id a marker records: HMAC-SHA256 of a constant under the memo secret (reveals nothing of it)."""
    return hmac.digest(secret, _ID_DOMAIN, "sha256")[:16].hex()


def _staging(path: Path) -> Path:
    """A fresh temporary name next to ``path`` (same directory, so it can be linked or renamed into place)."""
    return path.with_name(f"{path.name}.new-{secrets.token_hex(8)}")


def _move_aside(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, never over an existing file (a crash leaves both names, not neither)."""
    os.link(source, target)
    os.unlink(source)


def _connect(target: str) -> sqlite3.Connection:
    """A connection in WAL mode with ``synchronous=FULL`` (a file that cannot do WAL is refused)."""
    conn = sqlite3.connect(target, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        conn.execute("PRAGMA synchronous=FULL")
        if target != IN_MEMORY and str(mode).lower() != "wal":
            raise ValidationError("ledger", "a file on a local file system (SQLite WAL mode)",
                                  "WAL mode is unavailable there")
    except BaseException:
        conn.close()
        raise
    return conn


def _initialise(conn: sqlite3.Connection, budget: Budget, reset: dict | None = None) -> bytes:
    """Create the tables, a fresh memo secret, the budget (and the record of a reset) in an empty database."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _TABLES.values():
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {_FORMAT}")
        secret = os.urandom(_SECRET_BYTES)
        conn.execute("INSERT INTO device (name, value) VALUES ('memo_secret', ?)", (secret,))
        conn.execute("INSERT INTO device (name, value) VALUES ('budget', ?)", (budget.to_bytes(),))
        if reset is not None:
            conn.execute("INSERT INTO device (name, value) VALUES ('reset', ?)", (json.dumps(reset).encode(),))
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return secret


@contextmanager
def _built_ledger(path: Path, budget: Budget, reset: dict | None = None) -> Iterator[tuple[Path, bytes]]:
    """Build a complete new ledger under a temporary name next to ``path``; yield it and its secret.

    The caller links it into place; the temporary name is removed when the block ends. Built
    whole and then linked, a ledger is never seen half-made: a zero-length file at a ledger's
    path is therefore evidence of damage, never of a creation in progress.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    building = _staging(path)
    try:
        os.close(os.open(building, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        conn = _connect(str(building))
        try:
            secret = _initialise(conn, budget, reset)
        finally:
            conn.close()  # checkpoints the WAL into the file and removes it
        yield building, secret
    finally:
        building.unlink(missing_ok=True)


def _evidence(path: Path) -> list[Path]:
    """The files that show a ledger existed at ``path``: its marker and SQLite's ``-wal``/``-shm``."""
    candidates = [marker_path(path), *(Path(f"{path}{suffix}") for suffix in SQLITE_SUFFIXES)]
    return [candidate for candidate in candidates if os.path.lexists(candidate)]


def _create_if_new(path: Path, budget: Budget) -> None:
    """Create a ledger at ``path`` if nothing there shows an earlier one; refuse if only its evidence is left."""
    if os.path.lexists(path):
        return
    evidence = _evidence(path)
    if evidence and not os.path.lexists(path):  # (the second look: another process may have just created it)
        names = ", ".join(item.name for item in evidence)
        raise _refused(path, f"the ledger is missing but files left next to it ({names}) show that one was created "
                             "here: a new ledger would let rows already reported be reported afresh")
    if not evidence:
        with _built_ledger(path, budget) as (built, _), suppress(FileExistsError):  # another process won the race
            os.link(built, path)
        fsync_directory(path.parent)


def _check_file(path: Path) -> None:
    """Refuse a ledger file that is empty or not a SQLite database, before SQLite sees it."""
    with open(path, "rb") as handle:
        head = handle.read(len(_SQLITE_HEADER))
    if not head:
        raise _refused(path, "the ledger file is empty (0 bytes): an earlier ledger was truncated or replaced")
    if head != _SQLITE_HEADER:
        raise _refused(path, "the ledger file is not a SQLite database")


def _verify(conn: sqlite3.Connection, path: Path) -> tuple[int, bytes]:
    """Check the whole ledger on one snapshot (see the module docstring); return its format and memo secret."""
    conn.execute("BEGIN")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in _TABLES_OF:
            raise _refused(path, f"it is a SQLite database of format {version}, not a ledger of format {_FORMAT}")
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        for name, statement in _TABLES_OF[version].items():
            if tables.get(name) != statement:
                raise _refused(path, f"its table {name!r} is missing or not the one the ledger creates")
        if version >= 3 and conn.execute("SELECT COUNT(*) FROM memo_report WHERE memo_key NOT IN "
                                         "(SELECT memo_key FROM memo)").fetchone()[0]:
            raise _refused(path, "a memoized report has no memo row (the ledger records both in one transaction)")
        row = conn.execute("SELECT value FROM device WHERE name = 'memo_secret'").fetchone()
        if row is None:
            raise _refused(path, "its memo secret is missing (no memoized report could be found again)")
        if not isinstance(row[0], bytes) or len(row[0]) != _SECRET_BYTES:
            raise _refused(path, f"its memo secret is {_shown(row[0])}, not {_SECRET_BYTES} random bytes")
        spends = {collection: _checked_spend(path, collection, epsilon, reports)
                  for collection, epsilon, reports in conn.execute("SELECT collection, epsilon, reports FROM spend")}
        memos = dict(conn.execute("SELECT collection, COUNT(*) FROM memo GROUP BY collection").fetchall())
        if version >= 2:
            budget = conn.execute("SELECT value FROM device WHERE name = 'budget'").fetchone()
            Budget.from_bytes(path, None if budget is None else budget[0])
            for collection, epsilon in conn.execute("SELECT collection, epsilon FROM pinned"):
                pinned = _exact(epsilon)
                if pinned is None or pinned <= 0:
                    raise _refused(path, f"collection {_shown(collection)}: its pinned epsilon is {_shown(epsilon)}, "
                                         "not an exact number > 0")
        if version >= 4:
            for collection, *stored in conn.execute(f"SELECT collection, {_CENTRAL_COLUMNS} FROM central"):
                _checked_central(path, collection, *stored)
                if spends.get(collection, (Fraction(0), 0))[1] == 0:
                    raise _refused(path, f"collection {_shown(collection)}: a central guarantee is recorded but no "
                                         "report (the ledger records it with the spend, in one transaction)")
    finally:
        conn.execute("ROLLBACK")
    for collection in [*spends, *(c for c in memos if c not in spends)]:
        reports = spends.get(collection, (Fraction(0), 0))[1]
        stored = memos.get(collection, 0)
        if stored != reports:
            raise _refused(path, f"collection {_shown(collection)}: {reports} reports counted but {stored} "
                                 "memoized (the ledger records both in one transaction)")
    return version, bytes(row[0])


def _upgrade(conn: sqlite3.Connection, budget: Budget) -> None:
    """Format 1 -> 2 -> 3 -> 4 in one transaction: (1 -> 2) store ``budget`` and pin each collection's ε at
    its spend per report; (2 -> 3) add the table of bit-set reports; (3 -> 4) add the (empty) table of
    central guarantees: which earlier reports went through a shuffler is not known, so none is recorded."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # (another process may have just upgraded it)
        if version == 1:
            conn.execute(_PINNED)
            conn.execute("INSERT INTO device (name, value) VALUES ('budget', ?)", (budget.to_bytes(),))
            pins = [(collection, str(Fraction(epsilon) / reports))
                    for collection, epsilon, reports in conn.execute("SELECT collection, epsilon, reports FROM spend")
                    if reports > 0]
            conn.executemany("INSERT INTO pinned (collection, epsilon) VALUES (?, ?)", pins)
        if version < 3:
            conn.execute(_MEMO_REPORT)
        if version < _FORMAT:
            conn.execute(_CENTRAL)
            conn.execute(f"PRAGMA user_version = {_FORMAT}")
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _write_marker(path: Path, ledger_id: str, reset: dict | None = None) -> None:
    """Write the marker of the ledger at ``path`` atomically (owner-only, fsynced)."""
    content: dict[str, object] = {"format": _MARKER_FORMAT, "ledger": path.name, "ledger_id": ledger_id,
                                  "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if reset is not None:
        content["reset"] = reset
    marker = marker_path(path)
    staging = _staging(marker)
    try:
        with os.fdopen(os.open(staging, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w", encoding="utf-8") as out:
            out.write(json.dumps(content, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, marker)
    finally:
        staging.unlink(missing_ok=True)
    fsync_directory(path.parent)


def _check_marker(path: Path, ledger_id: str) -> None:
    """Refuse a ledger its marker was not written for; write the marker of a ledger that has none."""
    marker = marker_path(path)
    try:
        data = marker.read_bytes()
    except FileNotFoundError:
        _write_marker(path, ledger_id)
        return
    try:
        recorded = json.loads(data)["ledger_id"]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise _refused(path, f"its marker {marker.name} is not a ledger marker") from None
    if recorded != ledger_id:
        raise _refused(path, f"it is not the ledger its marker {marker.name} was written for (ledger id {ledger_id}, "
                             f"marker {_shown(recorded)}): the ledger was replaced")


class LedgerTransaction:
    """One submission's view of the ledger inside its write transaction (see :meth:`PrivacyLedger.transaction`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path | str, collection: str, epsilon: Fraction,
                 budget: Fraction, spent: Fraction, reports: int):
        self._conn = conn
        self._path = path
        self._collection = collection
        self._epsilon = epsilon
        self._budget = budget
        self._spent = spent
        self._reports = reports
        self._reported_before = reports > 0

    @property
    def spent(self) -> float:
        """ε spent on the collection so far, this transaction's records included."""
        return float(self._spent)

    @property
    def reports(self) -> int:
        """Reports charged to the collection so far, this transaction's records included."""
        return self._reports

    def promisable(self) -> bool:
        """Whether :meth:`promise` records a guarantee: every report charged to the collection before this
        transaction was charged for a shuffler (it has a guarantee recorded, or it had no report)."""
        return not self._reported_before or self._conn.execute(
            "SELECT 1 FROM central WHERE collection = ?", (self._collection,)).fetchone() is not None

    def promise(self, guarantee: CentralGuarantee | None) -> CentralGuarantee | None:
        """Record the central guarantee the collection promised this submission's reports, sent through a
        shuffler (only when :meth:`promisable`, else nothing: earlier reports did not go through one), or,
        with ``None``, remove it (they are sent in clear: the aggregator knows they are this device's).
        Returns what is recorded now."""
        if guarantee is None or not self._reports or not self.promisable():
            self._conn.execute("DELETE FROM central WHERE collection = ?", (self._collection,))
            return None
        self._conn.execute(
            f"INSERT INTO central (collection, {_CENTRAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT "
            "(collection) DO UPDATE SET delta = excluded.delta, min_batch = excluded.min_batch, rows_per_device "
            "= excluded.rows_per_device, central_epsilon = excluded.central_epsilon, central_delta = "
            "excluded.central_delta", (self._collection, *guarantee._row()))
        return guarantee

    def lookup(self, memo_keys: Sequence[bytes], report_bytes: int = 0) -> dict[bytes, tuple[bytes, int | bytes]]:
        """The memoized ``(report_id, perturbed_code)`` of every key that has one (a malformed row is refused);
        ``report_bytes`` > 0: the collection's reports are bit sets of that many bytes, and the second item is
        the memoized bit set."""
        found: dict[bytes, tuple[bytes, int | bytes]] = {}
        for start in range(0, len(memo_keys), _LOOKUP_CHUNK):
            chunk = list(memo_keys[start:start + _LOOKUP_CHUNK])
            marks = ",".join("?" * len(chunk))
            query = (f"SELECT memo_key, report_id, private_code, {_MEMO_ROW_SOUND}, report FROM memo"
                     f" LEFT JOIN memo_report USING (memo_key) WHERE memo_key IN ({marks})")
            for key, report_id, code, sound, report in self._conn.execute(query, chunk):
                shaped = (report is None if not report_bytes else
                          isinstance(report, bytes) and len(report) == report_bytes and code == 0)
                if not sound or not shaped:
                    raise _refused(self._path, f"collection {self._collection!r}: a memoized report is malformed")
                found[key] = (report_id, report if report_bytes else code)
        return found

    def record(self, memo_keys: Sequence[bytes], report_ids: np.ndarray, perturbed_codes: np.ndarray) -> None:
        """Charge ε for new reports and memoize them; raise if that would exceed the budget.

        ``memo_keys`` must be new (not found by :meth:`lookup`) and distinct; ``perturbed_codes`` one
        integer per report, or one bit set per row of a 2-d uint8 array (a frequency oracle's OUE or SS
        reports). Each costs the collection's ε (basic composition). On refusal nothing is written.
        """
        count = len(memo_keys)
        total = self._spent + count * self._epsilon
        if total > self._budget:
            raise PrivacyBudgetExceeded(
                f"collection {self._collection!r}: {count} new reports at epsilon {float(self._epsilon):.6g} each "
                f"would bring the epsilon spent to {float(total):.6g}, over this device's budget of "
                f"{float(self._budget):.6g} (spent so far {float(self._spent):.6g}; basic composition)")
        if not count:
            return
        self._conn.execute(
            "INSERT INTO spend (collection, epsilon, reports) VALUES (?, ?, ?) ON CONFLICT (collection) "
            "DO UPDATE SET epsilon = excluded.epsilon, reports = excluded.reports",
            (self._collection, str(total), self._reports + count))
        # Inserted in key order: the memo's B-tree then grows at a few places instead of at
        # random pages (HMAC keys are uniform), which halves the insert time of large submissions.
        order = np.argsort(np.array(memo_keys, dtype=object))
        reports = np.asarray(perturbed_codes)[order]
        ids = np.asarray(report_ids)[order]
        codes = [0] * count if reports.ndim == 2 else reports.tolist()
        self._conn.executemany(
            "INSERT INTO memo (memo_key, collection, report_id, private_code) VALUES (?, ?, ?, ?)",
            ((memo_keys[k], self._collection, bytes(ids[i]), codes[i]) for i, k in enumerate(order.tolist())))
        if reports.ndim == 2:
            self._conn.executemany("INSERT INTO memo_report (memo_key, report) VALUES (?, ?)",
                                   ((memo_keys[k], reports[i].tobytes()) for i, k in enumerate(order.tolist())))
        self._spent, self._reports = total, self._reports + count


class PrivacyLedger:
    """A device's privacy ledger in one SQLite file (WAL, ``synchronous=FULL``) and its marker.

    One ledger may be shared by threads and processes: every submission runs in one
    ``BEGIN IMMEDIATE`` transaction.

    Parameters
    ----------
    path : str, os.PathLike or None, default None
        The ledger file; ``None`` for :func:`default_ledger_path`. A path with no ledger, no marker
        and no ``-wal``/``-shm`` gets a new ledger; an existing ledger is checked whole (module
        docstring) and refused if anything is wrong, as is a path whose ledger is gone but whose
        marker or ``-wal``/``-shm`` is left (:meth:`reset` starts over). ``":memory:"`` is
        refused: see :meth:`for_simulation`.
    budget : float or None, default None
        The ε a device may spend per collection (a finite number > 0). A new ledger stores it
        (``None``: :data:`DEFAULT_BUDGET_MULTIPLE` times each collection's ε); with an existing
        ledger it may only lower the stored budget for this session (``None``: the stored one).

    Raises
    ------
    LedgerError
        The ledger cannot be opened or created, is damaged or replaced, or is missing where its
        marker or ``-wal``/``-shm`` show one existed (:class:`~ldpsynth.shared.errors.LedgerError`).
    ValidationError
        Naming ``ledger`` (``":memory:"``, or a file system without SQLite's WAL mode) or
        ``budget`` (not a finite number > 0, or above the budget the ledger was created with).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, budget: float | None = None,
                 _in_memory: bool = False):
        self.session_budget = None if budget is None else Fraction(check_epsilon(budget, "budget"))
        self._lock = threading.RLock()
        if _in_memory:
            self.path: Path | str = IN_MEMORY
            with _ledger_errors(IN_MEMORY, "cannot open it"):
                self._conn = _connect(IN_MEMORY)
                self._secret = _initialise(self._conn, Budget.of(budget))
            self.budget = Budget.of(budget)
            return
        if path is not None and os.fspath(path) == IN_MEMORY:
            raise ValidationError("ledger", "a ledger file (an in-memory ledger forgets every report when the "
                                            "program ends, so rows could be reported afresh and averaged; "
                                            "simulations: PrivacyLedger.for_simulation)", "got ':memory:'")
        self.path = Path(path if path is not None else default_ledger_path())
        with _ledger_errors(self.path, "cannot open it"):
            _create_if_new(self.path, Budget.of(budget))
            _check_file(self.path)
            self._conn = _connect(str(self.path))
            try:
                version, self._secret = _verify(self._conn, self.path)
                _check_marker(self.path, _ledger_id(self._secret))
                if version < _FORMAT:
                    _upgrade(self._conn, Budget.of(budget))
                self.budget = Budget.from_bytes(
                    self.path, self._conn.execute("SELECT value FROM device WHERE name = 'budget'").fetchone()[0])
            except BaseException:
                self._conn.close()
                raise
        if self.session_budget is not None and self.budget.epsilon is not None \
                and self.session_budget > self.budget.epsilon:
            raise self._higher_budget(self.budget.epsilon)

    @classmethod
    def for_simulation(cls, *, budget: float | None = None) -> PrivacyLedger:
        """A ledger in memory, for simulations and tests only.

        It forgets every report when this object goes, so it protects nothing across runs (a real
        device keeps a file).

        Parameters
        ----------
        budget : float or None, default None
            The ε per collection, a finite number > 0; ``None``: :data:`DEFAULT_BUDGET_MULTIPLE`
            times each collection's ε.

        Returns
        -------
        PrivacyLedger

        Raises
        ------
        ValidationError
            Naming ``budget``: not a finite number > 0.
        """
        return cls(budget=budget, _in_memory=True)

    def _higher_budget(self, stored: Fraction) -> ValidationError:
        return ValidationError("budget", f"at most {float(stored):.6g}, the budget this ledger was created with (a "
                                         "higher one needs `ldpsynth client reset-ledger --budget EPS`, which starts "
                                         "this device over)", f"got {float(self.session_budget or 0):.6g}")

    @staticmethod
    def reset(path: str | os.PathLike | None = None, *, budget: float | None = None) -> dict:
        """Start this device over, knowingly: move the old ledger aside and create a new one that records it.

        The ledger file, its ``-wal``/``-shm`` and its marker, whatever their state, are renamed
        ``<ledger>.reset-<UTC time>`` (plus their suffix; never deleted, never overwritten), then a
        new ledger with ``budget`` (``None``: the default) is linked in and its ``device`` table
        (row ``reset``) and its marker (key ``reset``) record the time and what was moved. Run it
        with no process using the ledger.

        The device's ε spent restarts at 0 and rows it has already reported get fresh,
        independent reports that can be averaged with the old ones: after a reset only the
        server's per-credential quota (``max_rows_per_client``) bounds what this device adds.

        Parameters
        ----------
        path : str, os.PathLike or None, default None
            The ledger file (it need not exist); ``None`` for :func:`default_ledger_path`.
        budget : float or None, default None
            The new ledger's ε per collection, a finite number > 0; ``None``:
            :data:`DEFAULT_BUDGET_MULTIPLE` times each collection's ε.

        Returns
        -------
        dict
            The record: ``at`` (the UTC time), ``moved`` (old name -> new name of each file moved
            aside) and ``budget`` (the new budget, described).

        Raises
        ------
        ValidationError
            Naming ``path`` (``":memory:"``) or ``budget`` (not a finite number > 0).
        LedgerError
            A file cannot be moved aside or the new ledger cannot be created.
        """
        if path is not None and os.fspath(path) == IN_MEMORY:
            raise ValidationError("path", "a ledger file", "an in-memory ledger has nothing to reset")
        new_budget = Budget.of(budget)
        path = Path(path if path is not None else default_ledger_path())
        now = datetime.now(timezone.utc)
        aside = f"{path}.reset-{now:%Y%m%dT%H%M%S%fZ}"
        files = [suffix for suffix in ("", *SQLITE_SUFFIXES) if os.path.lexists(f"{path}{suffix}")]
        marked = os.path.lexists(marker_path(path))
        moved = {f"{path.name}{suffix}": f"{Path(aside).name}{suffix}"
                 for suffix in files + ([MARKER_SUFFIX] if marked else [])}
        record = {"at": now.isoformat(timespec="seconds"), "moved": moved, "budget": new_budget.describe()}
        with _ledger_errors(path, "cannot reset it"):
            with _built_ledger(path, new_budget, record) as (built, secret):
                for suffix in files:  # the database first: its -wal must never be gone while it is in place
                    _move_aside(Path(f"{path}{suffix}"), Path(f"{aside}{suffix}"))
                os.link(built, path)
            if marked:
                _move_aside(marker_path(path), marker_path(aside))
            _write_marker(path, _ledger_id(secret), record)
        return record

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock, _ledger_errors(self.path, "cannot read or write it"):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("COMMIT")
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")

    def budget_for(self, epsilon: float) -> float:
        """The budget of a collection released at ``epsilon`` (this session's, if it set a lower one).

        Parameters
        ----------
        epsilon : float
            The collection's ε, a finite number > 0.

        Returns
        -------
        float
            The ε the device may spend on the collection.

        Raises
        ------
        ValidationError
            Naming ``epsilon`` (not a finite number > 0) or ``budget`` (this session's budget is
            above the stored one for this collection).
        """
        return float(self._budget(Fraction(check_epsilon(epsilon, "epsilon"))))

    def _budget(self, epsilon: Fraction) -> Fraction:
        stored = self.budget.for_collection(epsilon)
        if self.session_budget is None:
            return stored
        if self.session_budget > stored:
            raise self._higher_budget(stored)
        return self.session_budget

    def _pin(self, collection: str, epsilon: Fraction) -> None:
        """Pin ``collection``'s ε at its first report; refuse a card re-issued at another ε (in the write
        transaction)."""
        row = self._conn.execute("SELECT epsilon FROM pinned WHERE collection = ?", (collection,)).fetchone()
        if row is None:
            self._conn.execute("INSERT INTO pinned (collection, epsilon) VALUES (?, ?)", (collection, str(epsilon)))
            return
        pinned = _exact(row[0])
        if pinned is None or pinned <= 0:
            raise _refused(self.path, f"collection {collection!r}: its pinned epsilon is {_shown(row[0])}, "
                                      "not an exact number > 0")
        if pinned != epsilon:
            raise CardChanged(
                f"collection {collection!r} is now released at epsilon {float(epsilon):.6g}, but this device's "
                f"reports to it were made at epsilon {float(pinned):.6g}: the same rows would get fresh reports "
                "that could be averaged with the old ones. To report to the re-issued collection, start this "
                "device over knowingly: `ldpsynth client reset-ledger` (PrivacyLedger.reset)")

    def _read_spend(self, collection: str) -> tuple[Fraction, int]:
        """``(ε spent, reports)`` of ``collection``, checked (:class:`LedgerError` if the stored row is not sound)."""
        with self._lock, _ledger_errors(self.path, "cannot read it"):
            row = self._conn.execute("SELECT epsilon, reports FROM spend WHERE collection = ?",
                                     (collection,)).fetchone()
        return _checked_spend(self.path, collection, *row) if row else (Fraction(0), 0)

    def spent(self, collection: str) -> float:
        """ε this device has spent on ``collection``.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        float
            The ε spent (0 for a collection never reported to).

        Raises
        ------
        LedgerError
            The ledger cannot be read, or its record of the collection is not one it writes.
        """
        return float(self._read_spend(collection)[0])

    def reports(self, collection: str) -> int:
        """Distinct reports this device has released to ``collection``.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        int
            The number of reports (0 for a collection never reported to).

        Raises
        ------
        LedgerError
            The ledger cannot be read, or its record of the collection is not one it writes.
        """
        return self._read_spend(collection)[1]

    def guarantees(self, collection: str) -> CentralGuarantee | None:
        """The central guarantee ``collection`` promised this device's reports, sent through a shuffler.

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        CentralGuarantee or None
            Recorded with the last submission's spend; ``None`` for a collection that is not shuffled,
            never reported to, or some of whose reports were sent in clear or before the ledger
            recorded guarantees (format 4).

        Raises
        ------
        LedgerError
            The ledger cannot be read, or its record of the collection is not one it writes.
        """
        with self._lock, _ledger_errors(self.path, "cannot read it"):
            row = self._conn.execute(f"SELECT {_CENTRAL_COLUMNS} FROM central WHERE collection = ?",
                                     (collection,)).fetchone()
        return None if row is None else _checked_central(self.path, collection, *row)

    def memo_keys(self, collection_fingerprint: bytes, public_codes: np.ndarray,
                  private_codes: np.ndarray) -> list[bytes]:
        """HMAC-SHA256 memo key of every row under the device secret.

        The message is a domain tag, the collection's fingerprint (it binds the name, the schema
        and the mechanism) and the row's public and raw private codes as little-endian uint64.

        Parameters
        ----------
        collection_fingerprint : bytes
            SHA-256 of the collection's schema and mechanism
            (:func:`~ldpsynth.client.device.collection_fingerprint`).
        public_codes : numpy.ndarray
            Integer codes ``>= 0``, shape ``(n,)`` or ``(n, m)``: each row's public codes.
        private_codes : numpy.ndarray
            Integer codes ``>= 0``, shape ``(n,)``: each row's raw (unperturbed) private code.

        Returns
        -------
        list of bytes
            One 32-byte key per row.

        Raises
        ------
        ValueError
            ``public_codes`` and ``private_codes`` have different numbers of rows.
        """
        rows = np.ascontiguousarray(np.column_stack([public_codes, private_codes]), dtype="<u8")
        width = rows.shape[1] * 8
        data = rows.tobytes()
        prefix = _DOMAIN + collection_fingerprint
        secret = self._secret
        return [hmac.digest(secret, prefix + data[i:i + width], "sha256") for i in range(0, len(data), width)]

    @contextmanager
    def transaction(self, collection: str, epsilon: float) -> Iterator[LedgerTransaction]:
        """One durable write transaction for a submission to ``collection`` released at ``epsilon``.

        Commits (fsync) when the block ends; rolls back if it raises, e.g. on
        :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded`. The first transaction for a
        collection pins its ε.

        Parameters
        ----------
        collection : str
            The collection's name.
        epsilon : float
            The ε its reports are released at, a finite number > 0.

        Yields
        ------
        LedgerTransaction
            Looks up memoized reports and records new ones (``record`` raises
            :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded` over the budget).

        Raises
        ------
        ValidationError
            Naming ``epsilon`` (not a finite number > 0) or ``budget`` (as :meth:`budget_for`).
        CardChanged
            The collection's ε differs from the one pinned at its first report
            (:class:`~ldpsynth.shared.errors.CardChanged`, a ``PrivacyBudgetExceeded``).
        LedgerError
            The ledger cannot be read or written, or a record in it is not one it writes.
        """
        eps = Fraction(check_epsilon(epsilon, "epsilon"))
        with self._write():
            self._pin(collection, eps)
            yield LedgerTransaction(self._conn, self.path, collection, eps, self._budget(eps),
                                    *self._read_spend(collection))

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> PrivacyLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The ledger's SQLite store: the tables of formats 1 to 5, the check of a whole ledger, the upgrades, and the
reads and writes of a submission (:class:`LedgerTransaction`).

The rules those writes keep are :mod:`.rules`; the file around the database (creation, marker, reset) is
:mod:`.files`. The format: docs/internals.md, ``ldpsynth.client.ledger``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import numpy as np

from ldpsynth.client.ledger.rules import (
    MEMO_KEY_BYTES,
    SECRET_BYTES,
    Budget,
    CentralGuarantee,
    central_row,
    charge,
    check_path,
    check_pinned,
    checked_central,
    checked_pin,
    checked_spend,
    may_promise,
    promised,
    refused,
    shown,
)
from ldpsynth.shared.errors import LedgerError, ValidationError
from ldpsynth.shared.reports import REPORT_ID_BYTES

__all__ = ["FORMAT", "IN_MEMORY", "LedgerTransaction", "ledger_errors", "connect", "initialise", "verify",
           "upgrade", "stored_budget", "write", "read_spend", "read_central", "pin"]

#: The format this SDK writes (``PRAGMA user_version``).
FORMAT = 5
#: SQLite's name of a database in memory: refused as a ledger path (see :meth:`PrivacyLedger.for_simulation`).
IN_MEMORY = ":memory:"

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
#: ... and of format 4: the central guarantee a shuffled collection promised the device's reports, written in
#: the transaction of the spend it belongs to (by the former rule: one group of min_batch reports) ...
_CENTRAL = ("CREATE TABLE central (collection TEXT PRIMARY KEY, delta TEXT NOT NULL, min_batch INTEGER NOT NULL,"
            " rows_per_device INTEGER NOT NULL, central_epsilon TEXT, central_delta TEXT) WITHOUT ROWID")
_CENTRAL_COLUMNS = "delta, min_batch, rows_per_device, central_epsilon, central_delta"
_TABLES_4 = {**_TABLES_3, "central": _CENTRAL}
#: ... and of format 5: the promise per party (:class:`CentralGuarantee`: the central guarantee at the pool
#: floor, F = assume_injected, NULL for a promise carried over from format 4; operator 1: it holds against the
#: aggregator's operator too), in place of ``central``; and the memos first sent sealed (present: sealed,
#: absent: in clear), written in the transaction of their memo row.
_PROMISE = ("CREATE TABLE promise (collection TEXT PRIMARY KEY, delta TEXT NOT NULL, min_batch INTEGER NOT NULL,"
            " assume_injected INTEGER, rows_per_device INTEGER NOT NULL, central_epsilon TEXT, central_delta TEXT,"
            " operator INTEGER NOT NULL) WITHOUT ROWID")
_PROMISE_COLUMNS = "delta, min_batch, assume_injected, rows_per_device, central_epsilon, central_delta, operator"
_MEMO_SEALED = "CREATE TABLE memo_sealed (memo_key BLOB PRIMARY KEY) WITHOUT ROWID"
_TABLES = {**_TABLES_3, "promise": _PROMISE, "memo_sealed": _MEMO_SEALED}
_TABLES_OF = {1: _TABLES_1, 2: _TABLES_2, 3: _TABLES_3, 4: _TABLES_4, FORMAT: _TABLES}
#: SQL condition: a memo row has the shape the ledger writes.
_MEMO_ROW_SOUND = (f"(typeof(memo_key) = 'blob' AND length(memo_key) = {MEMO_KEY_BYTES} AND typeof(report_id) = 'blob'"
                   f" AND length(report_id) = {REPORT_ID_BYTES} AND typeof(private_code) = 'integer'"
                   f" AND private_code >= 0)")


@contextmanager
def ledger_errors(path: Path | str, doing: str) -> Iterator[None]:
    """Turn a file system or SQLite error into a :class:`LedgerError` saying what was being done."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise refused(path, f"{doing} ({exc})") from None


def connect(target: str) -> sqlite3.Connection:
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


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def initialise(conn: sqlite3.Connection, budget: Budget, reset: dict | None = None) -> bytes:
    """Create the tables, a fresh memo secret, the budget (and the record of a reset) in an empty database."""
    with write(conn):
        for statement in _TABLES.values():
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {FORMAT}")
        secret = os.urandom(SECRET_BYTES)
        conn.execute("INSERT INTO device (name, value) VALUES ('memo_secret', ?)", (secret,))
        conn.execute("INSERT INTO device (name, value) VALUES ('budget', ?)", (budget.to_bytes(),))
        if reset is not None:
            conn.execute("INSERT INTO device (name, value) VALUES ('reset', ?)", (json.dumps(reset).encode(),))
    return secret


def _bad_pin(path: Path | str, collection: str, epsilon: object) -> LedgerError:
    return refused(path, f"collection {collection}: its pinned epsilon is {shown(epsilon)}, not an exact number > 0")


def _promises(conn: sqlite3.Connection, version: int) -> list[tuple]:
    """The promises a ledger of ``version`` records, as format 5's columns (format 4's ``central`` rows as
    promises of the former rule: assume_injected NULL, operator 0)."""
    if version >= 5:
        return conn.execute(f"SELECT collection, {_PROMISE_COLUMNS} FROM promise").fetchall()
    if version == 4:
        return [(collection, delta, min_batch, None, m, eps, dlt, 0) for collection, delta, min_batch, m, eps, dlt
                in conn.execute(f"SELECT collection, {_CENTRAL_COLUMNS} FROM central")]
    return []


def verify(conn: sqlite3.Connection, path: Path) -> tuple[int, bytes]:
    """Check the whole ledger on one snapshot (docs/internals.md); return its format and memo secret."""
    conn.execute("BEGIN")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in _TABLES_OF:
            raise refused(path, f"it is a SQLite database of format {version}, not a ledger of format {FORMAT}")
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        for name, statement in _TABLES_OF[version].items():
            if tables.get(name) != statement:
                raise refused(path, f"its table {name!r} is missing or not the one the ledger creates")
        if version >= 3 and conn.execute("SELECT COUNT(*) FROM memo_report WHERE memo_key NOT IN "
                                         "(SELECT memo_key FROM memo)").fetchone()[0]:
            raise refused(path, "a memoized report has no memo row (the ledger records both in one transaction)")
        row = conn.execute("SELECT value FROM device WHERE name = 'memo_secret'").fetchone()
        if row is None:
            raise refused(path, "its memo secret is missing (no memoized report could be found again)")
        if not isinstance(row[0], bytes) or len(row[0]) != SECRET_BYTES:
            raise refused(path, f"its memo secret is {shown(row[0])}, not {SECRET_BYTES} random bytes")
        spends = {collection: checked_spend(path, collection, epsilon, reports)
                  for collection, epsilon, reports in conn.execute("SELECT collection, epsilon, reports FROM spend")}
        # (memo rows, those first sent sealed) per collection; before format 5 no memo is marked sealed
        memos = {collection: (count, marked) for collection, count, marked in conn.execute(
            "SELECT collection, COUNT(*), COUNT(memo_sealed.memo_key) FROM memo LEFT JOIN memo_sealed"
            " USING (memo_key) GROUP BY collection" if version >= 5 else
            "SELECT collection, COUNT(*), 0 FROM memo GROUP BY collection")}
        if version >= 5 and conn.execute("SELECT COUNT(*) FROM memo_sealed").fetchone()[0] != sum(
                marked for _, marked in memos.values()):
            raise refused(path, "a report marked sealed has no memo row (the ledger records both in one transaction)")
        if version >= 2:
            budget = conn.execute("SELECT value FROM device WHERE name = 'budget'").fetchone()
            Budget.from_bytes(path, None if budget is None else budget[0])
            for collection, epsilon in conn.execute("SELECT collection, epsilon FROM pinned"):
                if checked_pin(epsilon) is None:
                    raise _bad_pin(path, shown(collection), epsilon)
        for collection, *stored in _promises(conn, version):
            checked_central(path, collection, *stored)
            if spends.get(collection, (Fraction(0), 0))[1] == 0:
                raise refused(path, f"collection {shown(collection)}: a central guarantee is recorded but no "
                                    "report (the ledger records it with the spend, in one transaction)")
            count, marked = memos.get(collection, (0, 0))
            if version >= 5 and marked != count:
                raise refused(path, f"collection {shown(collection)}: a central guarantee is recorded but "
                                    f"{count - marked} of its {count} memoized reports were sent in clear (the "
                                    "ledger records one only while every report went through a shuffler)")
    finally:
        conn.execute("ROLLBACK")
    for collection in [*spends, *(c for c in memos if c not in spends)]:
        reports = spends.get(collection, (Fraction(0), 0))[1]
        stored = memos.get(collection, (0, 0))[0]
        if stored != reports:
            raise refused(path, f"collection {shown(collection)}: {reports} reports counted but {stored} "
                                "memoized (the ledger records both in one transaction)")
    return version, bytes(row[0])


def upgrade(conn: sqlite3.Connection, budget: Budget) -> None:
    """Format 1 -> 2 -> 3 -> 4 -> 5 in one transaction: (1 -> 2) store ``budget`` and pin each collection's ε
    at its spend per report; (2 -> 3) add the table of bit-set reports; (3 -> 4) the central guarantees:
    which earlier reports went through a shuffler is not known, so none is recorded; (4 -> 5) the table
    ``central`` becomes ``promise``, each row kept with ``assume_injected`` NULL (promised by the former
    rule) and ``operator`` 0, and ``memo_sealed`` marks sealed exactly the memos of the collections that had a
    ``central`` row (every report of theirs went through a shuffler); every other memo is in clear."""
    with write(conn):
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
        if version < FORMAT:
            conn.execute(_PROMISE)
            conn.execute(_MEMO_SEALED)
        if version == 4:
            conn.execute(f"INSERT INTO promise (collection, {_PROMISE_COLUMNS}) SELECT collection, delta, min_batch,"
                         " NULL, rows_per_device, central_epsilon, central_delta, 0 FROM central")
            conn.execute("INSERT INTO memo_sealed (memo_key) SELECT memo_key FROM memo WHERE collection IN"
                         " (SELECT collection FROM central) ORDER BY memo_key")
            conn.execute("DROP TABLE central")
        if version < FORMAT:
            conn.execute(f"PRAGMA user_version = {FORMAT}")


def stored_budget(conn: sqlite3.Connection, path: Path | str) -> Budget:
    """The budget the ledger was created with (:class:`LedgerError` unless it is one the ledger writes)."""
    return Budget.from_bytes(path, conn.execute("SELECT value FROM device WHERE name = 'budget'").fetchone()[0])


def read_spend(conn: sqlite3.Connection, path: Path | str, collection: str) -> tuple[Fraction, int]:
    """``(ε spent, reports)`` of ``collection``, checked (:class:`LedgerError` if the stored row is not sound)."""
    row = conn.execute("SELECT epsilon, reports FROM spend WHERE collection = ?", (collection,)).fetchone()
    return checked_spend(path, collection, *row) if row else (Fraction(0), 0)


def read_central(conn: sqlite3.Connection, path: Path | str, collection: str) -> CentralGuarantee | None:
    """The promise recorded for ``collection``, checked; ``None`` if there is none."""
    row = conn.execute(f"SELECT {_PROMISE_COLUMNS} FROM promise WHERE collection = ?", (collection,)).fetchone()
    return None if row is None else checked_central(path, collection, *row)


def pin(conn: sqlite3.Connection, path: Path | str, collection: str, epsilon: Fraction) -> None:
    """Pin ``collection``'s ε at its first report; refuse a card re-issued at another ε (in a write transaction)."""
    row = conn.execute("SELECT epsilon FROM pinned WHERE collection = ?", (collection,)).fetchone()
    if row is None:
        conn.execute("INSERT INTO pinned (collection, epsilon) VALUES (?, ?)", (collection, str(epsilon)))
        return
    pinned = checked_pin(row[0])
    if pinned is None:
        raise _bad_pin(path, repr(collection), row[0])
    check_pinned(collection, pinned, epsilon)


class LedgerTransaction:
    """One submission's view of the ledger inside its write transaction (see :meth:`PrivacyLedger.transaction`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path | str, collection: str, epsilon: Fraction,
                 budget: Fraction, spent: Fraction, reports: int, sealed: bool = False):
        self._conn = conn
        self._sealed = sealed
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

    @property
    def sealed(self) -> bool:
        """Whether this submission's reports go sealed through a shuffler (else in clear)."""
        return self._sealed

    def promisable(self) -> bool:
        """Whether :meth:`promise` records a guarantee: every report charged to the collection before this
        transaction was charged for a shuffler (it has a guarantee recorded, or it had no report)."""
        return may_promise(self._reported_before, lambda: self._conn.execute(
            "SELECT 1 FROM promise WHERE collection = ?", (self._collection,)).fetchone() is not None)

    def promise(self, guarantee: CentralGuarantee | None) -> CentralGuarantee | None:
        """Record what the collection promised this submission's reports, sent sealed through a shuffler
        (only when :meth:`promisable`, else nothing: earlier reports did not go through one), or, with
        ``None`` or in clear, remove it (the aggregator knows those reports are this device's). Returns what
        is recorded now (:func:`~ldpsynth.client.ledger.rules.promised`)."""
        recorded = promised(guarantee, self._sealed, self._reports, self.promisable)
        if recorded is None:
            self._conn.execute("DELETE FROM promise WHERE collection = ?", (self._collection,))
            return None
        self._conn.execute(
            f"INSERT INTO promise (collection, {_PROMISE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
            "(collection) DO UPDATE SET delta = excluded.delta, min_batch = excluded.min_batch, assume_injected = "
            "excluded.assume_injected, rows_per_device = excluded.rows_per_device, central_epsilon = "
            "excluded.central_epsilon, central_delta = excluded.central_delta, operator = excluded.operator",
            (self._collection, *central_row(recorded)))
        return recorded

    def lookup(self, memo_keys: Sequence[bytes], report_bytes: int = 0) -> dict[bytes, tuple[bytes, int | bytes]]:
        """The memoized ``(report_id, perturbed_code)`` of every key that has one (a malformed row is refused);
        ``report_bytes`` > 0: the collection's reports are bit sets of that many bytes, and the second item is
        the memoized bit set.

        Raises :class:`ValidationError` naming ``rows`` if any was first sent the other way (sealed or in
        clear) than this submission's (the memo path rule, :func:`~ldpsynth.client.ledger.rules.check_path`)."""
        found: dict[bytes, tuple[bytes, int | bytes]] = {}
        switched = 0
        for start in range(0, len(memo_keys), _LOOKUP_CHUNK):
            chunk = list(memo_keys[start:start + _LOOKUP_CHUNK])
            marks = ",".join("?" * len(chunk))
            query = (f"SELECT memo_key, report_id, private_code, {_MEMO_ROW_SOUND}, report,"
                     " memo_sealed.memo_key IS NOT NULL FROM memo LEFT JOIN memo_report USING (memo_key)"
                     f" LEFT JOIN memo_sealed USING (memo_key) WHERE memo_key IN ({marks})")
            for key, report_id, code, sound, report, sealed in self._conn.execute(query, chunk):
                shaped = (report is None if not report_bytes else
                          isinstance(report, bytes) and len(report) == report_bytes and code == 0)
                if not sound or not shaped:
                    raise refused(self._path, f"collection {self._collection!r}: a memoized report is malformed")
                found[key] = (report_id, report if report_bytes else code)
                switched += bool(sealed) != self._sealed
        check_path(self._collection, self._sealed, switched)
        return found

    def record(self, memo_keys: Sequence[bytes], report_ids: np.ndarray, perturbed_codes: np.ndarray) -> None:
        """Charge ε for new reports and memoize them, each with its path (sealed: marked in ``memo_sealed``);
        raise if that would exceed the budget.

        ``memo_keys`` must be new (not found by :meth:`lookup`) and distinct; ``perturbed_codes`` one
        integer per report, or one bit set per row of a 2-d uint8 array (a frequency oracle's OUE or SS
        reports). Each costs the collection's ε (basic composition). On refusal nothing is written.
        """
        count = len(memo_keys)
        total = charge(self._collection, self._spent, self._epsilon, self._budget, count)
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
        if self._sealed:
            self._conn.executemany("INSERT INTO memo_sealed (memo_key) VALUES (?)",
                                   ((memo_keys[k],) for k in order.tolist()))
        self._spent, self._reports = total, self._reports + count

"""The on-device privacy ledger: ε spent per collection, the budget, and the memoized reports.

Privacy semantics (design.md §4):

* **Basic composition.** Every row is released by mechanism E at the collection's delivered ε
  (the card's ``epsilon``, seed 000 eq. 16: the likelihood ratio of any two inputs is at most
  :math:`e^{\\epsilon}`). A device that reports :math:`r` distinct rows to a collection has spent
  :math:`r\\,\\epsilon`. The ledger keeps that sum exactly (as a rational: every float is one), so
  rounding can never under-count it.
* **Budget.** A submission whose new rows would take the sum over the device's per-collection
  budget is refused whole with :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded`: nothing
  is recorded and nothing is sent. The budget is ``budget`` (an ε, the same for every
  collection) or, by default, :data:`DEFAULT_BUDGET_MULTIPLE` times the collection's ε, i.e. ten
  distinct rows per device and collection.
* **Memoization** (RAPPOR's *permanent randomized response*). The perturbed report of a row is
  drawn once per (collection, public attributes, private value) and then reused: re-reporting
  the same row sends the same perturbed code with the same report id (so the server
  deduplicates it) and costs no ε, so repeated reports cannot be averaged to strip the noise.
  The memo is keyed by HMAC-SHA256 under a random 256-bit per-device secret stored in the
  ledger, not by the raw row: the table alone (an export, a log) reveals no private value. (A
  holder of the whole file has the secret too and can test guesses; the file is created
  readable by its owner only.)
* **Spend before send.** The spend and the memo of a submission are written in one SQLite
  transaction (WAL, ``synchronous=FULL``) that commits *before* any report leaves the device,
  so a crash at any moment can only over-count ε, never under-count it; re-running the
  submission resends the memoized reports at no cost.
"""

from __future__ import annotations

import hmac
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import numpy as np

from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.validation import check_epsilon

#: Environment variable naming the default ledger file.
LEDGER_ENV = "LDPSYNTH_LEDGER"
#: Default per-collection budget, in multiples of the collection's ε.
DEFAULT_BUDGET_MULTIPLE = 10
#: Path that keeps the ledger in memory (simulations only: nothing survives the process).
IN_MEMORY = ":memory:"

_FORMAT = 1
_SECRET_BYTES = 32
_DOMAIN = b"ldpsynth-memo/1"
_LOOKUP_CHUNK = 500
_TABLES = (
    "CREATE TABLE IF NOT EXISTS device (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS spend (collection TEXT PRIMARY KEY, epsilon TEXT NOT NULL,"
    " reports INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS memo (memo_key BLOB PRIMARY KEY, collection TEXT NOT NULL,"
    " report_id BLOB NOT NULL, private_code INTEGER NOT NULL) WITHOUT ROWID",
)


def default_ledger_path() -> Path:
    """``$LDPSYNTH_LEDGER``, else ``$XDG_DATA_HOME/ldpsynth/ledger.sqlite`` (``~/.local/share`` by default)."""
    explicit = os.environ.get(LEDGER_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "ldpsynth" / "ledger.sqlite"


def _create_private_file(path: Path) -> None:
    """Create ``path`` (and its folder) readable and writable by the owner only, if it is new."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


class LedgerTransaction:
    """One submission's view of the ledger inside its write transaction (see :meth:`PrivacyLedger.transaction`)."""

    def __init__(self, conn: sqlite3.Connection, collection: str, epsilon: Fraction, budget: Fraction):
        self._conn = conn
        self._collection = collection
        self._epsilon = epsilon
        self._budget = budget
        row = conn.execute("SELECT epsilon, reports FROM spend WHERE collection = ?", (collection,)).fetchone()
        self._spent = Fraction(row[0]) if row else Fraction(0)
        self._reports = int(row[1]) if row else 0

    @property
    def spent(self) -> float:
        """ε spent on the collection so far, this transaction's records included."""
        return float(self._spent)

    def lookup(self, memo_keys: Sequence[bytes]) -> dict[bytes, tuple[bytes, int]]:
        """The memoized ``(report_id, perturbed_code)`` of every key that has one."""
        found: dict[bytes, tuple[bytes, int]] = {}
        for start in range(0, len(memo_keys), _LOOKUP_CHUNK):
            chunk = list(memo_keys[start:start + _LOOKUP_CHUNK])
            marks = ",".join("?" * len(chunk))
            query = f"SELECT memo_key, report_id, private_code FROM memo WHERE memo_key IN ({marks})"
            for key, report_id, code in self._conn.execute(query, chunk):
                found[key] = (report_id, int(code))
        return found

    def record(self, memo_keys: Sequence[bytes], report_ids: np.ndarray, perturbed_codes: np.ndarray) -> None:
        """Charge ε for new reports and memoize them; raise if that would exceed the budget.

        ``memo_keys`` must be new (not found by :meth:`lookup`) and distinct. Each costs the
        collection's ε (basic composition). On refusal nothing is written.
        """
        count = len(memo_keys)
        total = self._spent + count * self._epsilon
        if total > self._budget:
            raise PrivacyBudgetExceeded(
                f"collection {self._collection!r}: {count} new reports at epsilon {float(self._epsilon):.6g} each "
                f"would bring the epsilon spent to {float(total):.6g}, over this device's budget of "
                f"{float(self._budget):.6g} (spent so far {float(self._spent):.6g}; basic composition, design.md §4)")
        if not count:
            return
        self._conn.execute(
            "INSERT INTO spend (collection, epsilon, reports) VALUES (?, ?, ?) ON CONFLICT (collection) "
            "DO UPDATE SET epsilon = excluded.epsilon, reports = excluded.reports",
            (self._collection, str(total), self._reports + count))
        # Inserted in key order: the memo's B-tree then grows at a few places instead of at
        # random pages (HMAC keys are uniform), which halves the insert time of large submissions.
        order = np.argsort(np.array(memo_keys, dtype=object))
        ids, codes = np.asarray(report_ids)[order], np.asarray(perturbed_codes)[order].tolist()
        self._conn.executemany(
            "INSERT INTO memo (memo_key, collection, report_id, private_code) VALUES (?, ?, ?, ?)",
            ((memo_keys[k], self._collection, bytes(ids[i]), codes[i]) for i, k in enumerate(order.tolist())))
        self._spent, self._reports = total, self._reports + count


class PrivacyLedger:
    """A device's privacy ledger in one SQLite file (WAL, ``synchronous=FULL``).

    Parameters
    ----------
    path:
        The ledger file; ``None`` for :func:`default_ledger_path`; :data:`IN_MEMORY` for a
        ledger that lives only as long as this object (simulations: it protects nothing
        across runs, say so).
    budget:
        The ε a device may spend per collection (a finite number > 0); ``None`` for
        :data:`DEFAULT_BUDGET_MULTIPLE` times the collection's ε.

    One ledger may be shared by threads and processes: every submission runs in one
    ``BEGIN IMMEDIATE`` transaction.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, budget: float | None = None):
        self.budget = None if budget is None else check_epsilon(budget, "budget")
        self.path = IN_MEMORY if path == IN_MEMORY else Path(path if path is not None else default_ledger_path())
        self._lock = threading.RLock()
        try:
            if self.path != IN_MEMORY:
                _create_private_file(self.path)
            self._conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA synchronous=FULL")
            if self.path != IN_MEMORY and str(mode).lower() != "wal":
                raise ValidationError("ledger", "a file on a local file system (SQLite WAL mode)",
                                      "WAL mode is unavailable there")
            self._secret = self._initialise()
        except (OSError, sqlite3.Error) as exc:
            raise ValidationError("ledger", "a writable SQLite ledger file", f"cannot open it ({exc})") from None

    def _initialise(self) -> bytes:
        with self._write():
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, _FORMAT):
                raise ValidationError("ledger", f"a ledger of format {_FORMAT}", f"format {version}")
            for statement in _TABLES:
                self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version = {_FORMAT}")
            self._conn.execute("INSERT OR IGNORE INTO device (name, value) VALUES ('memo_secret', ?)",
                               (os.urandom(_SECRET_BYTES),))
            return bytes(self._conn.execute("SELECT value FROM device WHERE name = 'memo_secret'").fetchone()[0])

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("COMMIT")
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")

    def budget_for(self, epsilon: float) -> float:
        """The budget of a collection released at ``epsilon``."""
        return float(self._budget(epsilon))

    def _budget(self, epsilon: float) -> Fraction:
        if self.budget is not None:
            return Fraction(self.budget)
        return DEFAULT_BUDGET_MULTIPLE * Fraction(check_epsilon(epsilon, "epsilon"))

    def spent(self, collection: str) -> float:
        """ε this device has spent on ``collection``."""
        with self._lock:
            row = self._conn.execute("SELECT epsilon FROM spend WHERE collection = ?", (collection,)).fetchone()
        return float(Fraction(row[0])) if row else 0.0

    def reports(self, collection: str) -> int:
        """Distinct reports this device has released to ``collection``."""
        with self._lock:
            row = self._conn.execute("SELECT reports FROM spend WHERE collection = ?", (collection,)).fetchone()
        return int(row[0]) if row else 0

    def memo_keys(self, collection_fingerprint: bytes, public_codes: np.ndarray,
                  private_codes: np.ndarray) -> list[bytes]:
        """HMAC-SHA256 memo key of every row under the device secret.

        The message is a domain tag, the collection's fingerprint (it binds the name, the schema
        and the mechanism) and the row's public and raw private codes as little-endian uint64.
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
        :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded`.
        """
        eps = Fraction(check_epsilon(epsilon, "epsilon"))
        with self._write():
            yield LedgerTransaction(self._conn, collection, eps, self._budget(epsilon))

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "PrivacyLedger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

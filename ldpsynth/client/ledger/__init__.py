"""The on-device privacy ledger: ε spent per collection, the budget, the memoized reports (each with the path
it was first sent by: sealed or in clear), and what each shuffled collection promised, per party.

:class:`PrivacyLedger` composes the rules (:mod:`.rules`: budget, exact composition, pins, what may be
promised, the memo path, memo keys), the SQLite store (:mod:`.store`: formats, checks, upgrades, transactions) and the
file around it (:mod:`.files`: creation, marker, reset). The math and the reasoning behind it:
docs/internals.md, ``ldpsynth.client.ledger``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import numpy as np

from ldpsynth.client.ledger import rules, store
from ldpsynth.client.ledger.files import LEDGER_ENV, default_ledger_path, marker_path, open_file, reset_file
from ldpsynth.client.ledger.rules import DEFAULT_BUDGET_MULTIPLE, Budget, CentralGuarantee
from ldpsynth.client.ledger.store import IN_MEMORY, LedgerTransaction
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import ROUND_KEY_CONTEXT
from ldpsynth.shared.validation import check_epsilon
from ldpsynth.shared.wide.collection import VIEW_KEY_TAG

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


class PrivacyLedger:
    """A device's privacy ledger in one SQLite file (WAL, ``synchronous=FULL``) and its marker.

    One ledger may be shared by threads and processes: every submission runs in one
    ``BEGIN IMMEDIATE`` transaction.

    Parameters
    ----------
    path : str, os.PathLike or None, default None
        The ledger file; ``None`` for :func:`default_ledger_path`. A path with no ledger, no marker
        and no ``-wal``/``-shm`` gets a new ledger; an existing ledger is checked whole
        (docs/internals.md) and refused if anything is wrong, as is a path whose ledger is gone but whose
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
            self.budget = Budget.of(budget)
            with store.ledger_errors(IN_MEMORY, "cannot open it"):
                self._conn = store.connect(IN_MEMORY)
                self._secret = store.initialise(self._conn, self.budget)
            return
        if path is not None and os.fspath(path) == IN_MEMORY:
            raise ValidationError("ledger", "a ledger file (an in-memory ledger forgets every report when the "
                                            "program ends, so rows could be reported afresh and averaged; "
                                            "simulations: PrivacyLedger.for_simulation)", "got ':memory:'")
        self.path = Path(path if path is not None else default_ledger_path())
        self._conn, self._secret, self.budget = open_file(self.path, Budget.of(budget))
        self.budget.check_session(self.session_budget)

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
        return reset_file(Path(path if path is not None else default_ledger_path()), new_budget)

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
        eps = Fraction(check_epsilon(epsilon, "epsilon"))
        return float(self.budget.effective(eps, self.session_budget))

    def _read_spend(self, collection: str) -> tuple[Fraction, int]:
        with self._lock, store.ledger_errors(self.path, "cannot read it"):
            return store.read_spend(self._conn, self.path, collection)

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
        """What ``collection`` promised this device's reports, sent through a shuffler, per party.

        The central guarantee at the pool floor against analysts, and against the aggregator's operator
        when ``operator``; the shuffler gets the local guarantee (:class:`CentralGuarantee`).

        Parameters
        ----------
        collection : str
            The collection's name.

        Returns
        -------
        CentralGuarantee or None
            Recorded with the last submission's spend; ``None`` for a collection that is not shuffled,
            never reported to, or some of whose reports were sent in clear or before the ledger
            recorded guarantees (format 4). A promise carried over from format 4 has
            ``assume_injected`` ``None`` and ``operator`` ``False`` until the next sealed submission.

        Raises
        ------
        LedgerError
            The ledger cannot be read, or its record of the collection is not one it writes.
        """
        with self._lock, store.ledger_errors(self.path, "cannot read it"):
            return store.read_central(self._conn, self.path, collection)

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
        return rules.memo_keys(self._secret, collection_fingerprint, public_codes, private_codes)

    def view_key(self, collection: str) -> bytes:
        """This device's key for the view assignment of the wide collection ``collection``.

        :func:`.rules.device_key` with the tag :data:`~ldpsynth.shared.wide.collection.VIEW_KEY_TAG`.

        Parameters
        ----------
        collection : str
            The wide collection's name.

        Returns
        -------
        bytes
            32 bytes, the same for the ledger's life.
        """
        return rules.device_key(self._secret, VIEW_KEY_TAG, collection)

    def round_key(self, collection: str) -> bytes:
        """This device's round key for the discovery collection ``collection`` (the parent's name, not a round's).

        :func:`.rules.device_key` with :data:`~ldpsynth.shared.heavy_hitters.collection.ROUND_KEY_CONTEXT`. The
        discovery's salt maps it to the one round the device reports in
        (:meth:`~ldpsynth.shared.heavy_hitters.collection.DiscoverySchema.device_round`).

        Parameters
        ----------
        collection : str
            The discovery collection's name.

        Returns
        -------
        bytes
            32 bytes, the same for the ledger's life.
        """
        return rules.device_key(self._secret, ROUND_KEY_CONTEXT, collection)

    @contextmanager
    def transaction(self, collection: str, epsilon: float, *, sealed: bool = False) -> Iterator[LedgerTransaction]:
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
        sealed : bool, default False
            Whether the submission's reports go sealed through a shuffler (else in clear): new reports are
            memoized with that path, a memoized one first sent the other way is refused (``lookup`` raises
            :class:`~ldpsynth.shared.errors.ValidationError` naming ``rows``), and only a sealed
            submission records a promise.

        Yields
        ------
        LedgerTransaction
            Looks up memoized reports (``lookup`` refuses one first sent the other way) and records new
            ones (``record`` raises :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded` over the budget).

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
        with self._lock, store.ledger_errors(self.path, "cannot read or write it"), store.write(self._conn):
            store.pin(self._conn, self.path, collection, eps)
            yield LedgerTransaction(self._conn, self.path, collection, eps,
                                    self.budget.effective(eps, self.session_budget), *self._read_spend(collection),
                                    sealed=sealed)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> PrivacyLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One shard of the synthetic database: an embedded SQLite file, written by one owner.

Reliability (design.md §5)
--------------------------
* **Durable before acknowledged.** :meth:`ShardStore.commit` writes a whole group of batches in
  one transaction (WAL, ``synchronous=FULL``: the WAL is fsynced before ``COMMIT`` returns)
  and only then returns; the server acknowledges a batch after every shard holding part of it
  returned. A SIGKILL at any moment leaves each transaction either wholly there or wholly
  absent.
* **Exactly once.** A report id is stored at most once per collection: ids already stored
  (:class:`~ldpsynth.aggregator.idindex.IdIndex`, rebuilt from this file at open) and repeats
  inside the group are counted as duplicates and not written — the semantics of
  ``INSERT OR IGNORE`` on the id. Rows are routed to shards by id, so this is exact overall.
* **One writer.** The shard holds an exclusive ``flock`` on ``<file>.lock`` while open; a new
  owner (a restarted actor, a restarted server) waits for the old process to be gone before
  it reads the file, so its in-memory index and counts cannot miss a late commit.
* **Quota counters in the same transaction.** Each commit adds the newly stored reports of a
  batch to ``quota(collection, credential)`` in the transaction that stores them, so the
  counters equal what is stored even across crashes. Reports carry no credential: the
  ``segments`` table has no credential column, and neither table holds tokens, peer
  addresses or raw values.

Layout
------
Reports are appended in columnar *segments*, one row per (group commit, collection) holding
the new reports' ids, public keys and perturbed private codes as little-endian blobs (the
smallest unsigned width fitting the domain), sorted by report id so that a segment keeps no
arrival order. Appending is sequential I/O (a B-tree keyed by random ids would rewrite most of
its pages at every commit), and scans read whole numpy columns. A segment does hold the reports
committed together, often one batch and so often one device's perturbed rows; the ε guarantee
is per row (a device's rows compose, design.md §4) and does not rest on rows being unlinkable.

:class:`ShardReader` opens a shard file read-only (any process on the same machine, while the
owner writes): it iterates the stored rows, counts them and verifies the file.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.reports import REPORT_ID_BYTES
from ldpsynth.shared.schema import Schema

from .idindex import IdIndex, SortedIds, repeats, sort_ids
from .pairs import PairCounts
from .stats import StatsAccumulator, SufficientStats

SHARD_FORMAT = "ldpsynth.aggregator-shard/1"
#: How long a new owner waits for the previous owner of a shard file to exit.
DEFAULT_LOCK_TIMEOUT = 60.0
_BUSY_TIMEOUT_MS = 10_000

_DDL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS collections(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    card_json TEXT NOT NULL,
    public_dtype TEXT NOT NULL,
    private_dtype TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments(
    seq INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    n INTEGER NOT NULL CHECK (n > 0),
    report_ids BLOB NOT NULL CHECK (length(report_ids) = 16 * n),
    public_keys BLOB NOT NULL,
    private_codes BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS segments_by_collection ON segments(collection_id, seq);
CREATE TABLE IF NOT EXISTS quota(
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    credential TEXT NOT NULL,
    used INTEGER NOT NULL CHECK (used >= 0),
    PRIMARY KEY (collection_id, credential)) WITHOUT ROWID;
"""

QuotaKey = tuple[str, str]  # (collection, credential id)


class StoreError(LdpsynthError):
    """A shard file cannot be opened or does not match the configuration."""


def code_dtype(size: int) -> np.dtype:
    """Smallest little-endian unsigned integer type holding codes ``0 .. size-1``."""
    for dtype in ("u1", "<u2", "<u4"):
        if size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype("<u8")


@dataclass(frozen=True)
class Segment:
    """Reports of one batch bound for one shard (the unit the server hands to a group commit).

    ``credential`` is only used to charge the quota counter; it is not stored with the rows.
    """

    collection: str
    credential: str
    report_ids: np.ndarray  # (n, 16) uint8
    public_keys: np.ndarray  # (n,) int64
    private_codes: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])


@dataclass(frozen=True)
class CommitOutcome:
    """What a group commit did.

    ``results[i]`` is ``(accepted, duplicates)`` of the i-th segment; ``quota`` the shard's
    counters (absolute, after the commit) of the credentials the commit charged.
    """

    results: tuple[tuple[int, int], ...]
    quota: dict[QuotaKey, int]


@dataclass(frozen=True)
class RowChunk:
    """Stored reports of one collection, a chunk at a time (int64 columns, ids ``(n, 16)`` uint8)."""

    report_ids: np.ndarray
    public_keys: np.ndarray
    private_codes: np.ndarray

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])

    def public_codes(self, schema: Schema) -> np.ndarray:
        """``(n, m)`` codes of the public attributes (schema order) decoded from the keys."""
        digits = schema.public_digits(self.public_keys)
        columns = [digits[a.name] for a in schema.public_attributes]
        return np.column_stack(columns) if columns else np.zeros((len(self), 0), np.int64)


@dataclass(frozen=True)
class _Collection:
    id: int
    card: MechanismCard
    public_dtype: np.dtype
    private_dtype: np.dtype


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    uri = f"file:{path}?mode=ro" if read_only else f"file:{path}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    return conn


def _load_collections(conn: sqlite3.Connection) -> dict[str, _Collection]:
    rows = conn.execute("SELECT id, name, card_json, public_dtype, private_dtype FROM collections").fetchall()
    return {name: _Collection(cid, MechanismCard.from_json(card), np.dtype(pub), np.dtype(priv))
            for cid, name, card, pub, priv in rows}


def _read_rows(conn: sqlite3.Connection, coll: _Collection) -> Iterator[RowChunk]:
    cursor = conn.execute("SELECT n, report_ids, public_keys, private_codes FROM segments "
                          "WHERE collection_id = ? ORDER BY seq", (coll.id,))
    for n, ids, keys, codes in cursor:
        yield RowChunk(np.frombuffer(ids, np.uint8).reshape(n, REPORT_ID_BYTES),
                       np.frombuffer(keys, coll.public_dtype).astype(np.int64),
                       np.frombuffer(codes, coll.private_dtype).astype(np.int64))


def _quota_usage(conn: sqlite3.Connection) -> dict[QuotaKey, int]:
    rows = conn.execute("SELECT c.name, q.credential, q.used FROM quota q JOIN collections c ON c.id = q.collection_id")
    return {(name, credential): int(used) for name, credential, used in rows}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_cards(path: Path, stored: Mapping[str, MechanismCard], cards: Mapping[str, str]) -> None:
    """Every configured collection already in a shard file must keep its card (schema and ε):
    its stored codes mean nothing under another domain."""
    for name, card_json in cards.items():
        card = MechanismCard.from_json(card_json)
        if card.schema.name != name:
            raise StoreError(f"collection {name!r}: its card names the schema {card.schema.name!r}")
        if name in stored and stored[name].dumps() != card.dumps():
            raise StoreError(f"collection {name!r} in {path} was created with a different mechanism card "
                             "(schema or epsilon); serve it with its original card")


def check_shard_files(paths: Sequence[Path], cards: Mapping[str, str]) -> None:
    """:func:`check_cards` on the existing files of a data directory, read-only (lets a server
    report a mismatch before it starts any shard owner)."""
    for path in paths:
        if path.exists():
            with ShardReader(path) as reader:
                check_cards(path, reader.collections(), cards)


class ShardReader:
    """Read-only view of a shard file (safe while its owner writes: WAL readers see a snapshot)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise StoreError(f"shard file {self.path} does not exist")
        self._conn = _connect(self.path, read_only=True)
        self._collections = _load_collections(self._conn)

    def __enter__(self) -> "ShardReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _collection(self, name: str) -> _Collection:
        try:
            return self._collections[name]
        except KeyError:
            raise StoreError(f"collection {name!r} is not in shard file {self.path}") from None

    def collections(self) -> dict[str, MechanismCard]:
        """The collections this shard file holds, with their mechanism cards."""
        return {name: c.card for name, c in self._collections.items()}

    def rows(self, collection: str) -> Iterator[RowChunk]:
        """The stored reports of ``collection``, one chunk per stored segment."""
        return _read_rows(self._conn, self._collection(collection))

    def row_count(self, collection: str) -> int:
        (count,) = self._conn.execute("SELECT coalesce(sum(n), 0) FROM segments WHERE collection_id = ?",
                                      (self._collection(collection).id,)).fetchone()
        return int(count)

    def quota_usage(self) -> dict[QuotaKey, int]:
        """Stored reports per (collection, credential)."""
        return _quota_usage(self._conn)

    def verify(self) -> list[str]:
        """Problems found (empty: all good): ``PRAGMA integrity_check``, column lengths, repeated
        report ids, and quota counters that do not add up to the stored rows."""
        problems = [row[0] for row in self._conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
        usage = self.quota_usage()
        for name, coll in self._collections.items():
            bad = [seq for seq, n, pub_len, priv_len in self._conn.execute(
                "SELECT seq, n, length(public_keys), length(private_codes) FROM segments WHERE collection_id = ?",
                (coll.id,)) if pub_len != n * coll.public_dtype.itemsize or priv_len != n * coll.private_dtype.itemsize]
            if bad:
                problems.append(f"{name}: segments {bad[:10]} have columns of the wrong length")
                continue
            ids = [c.report_ids for c in self.rows(name)]
            total = sum(len(i) for i in ids)
            if ids and repeats(sort_ids(np.concatenate(ids))).any():
                problems.append(f"{name}: a report id is stored more than once")
            charged = sum(v for (c, _), v in usage.items() if c == name)
            if charged != total:
                problems.append(f"{name}: quota counters sum to {charged}, {total} rows stored")
        return problems


class ShardStore:
    """The owner of one shard file: group commits, deduplication, counts, quota counters.

    Parameters
    ----------
    path:
        The SQLite file (created if missing, with ``<path>.lock`` beside it).
    cards:
        Collection name -> mechanism card JSON, for every collection this server serves. A
        collection already in the file must have the same card (same schema and ε), else
        :class:`StoreError`: stored codes would be read against the wrong domain.
    lock_timeout:
        Seconds to wait for a previous owner to release the file.
    """

    def __init__(self, path: str | Path, cards: Mapping[str, str], lock_timeout: float = DEFAULT_LOCK_TIMEOUT):
        self.path = Path(path)
        self._lock_fd = self._acquire_lock(lock_timeout)
        try:
            self._conn = _connect(self.path, read_only=False)
            try:
                self._open(cards)
            except BaseException:
                self._conn.close()
                raise
        except BaseException:
            os.close(self._lock_fd)
            raise

    # ----- opening ----------------------------------------------------------------------------
    def _acquire_lock(self, timeout: float) -> int:
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StoreError(f"shard file {self.path} is still held by another process "
                                     f"after {timeout:g} s") from None
                time.sleep(0.05)

    def _open(self, cards: Mapping[str, str]) -> None:
        conn = self._conn
        if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise StoreError(f"shard file {self.path}: cannot switch to WAL mode")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _DDL.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)", (SHARD_FORMAT,))
            (fmt,) = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if fmt != SHARD_FORMAT:
                raise StoreError(f"shard file {self.path} has format {fmt!r}, expected {SHARD_FORMAT!r}")
            self._register(cards)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        # The WAL file now exists and stays while we hold the connection: make its directory
        # entry durable too, so a power loss cannot drop the file holding fresh commits.
        _fsync_dir(self.path.parent)
        self._collections = {name: c for name, c in _load_collections(conn).items() if name in cards}
        self._index: dict[str, IdIndex] = {}
        self._stats: dict[str, StatsAccumulator] = {}
        self._pairs: dict[tuple[str, str, str, str], tuple[int, PairCounts]] = {}
        for name, coll in self._collections.items():
            self._index[name] = index = IdIndex()
            self._stats[name] = acc = StatsAccumulator(coll.card.schema.public_domain_size,
                                                       coll.card.schema.private_domain_size)
            ids = []
            for chunk in _read_rows(conn, coll):
                acc.add(chunk.public_keys, chunk.private_codes)
                ids.append(chunk.report_ids)
            if ids:
                index.add(sort_ids(np.concatenate(ids)))

    def _register(self, cards: Mapping[str, str]) -> None:
        existing = _load_collections(self._conn)
        check_cards(self.path, {name: c.card for name, c in existing.items()}, cards)
        for name, card_json in cards.items():
            if name not in existing:
                card = MechanismCard.from_json(card_json)
                self._conn.execute(
                    "INSERT INTO collections(name, card_json, public_dtype, private_dtype) VALUES (?, ?, ?, ?)",
                    (name, card.dumps(), code_dtype(card.schema.public_domain_size).str,
                     code_dtype(card.schema.private_domain_size).str))

    def close(self) -> None:
        """Close the file and release the lock (a later owner may open it)."""
        if self._lock_fd >= 0:
            self._conn.close()
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _collection(self, name: str) -> _Collection:
        try:
            return self._collections[name]
        except KeyError:
            raise StoreError(f"collection {name!r} is not served by shard {self.path.name}") from None

    # ----- writing ----------------------------------------------------------------------------
    def commit(self, segments: Sequence[Segment]) -> CommitOutcome:
        """Store the new reports of ``segments`` in one durable transaction (a group commit).

        Returns, per segment, how many of its reports were newly stored and how many were
        duplicates (already stored, or repeated earlier in the group). In-memory counts and
        the id index change only after ``COMMIT`` succeeded; on any error the transaction is
        rolled back and nothing changes.
        """
        results: list[tuple[int, int]] = [(0, 0)] * len(segments)
        charges: dict[QuotaKey, int] = defaultdict(int)
        by_collection: dict[str, list[int]] = defaultdict(list)
        for i, seg in enumerate(segments):
            by_collection[seg.collection].append(i)
        writes: list[tuple[str, SortedIds, RowChunk]] = []
        for name, members in by_collection.items():
            self._collection(name)
            ids = np.concatenate([segments[i].report_ids for i in members])
            ordered = sort_ids(ids)
            new_sorted = ~repeats(ordered) & ~self._index[name].contains(ordered)
            new = np.empty_like(new_sorted)
            new[ordered.order] = new_sorted
            start = 0
            for i in members:
                n = len(segments[i])
                accepted = int(new[start:start + n].sum())
                results[i] = (accepted, n - accepted)
                charges[(name, segments[i].credential)] += accepted
                start += n
            if new_sorted.any():
                # Stored in id order: a segment keeps no trace of arrival order.
                rows = ordered.order[new_sorted]
                keys = np.concatenate([segments[i].public_keys for i in members])[rows]
                codes = np.concatenate([segments[i].private_codes for i in members])[rows]
                stored = SortedIds(rows, ordered.hi[new_sorted], ordered.lo[new_sorted])
                writes.append((name, stored, RowChunk(ids[rows], keys, codes)))
        quota = self._write([(name, chunk) for name, _, chunk in writes], {k: v for k, v in charges.items() if v})
        for name, stored, chunk in writes:
            self._index[name].add(stored)
            self._stats[name].add(chunk.public_keys, chunk.private_codes)
        return CommitOutcome(tuple(results), quota)

    def _write(self, writes: list[tuple[str, RowChunk]], charges: Mapping[QuotaKey, int]) -> dict[QuotaKey, int]:
        if not writes:
            return {}
        conn = self._conn
        quota: dict[QuotaKey, int] = {}
        conn.execute("BEGIN IMMEDIATE")
        try:
            for name, chunk in writes:
                coll = self._collections[name]
                conn.execute(
                    "INSERT INTO segments(collection_id, n, report_ids, public_keys, private_codes) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (coll.id, len(chunk), np.ascontiguousarray(chunk.report_ids).tobytes(),
                     chunk.public_keys.astype(coll.public_dtype).tobytes(),
                     chunk.private_codes.astype(coll.private_dtype).tobytes()))
            for (name, credential), count in charges.items():
                (used,) = conn.execute(
                    "INSERT INTO quota(collection_id, credential, used) VALUES (?, ?, ?) "
                    "ON CONFLICT(collection_id, credential) DO UPDATE SET used = used + excluded.used "
                    "RETURNING used", (self._collections[name].id, credential, count)).fetchone()
                quota[(name, credential)] = int(used)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return quota

    # ----- reading ----------------------------------------------------------------------------
    def count_existing(self, collection: str, report_ids: np.ndarray) -> int:
        """How many of ``report_ids`` are already stored (for quota admission)."""
        self._collection(collection)
        return int(self._index[collection].contains(sort_ids(report_ids)).sum())

    def stats(self, collection: str) -> SufficientStats:
        """Sufficient statistics of ``collection`` in this shard (from memory)."""
        self._collection(collection)
        return self._stats[collection].snapshot()

    def sorted_rows(self, collection: str) -> RowChunk:
        """Every stored report of ``collection`` in this shard, ordered by report id (the order of
        :func:`~ldpsynth.aggregator.idindex.sort_ids`: the id's two little-endian 64-bit halves)."""
        coll = self._collection(collection)
        chunks = list(_read_rows(self._conn, coll))
        if not chunks:
            empty = np.zeros(0, np.int64)
            return RowChunk(np.zeros((0, REPORT_ID_BYTES), np.uint8), empty, empty.copy())
        ids = np.concatenate([c.report_ids for c in chunks])
        order = sort_ids(ids).order
        return RowChunk(ids[order], np.concatenate([c.public_keys for c in chunks])[order],
                        np.concatenate([c.private_codes for c in chunks])[order])

    def cut_totals(self, collection: str, source: str, target: str, edge: str, sources: np.ndarray,
                   targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Pair totals ``(m, y1)`` of cut queries over this shard's rows, and the rows they cover.

        Served from a compact :class:`~ldpsynth.aggregator.pairs.PairCounts` kept per
        (collection, source, target, edge) and rebuilt when rows were committed since.
        """
        coll = self._collection(collection)
        rows = len(self._index[collection])
        key = (collection, source, target, edge)
        cached = self._pairs.get(key)
        if cached is None or cached[0] != rows:
            self._pairs[key] = cached = (rows, PairCounts.build(coll.card.schema, self._stats[collection].snapshot(),
                                                                source, target, edge))
        m, y1 = cached[1].totals(sources, targets)
        return m, y1, rows

    def row_counts(self) -> dict[str, int]:
        """Stored reports per served collection (from memory)."""
        return {name: len(index) for name, index in self._index.items()}

    def quota_usage(self) -> dict[QuotaKey, int]:
        """This shard's quota counters: stored reports per (collection, credential)."""
        return _quota_usage(self._conn)

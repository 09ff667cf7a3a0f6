"""The units the ingest path and the shard workers exchange: segments in, outcomes and rows out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ldpsynth.serving.observe.histogram import HistogramSnapshot
from ldpsynth.shared.reports import REPORT_ID_BYTES
from ldpsynth.shared.schema import Schema

QuotaKey = tuple[str, str]  # (collection, credential id)


class Pin(NamedTuple):
    """A query's hold on one shard's state: the statistics of a collection as of one log sequence."""

    #: The worker's name for the pin (what :meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.unpin` takes).
    id: str
    #: The log sequence the pinned state reflects.
    sequence: int
    #: The collection's reports in the pinned state.
    rows: int


@dataclass(frozen=True)
class WorkerStatus:
    """What a shard worker reports: its state, what it holds, and its counters since it started (the
    replica exposes them as metrics: ``ldpsynth.aggregator.ingress.replica_metrics``)."""

    shard: int
    directory: str
    #: The next log sequence to apply, and the one the last snapshot reflects.
    offset: int
    snapshot_offset: int
    #: Stored reports per collection.
    rows: dict[str, int]
    #: Ids not yet in a run file, and run files, over all collections.
    memory_ids: int
    runs: int
    #: Log records replayed by the last start.
    replayed: int
    #: What the worker did with its snapshot at start, ``(level, text)`` (the replica logs them).
    notes: tuple[tuple[str, str], ...]
    #: ``ready`` (restored, serving), ``starting`` (restoring its state: ``offset`` is how far it got) or
    #: ``damaged`` (refusing service; ``damage`` says why).
    state: str = "ready"
    damage: str = ""
    #: Group commits made, reports they stored and reports they found already stored, since it started.
    groups: int = 0
    stored: int = 0
    duplicates: int = 0
    #: Durations of its group commits and of its log appends since it started.
    commit_seconds: HistogramSnapshot | None = None
    append_seconds: HistogramSnapshot | None = None


@dataclass(frozen=True)
class Segment:
    """Reports of one batch bound for one shard (the unit a replica hands to a shard's group commit).

    ``credential`` only charges the quota counter of the credential that sent the batch.
    """

    collection: str
    credential: str
    report_ids: np.ndarray  # (n, 16) uint8
    public_keys: np.ndarray  # (n,) int64
    private_codes: np.ndarray  # (n,) int64; a frequency oracle's reports (n,) int64 or (n, width) uint8

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])


@dataclass(frozen=True)
class SegmentPack:
    """Several segments in three arrays, as one Ray call carries them (three buffers to serialise
    instead of three per segment). ``ends[i]`` is the end of segment ``i`` in the arrays."""

    collections: tuple[str, ...]
    credentials: tuple[str, ...]
    ends: np.ndarray
    report_ids: np.ndarray
    public_keys: np.ndarray
    private_codes: np.ndarray

    @classmethod
    def of(cls, segments: list[Segment]) -> SegmentPack:
        return cls(tuple(s.collection for s in segments), tuple(s.credential for s in segments),
                   np.cumsum([len(s) for s in segments]), np.concatenate([s.report_ids for s in segments]),
                   np.concatenate([s.public_keys for s in segments]),
                   np.concatenate([s.private_codes for s in segments]))


@dataclass(frozen=True)
class CommitOutcome:
    """What a group commit did.

    ``results[i]`` is ``(accepted, duplicates)`` of the i-th segment; ``quota`` the shard's
    counters (absolute, after the commit) of the credentials the commit charged; ``closed`` the
    segments refused, nothing of them stored, because their collection is closed to reports
    (a discovery's closed round).
    """

    results: tuple[tuple[int, int], ...]
    quota: dict[QuotaKey, int]
    closed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class RowChunk:
    """Stored reports of one collection (int64 columns, ids ``(n, 16)`` uint8)."""

    report_ids: np.ndarray
    public_keys: np.ndarray
    private_codes: np.ndarray

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])

    @classmethod
    def empty(cls, width: int = 0) -> RowChunk:
        """No rows (``width`` > 0: of a collection whose reports are bit sets of that many bytes)."""
        zero = np.zeros(0, np.int64)
        private = np.zeros((0, width), np.uint8) if width else zero.copy()
        return cls(np.zeros((0, REPORT_ID_BYTES), np.uint8), zero, private)

    def public_codes(self, schema: Schema) -> np.ndarray:
        """``(n, m)`` codes of the public attributes (schema order) decoded from the keys."""
        digits = schema.public_digits(self.public_keys)
        columns = [digits[a.name] for a in schema.public_attributes]
        return np.column_stack(columns) if columns else np.zeros((len(self), 0), np.int64)

"""A shard worker: the single writer of one shard's log, with its deduplication index and statistics.

Plain asyncio code (no Ray): :mod:`~ldpsynth.aggregator.runtime.ray_cluster` runs one per shard as a
Ray actor, :mod:`~ldpsynth.aggregator.runtime.local_shards` on the caller's event loop; both reach
it by name through :meth:`ShardWorker.call` (:data:`CALLS`). This module is the worker's lifecycle
and its write path (one group commit at a time: new ids found, one record appended, then applied);
its other parts are modules of their own: the applied state
(:mod:`~ldpsynth.aggregator.storage.shard_state`), the start
(:mod:`~ldpsynth.aggregator.storage.recovery`), the snapshots
(:mod:`~ldpsynth.aggregator.storage.snapshots`), the acknowledged file
(:mod:`~ldpsynth.aggregator.storage.acknowledged`) and the queries' pins
(:mod:`~ldpsynth.aggregator.storage.pins`).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

import asyncio
import errno
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.aggregator.errors import ShardDamaged, ShardFull, ShardUnavailable, WorkerStartFailed
from ldpsynth.aggregator.storage.acknowledged import AcknowledgedWriter
from ldpsynth.aggregator.storage.idindex import repeats, sort_ids
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LogFenced, LogFull, LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.log_records import (
    LogCorruption,
    Record,
    Section,
    encode_reports,
    record_crc,
    reports_per_record,
)
from ldpsynth.aggregator.storage.pins import ShardPins
from ldpsynth.aggregator.storage.recovery import Recovery
from ldpsynth.aggregator.storage.refusals import StoreRefused, damaged_log
from ldpsynth.aggregator.storage.segments import (
    CommitOutcome,
    Pin,
    QuotaKey,
    RowChunk,
    Segment,
    SegmentPack,
    WorkerStatus,
)
from ldpsynth.aggregator.storage.shard_state import ShardState
from ldpsynth.aggregator.storage.snapshots import Snapshots
from ldpsynth.serving.observe import events, tracing
from ldpsynth.serving.observe.histogram import LatencyHistogram
from ldpsynth.shared.estimators.engine import Statistics
from ldpsynth.shared.estimators.formulas import BlockSums

log = events.get(__name__)
#: A worker's states (:attr:`WorkerStatus.state`).
READY, STARTING, DAMAGED = "ready", "starting", "damaged"

#: New ids a worker keeps in memory before it writes them to a run file (16 MiB of ids).
DEFAULT_FLUSH_IDS = 1 << 20
DEFAULT_FLUSH_SECONDS = 30.0
DEFAULT_PIN_SECONDS = 600.0
#: A start that failed with one of these may succeed later (space freed, a file system back): retried.
_TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR, errno.ESTALE})
#: The methods a replica calls by name (:meth:`ShardWorker.call`); no other attribute is reachable that way.
CALLS = frozenset({"commit_pack", "close_collection", "reopen_collection",
                   "count_existing", "quota_usage", "quota_of", "pin", "unpin", "pinned_stats",
                   "cut_totals", "rows", "row_ids", "dense_sums", "status", "flush", "close"})


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to start (picklable: Ray passes it to the actor)."""

    layout: Layout
    shard: int
    log: LogSettings
    directory: str
    publish_snapshots: bool = False
    flush_ids: int = DEFAULT_FLUSH_IDS
    flush_seconds: float = DEFAULT_FLUSH_SECONDS
    pin_seconds: float = DEFAULT_PIN_SECONDS
    #: The shard's acknowledged file (one machine: ``DIR/acknowledged/shard-NNN``); ``None``: none kept.
    acknowledged: str | None = None
    #: Where the worker sends its trace spans (OTLP/HTTP); ``None``: no tracing.
    otlp_endpoint: str | None = None


class ShardWorker:
    """One shard's writer and reader (see the module docstring). Call :meth:`start` first."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.directory = Path(spec.directory)
        self._log: ReplicatedLog | None = None
        self._state = ShardState(spec.shard)
        self._snapshots = Snapshots(self._state, self.directory, spec.layout.id, spec.flush_ids, spec.flush_seconds)
        self._acknowledged = AcknowledgedWriter(None if spec.acknowledged is None else Path(spec.acknowledged),
                                                spec.layout.id, spec.shard, lambda: self._state.position)
        self._recovery = Recovery(spec.layout, self.directory, self._state, self._snapshots, self._acknowledged)
        self._pins = ShardPins(self._state, spec.layout.id, spec.pin_seconds)
        self._started: asyncio.Task[None] | None = None
        self._writer = asyncio.Lock()  # one commit at a time: the shard's log has one writer
        #: Collections closed to reports (:meth:`close_collection`), and those the log said were open when first
        #: committed to here (a close after that reaches this worker through :meth:`close_collection`).
        self._closed: set[str] = set()
        self._open: set[str] = set()
        self._closing = False
        self._commit_seconds = LatencyHistogram()  # group commits, from taking the group to its last append
        self._append_seconds = LatencyHistogram()  # log appends, until the log confirmed the record durable
        self._groups = 0
        self._stored = 0
        self._duplicates = 0
        tracing.configure(spec.otlp_endpoint, "ldpsynth-shard-worker")

    async def call(self, method: str, *args: Any) -> Any:
        """``method`` (one of :data:`CALLS`) on ``args``: what the Ray actor and the local shards forward."""
        if method not in CALLS:
            raise AttributeError(f"shard worker: {method!r} is not one of its calls")
        return await getattr(self, method)(*args)

    # ----- start ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, restore the last snapshot and replay the log after it (once; later calls wait).

        If the log cannot be reached (:class:`ShardUnavailable`), the next call tries again."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        started = self._started
        try:
            await asyncio.shield(started)
        except (LogUnavailable, OSError) as exc:
            if self._started is started:
                self._started = None
                if self._log is not None:
                    await self._log.close()
                    self._log = None
            if isinstance(exc, OSError) and exc.errno not in _TRANSIENT_ERRNOS:  # waiting will not mend it
                raise WorkerStartFailed(f"shard {self.spec.shard}: {type(exc).__name__}: {exc}") from None
            raise ShardUnavailable(f"shard {self.spec.shard} is starting: {exc}") from None
        self._state.check()

    async def _start(self) -> None:
        spec = self.spec
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = await ReplicatedLog.connect(spec.log, name=f"ldpsynth-shard-{spec.shard}")
        self._log.layout = spec.layout
        if spec.publish_snapshots:
            self._snapshots.bucket = await self._log.snapshots()
        try:
            await self._recovery.recover(self._log)
            await self._acknowledged.write()
        except LogCorruption as exc:
            self._state.damaged(damaged_log(str(exc)))
        except (ShardDamaged, StoreRefused) as exc:
            self._state.damaged(str(exc))

    # ----- write path --------------------------------------------------------------------------
    async def commit(self, segments: Sequence[Segment]) -> CommitOutcome:
        """:meth:`commit_pack` of ``segments`` (each one batch's reports), packed here."""
        return await self.commit_pack(SegmentPack.of(list(segments)))

    async def commit_pack(self, pack: SegmentPack, trace: dict[str, str] | None = None) -> CommitOutcome:
        """Store the pack's segments exactly once, as one unit: a replica's group commit for this shard
        (the one place reports are grouped), committed after the commits before it (one writer), in a
        span continuing the caller's ``trace`` when tracing is on."""
        await self.start()
        if self._closing:
            raise ShardUnavailable(f"shard {self.spec.shard} is shutting down; retry")
        async with self._writer:
            if not tracing.enabled():
                return await self._commit_group(pack)
            with tracing.tracer().start_as_current_span("ldpsynth.shard.group_commit",
                                                        context=tracing.extract(trace or {}),
                                                        attributes={"ldpsynth.shard": self.spec.shard,
                                                                    "ldpsynth.segments": len(pack.collections)}):
                return await self._commit_group(pack)

    async def _commit_group(self, pack: SegmentPack) -> CommitOutcome:
        self._state.check()
        start = time.perf_counter()
        try:
            if not self._recovery.synced:
                assert self._log is not None
                await self._recovery.replay(self._log)
            outcome = await self._store(pack)
            self._commit_seconds.observe(time.perf_counter() - start)
            self._groups += 1
            self._stored += sum(accepted for accepted, _ in outcome.results)
            self._duplicates += sum(duplicates for _, duplicates in outcome.results)
            return outcome
        except LogFull as exc:
            log.error("log.full", f"shard {self.spec.shard}: the log's storage is full ({exc}): reports are refused "
                      "until space is added", shard=self.spec.shard)
            raise ShardFull(str(exc)) from None
        except (LogUnavailable, LogFenced) as exc:
            self._recovery.synced = False
            raise ShardUnavailable(str(exc)) from None
        except LogCorruption as exc:
            raise ShardDamaged(self._state.damaged(damaged_log(str(exc)))) from None
        except ShardDamaged as exc:
            raise ShardDamaged(self._state.damaged(str(exc))) from None

    async def _store(self, pack: SegmentPack) -> CommitOutcome:
        """Append the pack's new reports (each id once: not stored yet, first in the pack) per
        collection, in id order (no trace of arrival order), and count each segment's new reports
        and duplicates (a running sum of the new-report mask, read at the segments' ends)."""
        ends = pack.ends.astype(np.int64, copy=False)
        starts = np.concatenate(([0], ends[:-1]))
        names = pack.collections
        new = np.zeros(len(pack.report_ids), bool)
        found: list[tuple[str, str, np.ndarray]] = []  # (collection, card, positions of its new reports)
        closed = {name for name in dict.fromkeys(names) if await self._is_closed(name)}
        for name in dict.fromkeys(names):
            if name in closed:
                continue
            coll = await self._state.collection(self._log, name)
            if names.count(name) == len(names):  # the usual group: one collection
                positions = np.arange(len(new))
            else:
                positions = np.concatenate([np.arange(a, b) for c, a, b in zip(names, starts, ends) if c == name])
            ordered = sort_ids(pack.report_ids[positions])
            new_sorted = ~repeats(ordered) & ~coll.index.contains(ordered)
            if new_sorted.any():
                stored = positions[ordered.order[new_sorted]]  # in id order: no trace of arrival order
                new[stored] = True
                found.append((name, coll.digest, stored))
        counts = np.concatenate(([0], np.cumsum(new)))
        accepted = (counts[ends] - counts[starts]).tolist()
        charges: dict[QuotaKey, int] = defaultdict(int)
        for name, credential, n in zip(names, pack.credentials, accepted):
            charges[(name, credential)] += n
        sections = [Section(name, card, pack.report_ids[rows], pack.public_keys[rows], pack.private_codes[rows],
                            {credential: n for (c, credential), n in charges.items() if c == name and n})
                    for name, card, rows in found]
        await self._snapshots.room_for(sum(len(section) for section in sections))
        for chunk in self._records(sections):
            await self._append(chunk)
        self._snapshots.maybe_write()
        self._acknowledged.soon()
        sizes = [0 if name in closed else size for name, size in zip(names, (ends - starts).tolist())]
        return CommitOutcome(tuple(zip(accepted, (size - n for size, n in zip(sizes, accepted)))),
                             {key: self._state.quota[key] for key in charges if key[0] not in closed},
                             frozenset(i for i, name in enumerate(names) if name in closed))

    async def _is_closed(self, collection: str) -> bool:
        """Whether ``collection`` is closed to reports: asked of the log the first time (a worker started after
        a close), then known here (:meth:`close_collection`, :meth:`reopen_collection`). Under the writer lock."""
        if collection not in self._closed and collection not in self._open:
            assert self._log is not None
            (self._closed if await self._log.is_closed(collection) else self._open).add(collection)
        return collection in self._closed

    async def close_collection(self, collection: str) -> None:
        """Refuse ``collection``'s reports from now on (a discovery's round closing; the log records it first,
        :meth:`~ldpsynth.aggregator.storage.log_registry.LogRegistry.close_collection`). Taken in turn with the
        commits: once this returns, every commit of the collection this worker made is applied (in the
        statistics a pin reads) and no later one stores any of its reports."""
        await self.start()
        async with self._writer:
            self._open.discard(collection)
            self._closed.add(collection)

    async def reopen_collection(self, collection: str) -> None:
        """Take ``collection``'s reports again (a close that did not reach its commit point; the log's record of
        the close is removed first)."""
        await self.start()
        async with self._writer:
            self._closed.discard(collection)
            self._open.add(collection)

    def _records(self, sections: list[Section]) -> list[list[Section]]:
        """Sections split into records that fit the log's message size (each report once)."""
        assert self._log is not None
        limit = self._log.max_payload
        widest = max((self._state.collections[section.collection].record_bytes for section in sections), default=0)
        per_record = reports_per_record(limit, len(sections), widest)
        records: list[list[Section]] = []
        current: list[Section] = []
        room = per_record
        for section in sections:
            start = 0
            while start < len(section):
                take = min(room, len(section) - start)
                part = slice(start, start + take)
                quota = dict(section.quota) if start == 0 else {}
                current.append(Section(section.collection, section.card, section.report_ids[part],
                                       section.public_keys[part], section.private_codes[part], quota))
                start += take
                room -= take
                if room == 0:
                    records.append(current)
                    current, room = [], per_record
        if current:
            records.append(current)
        return records

    async def _append(self, sections: list[Section]) -> None:
        """Append one record of ``sections`` at the next sequence (fenced: only if the log ends where the
        worker believes it ends), then apply it."""
        assert self._log is not None
        state, layout, shard = self._state, self.spec.layout.id, self.spec.shard
        domains = {s.collection: (state.collections[s.collection].public_size,
                                  state.collections[s.collection].private_size,
                                  state.collections[s.collection].width) for s in sections}
        sequence = state.offset + 1
        data = encode_reports(layout, shard, sequence, state.total, sections, domains)
        start = time.perf_counter()
        with tracing.tracer().start_as_current_span("ldpsynth.log.append", attributes={
                "ldpsynth.shard": shard, "ldpsynth.sequence": sequence, "ldpsynth.bytes": len(data),
                "ldpsynth.reports": sum(len(section) for section in sections)}):
            await self._log.append(shard, data, state.offset)
        self._append_seconds.observe(time.perf_counter() - start)
        record = Record("reports", layout, shard, sequence, state.total, tuple(sections))
        await state.apply(self._log, record, record_crc(data))

    async def flush(self) -> None:
        """Write a snapshot of everything applied so far (and wait for it)."""
        await self.start()
        await self._snapshots.flush()

    # ----- read path (the pins: pins.py) -------------------------------------------------------
    async def pin(self, collection: str) -> Pin:
        """Pin ``collection``'s statistics at the applied sequence."""
        await self.start()
        return await self._pins.pin(self._log, collection)

    async def unpin(self, pin_id: str) -> None:
        """Release a pin (nothing if it is gone)."""
        self._pins.unpin(pin_id)

    async def pinned_stats(self, pin_id: str, collection: str) -> Statistics:
        """The pinned statistics of ``collection`` (E's counts, or an oracle's tallies per public key)."""
        return self._pins.pinned_stats(pin_id, collection)

    async def cut_totals(self, pin_id: str, collection: str, source: str, target: str, edge: str,
                         sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Pair totals ``(m, y1)`` of cut queries over the pinned rows, and the rows they cover."""
        return await self._pins.cut_totals(pin_id, collection, source, target, edge, sources, targets)

    async def rows(self, pin_id: str, collection: str) -> RowChunk:
        """Every report of ``collection`` up to the pinned sequence, in id order."""
        return await self._pins.rows(self._log, pin_id, collection)

    async def row_ids(self, pin_id: str, collection: str) -> np.ndarray:
        """The ids of the pinned :meth:`rows` (in id order); the rows stay with the pin for :meth:`dense_sums`."""
        return await self._pins.row_ids(self._log, pin_id, collection)

    async def dense_sums(self, pin_id: str, collection: str, weights: np.ndarray) -> BlockSums:
        """The sums of a dense block over the pinned rows (``weights``: a weight list per row, in id
        order), where the rows are: their codes never leave the worker."""
        return await self._pins.dense_sums(self._log, pin_id, collection, weights)

    # ----- quota and status --------------------------------------------------------------------
    async def count_existing(self, collection: str, report_ids: np.ndarray) -> int:
        """How many distinct ids of ``report_ids`` are already stored (quota admission: duplicates are free)."""
        await self.start()
        self._state.check()
        coll = await self._state.collection(self._log, collection)
        ordered = sort_ids(report_ids)
        return int((coll.index.contains(ordered) & ~repeats(ordered)).sum())

    async def quota_of(self, collection: str, credential: str) -> int:
        """Stored reports of ``credential`` in ``collection`` in this shard."""
        await self.start()
        return self._state.quota.get((collection, credential), 0)

    async def quota_usage(self) -> dict[QuotaKey, int]:
        """Stored reports per (collection, credential) in this shard."""
        await self.start()
        return dict(self._state.quota)

    async def status(self, wait: bool = True) -> WorkerStatus:
        """Readiness and counters: once the state is restored; with ``wait`` false at once, the start
        begun if it was not (a worker Ray just restarted says ``starting`` and the sequence it restored
        so far: how far it is behind the log is visible while it replays)."""
        if wait:
            await self.start()
        elif self._started is None:
            asyncio.ensure_future(self.start()).add_done_callback(lambda task: task.cancelled() or task.exception())
        started = self._started
        restored = started is not None and started.done() and not started.cancelled() and started.exception() is None
        state = self._state
        condition = DAMAGED if state.damage is not None else READY if restored else STARTING
        return WorkerStatus(self.spec.shard, str(self.directory), state.offset, self._snapshots.offset,
                            {name: c.rows for name, c in state.collections.items()}, state.memory_ids,
                            sum(len(c.index.runs) for c in state.collections.values()), self._recovery.replayed,
                            tuple(self._recovery.notes), condition, state.damage or "", self._groups, self._stored,
                            self._duplicates, self._commit_seconds.snapshot(), self._append_seconds.snapshot())

    async def close(self) -> None:
        """Finish queued commits, write a snapshot, disconnect."""
        try:
            self._closing = True
            async with self._writer:  # commits that came before finish (the lock is FIFO); later ones are refused
                pass
            if self._started is not None and self._started.done() and self._state.damage is None:
                await self.flush()
                await self._acknowledged.close()
        finally:
            if self._log is not None:
                await self._log.close()

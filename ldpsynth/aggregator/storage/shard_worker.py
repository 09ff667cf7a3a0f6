"""A shard worker: the single writer of one shard's log, with its deduplication index and statistics.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

import asyncio
import errno
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ldpsynth.aggregator.errors import PinExpired, ShardDamaged, ShardFull, ShardUnavailable, WorkerStartFailed
from ldpsynth.aggregator.storage.acknowledged import Acknowledged, write_acknowledged
from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked
from ldpsynth.aggregator.storage.idindex import IdIndex, merge_sorted_ids, repeats, sort_ids
from ldpsynth.aggregator.storage.idstore import (
    DiskIdIndex,
    RunOwner,
    merge_plan,
    merge_runs,
    remove_unreferenced,
    write_run,
)
from ldpsynth.aggregator.storage.jetstream import (
    Layout,
    LogFenced,
    LogFull,
    LogSettings,
    LogUnavailable,
    ReplicatedLog,
    SnapshotBucket,
)
from ldpsynth.aggregator.storage.log_records import (
    LogCorruption,
    Record,
    Section,
    card_digest,
    decode,
    encode_reports,
    record_crc,
    reports_per_record,
)
from ldpsynth.aggregator.storage.record_ranges import RecordRanges
from ldpsynth.aggregator.storage.refusals import (
    StoreRefused,
    damaged_log,
    no_snapshot,
    record_out_of_place,
    record_under_another_card,
    records_lost,
    snapshot_rebuilt,
    snapshot_restored,
)
from ldpsynth.aggregator.storage.segments import (
    CommitOutcome,
    Pin,
    QuotaKey,
    RowChunk,
    Segment,
    SegmentPack,
    WorkerStatus,
)
from ldpsynth.aggregator.storage.snapshot import (
    MANIFEST,
    MANIFEST_KIND,
    Position,
    TallyArrays,
    collection_key,
    write_manifest,
    write_state,
)
from ldpsynth.aggregator.storage.stats import StatsAccumulator, TallyAccumulator, accumulator_for
from ldpsynth.aggregator.storage.store_check import check_position, load_snapshot, log_position, published_manifest
from ldpsynth.serving.errors import WrongState
from ldpsynth.serving.observe import events, tracing
from ldpsynth.serving.observe.histogram import LatencyHistogram
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.engine import Statistics, row_block_sums
from ldpsynth.shared.estimators.formulas import BlockSums
from ldpsynth.shared.estimators.pairs import PairTotals, edge_pair_totals
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.reports import REPORT_ID_BYTES

log = events.get(__name__)
#: A worker's states (:attr:`WorkerStatus.state`).
READY, STARTING, DAMAGED = "ready", "starting", "damaged"

#: New ids a worker keeps in memory before it writes them to a run file (16 MiB of ids).
DEFAULT_FLUSH_IDS = 1 << 20
DEFAULT_FLUSH_SECONDS = 30.0
DEFAULT_PIN_SECONDS = 600.0
#: A start that failed with one of these may succeed later (space freed, a file system back): retried.
_TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR, errno.ESTALE})
#: Seconds between two writes of the acknowledged file while commits go on.
ACKNOWLEDGED_SECONDS = 1.0


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


@dataclass
class _Collection:
    name: str
    card_json: str
    digest: str
    public_size: int
    #: The bound of the private codes (E: |D|; an oracle's numbers: its layout's bound) and the bytes of a
    #: bit-set report (0: numbers): what fixes the log's columns.
    private_size: int
    width: int
    index: DiskIdIndex
    stats: StatsAccumulator | TallyAccumulator
    rows: int = 0
    oracle: FrequencyOracle | None = None
    #: The log records holding its reports (what a read of its rows reads).
    records: RecordRanges = field(default_factory=RecordRanges)

    @property
    def record_bytes(self) -> int:
        """Most bytes one report takes in a log record (id, key, private part)."""
        return REPORT_ID_BYTES + 8 + (self.width or 8)


@dataclass
class _Pin:
    offset: int
    deadline: float
    stats: dict[str, tuple[int, Statistics]] = field(default_factory=dict)
    #: Rows read for the pin (:meth:`ShardWorker.row_ids`), kept for its dense blocks until it is released.
    rows: dict[str, RowChunk] = field(default_factory=dict)


class ShardWorker:
    """One shard's writer and reader (see the module docstring). Call :meth:`start` first."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.directory = Path(spec.directory)
        self._log: ReplicatedLog | None = None
        self._bucket: SnapshotBucket | None = None
        self._collections: dict[str, _Collection] = {}
        self._quota: dict[QuotaKey, int] = defaultdict(int)
        self._offset = 1  # the genesis record
        self._total = 0
        self._crc = -1  # CRC-32 of the record at self._offset (known once started)
        self._frozen_upto = 1  # ids of records up to here are in runs or frozen tails
        self._ranges: dict[int, tuple[int, int]] = {}  # id(frozen tail) -> its records' sequences
        self._ack: Acknowledged | None = None
        self._ack_lock = asyncio.Lock()
        self._ack_task: asyncio.Task[None] | None = None
        self._ack_wake = asyncio.Event()  # set at close: write now
        self._ack_at = 0.0
        self.notes: list[tuple[str, str]] = []  # (level, what the start did), for the replica's log
        self._synced = False
        self._damage: str | None = None
        self._started: asyncio.Task[None] | None = None
        self._writer = asyncio.Lock()  # one commit at a time: the shard's log has one writer
        self._closing = False
        self._persisting: asyncio.Task[None] | None = None
        self._last_flush = time.monotonic()
        self._snapshot_offset = 1
        self._snapshot_total = 0  # the shard's reports up to the last written snapshot
        self._published: set[str] = set()
        self._pins: dict[str, _Pin] = {}
        self._pairs: dict[tuple[str, int, str, str, str], PairTotals] = {}
        self.replayed = 0  # records replayed by the last start (observability, tests)
        self._commit_seconds = LatencyHistogram()  # group commits, from taking the group to its last append
        self._append_seconds = LatencyHistogram()  # log appends, until the log confirmed the record durable
        self._groups = 0
        self._stored = 0
        self._duplicates = 0
        tracing.configure(spec.otlp_endpoint, "ldpsynth-shard-worker")

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
        if self._damage is not None:
            raise ShardDamaged(self._damage)

    async def _start(self) -> None:
        spec = self.spec
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = await ReplicatedLog.connect(spec.log, name=f"ldpsynth-shard-{spec.shard}")
        self._log.layout = spec.layout
        if spec.publish_snapshots:
            self._bucket = await self._log.snapshots()
        try:
            restored = await self._restore()
            await self._catch_up()
            if restored is not None:
                self._note("info", no_snapshot(spec.shard, self.replayed) if restored == 0 else
                           snapshot_restored(spec.shard, restored, self.replayed))
            if self._crc < 0:
                position = await log_position(self._log, spec.layout, spec.shard, self._offset)
                assert position is not None
                self._crc = position.record_crc
            await self._write_acknowledged()
        except LogCorruption as exc:
            self._damaged(damaged_log(str(exc)))
        except (ShardDamaged, StoreRefused) as exc:
            self._damaged(str(exc))

    def _note(self, level: str, text: str) -> None:
        (log.warning if level == "warning" else log.info)("shard.start", text, shard=self.spec.shard)
        self.notes.append((level, text))

    def _damaged(self, reason: str) -> str:
        """Refuse service from now on (an operator must restore the log); log why once."""
        self._damage = reason
        log.error("shard.damaged", f"shard {self.spec.shard} is damaged and refuses service: {reason}",
                  shard=self.spec.shard, detail=reason)
        return reason

    async def _restore(self) -> int | None:
        """Check the log holds what was acknowledged, restore the snapshot if it is a view of this log.
        Returns the snapshot's sequence (0: there is none; ``None``: it was refused, and said so)."""
        spec = self.spec
        assert self._log is not None
        downloaded = None
        if self._bucket is not None and not (self.directory / MANIFEST).exists():
            try:
                await self._download_snapshot()
            except CheckedFileError as exc:
                downloaded = str(exc)
        acknowledged = None if spec.acknowledged is None else Path(spec.acknowledged)
        position = await check_position(self._log, spec.layout, spec.shard, self.directory, acknowledged,
                                        require_acknowledged=False, one_machine=acknowledged is not None,
                                        snapshot_name=None if self._bucket is None else
                                        published_manifest(spec.layout, spec.shard))
        self._ack = position.acknowledged
        loaded = None
        try:
            if downloaded is not None:
                raise CheckedFileError(downloaded)
            loaded = await load_snapshot(self.directory, spec.layout, spec.shard, self._log)
        except CheckedFileError as exc:
            self._note("warning", snapshot_rebuilt(spec.shard, str(exc)))
            return None
        if loaded is None:
            return 0
        snapshot, runs = loaded
        for name, c in snapshot.collections.items():
            coll = await self._collection(name)
            if coll.digest != c.card:
                raise ShardDamaged(f"shard {spec.shard}: the snapshot holds collection {name!r} under another card")
            coll.index = DiskIdIndex(runs[name])
            coll.stats = self._restored_stats(coll, c.stats)
            coll.rows = c.rows
            coll.records = c.records
        self._quota.update(snapshot.quota)
        self._offset = self._snapshot_offset = self._frozen_upto = snapshot.offset
        self._total = self._snapshot_total = snapshot.total
        self._crc = snapshot.position.record_crc
        self._published = set(snapshot.files) if self._bucket is not None else set()
        return snapshot.offset

    def _restored_stats(self, coll: _Collection, stats: SufficientStatistics | TallyArrays
                        ) -> StatsAccumulator | TallyAccumulator:
        """The running statistics of ``coll`` from its snapshot (a frequency oracle's tallies checked against
        its card's oracle)."""
        if isinstance(stats, SufficientStatistics) and coll.oracle is None:
            return StatsAccumulator.restore(stats)
        if isinstance(stats, TallyArrays) and coll.oracle is not None:
            try:
                return TallyAccumulator.restore(KeyedTallies.restore(coll.oracle, stats.public_domain_size, stats.keys,
                                                                     stats.sizes, stats.tallies))
            except ValidationError as exc:
                raise ShardDamaged(f"shard {self.spec.shard}: the snapshot's tallies of {coll.name!r}: {exc}") from None
        mechanism = "E" if coll.oracle is None else coll.oracle.name
        raise ShardDamaged(f"shard {self.spec.shard}: the snapshot holds {type(stats).__name__} for collection "
                           f"{coll.name!r}, whose card is of mechanism {mechanism}")

    async def _download_snapshot(self) -> None:
        assert self._bucket is not None
        prefix = f"{self.spec.shard}/"
        if not await self._bucket.get(prefix + MANIFEST, self.directory / (MANIFEST + ".remote")):
            return
        staging = self.directory / (MANIFEST + ".remote")
        meta, _ = read_checked(staging, MANIFEST_KIND)
        try:
            files = [str(meta["state"]["file"])] + [str(r["file"]) for c in meta["collections"].values()
                                                    for r in c["runs"]]
        except (KeyError, TypeError, AttributeError):
            raise CheckedFileError(f"{staging}: malformed manifest") from None
        for name in files:
            if not (self.directory / name).exists():
                await self._bucket.get(prefix + name, self.directory / name)
        staging.replace(self.directory / MANIFEST)

    async def _collection(self, name: str) -> _Collection:
        """The state of collection ``name``, made empty (from its registered card) the first time.

        While one caller waits for the card, another (a commit, a query's pin, quota admission)
        may make the collection and store rows in it: the one made first is kept, so no caller
        ever replaces rows and ids already applied with an empty state."""
        coll = self._collections.get(name)
        if coll is not None:
            return coll
        assert self._log is not None
        card_json = await self._log.card(name)
        if card_json is None:
            raise ShardDamaged(f"shard {self.spec.shard}: collection {name!r} is not registered in the log")
        coll = self._collections.get(name)
        if coll is None:
            card = MechanismCard.from_json(card_json)
            layout = layout_of(card.mechanism)
            oracle = card.mechanism if isinstance(card.mechanism, FrequencyOracle) else None
            coll = _Collection(name, card_json, card_digest(card_json), card.schema.public_domain_size,
                               layout.bound, layout.width, DiskIdIndex(), accumulator_for(card), oracle=oracle)
            self._collections[name] = coll
        return coll

    async def _catch_up(self) -> None:
        """Apply every record after the applied sequence (start, and after an unknown append)."""
        assert self._log is not None
        state = await self._log.state(self.spec.shard)
        if state.first != 1 or state.deleted:
            raise ShardDamaged(f"log of shard {self.spec.shard}: records were removed (first sequence {state.first}, "
                               f"{state.deleted} deleted)")
        if state.last < self._offset:
            raise ShardDamaged(records_lost(self.spec.shard, state.last, self._offset, "this worker applied it",
                                            self.spec.acknowledged is not None))
        async for sequence, data in self._log.read(self.spec.shard, self._offset + 1, state.last):
            record = self._decode(data, sequence)
            await self._apply(record, record_crc(data))
            self.replayed += 1
        self._synced = True

    def _decode(self, data: bytes, sequence: int) -> Record:
        record = decode(data, layout=self.spec.layout.id, shard=self.spec.shard, sequence=sequence)
        if record.kind != "reports" or record.before != self._total:
            raise LogCorruption(record_out_of_place(self.spec.shard, sequence, record.before, self._total))
        return record

    async def _apply(self, record: Record, crc: int) -> None:
        # Resolve the collections first, then change the state without yielding: a concurrent
        # pin sees the state before or after the record, never half of it.
        colls = [await self._collection(section.collection) for section in record.sections]
        for coll, section in zip(colls, record.sections):
            if section.card != coll.digest:
                raise LogCorruption(record_under_another_card(self.spec.shard, record.sequence, section.collection))
        for coll, section in zip(colls, record.sections):
            coll.index.add(sort_ids(section.report_ids))
            coll.stats.add(section.public_keys, section.private_codes)
            coll.rows += len(section)
            coll.records.add(record.sequence, record.before)
            for credential, count in section.quota.items():
                self._quota[(section.collection, credential)] += count
        self._offset = record.sequence
        self._total += record.reports
        self._crc = crc

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
        if self._damage is not None:
            raise ShardDamaged(self._damage)
        start = time.perf_counter()
        try:
            if not self._synced:
                await self._catch_up()
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
            self._synced = False
            raise ShardUnavailable(str(exc)) from None
        except LogCorruption as exc:
            raise ShardDamaged(self._damaged(damaged_log(str(exc)))) from None
        except ShardDamaged as exc:
            raise ShardDamaged(self._damaged(str(exc))) from None

    async def _store(self, pack: SegmentPack) -> CommitOutcome:
        """Append the pack's new reports (each id once: not stored yet, first in the pack) per
        collection, in id order (no trace of arrival order), and count each segment's new reports
        and duplicates (a running sum of the new-report mask, read at the segments' ends)."""
        ends = pack.ends.astype(np.int64, copy=False)
        starts = np.concatenate(([0], ends[:-1]))
        names = pack.collections
        new = np.zeros(len(pack.report_ids), bool)
        found: list[tuple[str, str, np.ndarray]] = []  # (collection, card, positions of its new reports)
        for name in dict.fromkeys(names):
            coll = await self._collection(name)
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
        await self._room_for(sum(len(section) for section in sections))
        for chunk in self._records(sections):
            await self._append(chunk)
        self._maybe_persist()
        self._maybe_acknowledge()
        sizes = (ends - starts).tolist()
        return CommitOutcome(tuple(zip(accepted, (size - n for size, n in zip(sizes, accepted)))),
                             {key: self._quota[key] for key in charges})

    def _records(self, sections: list[Section]) -> list[list[Section]]:
        """Sections split into records that fit the log's message size (each report once)."""
        assert self._log is not None
        limit = self._log.max_payload
        widest = max((self._collections[section.collection].record_bytes for section in sections), default=0)
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
        assert self._log is not None
        domains = {s.collection: (self._collections[s.collection].public_size,
                                  self._collections[s.collection].private_size,
                                  self._collections[s.collection].width) for s in sections}
        sequence = self._offset + 1
        data = encode_reports(self.spec.layout.id, self.spec.shard, sequence, self._total, sections, domains)
        start = time.perf_counter()
        with tracing.tracer().start_as_current_span("ldpsynth.log.append", attributes={
                "ldpsynth.shard": self.spec.shard, "ldpsynth.sequence": sequence, "ldpsynth.bytes": len(data),
                "ldpsynth.reports": sum(len(section) for section in sections)}):
            await self._log.append(self.spec.shard, data, self._offset)
        self._append_seconds.observe(time.perf_counter() - start)
        record = Record("reports", self.spec.layout.id, self.spec.shard, sequence, self._total, tuple(sections))
        await self._apply(record, record_crc(data))

    # ----- the acknowledged file ------------------------------------------------------------------
    def _maybe_acknowledge(self) -> None:
        """After a commit: make sure the acknowledged file reaches the applied sequence within
        about :data:`ACKNOWLEDGED_SECONDS` (one writer task at a time, which catches up with
        every commit made while it waited or wrote)."""
        if self.spec.acknowledged is not None and (self._ack_task is None or self._ack_task.done()):
            self._ack_task = asyncio.ensure_future(self._acknowledge_soon())

    async def _acknowledge_soon(self) -> None:
        while True:
            delay = self._ack_at + ACKNOWLEDGED_SECONDS - time.monotonic()
            if delay > 0 and not self._ack_wake.is_set():
                try:
                    await asyncio.wait_for(self._ack_wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            if not await self._write_acknowledged() or (self._ack is not None and
                                                        self._ack.sequence >= self._offset):
                return

    async def _write_acknowledged(self) -> bool:
        """Write the sequence applied (confirmed durable by the log) to the acknowledged file;
        ``False`` if the write failed."""
        if self.spec.acknowledged is None:
            return True
        async with self._ack_lock:
            self._ack_at = time.monotonic()
            losses = self._ack.losses if self._ack is not None else ()
            ack = Acknowledged(self.spec.layout.id, self.spec.shard, self._offset, self._total, self._crc, losses)
            if self._ack is not None and self._ack.sequence >= ack.sequence:
                return True
            try:
                await asyncio.to_thread(write_acknowledged, Path(self.spec.acknowledged), ack)
            except OSError as exc:
                log.warning("shard.acknowledged_not_written", f"shard {self.spec.shard}: {self.spec.acknowledged} "
                            f"not written ({exc}); the log keeps every record", shard=self.spec.shard,
                            detail=str(exc))
                return False
            self._ack = ack
            return True

    # ----- snapshots ---------------------------------------------------------------------------
    async def _room_for(self, reports: int) -> None:
        """Wait for the snapshot being written if ``reports`` more would take the reports after the last
        written snapshot (what a restart replays) past two snapshot intervals (``2 * flush_ids``): the
        bound holds however fast reports come."""
        if self._persisting is None or self._persisting.done():
            return
        if self._total - self._snapshot_total + reports > 2 * self.spec.flush_ids:
            await asyncio.shield(self._persisting)

    def _maybe_persist(self) -> None:
        memory = sum(c.index.memory_ids for c in self._collections.values())
        due = memory >= self.spec.flush_ids or (
            memory and time.monotonic() - self._last_flush >= self.spec.flush_seconds)
        if due and (self._persisting is None or self._persisting.done()):
            self._persisting = asyncio.ensure_future(self._persist())

    async def flush(self) -> None:
        """Write a snapshot of everything applied so far (and wait for it)."""
        await self.start()
        if self._persisting is not None:
            await asyncio.shield(self._persisting)
        if self._offset != self._snapshot_offset:
            self._persisting = asyncio.ensure_future(self._persist())
            await asyncio.shield(self._persisting)

    async def _persist(self) -> None:
        """Tails -> run files, merge runs, state file, manifest (then upload; then clean up)."""
        self._last_flush = time.monotonic()
        position, quota = Position(self._offset, self._total, self._crc), dict(self._quota)
        offset = position.offset
        for coll in self._collections.values():
            frozen = coll.index.freeze()
            if frozen is not None:
                self._ranges[id(frozen)] = (self._frozen_upto + 1, offset)
        self._frozen_upto = offset
        state = {name: (c.rows, c.stats.snapshot(), c.records.to_array()) for name, c in self._collections.items()}
        layout, shard = self.spec.layout.id, self.spec.shard
        try:
            # The collections in the state: one made while this snapshot is written is in the next one.
            for name, coll in [(name, self._collections[name]) for name in state]:
                owner, key = RunOwner(layout, shard, name), collection_key(name)
                for tail in list(coll.index.frozen):  # also tails a failed snapshot left frozen
                    hi, lo = tail.merged()
                    first, last = self._ranges[id(tail)]
                    run = await asyncio.to_thread(write_run, self.directory, owner, key, first, last, hi, lo)
                    coll.index.flushed(tail, run)
                    self._forget(tail)
                while (plan := merge_plan(coll.index.runs)) is not None:
                    a, b = coll.index.runs[plan[0]], coll.index.runs[plan[1]]
                    merged = await asyncio.to_thread(merge_runs, self.directory, owner, key, a, b)
                    coll.index.replace(a, b, merged)
            state_file = await asyncio.to_thread(write_state, self.directory, layout, shard, position, state, quota)
            listed = {name: (c.digest, state[name][0], [r.entry for r in c.index.runs])
                      for name, c in self._collections.items() if name in state}
            await asyncio.to_thread(write_manifest, self.directory, layout, shard, position, state_file, listed)
        except OSError as exc:
            # A snapshot is a view the log can rebuild: a failed write only makes a restart replay more.
            # Tails that were not written stay frozen (searched) and are written by the next snapshot.
            log.warning("shard.snapshot_not_written", f"shard {self.spec.shard}: snapshot not written ({exc}); the "
                        "log keeps every record", shard=self.spec.shard, detail=str(exc))
            return
        self._snapshot_offset, self._snapshot_total = offset, position.total
        keep = {state_file[0], MANIFEST} | {r.file for _, _, runs in listed.values() for r in runs}
        await self._publish(keep)
        remove_unreferenced(self.directory, keep, prefix="ids-")
        remove_unreferenced(self.directory, keep, prefix="state-")

    def _forget(self, tail: IdIndex) -> None:
        self._ranges.pop(id(tail), None)

    async def _publish(self, keep: set[str]) -> None:
        if self._bucket is None:
            return
        prefix = f"{self.spec.shard}/"
        try:
            for name in sorted(keep - self._published - {MANIFEST}):
                await self._bucket.put(prefix + name, self.directory / name)
            await self._bucket.put(prefix + MANIFEST, self.directory / MANIFEST)
            await self._bucket.delete([prefix + name for name in self._published - keep])
            self._published = set(keep)
        except LogUnavailable as exc:
            log.warning("shard.snapshot_not_uploaded", f"shard {self.spec.shard}: snapshot not uploaded ({exc}); a "
                        "restart elsewhere replays more of the log", shard=self.spec.shard, detail=str(exc))

    # ----- read path ---------------------------------------------------------------------------
    def _check(self) -> None:
        if self._damage is not None:
            raise ShardDamaged(self._damage)

    async def pin(self, collection: str) -> Pin:
        """Pin ``collection``'s statistics at the applied sequence."""
        await self.start()
        self._check()
        now = time.monotonic()
        for key in [k for k, p in self._pins.items() if p.deadline < now]:
            del self._pins[key]
        coll = await self._collection(collection)
        pin_id = uuid.uuid4().hex
        self._pins[pin_id] = _Pin(self._offset, now + self.spec.pin_seconds,
                                  {collection: (coll.rows, coll.stats.snapshot())})
        return Pin(pin_id, self._offset, coll.rows)

    def _pin(self, pin_id: str) -> _Pin:
        pin = self._pins.get(pin_id)
        if pin is None:
            raise PinExpired(f"shard {self.spec.shard}: the query's pin expired; evaluate it again")
        return pin

    def _pinned(self, pin_id: str, collection: str) -> tuple[int, int, Statistics]:
        pin = self._pin(pin_id)
        if collection not in pin.stats:
            raise PinExpired(f"shard {self.spec.shard}: the query's pin expired; evaluate it again")
        rows, stats = pin.stats[collection]
        return pin.offset, rows, stats

    async def unpin(self, pin_id: str) -> None:
        self._pins.pop(pin_id, None)

    async def pinned_stats(self, pin_id: str, collection: str) -> Statistics:
        """The pinned statistics of ``collection`` (E's counts, or an oracle's tallies per public key)."""
        self._check()
        return self._pinned(pin_id, collection)[2]

    async def cut_totals(self, pin_id: str, collection: str, source: str, target: str, edge: str,
                         sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Pair totals ``(m, y1)`` of cut queries over the pinned rows, and the rows they cover."""
        self._check()
        offset, rows, stats = self._pinned(pin_id, collection)
        if not isinstance(stats, SufficientStatistics):
            raise WrongState(f"collection {collection!r}: the shards' pair counts are mechanism E's (a frequency "
                             "oracle's cut queries are answered from its tallies)")
        key = (collection, offset, source, target, edge)
        pairs = self._pairs.get(key)
        if pairs is None:
            schema = MechanismCard.from_json(self._collections[collection].card_json).schema
            pairs = await asyncio.to_thread(edge_pair_totals, schema, stats, source, target, edge)
            self._pairs = {k: v for k, v in self._pairs.items() if k[0] != collection}
            self._pairs[key] = pairs
        m, y1 = pairs.totals(sources, targets).T
        return m, y1, rows

    async def rows(self, pin_id: str, collection: str) -> RowChunk:
        """Every report of ``collection`` up to the pinned sequence, read from the log records that hold
        them (:class:`~ldpsynth.aggregator.storage.record_ranges.RecordRanges`) and verified, ordered by
        report id (each record's section is: :func:`~ldpsynth.aggregator.storage.idindex.merge_sorted_ids`)."""
        self._check()
        offset, rows, _ = self._pinned(pin_id, collection)
        assert self._log is not None
        parts: list[Section] = []
        try:
            for first, last, before in self._collections[collection].records.spans(offset):
                async for sequence, data in self._log.read(self.spec.shard, first, last):
                    record = decode(data, layout=self.spec.layout.id, shard=self.spec.shard, sequence=sequence)
                    if record.before != before:
                        raise LogCorruption(f"log of shard {self.spec.shard}, sequence {sequence}: a record before "
                                            "it is missing or out of place")
                    before += record.reports
                    parts += [s for s in record.sections if s.collection == collection]
        except LogCorruption as exc:
            raise ShardDamaged(self._damaged(damaged_log(str(exc)))) from None
        except LogUnavailable as exc:
            raise ShardUnavailable(str(exc)) from None
        if not parts:
            coll = self._collections[collection]
            return RowChunk.empty(coll.width)
        ids = np.concatenate([p.report_ids for p in parts])
        if len(ids) != rows:
            raise ShardDamaged(f"shard {self.spec.shard}: the log holds {len(ids)} reports of {collection!r} up to "
                               f"sequence {offset}, its statistics {rows}")
        order = merge_sorted_ids(ids).order
        return RowChunk(ids[order], np.concatenate([p.public_keys for p in parts])[order],
                        np.concatenate([p.private_codes for p in parts])[order])

    async def row_ids(self, pin_id: str, collection: str) -> np.ndarray:
        """The ids of the pinned :meth:`rows` (in id order); the rows stay with the pin for :meth:`dense_sums`."""
        return (await self._pinned_rows(pin_id, collection)).report_ids

    async def dense_sums(self, pin_id: str, collection: str, weights: np.ndarray) -> BlockSums:
        """:func:`~ldpsynth.shared.estimators.engine.row_block_sums` of a dense block over the pinned rows
        (``weights`` ``(Q, m, |D|)``: a weight list per row, in id order), where the rows are: their codes
        never leave the worker."""
        chunk = await self._pinned_rows(pin_id, collection)
        mechanism = MechanismCard.from_json(self._collections[collection].card_json).mechanism
        return await asyncio.to_thread(row_block_sums, weights, chunk.private_codes, mechanism, 1)

    async def _pinned_rows(self, pin_id: str, collection: str) -> RowChunk:
        """The pin's :meth:`rows` of ``collection``, read once per pin."""
        pin = self._pin(pin_id)
        if collection not in pin.rows:
            pin.rows[collection] = await self.rows(pin_id, collection)
        return pin.rows[collection]

    async def count_existing(self, collection: str, report_ids: np.ndarray) -> int:
        """How many distinct ids of ``report_ids`` are already stored (quota admission: duplicates are free)."""
        await self.start()
        self._check()
        coll = await self._collection(collection)
        ordered = sort_ids(report_ids)
        return int((coll.index.contains(ordered) & ~repeats(ordered)).sum())

    async def quota_of(self, collection: str, credential: str) -> int:
        """Stored reports of ``credential`` in ``collection`` in this shard."""
        await self.start()
        return self._quota.get((collection, credential), 0)

    async def quota_usage(self) -> dict[QuotaKey, int]:
        """Stored reports per (collection, credential) in this shard."""
        await self.start()
        return dict(self._quota)

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
        state = DAMAGED if self._damage is not None else READY if restored else STARTING
        return WorkerStatus(self.spec.shard, str(self.directory), self._offset, self._snapshot_offset,
                            {name: c.rows for name, c in self._collections.items()},
                            sum(c.index.memory_ids for c in self._collections.values()),
                            sum(len(c.index.runs) for c in self._collections.values()), self.replayed,
                            tuple(self.notes), state, self._damage or "", self._groups, self._stored,
                            self._duplicates, self._commit_seconds.snapshot(), self._append_seconds.snapshot())

    async def close(self) -> None:
        """Finish queued commits, write a snapshot, disconnect."""
        try:
            self._closing = True
            async with self._writer:  # commits that came before finish (the lock is FIFO); later ones are refused
                pass
            if self._started is not None and self._started.done() and self._damage is None:
                await self.flush()
                self._ack_wake.set()
                if self._ack_task is not None:
                    await self._ack_task
                await self._write_acknowledged()
        finally:
            if self._log is not None:
                await self._log.close()

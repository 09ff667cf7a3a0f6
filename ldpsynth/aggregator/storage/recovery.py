"""A shard worker's start: check the log, restore the last snapshot, replay the log after it.

1. The log must still hold every sequence acknowledged
   (:func:`~ldpsynth.aggregator.storage.store_check.check_position`: the shard's acknowledged file on
   one machine, and the snapshot's sequence).
2. The last snapshot (downloaded from the object store in a cluster) is restored if every file
   matches its manifest and the manifest matches the log
   (:func:`~ldpsynth.aggregator.storage.store_check.load_snapshot`); one that fails is rebuilt from
   the log, never used, and the worker says so (a note).
3. The records after it are replayed (:meth:`Recovery.replay`): each must be the next one (its
   position, shard and the running report count), so a restart reads at most the reports after the
   last written snapshot (``2 * flush_ids``: :mod:`~ldpsynth.aggregator.storage.snapshots`).

A log that fails a check makes the shard damaged (:class:`~ldpsynth.aggregator.errors.ShardDamaged`).
The reasoning: docs/internals.md, ``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

from pathlib import Path

from ldpsynth.aggregator.errors import ShardDamaged
from ldpsynth.aggregator.storage.acknowledged import AcknowledgedWriter
from ldpsynth.aggregator.storage.checked_file import CheckedFileError
from ldpsynth.aggregator.storage.idstore import DiskIdIndex
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout
from ldpsynth.aggregator.storage.log_records import LogCorruption, Record, decode, record_crc
from ldpsynth.aggregator.storage.refusals import (
    no_snapshot,
    record_out_of_place,
    records_lost,
    snapshot_rebuilt,
    snapshot_restored,
)
from ldpsynth.aggregator.storage.shard_state import Collection, ShardState
from ldpsynth.aggregator.storage.snapshot import MANIFEST, TallyArrays
from ldpsynth.aggregator.storage.snapshots import Snapshots
from ldpsynth.aggregator.storage.stats import StatsAccumulator, TallyAccumulator
from ldpsynth.aggregator.storage.store_check import check_position, load_snapshot, log_position, published_manifest
from ldpsynth.serving.observe import events
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies

log = events.get(__name__)


class Recovery:
    """Brings one shard's state up to its log (see the module docstring)."""

    def __init__(self, layout: Layout, directory: Path, state: ShardState, snapshots: Snapshots,
                 acknowledged: AcknowledgedWriter):
        self._layout = layout
        self._directory = directory
        self._state = state
        self._snapshots = snapshots
        self._acknowledged = acknowledged
        #: What the start did with the snapshot, ``(level, text)``, for the replica's log.
        self.notes: list[tuple[str, str]] = []
        #: Records replayed since the worker began (observability, tests).
        self.replayed = 0
        #: The state holds every record of the log (else the log's tail is replayed before the next commit).
        self.synced = False

    async def recover(self, replicated: ReplicatedLog) -> None:
        """Restore the last snapshot if it is a view of this log, replay the log after it, say what was done."""
        shard = self._state.shard
        restored = await self._restore(replicated)
        await self.replay(replicated)
        if restored is not None:
            self._note("info", no_snapshot(shard, self.replayed) if restored == 0 else
                       snapshot_restored(shard, restored, self.replayed))
        if self._state.crc < 0:
            position = await log_position(replicated, self._layout, shard, self._state.offset)
            assert position is not None
            self._state.crc = position.record_crc

    def _note(self, level: str, text: str) -> None:
        (log.warning if level == "warning" else log.info)("shard.start", text, shard=self._state.shard)
        self.notes.append((level, text))

    async def _restore(self, replicated: ReplicatedLog) -> int | None:
        """Check the log holds what was acknowledged, restore the snapshot if it is a view of this log.
        Returns the snapshot's sequence (0: there is none; ``None``: it was refused, and said so)."""
        state, layout, directory = self._state, self._layout, self._directory
        bucket = self._snapshots.bucket
        downloaded = None
        if bucket is not None and not (directory / MANIFEST).exists():
            try:
                await self._snapshots.download()
            except CheckedFileError as exc:
                downloaded = str(exc)
        acknowledged = self._acknowledged.path
        position = await check_position(replicated, layout, state.shard, directory, acknowledged,
                                        require_acknowledged=False, one_machine=acknowledged is not None,
                                        snapshot_name=None if bucket is None else
                                        published_manifest(layout, state.shard))
        self._acknowledged.last = position.acknowledged
        loaded = None
        try:
            if downloaded is not None:
                raise CheckedFileError(downloaded)
            loaded = await load_snapshot(directory, layout, state.shard, replicated)
        except CheckedFileError as exc:
            self._note("warning", snapshot_rebuilt(state.shard, str(exc)))
            return None
        if loaded is None:
            return 0
        snapshot, runs = loaded
        for name, c in snapshot.collections.items():
            coll = await state.collection(replicated, name)
            if coll.digest != c.card:
                raise ShardDamaged(f"shard {state.shard}: the snapshot holds collection {name!r} under another card")
            coll.index = DiskIdIndex(runs[name])
            coll.stats = self._restored_stats(coll, c.stats)
            coll.rows = c.rows
            coll.records = c.records
        state.quota.update(snapshot.quota)
        state.offset = snapshot.offset
        state.total = snapshot.total
        state.crc = snapshot.position.record_crc
        self._snapshots.restored(snapshot)
        return snapshot.offset

    def _restored_stats(self, coll: Collection, stats: SufficientStatistics | TallyArrays
                        ) -> StatsAccumulator | TallyAccumulator:
        """The running statistics of ``coll`` from its snapshot (a frequency oracle's tallies checked against
        its card's oracle)."""
        shard = self._state.shard
        if isinstance(stats, SufficientStatistics) and coll.oracle is None:
            return StatsAccumulator.restore(stats)
        if isinstance(stats, TallyArrays) and coll.oracle is not None:
            try:
                return TallyAccumulator.restore(KeyedTallies.restore(coll.oracle, stats.public_domain_size, stats.keys,
                                                                     stats.sizes, stats.tallies))
            except ValidationError as exc:
                raise ShardDamaged(f"shard {shard}: the snapshot's tallies of {coll.name!r}: {exc}") from None
        mechanism = "E" if coll.oracle is None else coll.oracle.name
        raise ShardDamaged(f"shard {shard}: the snapshot holds {type(stats).__name__} for collection "
                           f"{coll.name!r}, whose card is of mechanism {mechanism}")

    async def replay(self, replicated: ReplicatedLog) -> None:
        """Apply every record after the applied sequence (at start, and after an append whose outcome is
        unknown)."""
        shard, applied = self._state.shard, self._state.offset
        stream = await replicated.state(shard)
        if stream.first != 1 or stream.deleted:
            raise ShardDamaged(f"log of shard {shard}: records were removed (first sequence {stream.first}, "
                               f"{stream.deleted} deleted)")
        if stream.last < applied:
            raise ShardDamaged(records_lost(shard, stream.last, applied, "this worker applied it",
                                            self._acknowledged.path is not None))
        async for sequence, data in replicated.read(shard, applied + 1, stream.last):
            record = self._decode(data, sequence)
            await self._state.apply(replicated, record, record_crc(data))
            self.replayed += 1
        self.synced = True

    def _decode(self, data: bytes, sequence: int) -> Record:
        """The record at ``sequence``, which must be the next reports record of the shard."""
        shard = self._state.shard
        record = decode(data, layout=self._layout.id, shard=shard, sequence=sequence)
        if record.kind != "reports" or record.before != self._state.total:
            raise LogCorruption(record_out_of_place(shard, sequence, record.before, self._state.total))
        return record

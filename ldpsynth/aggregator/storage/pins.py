"""A shard worker's read path: queries pin the shard's state, and read their pins.

A pin (:meth:`ShardPins.pin`) keeps a collection's statistics and row count at the sequence the
worker has applied, until it is released or ``pin_seconds`` pass; every block of a query batch is
evaluated against the same pins, so answers describe one set of rows while ingest goes on. On a pin:
the statistics (:meth:`ShardPins.pinned_stats`), a cut block's pair totals :math:`(m, y_1)` (WYZ eq.
33; :class:`~ldpsynth.shared.estimators.pairs.PairTotals`, cached per pinned sequence), the rows
themselves (:meth:`ShardPins.rows`: read from the log records holding the collection's reports,
:class:`~ldpsynth.aggregator.storage.record_ranges.RecordRanges`, verified, in id order), and a
dense block's sums over them (:meth:`ShardPins.dense_sums`: the rows are kept with the pin, the
codes never leave the worker). The reasoning: docs/internals.md,
``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from ldpsynth.aggregator.errors import PinExpired, ShardDamaged, ShardUnavailable
from ldpsynth.aggregator.storage.idindex import merge_sorted_ids
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogUnavailable
from ldpsynth.aggregator.storage.log_records import LogCorruption, Section, decode
from ldpsynth.aggregator.storage.refusals import damaged_log
from ldpsynth.aggregator.storage.segments import Pin, RowChunk
from ldpsynth.aggregator.storage.shard_state import ShardState
from ldpsynth.serving.errors import WrongState
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.engine import Statistics, row_block_sums
from ldpsynth.shared.estimators.formulas import BlockSums
from ldpsynth.shared.estimators.pairs import PairTotals, edge_pair_totals
from ldpsynth.shared.estimators.statistics import SufficientStatistics


@dataclass
class _Pin:
    offset: int
    deadline: float
    stats: dict[str, tuple[int, Statistics]] = field(default_factory=dict)
    #: Rows read for the pin (:meth:`ShardPins.row_ids`), kept for its dense blocks until it is released.
    rows: dict[str, RowChunk] = field(default_factory=dict)


class ShardPins:
    """The pins on one shard's state (see the module docstring). Every read raises
    :class:`ShardDamaged` once the shard is damaged, :class:`PinExpired` for a pin it does not hold."""

    def __init__(self, state: ShardState, layout: str, pin_seconds: float):
        self._state = state
        self._layout = layout
        self._seconds = pin_seconds
        self._pins: dict[str, _Pin] = {}
        self._pairs: dict[tuple[str, int, str, str, str], PairTotals] = {}

    async def pin(self, replicated: ReplicatedLog | None, collection: str) -> Pin:
        """Pin ``collection``'s statistics at the applied sequence (expired pins are dropped)."""
        self._state.check()
        now = time.monotonic()
        for key in [k for k, p in self._pins.items() if p.deadline < now]:
            del self._pins[key]
        coll = await self._state.collection(replicated, collection)
        pin_id = uuid.uuid4().hex
        offset = self._state.offset
        self._pins[pin_id] = _Pin(offset, now + self._seconds, {collection: (coll.rows, coll.stats.snapshot())})
        return Pin(pin_id, offset, coll.rows)

    def unpin(self, pin_id: str) -> None:
        self._pins.pop(pin_id, None)

    def _pin(self, pin_id: str) -> _Pin:
        pin = self._pins.get(pin_id)
        if pin is None:
            raise PinExpired(f"shard {self._state.shard}: the query's pin expired; evaluate it again")
        return pin

    def _pinned(self, pin_id: str, collection: str) -> tuple[int, int, Statistics]:
        """The pin's sequence, and the rows and statistics of ``collection`` it holds."""
        pin = self._pin(pin_id)
        if collection not in pin.stats:
            raise PinExpired(f"shard {self._state.shard}: the query's pin expired; evaluate it again")
        rows, stats = pin.stats[collection]
        return pin.offset, rows, stats

    def pinned_stats(self, pin_id: str, collection: str) -> Statistics:
        """The pinned statistics of ``collection`` (E's counts, or an oracle's tallies per public key)."""
        self._state.check()
        return self._pinned(pin_id, collection)[2]

    async def cut_totals(self, pin_id: str, collection: str, source: str, target: str, edge: str,
                         sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Pair totals ``(m, y1)`` of cut queries over the pinned rows, and the rows they cover."""
        self._state.check()
        offset, rows, stats = self._pinned(pin_id, collection)
        if not isinstance(stats, SufficientStatistics):
            raise WrongState(f"collection {collection!r}: the shards' pair counts are mechanism E's (a frequency "
                             "oracle's cut queries are answered from its tallies)")
        key = (collection, offset, source, target, edge)
        pairs = self._pairs.get(key)
        if pairs is None:
            schema = MechanismCard.from_json(self._state.collections[collection].card_json).schema
            pairs = await asyncio.to_thread(edge_pair_totals, schema, stats, source, target, edge)
            self._pairs = {k: v for k, v in self._pairs.items() if k[0] != collection}
            self._pairs[key] = pairs
        m, y1 = pairs.totals(sources, targets).T
        return m, y1, rows

    async def rows(self, replicated: ReplicatedLog | None, pin_id: str, collection: str) -> RowChunk:
        """Every report of ``collection`` up to the pinned sequence, read from the log records that hold
        them and verified, ordered by report id (each record's section is: :func:`merge_sorted_ids`)."""
        self._state.check()
        offset, rows, _ = self._pinned(pin_id, collection)
        assert replicated is not None
        shard = self._state.shard
        parts: list[Section] = []
        try:
            for first, last, before in self._state.collections[collection].records.spans(offset):
                async for sequence, data in replicated.read(shard, first, last):
                    record = decode(data, layout=self._layout, shard=shard, sequence=sequence)
                    if record.before != before:
                        raise LogCorruption(f"log of shard {shard}, sequence {sequence}: a record before "
                                            "it is missing or out of place")
                    before += record.reports
                    parts += [s for s in record.sections if s.collection == collection]
        except LogCorruption as exc:
            raise ShardDamaged(self._state.damaged(damaged_log(str(exc)))) from None
        except LogUnavailable as exc:
            raise ShardUnavailable(str(exc)) from None
        if not parts:
            return RowChunk.empty(self._state.collections[collection].width)
        ids = np.concatenate([p.report_ids for p in parts])
        if len(ids) != rows:
            raise ShardDamaged(f"shard {shard}: the log holds {len(ids)} reports of {collection!r} up to "
                               f"sequence {offset}, its statistics {rows}")
        order = merge_sorted_ids(ids).order
        return RowChunk(ids[order], np.concatenate([p.public_keys for p in parts])[order],
                        np.concatenate([p.private_codes for p in parts])[order])

    async def row_ids(self, replicated: ReplicatedLog | None, pin_id: str, collection: str) -> np.ndarray:
        """The ids of the pinned :meth:`rows` (in id order); the rows stay with the pin for :meth:`dense_sums`."""
        return (await self._pinned_rows(replicated, pin_id, collection)).report_ids

    async def dense_sums(self, replicated: ReplicatedLog | None, pin_id: str, collection: str,
                         weights: np.ndarray) -> BlockSums:
        """:func:`~ldpsynth.shared.estimators.engine.row_block_sums` of a dense block over the pinned rows
        (``weights`` ``(Q, m, |D|)``: a weight list per row, in id order), where the rows are."""
        chunk = await self._pinned_rows(replicated, pin_id, collection)
        mechanism = MechanismCard.from_json(self._state.collections[collection].card_json).mechanism
        return await asyncio.to_thread(row_block_sums, weights, chunk.private_codes, mechanism, 1)

    async def _pinned_rows(self, replicated: ReplicatedLog | None, pin_id: str, collection: str) -> RowChunk:
        """The pin's :meth:`rows` of ``collection``, read once per pin."""
        pin = self._pin(pin_id)
        if collection not in pin.rows:
            pin.rows[collection] = await self.rows(replicated, pin_id, collection)
        return pin.rows[collection]

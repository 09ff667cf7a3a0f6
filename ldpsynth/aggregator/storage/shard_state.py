"""What a shard worker has applied from its log, and the one way it grows: a record applied whole.

Per collection (:class:`Collection`): its card, its id index
(:class:`~ldpsynth.aggregator.storage.idstore.DiskIdIndex`: every id in the log up to the applied
sequence), its running statistics (:mod:`~ldpsynth.aggregator.storage.stats`), its rows and the log
records holding them (:class:`~ldpsynth.aggregator.storage.record_ranges.RecordRanges`). Per shard: the
quota counters of every (collection, credential), the position applied (the log sequence, the
reports up to it and the CRC-32 of the record there:
:class:`~ldpsynth.aggregator.storage.snapshot.Position`, what snapshots and the acknowledged file
name) and whether the shard is *damaged* (it then refuses every call until an operator restores
the log). The math and the reasoning: docs/internals.md, ``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ldpsynth.aggregator.errors import ShardDamaged
from ldpsynth.aggregator.storage.idindex import sort_ids
from ldpsynth.aggregator.storage.idstore import DiskIdIndex
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_records import LogCorruption, Record, card_digest
from ldpsynth.aggregator.storage.record_ranges import RecordRanges
from ldpsynth.aggregator.storage.refusals import record_under_another_card
from ldpsynth.aggregator.storage.segments import QuotaKey
from ldpsynth.aggregator.storage.snapshot import Position
from ldpsynth.aggregator.storage.stats import StatsAccumulator, TallyAccumulator, accumulator_for
from ldpsynth.serving.observe import events
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.reports import REPORT_ID_BYTES

log = events.get(__name__)


@dataclass
class Collection:
    """One collection's applied state in a shard."""

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


class ShardState:
    """One shard's applied state (see the module docstring), from the genesis record on."""

    def __init__(self, shard: int):
        self.shard = shard
        self.collections: dict[str, Collection] = {}
        self.quota: dict[QuotaKey, int] = defaultdict(int)
        self.offset = 1  # the genesis record
        self.total = 0
        self.crc = -1  # CRC-32 of the record at self.offset (known once started)
        self.damage: str | None = None

    @property
    def position(self) -> Position:
        """The position applied."""
        return Position(self.offset, self.total, self.crc)

    @property
    def memory_ids(self) -> int:
        """Ids not yet in a run file, over all collections."""
        return sum(c.index.memory_ids for c in self.collections.values())

    def check(self) -> None:
        """Raise :class:`ShardDamaged` if the shard is damaged."""
        if self.damage is not None:
            raise ShardDamaged(self.damage)

    def damaged(self, reason: str) -> str:
        """Refuse service from now on (an operator must restore the log); log why once."""
        self.damage = reason
        log.error("shard.damaged", f"shard {self.shard} is damaged and refuses service: {reason}",
                  shard=self.shard, detail=reason)
        return reason

    async def collection(self, replicated: ReplicatedLog | None, name: str) -> Collection:
        """The state of collection ``name``, made empty (from its card registered in the log) the first time.

        While one caller waits for the card, another (a commit, a query's pin, quota admission)
        may make the collection and store rows in it: the one made first is kept, so no caller
        ever replaces rows and ids already applied with an empty state."""
        coll = self.collections.get(name)
        if coll is not None:
            return coll
        assert replicated is not None
        card_json = await replicated.card(name)
        if card_json is None:
            raise ShardDamaged(f"shard {self.shard}: collection {name!r} is not registered in the log")
        coll = self.collections.get(name)
        if coll is None:
            card = MechanismCard.from_json(card_json)
            layout = layout_of(card.mechanism)
            oracle = card.mechanism if isinstance(card.mechanism, FrequencyOracle) else None
            coll = Collection(name, card_json, card_digest(card_json), card.schema.public_domain_size,
                              layout.bound, layout.width, DiskIdIndex(), accumulator_for(card), oracle=oracle)
            self.collections[name] = coll
        return coll

    async def apply(self, replicated: ReplicatedLog | None, record: Record, crc: int) -> None:
        """Apply ``record`` (its CRC-32 ``crc``), the next one of the log, to the state."""
        # Resolve the collections first, then change the state without yielding: a concurrent
        # pin sees the state before or after the record, never half of it.
        colls = [await self.collection(replicated, section.collection) for section in record.sections]
        for coll, section in zip(colls, record.sections):
            if section.card != coll.digest:
                raise LogCorruption(record_under_another_card(self.shard, record.sequence, section.collection))
        for coll, section in zip(colls, record.sections):
            coll.index.add(sort_ids(section.report_ids))
            coll.stats.add(section.public_keys, section.private_codes)
            coll.rows += len(section)
            coll.records.add(record.sequence, record.before)
            for credential, count in section.quota.items():
                self.quota[(section.collection, credential)] += count
        self.offset = record.sequence
        self.total += record.reports
        self.crc = crc

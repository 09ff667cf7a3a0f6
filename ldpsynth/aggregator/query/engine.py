"""The query engine: statistical queries over the live synthetic database, evaluated where the data is.

A compiled batch (:class:`~ldpsynth.shared.queries.batch.QueryBatch`) is answered block by block with
the companion estimators (WYZ eqs. 17-22; :mod:`ldpsynth.shared.estimators.formulas`), all on **one
snapshot**: the engine first *pins* every shard (:meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.pin`:
the shard's statistics at the log sequence it has applied), evaluates every block against those
pins, and unpins. Rows that arrive meanwhile are simply not in the answer, so a batch is never
refused because of ingest.

* **A numeric collection** (HM or SW reports; docs/numeric.md): its batch is a
  :class:`~ldpsynth.shared.numeric.answering.NumericBatch` (mean, sum, variance, quantiles, histogram), answered
  from the same merged counts per (public key, report) by :func:`~ldpsynth.shared.numeric.answering.answer_numeric`.
* **Table blocks** (linear, predicate, marginal, grouped by a public attribute) depend on the rows
  only through the counts per (public key, private code): the pinned statistics of every shard,
  summed (the merged table is cached per collection, keyed by the pinned log sequences), and the
  whole block is one matrix product over it.
* **Cut blocks** (graph collections, WYZ eq. 33): every shard worker computes the pair totals
  :math:`(m, y_1)` over its pinned statistics (:class:`~ldpsynth.shared.estimators.pairs.PairTotals`);
  the totals add up.
* **Dense blocks** (one weight list per row, small n): every shard reads its pinned rows from the
  log records of the collection and keeps them with the pin; the engine ranks their ids (the order
  of an export: the shards' id runs merged), sends each shard its rows' weight lists, and each
  shard computes the block's :class:`~ldpsynth.shared.estimators.formulas.BlockSums` where its rows
  are (the codes never leave it); the sums merge.

A pin lost to a restarted worker makes the evaluation start again on new pins (at most
:data:`ATTEMPTS` times, then UNAVAILABLE). Querying reads the perturbed rows only, so it spends
no privacy budget.

**The minimum batch** (the schema's ``min_batch``, or a shuffled collection's ``shuffle.min_batch``;
docs/shuffle-accountant.md §6): on the same pins, a public-key group of fewer reports is never released
nor counted, whatever the query (:func:`~ldpsynth.shared.guarantees.withhold`): table blocks are
evaluated over the other groups only (``n`` counts them only), a cut or dense block that reads such a
group is refused (``WrongState``, FAILED_PRECONDITION, naming the group, its count and the minimum), and
so is a batch all of whose groups read are below it. An export (:meth:`QueryEngine.export_rows` then
:meth:`QueryEngine.release`) leaves those groups' rows out.

**A wide collection's parent** (:meth:`QueryEngine.estimate_wide`; docs/wide.md "Answering queries"): each view
sub-collection's merged statistics on its own pins (one snapshot per view, not one across the views), the
groups below the minimum batch withheld, reduced to the views' measurements
(:func:`~ldpsynth.shared.wide.parent.measure_parent`); the parent's database is fitted once per distinct
measurements (cached: the last one per parent) and answers the query objects over the wide row's attributes;
a grouped query by a public attribute is answered per value from that group's views and model
(:mod:`ldpsynth.shared.wide.grouped`; each group's model fitted on first use and cached with the parent's).
The answers carry the guarantees of a shuffled collection (or one with groups withheld) as any collection's: per
party the worst over the views and groups they read (:mod:`ldpsynth.shared.wide.guarantees`).
Queries that need the model are refused (``WrongState``, FAILED_PRECONDITION) naming the ``[wide]`` extra when
it is not installed; analytic ones answer without it.

**A shuffled collection** (its schema's shuffle block): the answers and releases carry the guarantees per
party (:func:`~ldpsynth.shared.guarantees.of_card`: the central one at the pool floor, the accountant
in a worker thread, cached), with the public-key groups read and their counts, and what was withheld.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ldpsynth.aggregator.errors import PinExpired
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.shards import Pins, Shards
from ldpsynth.aggregator.storage.idindex import merge_sorted_ids
from ldpsynth.aggregator.storage.segments import RowChunk
from ldpsynth.serving.errors import TryLater, WrongState
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.eligible import by_group, eligible
from ldpsynth.shared.estimators.engine import Statistics, cut_oracle_sums, table_block_sums
from ldpsynth.shared.estimators.formulas import Answers, BlockSums, answers_from_sums, cut_block_sums
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.guarantees import (
    ANSWERS,
    RELEASE,
    BelowMinimumBatch,
    Guarantees,
    key_names,
    of_card,
    refuse_withheld,
    withhold,
)
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import Mechanism, categorical
from ldpsynth.shared.numeric.answering import NumericAnswers, NumericBatch, answer_numeric
from ldpsynth.shared.queries.batch import CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.queries.model import Query
from ldpsynth.shared.queries.numeric import NumericQuery
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.shared.wide.grouped import WideParent
from ldpsynth.shared.wide.guarantees import parent_guarantees, views_read
from ldpsynth.shared.wide.parent import DEFAULT_FIT, WideAnswers, WideFit, measure_parent, parent_database, wide_answers

#: Evaluations of one batch before giving up when pins keep being lost (workers restarting).
ATTEMPTS = 3


def merge_sorted_rows(parts: Sequence[RowChunk]) -> RowChunk:
    """The shards' rows as one chunk ordered by report id (each part is already ordered)."""
    ids = np.concatenate([p.report_ids for p in parts])
    order = merge_sorted_ids(ids).order
    return RowChunk(ids[order], np.concatenate([p.public_keys for p in parts])[order],
                    np.concatenate([p.private_codes for p in parts])[order])


def _refuse(schema: Schema, keys: np.ndarray, sizes: np.ndarray, what: str) -> None:
    """The minimum batch's refusal, as this service's ``WrongState`` (FAILED_PRECONDITION)."""
    try:
        refuse_withheld(schema, key_names(schema, keys), sizes, what)
    except BelowMinimumBatch as exc:
        raise WrongState(str(exc)) from None


def merge_statistics(parts: Sequence[Statistics]) -> Statistics:
    """The shards' pinned statistics merged: E's counts, or a frequency oracle's tallies per public key."""
    if all(isinstance(p, KeyedTallies) for p in parts):
        return KeyedTallies.merge([p for p in parts if isinstance(p, KeyedTallies)])
    return SufficientStatistics.merge([p for p in parts if isinstance(p, SufficientStatistics)])


class QueryEngine:
    """Answers query batches of the collections of ``catalog`` from ``shards``."""

    def __init__(self, catalog: Catalog, shards: Shards, wide_fit: WideFit = DEFAULT_FIT):
        self.catalog = catalog
        self.shards = shards
        self.wide_fit = wide_fit
        self._statistics: dict[str, tuple[tuple[int, ...], Statistics]] = {}
        #: Per wide parent: the key of its views' statistics, its answering parent (fitted databases: the whole
        #: population's and each public group's asked for) and the lock answering it.
        self._wide: dict[str, tuple[object, WideParent, threading.Lock]] = {}

    async def _pinned(self, collection: str, evaluate: Any) -> Any:
        """``await evaluate(pins)`` on fresh pins of every shard (again if a pin was lost)."""
        for _ in range(ATTEMPTS):
            pins = await self.shards.pin(collection)
            try:
                return await evaluate(pins)
            except PinExpired:
                continue
            finally:
                await self.shards.unpin(pins)
        raise TryLater(f"shard workers of {collection!r} restarted during the query {ATTEMPTS} times in a row; retry")

    async def statistics(self, collection: str, pins: Pins) -> Statistics:
        """The merged pinned statistics, cached until a shard's pinned log sequence changes."""
        offsets = tuple(pin.sequence for pin in pins)
        cached = self._statistics.get(collection)
        if cached is not None and cached[0] == offsets:
            return cached[1]
        parts = await self.shards.pinned_stats(pins, collection)
        merged = await asyncio.to_thread(merge_statistics, parts)
        self._statistics[collection] = (offsets, merged)
        return merged

    async def export_rows(self, collection: str) -> RowChunk:
        """Every stored report of ``collection`` (one snapshot), ordered by report id."""
        self.catalog.get(collection)

        async def evaluate(pins: Pins) -> RowChunk:
            parts = await self.shards.rows(pins, collection)
            return await asyncio.to_thread(merge_sorted_rows, parts)

        return await self._pinned(collection, evaluate)

    async def estimate(self, collection: str, batch: QueryBatch | NumericBatch, level: float
                       ) -> Answers | NumericAnswers:
        """Answer ``batch`` over the rows of ``collection`` (see the module docstring). An empty
        batch has no answers (``n = 0``), asks no shard and is not refused for a collection without rows."""
        info = self.catalog.get(collection)
        if batch.schema != info.schema:
            raise ValidationError("queries", f"queries compiled for the schema of collection {collection!r}",
                                  "another schema")
        if isinstance(batch, NumericBatch):
            return await self._numeric(collection, batch, level)
        mechanism = info.card.mechanism
        categorical(mechanism)  # a numeric collection's batch is a NumericBatch (above)
        if batch.size == 0:  # the empty batch "[]": no answers, and no shard is asked (n = 0: no row read)
            none = np.zeros(0)
            return Answers(batch=batch, estimate=none, proper_estimate=none, exact=np.zeros(0, bool), std_error=none,
                           ci_low=none, ci_high=none, bound=none, bound_proper=none, level=level, n=0,
                           epsilon=mechanism.epsilon)

        async def evaluate(pins: Pins) -> Answers:
            n = sum(pin.rows for pin in pins)
            if n == 0:
                raise WrongState(f"collection {collection!r} has no reports yet: nothing to estimate from")
            if not by_group(info.schema):
                sums = [await self._block(collection, block, batch, mechanism, pins, n, None)
                        for block in batch.blocks]
                return await asyncio.to_thread(answers_from_sums, batch, sums, n, mechanism, level=level)
            stats = await self.statistics(collection, pins)  # the groups the batch reads, on the same pins
            try:
                kept = await asyncio.to_thread(eligible, batch, stats)
            except BelowMinimumBatch as exc:
                raise WrongState(str(exc)) from None
            n = kept.stats.n
            sums = [await self._block(collection, block, batch, mechanism, pins, n, kept.stats)
                    for block in batch.blocks]
            answers = await asyncio.to_thread(answers_from_sums, batch, sums, n, mechanism, level=level)
            if info.schema.shuffle is None and not kept.withheld.groups:
                return answers
            guarantees = await asyncio.to_thread(of_card, info.card, ANSWERS, kept.labels, kept.counts,
                                                 withheld=kept.withheld)
            return replace(answers, guarantees=guarantees)

        return await self._pinned(collection, evaluate)

    async def _numeric(self, collection: str, batch: NumericBatch, level: float) -> NumericAnswers:
        """A numeric collection's answers from the merged pinned counts per (public key, report), by
        :func:`~ldpsynth.shared.numeric.answering.answer_numeric` (the offline estimator's function too)."""
        card = self.catalog.get(collection).card
        epsilon = card.mechanism.epsilon
        if batch.size == 0:
            return answer_numeric(batch, SufficientStatistics.empty(batch.schema.public_domain_size,
                                                                    batch.schema.private_domain_size), epsilon, level)

        async def evaluate(pins: Pins) -> NumericAnswers:
            if sum(pin.rows for pin in pins) == 0:
                raise WrongState(f"collection {collection!r} has no reports yet: nothing to estimate from")
            stats = await self.statistics(collection, pins)
            assert isinstance(stats, SufficientStatistics)
            try:
                return await asyncio.to_thread(answer_numeric, batch, stats, epsilon, level, card=card)
            except BelowMinimumBatch as exc:
                raise WrongState(str(exc)) from None

        return await self._pinned(collection, evaluate)

    async def estimate_wide(self, card: WideCard, queries: Sequence[Query | NumericQuery], level: float
                            ) -> WideAnswers:
        """Answer ``queries`` on the wide collection ``card`` from its views' sub-collections (module docstring)."""
        name = card.schema.name
        stats = []
        for sub in card.names:
            async def evaluate(pins: Pins, sub: str = sub) -> Statistics:
                return await self.statistics(sub, pins)

            stats.append(await self._pinned(sub, evaluate))
        measured = await asyncio.to_thread(measure_parent, card, stats)
        if not measured.measurements:
            withheld = sum(rule.reports for rule in measured.withheld)
            raise WrongState(f"collection {name!r}: none of its views {list(card.names)} has a report to answer from"
                             + (f" ({withheld} reports withheld below the minimum batch)" if withheld else ""))
        key = (measured.key(), tuple((s.present_keys.tobytes(), s.group_sizes.tobytes()) for s in stats))
        cached = self._wide.get(name)
        if cached is None or cached[0] != key:     # the groups' databases are fitted on first use, then kept
            parent = WideParent(card, tuple(stats), measured, parent_database(card, measured, self.wide_fit))
            cached = (key, parent, threading.Lock())
            self._wide[name] = cached
        epsilon = max(sub.mechanism.epsilon for sub in card.cards)

        def answer() -> WideAnswers:
            with cached[2]:     # the database keeps its bootstrap's replicates: one answer at a time
                try:
                    answers = wide_answers(cached[1], queries, level, epsilon)
                    return replace(answers, guarantees=parent_guarantees(card, stats, views_read(card, answers)))
                except ImportError as exc:
                    raise WrongState(f"collection {name!r}: these queries need the wide model, which this server "
                                     "cannot fit without the [wide] extra (pip install 'ldpsynth[wide]'): "
                                     f"{exc}; queries inside one measured view answer without it") from None

        return await asyncio.to_thread(answer)

    async def release(self, collection: str, rows: RowChunk) -> tuple[RowChunk, Guarantees | None]:
        """What an export of ``rows`` releases: the rows of the public-key groups at or above the minimum
        batch (the others withheld: ``WrongState`` when none is left), and their guarantees per party
        (``None`` for a collection without a shuffle block or a minimum batch)."""
        info = self.catalog.get(collection)
        if not by_group(info.schema):
            return rows, None
        keys, inverse, sizes = np.unique(np.asarray(rows.public_keys), return_inverse=True, return_counts=True)
        rule = withhold(info.schema.minimum_batch[0], sizes)
        if not rule.kept.any():
            _refuse(info.schema, keys, sizes, "the export was")
        if rule.groups:
            keep = rule.kept[inverse.reshape(-1)]
            rows = RowChunk(rows.report_ids[keep], rows.public_keys[keep], rows.private_codes[keep])
        guarantees = await asyncio.to_thread(of_card, info.card, RELEASE, key_names(info.schema, keys[rule.kept]),
                                             sizes[rule.kept], withheld=rule)
        return rows, guarantees

    async def _block(self, collection: str, block: Any, batch: QueryBatch, mechanism: Mechanism, pins: Pins,
                     n: int, kept: Statistics | None) -> BlockSums:
        """One block's sums over the pinned rows (``kept``: the statistics of the groups not withheld)."""
        if isinstance(block, TableBlock):
            stats = kept if kept is not None else await self.statistics(collection, pins)
            return await asyncio.to_thread(table_block_sums, block, stats, batch.schema, mechanism)
        if isinstance(block, CutBlock) and not isinstance(mechanism, MechanismE):
            # an oracle's pairs: their estimates from the merged tallies (the shards' pair counts are E's)
            tallies = kept if kept is not None else await self.statistics(collection, pins)
            assert isinstance(tallies, KeyedTallies)
            return await asyncio.to_thread(cut_oracle_sums, block, tallies, batch.schema)
        if isinstance(block, CutBlock):
            parts = await self.shards.cut_totals(pins, collection, block.source, block.target, block.edge,
                                                 block.sources, block.targets)
            m = np.sum([p[0] for p in parts], axis=0)
            y1 = np.sum([p[1] for p in parts], axis=0)
            assert isinstance(mechanism, MechanismE)
            return cut_block_sums(m, y1, mechanism)
        return await self._dense(collection, block, batch, pins, n)

    async def _dense(self, collection: str, block: RowBlock, batch: QueryBatch, pins: Pins, n: int) -> BlockSums:
        """A dense block's sums: the replica ranks the shards' ids (the rows' order, as exported), each shard
        sums its rows' weight lists where its rows are (:meth:`ShardWorker.dense_sums`)."""
        if block.weights.shape[1] != n:
            raise ValidationError(f"queries[{batch.origins[block.positions[0]]}].table",
                                  f"{n} weight lists, one per stored row (in report-id order, as exported)",
                                  f"got {block.weights.shape[1]}")
        ids = await self.shards.row_ids(pins, collection)
        merged_order = merge_sorted_ids(np.concatenate(ids)).order
        position = np.empty(n, np.int64)
        position[merged_order] = np.arange(n)          # global rank of every row, shard by shard
        starts = np.cumsum([0] + [len(part) for part in ids])
        weights = [block.weights[:, position[a:b]] if b > a else None for a, b in zip(starts[:-1], starts[1:])]
        sums = [part for part in await self.shards.dense_sums(pins, collection, weights) if part is not None]
        total = sums[0]
        for other in sums[1:]:
            total = total.merge(other)
        return total

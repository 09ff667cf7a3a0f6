"""The query engine: statistical queries over the live synthetic database, evaluated where the data is.

A compiled batch (:class:`~ldpsynth.shared.query_batch.QueryBatch`) is answered block by block with
the companion estimators of seed 000 (eqs. 17-22; :mod:`ldpsynth.shared.estimator_math`):

* **Table blocks** (linear, predicate, marginal, grouped by a public attribute) depend on the rows
  only through the counts per (public key, private code): the shards' sufficient statistics are
  fetched in parallel and summed (the merged table is cached per collection until rows are
  committed), and the whole block is one matrix product over it.
* **Cut blocks** (graph collections, eq. 33): every shard actor computes the pair totals
  :math:`(m, y_1)` of the batch over its own rows from a compact pair-count matrix
  (:class:`~ldpsynth.aggregator.pairs.PairCounts`); the totals add up.
* **Dense blocks** (one weight list per row, small n): the rows are ordered by report id (the
  order of an export), and each shard's rows are a Ray task computing the block's
  :class:`~ldpsynth.shared.estimator_math.BlockSums` over them; the sums merge.

Each block reports the number of rows it was computed over; if rows were committed while a
batch was being evaluated the blocks would disagree, so the evaluation is repeated (at most
:data:`ATTEMPTS` times) and then refused with ABORTED: answers always describe one set of rows.
Querying reads the perturbed rows only, so it spends no privacy budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimator_engine import row_block_sums, table_block_sums
from ldpsynth.shared.estimator_math import Answers, BlockSums, answers_from_sums, cut_block_sums
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.query_batch import CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.statistics import SufficientStatistics

from .config import Catalog
from .idindex import sort_ids
from .stats import SufficientStats
from .status import StatusError
from .store import RowChunk

#: Evaluations of one batch before giving up on a consistent set of rows (concurrent ingest).
ATTEMPTS = 3


class QueryShards(Protocol):
    """What the engine needs from the shards (:class:`~ldpsynth.aggregator.ray_shards.RayShards`)."""

    async def wait_ready(self) -> dict[int, dict[str, int]]: ...

    async def stats(self, collection: str) -> list[SufficientStats]: ...

    async def sorted_rows(self, collection: str) -> list[RowChunk]: ...

    async def cut_totals(self, collection: str, source: str, target: str, edge: str, sources: np.ndarray,
                         targets: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]: ...

    async def map_tasks(self, function: Any, arguments: Sequence[tuple[Any, ...]]) -> list[Any]: ...


def merge_sorted_rows(parts: Sequence[RowChunk]) -> RowChunk:
    """The shards' rows as one chunk ordered by report id (each part is already ordered)."""
    ids = np.concatenate([p.report_ids for p in parts])
    order = sort_ids(ids).order
    return RowChunk(ids[order], np.concatenate([p.public_keys for p in parts])[order],
                    np.concatenate([p.private_codes for p in parts])[order])


def _dense_sums(weights: np.ndarray, codes: np.ndarray, mechanism: MechanismE) -> BlockSums:
    """A Ray task: the sums of a dense block over one shard's rows (one worker thread per task)."""
    return row_block_sums(weights, codes, mechanism, workers=1)


class QueryEngine:
    """Answers query batches of the collections of ``catalog`` from ``shards``."""

    def __init__(self, catalog: Catalog, shards: QueryShards):
        self.catalog = catalog
        self.shards = shards
        self._statistics: dict[str, SufficientStatistics] = {}

    async def rows(self, collection: str) -> int:
        """Stored reports of ``collection`` (all shards)."""
        counts = await self.shards.wait_ready()
        return sum(c.get(collection, 0) for c in counts.values())

    async def statistics(self, collection: str) -> SufficientStatistics:
        """The merged sufficient statistics, cached until the collection's row count changes."""
        cached = self._statistics.get(collection)
        if cached is not None and cached.n == await self.rows(collection):
            return cached
        parts = await self.shards.stats(collection)
        merged = await asyncio.to_thread(lambda: SufficientStats.merge(parts).to_statistics())
        self._statistics[collection] = merged
        return merged

    async def export_rows(self, collection: str) -> RowChunk:
        """Every stored report of ``collection``, ordered by report id."""
        self.catalog.get(collection)
        parts = await self.shards.sorted_rows(collection)
        return await asyncio.to_thread(merge_sorted_rows, parts)

    async def estimate(self, collection: str, batch: QueryBatch, level: float) -> Answers:
        """Answer ``batch`` over the rows of ``collection`` (see the module docstring). An empty
        batch has no answers (``n = 0``), asks no shard and is not refused for a collection without rows."""
        info = self.catalog.get(collection)
        if batch.schema != info.schema:
            raise ValidationError("queries", f"queries compiled for the schema of collection {collection!r}",
                                  "another schema")
        mechanism = info.card.mechanism
        if batch.size == 0:  # the empty batch "[]": no answers, and no shard is asked (n = 0: no row read)
            none = np.zeros(0)
            return Answers(batch=batch, estimate=none, proper_estimate=none, exact=np.zeros(0, bool), std_error=none,
                           ci_low=none, ci_high=none, bound=none, bound_proper=none, level=level, n=0,
                           epsilon=mechanism.epsilon)
        for _ in range(ATTEMPTS):
            sums, sizes = [], set()
            for block in batch.blocks:
                block_sums, n = await self._block(collection, block, batch, mechanism)
                sums.append(block_sums)
                sizes.add(n)
            if len(sizes) == 1:
                (n,) = sizes
                if n == 0:
                    raise StatusError(grpc.StatusCode.FAILED_PRECONDITION,
                                      f"collection {collection!r} has no reports yet: nothing to estimate from")
                return await asyncio.to_thread(answers_from_sums, batch, sums, n, mechanism, level=level)
        raise StatusError(grpc.StatusCode.ABORTED, f"reports of {collection!r} were committed during the query "
                                                   f"{ATTEMPTS} times in a row; retry")

    async def _block(self, collection: str, block: Any, batch: QueryBatch,
                     mechanism: MechanismE) -> tuple[BlockSums, int]:
        if isinstance(block, TableBlock):
            stats = await self.statistics(collection)
            if stats.n == 0:
                return BlockSums.empty(len(block.positions)), 0
            sums = await asyncio.to_thread(table_block_sums, block, stats, batch.schema, mechanism)
            return sums, stats.n
        if isinstance(block, CutBlock):
            parts = await self.shards.cut_totals(collection, block.source, block.target, block.edge,
                                                 block.sources, block.targets)
            m = np.sum([p[0] for p in parts], axis=0)
            y1 = np.sum([p[1] for p in parts], axis=0)
            return cut_block_sums(m, y1, mechanism), sum(p[2] for p in parts)
        return await self._dense(collection, block, batch, mechanism)

    async def _dense(self, collection: str, block: RowBlock, batch: QueryBatch,
                     mechanism: MechanismE) -> tuple[BlockSums, int]:
        parts = await self.shards.sorted_rows(collection)
        n = sum(len(p) for p in parts)
        if block.weights.shape[1] != n:
            raise ValidationError(f"queries[{batch.origins[block.positions[0]]}].table",
                                  f"{n} weight lists, one per stored row (in report-id order, as exported)",
                                  f"got {block.weights.shape[1]}")
        if n == 0:
            return BlockSums.empty(len(block.positions)), 0
        merged_order = sort_ids(np.concatenate([p.report_ids for p in parts])).order
        position = np.empty(n, np.int64)
        position[merged_order] = np.arange(n)          # global rank of every row, shard by shard
        starts = np.cumsum([0] + [len(p) for p in parts])
        tasks = [(block.weights[:, position[a:b]], part.private_codes, mechanism)
                 for a, b, part in zip(starts[:-1], starts[1:], parts) if b > a]
        sums = await self.shards.map_tasks(_dense_sums, tasks)
        total = sums[0]
        for other in sums[1:]:
            total = total.merge(other)
        return total, n

"""The statistics a batch of queries is answered from under the minimum batch (docs/shuffle-accountant.md §6).

A public-key group of fewer reports than the collection's minimum batch is never released nor counted,
whatever the query (:func:`~ldpsynth.shared.guarantees.withhold`). Table blocks (linear, predicate,
marginal, grouped) are answered over the other groups only; a cut or dense block reads each group it
touches whole, so one that reads a withheld group is refused, and so is a batch all of whose groups read
are withheld. The query service and the offline estimator both answer through :func:`eligible`, so they
agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.estimators.engine import Statistics
from ldpsynth.shared.guarantees import Withheld, key_names, keys_read, refuse_withheld, withhold
from ldpsynth.shared.schema import Schema

__all__ = ["by_group", "Eligible", "eligible"]


def by_group(schema: Schema) -> bool:
    """Whether ``schema``'s collection is released per public-key group: a shuffled collection (its
    guarantees are stated per group) or one with a minimum batch (its groups below it are withheld)."""
    return schema.shuffle is not None or schema.minimum_batch[0] > 1


@dataclass(frozen=True)
class Eligible:
    """What a batch is answered from: the statistics of the groups kept, what it would have read of the
    withheld ones, and the names and reports of the kept groups it reads."""

    stats: Statistics
    withheld: Withheld
    labels: list[str]
    counts: np.ndarray


def eligible(batch: object, stats: Statistics) -> Eligible:
    """The minimum batch applied to ``batch`` (a :class:`~ldpsynth.shared.queries.batch.QueryBatch`) over
    ``stats`` (module docstring); raises :class:`~ldpsynth.shared.guarantees.BelowMinimumBatch`.

    Parameters
    ----------
    batch : QueryBatch
        The compiled queries.
    stats : SufficientStatistics or KeyedTallies
        Every stored report's statistics.

    Returns
    -------
    Eligible
        The statistics to answer from and what was withheld.
    """
    from ldpsynth.shared.queries.batch import TableBlock

    schema: Schema = batch.schema  # type: ignore[attr-defined]
    present, sizes = stats.present_keys, stats.group_sizes
    rule = withhold(schema.minimum_batch[0], sizes)
    read = keys_read(batch, present)
    lost = read & ~rule.kept
    whole = any(not isinstance(block, TableBlock) for block in batch.blocks)  # type: ignore[attr-defined]
    if lost.any() and (whole or not (read & rule.kept).any()):
        why = " (a cut or dense query reads each group whole)" if whole else ""
        refuse_withheld(schema, key_names(schema, present[lost]), sizes[lost], f"the queries were{why}")
    counted = read & rule.kept
    return Eligible(stats.restricted(rule.kept), Withheld(rule.kept, int(lost.sum()), int(sizes[lost].sum())),
                    key_names(schema, present[counted]), sizes[counted])

"""A numeric batch's answers from the counts of reports per (public key, report): the one function the query
service and the offline estimator both call, so they agree.

For a group g of rows (every row, or the rows with one value of the public attribute ``by``) the counts
:math:`c_{g,y} = \\sum_{\\text{keys } k \\in g} N[k, y]` of the sufficient statistics are all an answer needs:

* **mean, sum** (HM): :func:`~ldpsynth.shared.numeric.estimators.estimate_mean_from_counts`,
  :math:`\\bar v_g` with SE :math:`\\sqrt{(a m_2 + c)/n_g}` on [-1, 1] times the range's half width; the sum is
  :math:`n_g \\bar v_g` with SE :math:`n_g\\,\\mathrm{SE}` (:math:`n_g` public). A group without rows: the mean is
  NaN, the sum 0 with SE 0.
* **variance**: HM, :func:`~ldpsynth.shared.numeric.variance.estimate_variance_from_counts` (unbiased, with its
  delta-method SE); SW, :func:`~ldpsynth.shared.numeric.variance.histogram_variance` of the EMS fit with the
  bootstrap SE below. Its proper estimate is clipped to :math:`[0, ((hi - lo)/2)^2]`, the largest variance on the range.
  A group without rows: NaN.
* **declared levels** (SW, the attribute has a ``step``): the quantiles, histogram and variance below are those of
  the EM on the levels (:class:`~ldpsynth.shared.numeric.levels.LevelModel`, smoothed or not by cross-validation)
  in place of EMS on the buckets, with the same bootstrap (the folds are drawn from the counts' own seed, so every
  query on a group makes the same choice).
* **quantiles, histogram** (SW): EMS (Li2020SIGMOD) of :math:`c_g`, its CDF's quantiles
  (:func:`~ldpsynth.shared.numeric.estimators.quantiles`) or the shares of k equal bins
  (:func:`~ldpsynth.shared.numeric.estimators.bin_shares`), with the bootstrap SE of
  :func:`~ldpsynth.shared.numeric.estimators.bootstrap_from_counts` (:data:`REPLICATES` resamples). The resamples
  are analysis-side randomness, drawn from a generator seeded by SHA-256 of the group's counts and the query, so
  the same counts give the same answer on the server and offline. A group without rows: NaN.

Each answer states the rows it reads (``rows``: :math:`n_g`, sent per answer on the wire; ``n`` is the batch's
kept rows). The interval is the estimate ± z SE at ``level``, except a quantile on declared levels: its interval is
inverted from the CDF's intervals at every level (:func:`~ldpsynth.shared.numeric.levels.quantile_intervals`; its
SE stays the bootstrap SE of the level quantile); the ``proper_estimate`` is the estimate clipped to
what the answer can be (the range, n times it, [0, 1] for a share; ``exact`` False); the RMS bounds of WYZ eqs. 20/22
do not apply to these estimators and are NaN. A public-key group below the collection's minimum batch is never
counted (:func:`~ldpsynth.shared.guarantees.withhold`); if no group is left the batch is refused
(:class:`~ldpsynth.shared.guarantees.BelowMinimumBatch`). Given the collection's card, the answers of a shuffled
collection (or with groups withheld) state their guarantees as a categorical collection's do
(:func:`~ldpsynth.shared.guarantees.of_card`: per party, the central one by FMT21's clone bound).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np

from ldpsynth.shared.estimators.formulas import AnswerColumns
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.guarantees import ANSWERS, key_names, of_card, refuse_withheld, withhold
from ldpsynth.shared.numeric.answering.batch import NumericBatch
from ldpsynth.shared.numeric.collection.mechanism import numeric_mechanism
from ldpsynth.shared.numeric.estimators import bin_shares, bootstrap_from_counts, estimate_mean_from_counts, quantiles
from ldpsynth.shared.numeric.levels import LevelModel, NumericLevels, quantile_intervals
from ldpsynth.shared.numeric.samplers import HybridMechanism, SquareWave
from ldpsynth.shared.numeric.variance import estimate_variance_from_counts, histogram_variance
from ldpsynth.shared.queries.json_form import query_to_json
from ldpsynth.shared.queries.numeric import HistogramQuery, NumericQuery, QuantilesQuery, SumQuery, VarianceQuery
from ldpsynth.shared.validation import check_probability

__all__ = ["REPLICATES", "NumericAnswers", "answer_numeric", "group_counts"]

#: Bootstrap resamples behind an SW answer's standard error.
REPLICATES = 100


@dataclass(frozen=True, eq=False)
class NumericAnswers(AnswerColumns):
    """The answers to a :class:`NumericBatch`, labelled by it (columns as
    :class:`~ldpsynth.shared.estimators.formulas.AnswerColumns`)."""

    batch: NumericBatch
    #: Per answer, the rows its group holds (:math:`n_g`; every kept row without ``by``).
    rows: np.ndarray = field(kw_only=True)

    def label(self, j: int) -> str:
        return self.batch.label(j)

    def rows_sent(self) -> np.ndarray | None:
        return self.rows

    def labels_sent(self) -> tuple[str, ...] | None:
        return self.batch.labels

    def origin(self, j: int) -> int:
        return int(self.batch.origins[j])


def group_counts(batch: NumericBatch, stats: SufficientStatistics, by: str | None) -> np.ndarray:
    """:math:`c_{g,y}`: the counts of reports y per value g of the public attribute ``by`` (every value, in code
    order), or one row for all rows (``by`` None)."""
    table = stats.table.astype(np.int64)
    if by is None:
        return table.sum(axis=0, keepdims=True)
    size = batch.schema.attribute(by).size
    digits = batch.schema.public_digits(stats.present_keys)[by]
    counts = np.zeros((size, table.shape[1]), np.int64)
    np.add.at(counts, digits, table)
    return counts


def _rng(counts: np.ndarray, query: NumericQuery) -> np.random.Generator:
    """The bootstrap's generator: seeded by SHA-256 of the group's counts and the query's JSON (module docstring)."""
    digest = hashlib.sha256(counts.astype("<i8").tobytes() + json.dumps(query_to_json(query)).encode()).digest()
    return np.random.default_rng(list(digest))


class _Part(NamedTuple):
    """One group's answers to one query: estimate, SE, lowest and highest possible answer, and the interval's ends
    where they are not the estimate ± z SE (None: they are)."""

    estimate: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    interval: tuple[np.ndarray, np.ndarray] | None = None


def _answer(batch: NumericBatch, query: NumericQuery, counts: np.ndarray, level: float) -> _Part:
    """One group's :class:`_Part` for ``query`` from its ``counts``."""
    attribute = batch.schema.numeric
    assert attribute is not None
    span = attribute.range
    sampler = numeric_mechanism(batch.schema.mechanism, batch.schema.epsilon).sampler
    n = int(counts.sum())
    if attribute.levels is not None and isinstance(sampler, SquareWave) and n > 0 and \
            isinstance(query, (QuantilesQuery, HistogramQuery, VarianceQuery)):
        return _level_answer(attribute.levels, attribute.level_units(), sampler, query, counts, level)
    if isinstance(query, (QuantilesQuery, HistogramQuery)):
        assert isinstance(sampler, SquareWave)
        width = len(query.q) if isinstance(query, QuantilesQuery) else query.bins
        low, high = (np.full(width, span.lo), np.full(width, span.hi)) if isinstance(query, QuantilesQuery) \
            else (np.zeros(width), np.ones(width))
        if n == 0:
            return _Part(np.full(width, np.nan), np.full(width, np.nan), low, high)
        statistic = (lambda theta: quantiles(theta, span, query.q)) if isinstance(query, QuantilesQuery) \
            else (lambda theta: bin_shares(theta, query.bins))
        value, se = bootstrap_from_counts(sampler, counts, statistic, _rng(counts, query), replicates=REPLICATES)
        return _Part(value, se, low, high)
    if isinstance(query, VarianceQuery):
        bounds = np.zeros(1), np.array([span.half_width ** 2])        # the largest variance on [lo, hi]
        if n == 0:
            return _Part(np.full(1, np.nan), np.full(1, np.nan), *bounds)
        if isinstance(sampler, SquareWave):
            value, se = bootstrap_from_counts(sampler, counts,
                                              lambda theta: np.array([histogram_variance(theta, span)]),
                                              _rng(counts, query), replicates=REPLICATES)
            return _Part(value, se, *bounds)
        assert isinstance(sampler, HybridMechanism)
        var = estimate_variance_from_counts(sampler, counts, span, level)
        return _Part(np.array([var.variance]), np.array([var.standard_error]), *bounds)
    assert isinstance(sampler, HybridMechanism)
    scale = n if isinstance(query, SumQuery) else 1
    bounds = np.array([scale * span.lo]), np.array([scale * span.hi])
    if n == 0:  # no rows: the sum is 0 exactly (n is public), the mean undefined
        empty = np.array([0.0 if isinstance(query, SumQuery) else np.nan])
        return _Part(empty, empty.copy(), *bounds)
    mean = estimate_mean_from_counts(sampler, counts, span, level)
    return _Part(np.array([scale * mean.mean]), np.array([scale * mean.standard_error]), *bounds)


def _level_answer(levels: NumericLevels, units: np.ndarray, sampler: SquareWave,
                  query: QuantilesQuery | HistogramQuery | VarianceQuery, counts: np.ndarray, level: float
                  ) -> _Part:
    """:func:`_answer` of an SW query on declared levels, from a group with rows (module docstring); a quantile's
    interval is inverted from the CDF's at ``level``."""
    rng = _rng(counts, query)
    model = LevelModel.of(sampler, levels, units, False).chosen(counts)
    if isinstance(query, QuantilesQuery):
        q = quantile_intervals(model, counts, query.q, level, rng, replicates=REPLICATES)
        return _Part(q.value, q.se, np.full(q.value.size, levels.lo), np.full(q.value.size, levels.hi),
                     (q.low, q.high))
    if isinstance(query, HistogramQuery):
        bins = query.bins
        value, se = bootstrap_from_counts(sampler, counts, lambda theta: model.bin_shares(theta, bins), rng,
                                          replicates=REPLICATES, fit=model.fit)
        return _Part(value, se, np.zeros(value.size), np.ones(value.size))
    value, se = bootstrap_from_counts(sampler, counts, lambda theta: np.array([model.variance(theta)]), rng,
                                      replicates=REPLICATES, fit=model.fit)
    return _Part(value, se, np.zeros(1), np.array([((levels.hi - levels.lo) / 2.0) ** 2]))


def answer_numeric(batch: NumericBatch, stats: SufficientStatistics, epsilon: float, level: float = 0.95, *,
                   card: Any = None, rows_per_device: int | None = None) -> NumericAnswers:
    """The answers to ``batch`` from the collection's statistics ``stats`` (module docstring), at confidence
    ``level``; ``epsilon`` is the delivered ε the answers state. ``n``: the rows counted. ``card`` (the
    collection's :class:`~ldpsynth.shared.card.MechanismCard`): the answers of a shuffled collection, or with
    groups withheld, carry their ``guarantees`` (``rows_per_device`` as :func:`~ldpsynth.shared.guarantees.of_card`)."""
    level = check_probability(level, "level")
    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    rule = withhold(batch.schema.minimum_batch[0], stats.group_sizes)
    if batch.size and stats.n and not rule.kept.any():
        refuse_withheld(batch.schema, key_names(batch.schema, stats.present_keys), stats.group_sizes,
                        "the queries were")
    kept = stats.restricted(rule.kept) if rule.groups else stats
    parts: list[_Part] = []
    rows: list[np.ndarray] = []
    for query in batch.queries:
        for counts in group_counts(batch, kept, query.by):
            parts.append(_answer(batch, query, counts, level))
            rows.append(np.full(len(parts[-1][0]), counts.sum(), np.int64))
    ends = [p.interval if p.interval is not None else (p.estimate - z * p.se, p.estimate + z * p.se) for p in parts]
    columns = [np.concatenate(c) for c in zip(*(p[:4] + e for p, e in zip(parts, ends)))] if parts \
        else [np.zeros(0)] * 6
    estimate, se, low, high, ci_low, ci_high = columns
    nan = np.full(len(estimate), np.nan)
    answers = NumericAnswers(estimate=estimate, proper_estimate=np.clip(estimate, low, high),
                             exact=np.zeros(len(estimate), bool), std_error=se, ci_low=ci_low,
                             ci_high=ci_high, bound=nan, bound_proper=nan.copy(), level=level, n=kept.n,
                             epsilon=epsilon, batch=batch,
                             rows=np.concatenate(rows) if rows else np.zeros(0, np.int64))
    if card is None or (batch.schema.shuffle is None and not rule.groups):
        return answers
    labels = key_names(batch.schema, stats.present_keys[rule.kept])
    guarantees = of_card(card, ANSWERS, labels, stats.group_sizes[rule.kept], rows_per_device=rows_per_device,
                         withheld=rule)
    return replace(answers, guarantees=guarantees)

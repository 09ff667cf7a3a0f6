"""Companion estimators of mechanism E (WYZ §IV-A): the public names of the estimator modules.

One import for users; the parts live in their own modules:

* :mod:`~ldpsynth.shared.estimators.formulas`: the math (eqs. 17-22, 29, documented there): the
  constants :class:`Debias`, the per-query sums :class:`BlockSums`, the answers from the sums
  (:func:`answers_from_sums`), the bounds (:func:`rms_bound`, :func:`minimax_lower_bound`);
* :mod:`~ldpsynth.shared.estimators.engine`: :func:`estimate` and the evaluation of each block's
  sums over the sufficient statistics (chunks, worker threads, the numba kernel);
* :mod:`~ldpsynth.shared.estimators.pairs`: the pair totals of cut queries (:class:`PairTotals`), also kept
  by the shards.
"""

from ldpsynth.shared.estimators.engine import (
    CHUNK_WEIGHTS,
    PARALLEL_WEIGHTS,
    cut_pair_totals,
    estimate,
    group_counts,
    row_block_sums,
    table_block_sums,
)
from ldpsynth.shared.estimators.formulas import (
    ANSWER_CHUNK,
    ANSWER_FIELDS,
    AnswerColumns,
    Answers,
    BlockSums,
    Debias,
    answers_from_sums,
    cut_block_sums,
    minimax_lower_bound,
    rms_bound,
)
from ldpsynth.shared.estimators.pairs import DENSE_PAIRS, PairTotals

__all__ = [
    # the math
    "Debias", "BlockSums", "cut_block_sums", "AnswerColumns", "Answers", "ANSWER_FIELDS", "answers_from_sums",
    "rms_bound", "minimax_lower_bound", "ANSWER_CHUNK",
    # the engine
    "estimate", "table_block_sums", "row_block_sums", "cut_pair_totals", "group_counts", "CHUNK_WEIGHTS",
    "PARALLEL_WEIGHTS",
    # cut queries' pair totals
    "PairTotals", "DENSE_PAIRS",
]

"""The one exponential mechanism's two samplers, and the one MWEM loop with its two weight representations.

The comparison's MWEM (dense queries, log-space weights) and DP-PQD's generator (marginal cells,
weights updated in place) run the same :func:`run_mwem`; on the same marginal workload, data and
seed they must make the same selections and end at the same synthetic histogram.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.evaluation.pqd.mwem import MarginalHistogram, mwem_histogram
from ldpsynth.evaluation.primitives.mwem import (
    SELECTIONS,
    DenseQueryHistograms,
    inverse_cdf_selection,
    run_mwem,
)
from ldpsynth.evaluation.primitives.selection import (
    em_log_probabilities,
    em_probabilities,
    exponential_mechanism_draws,
)
from ldpsynth.shared.errors import ValidationError

SHAPE = (2, 3, 4)


def marginal_weights(shape: tuple[int, ...]) -> np.ndarray:
    """The 1- and 2-way marginal cells of ``shape`` as dense 0/1 rows over the flattened cells, in MWEM order."""
    axes = [(a,) for a in range(len(shape))] + list(itertools.combinations(range(len(shape)), 2))
    coords = np.indices(shape).reshape(len(shape), -1)
    rows = []
    for m in axes:
        cell = np.ravel_multi_index(tuple(coords[a] for a in m), tuple(shape[a] for a in m))
        rows.append(np.eye(math.prod(shape[a] for a in m))[cell].T)
    return np.concatenate(rows)


def test_inverse_cdf_draws_follow_the_exponential_mechanism():
    """Seed 9, α = 1e-4: 40,000 inverse-CDF draws follow softmax(ε u / 2Δ) (chi-square, >= 5 per bin)."""
    scores = np.array([0.0, 1.0, 2.0, 3.5, -1.0])
    draws = exponential_mechanism_draws(scores, 1.0, 0.5, np.random.default_rng(9), 40_000)
    expected = em_probabilities(scores, 1.0, 0.5) * 40_000
    assert expected.min() >= 5
    assert stats.chisquare(np.bincount(draws, minlength=5), expected).pvalue > 1e-4
    assert np.allclose(np.log(em_probabilities(scores, 1.0, 0.5)), em_log_probabilities(scores, 1.0, 0.5))
    with pytest.raises(ValidationError, match="sensitivity"):
        exponential_mechanism_draws(scores, 1.0, 0.0, np.random.default_rng(9), 1)


def test_every_selection_picks_one_query_per_histogram():
    scores = np.array([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    for select in (*SELECTIONS.values(), inverse_cdf_selection):
        chosen = select(scores, 50.0, np.random.default_rng(2))   # ε_t large: the top score wins
        assert chosen.shape == (2,) and chosen.tolist() == [1, 0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_weight_representations_run_the_same_mwem(seed):
    rng = np.random.default_rng(100 + seed)
    data = rng.integers(0, 40, SHAPE).astype(np.float64)
    weights = marginal_weights(SHAPE)
    m = len(weights)
    dense = DenseQueryHistograms(weights[None], np.zeros((1, m)), np.ones((1, m)), np.array([data.sum()]), 1 << 22)
    marginal = MarginalHistogram(SHAPE, float(data.sum()))
    truth = dense.query_answers(data.reshape(1, -1))
    assert np.array_equal(truth, marginal.query_answers(data))
    runs = [run_mwem(h, truth, 6, 2.0, 3, inverse_cdf_selection, "last", np.random.default_rng(seed))
            for h in (dense, marginal)]
    (dense_table, dense_chosen), (marginal_table, marginal_chosen) = runs
    assert np.array_equal(dense_chosen, marginal_chosen)
    assert np.allclose(dense_table, marginal_table, rtol=1e-9, atol=0)
    assert marginal_table.sum() == pytest.approx(data.sum())
    # and mwem_histogram is this run
    assert np.array_equal(mwem_histogram(data, 2.0, 6, np.random.default_rng(seed), replays=3).ravel(),
                          marginal_table.ravel())


class RecordingHistograms(DenseQueryHistograms):
    """Keeps every table the loop reads (once per round with the average iterate)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.seen: list[np.ndarray] = []

    def tables(self) -> np.ndarray:
        self.seen.append(super().tables())
        return self.seen[-1]


def test_the_average_iterate_is_the_mean_of_the_round_tables_and_the_last_is_the_final_one():
    data = np.arange(24, dtype=np.float64).reshape(SHAPE)
    weights = marginal_weights(SHAPE)
    m = len(weights)

    def histograms() -> RecordingHistograms:
        return RecordingHistograms(weights[None], np.zeros((1, m)), np.ones((1, m)), np.array([data.sum()]), 1 << 22)

    truth = histograms().query_answers(data.reshape(1, -1))
    recorder = histograms()
    average, _ = run_mwem(recorder, truth, 4, 1.0, 2, SELECTIONS["em"], "average", np.random.default_rng(4))
    assert len(recorder.seen) == 4 and np.allclose(average, np.mean(recorder.seen, axis=0), rtol=1e-12)
    last, _ = run_mwem(histograms(), truth, 4, 1.0, 2, SELECTIONS["em"], "last", np.random.default_rng(4))
    assert np.array_equal(last, recorder.seen[-1])   # the iterate choice draws no randomness


def test_mwem_histogram_checks_rounds_and_replays():
    with pytest.raises(ValidationError, match="replays"):
        mwem_histogram(np.ones((2, 2)), 1.0, 2, np.random.default_rng(0), replays=0)
    with pytest.raises(ValidationError, match="rounds"):
        mwem_histogram(np.ones((2, 2)), 1.0, 0, np.random.default_rng(0))

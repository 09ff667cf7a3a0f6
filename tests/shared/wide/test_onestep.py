"""The one-step correction of a model answer (``ldpsynth.shared.wide.onestep``): its blocks, its first-order
exactness, and its variance against the spread of its estimates over simulated collections (α stated per test,
seeded)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import WideDomain, simulate
from ldpsynth.shared.wide.measure import best_mechanism, measure
from ldpsynth.shared.wide.onestep import MAX_CORRECTED_CELLS, Correction, blocks

DOMAIN = WideDomain(("a", "b", "c"), (3, 2, 4))
PAIRS = [DOMAIN.view(p) for p in itertools.combinations(range(3), 2)]


def _no_three_way(scale: float) -> np.ndarray:
    """A distribution on a × b × c with pairwise interactions only (log-linear, no three-way term)."""
    rng = np.random.default_rng(11)
    logits = (scale * rng.normal(size=(3, 2, 1)) + scale * rng.normal(size=(1, 2, 4))
              + scale * rng.normal(size=(3, 1, 4)))
    p = np.exp(logits)
    return (p / p.sum()).ravel()


def _rows(table: np.ndarray, n: int) -> np.ndarray:
    """About ``n`` rows whose histogram is ``table`` rounded (deterministic)."""
    counts = np.rint(table * n).astype(np.int64)
    cells = np.repeat(np.arange(table.size), counts)
    return np.stack(np.unravel_index(cells, DOMAIN.sizes), axis=1)


def _exact(rows: np.ndarray) -> list:
    """Every pair view measured on all rows with no flip to speak of (E at ε = 60: shares exact to 1e-20)."""
    return [measure(v, best_mechanism(60.0, v.size), v.cells(rows)) for v in PAIRS]


def test_blocks_are_the_views_with_the_largest_intersections() -> None:
    views = [DOMAIN.view((0,)), DOMAIN.view((0, 1)), DOMAIN.view((1, 2)), DOMAIN.view((2,)), DOMAIN.view((0, 2))]
    rows = _rows(_no_three_way(0.5), 3000)
    measured = [measure(v, best_mechanism(1.0, v.size), v.cells(rows)) for v in views]
    chosen = blocks(measured, (0, 2))
    assert [(m.view.attributes, s) for m, s in chosen] == [((0, 2), (0, 2))]          # a, c and (a, b) are inside
    chosen = blocks(measured[:4], (0, 2))                                                 # without the pair (a, c)
    assert [(m.view.attributes, s) for m, s in chosen] == [((0,), (0,)), ((0, 1), (0,)), ((1, 2), (2,)), ((2,), (2,))]
    assert blocks(measured[:1], (1,)) == []


def test_the_correction_is_first_order_exact_and_vanishes_at_the_truth() -> None:
    truth = _no_three_way(0.8)
    rows = _rows(truth, 1_000_000)
    table = DOMAIN.view((0, 1, 2)).histogram(rows) / len(rows)
    measured = _exact(rows)
    cells = np.arange(table.size)
    replicates = np.repeat(table[None], 3, axis=0)
    at_truth = Correction.of(DOMAIN, measured, (0, 1, 2), table, replicates, len(rows)).answer(cells)
    np.testing.assert_allclose(at_truth.estimate, table, atol=1e-12)
    np.testing.assert_allclose(at_truth.bootstrap, 0.0, atol=1e-24)
    # a shrunk model: halfway to the product of the margins. The one-step estimate's error is second order.
    margins = [table.reshape(DOMAIN.sizes).sum(axis=tuple(j for j in range(3) if j != i)) for i in range(3)]
    independent = np.einsum("i,j,k->ijk", *margins).ravel()
    shrunk = (table + independent) / 2
    correction = Correction.of(DOMAIN, measured, (0, 1, 2), shrunk, np.repeat(shrunk[None], 3, axis=0), len(rows))
    step = correction.answer(cells)
    model_error = np.abs(shrunk - table).max()
    assert np.abs(step.estimate - table).max() < 0.05 * model_error, (np.abs(step.estimate - table).max(), model_error)
    # a predicate (rows of weights) is the same linear map: the sum of its cells' corrections
    weights = np.zeros((1, table.size))
    weights[0, [0, 5, 9]] = 1.0
    predicate = correction.answer(weights)
    assert predicate.estimate[0] == pytest.approx(step.estimate[[0, 5, 9]].sum(), abs=1e-12)


def test_the_variance_is_the_spread_of_the_estimates_over_collections() -> None:
    # 400 collections of 12,000 devices at ε = 1, each on one of the three pair views; the model fixed at the
    # truth's table (so the estimate is linear in the views' and unbiased) and B = 3 equal replicates (bootstrap
    # variance 0). alpha = 0.001 per statement: the mean error within 3.29 SE of 0; the empirical variance over
    # the mean predicted one within the chi-square(399) / 399 0.05 %-99.95 % quantiles, about 0.78 to 1.26.
    truth = _no_three_way(0.8)
    rng = np.random.default_rng(5)
    rows = _rows(truth, 12_000)
    n = len(rows)
    table = DOMAIN.view((0, 1, 2)).histogram(rows) / n
    weights = np.zeros((2, table.size))
    weights[0, 3] = 1.0                                        # one cell
    weights[1, [1, 2, 7, 8, 13, 20]] = 1.0                     # a predicate over several
    replicates = np.repeat(table[None], 3, axis=0)
    estimates, variances = [], []
    for _ in range(400):
        measured = simulate(DOMAIN, PAIRS, rows, rng.integers(0, 3, n), 1.0, rng)
        step = Correction.of(DOMAIN, measured, (0, 1, 2), table, replicates, n).answer(weights)
        estimates.append(step.estimate)
        variances.append(step.analytic)
        assert np.all(step.bootstrap < 1e-20) and np.all(step.df > 1e40)       # equal replicates: rounding only
    estimates, variances = np.array(estimates), np.array(variances)
    target = weights @ table
    spread = estimates.var(axis=0, ddof=1)
    assert np.all(np.abs(estimates.mean(axis=0) - target) < 3.29 * np.sqrt(spread / 400)), estimates.mean(axis=0)
    ratio = spread / variances.mean(axis=0)
    assert np.all((0.78 < ratio) & (ratio < 1.26)), ratio


def test_too_many_cells_are_refused_naming_the_attributes() -> None:
    wide = WideDomain(("a", "b", "c"), (64, 64, 128))
    with pytest.raises(ValidationError) as info:
        Correction.of(wide, [], (0, 1, 2), np.zeros(MAX_CORRECTED_CELLS * 2), np.zeros((2, 2)), 10)
    assert info.value.field == "attributes" and f"{MAX_CORRECTED_CELLS:,}" in str(info.value)

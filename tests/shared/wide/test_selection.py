"""Choosing the views: the pilot is chosen by key and uniform, the scores find a planted tree, and the tree's
model fits fast and recovers the pairs."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.selection import chow_liu, pair_gain, pair_score, pilot_devices, prior_scores, tree_views

SALT = b"test-selection-salt-01"
#: A planted tree over 6 attributes: 0-1, 1-2, 1-3, 3-4, 0-5.
TREE = [(0, 1), (1, 2), (1, 3), (3, 4), (0, 5)]
DOMAIN = WideDomain(tuple("abcdef"), (3, 4, 2, 3, 5, 2))


def _planted(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rows from the planted tree: each child copies a function of its parent with probability 0.7,
    otherwise is uniform."""
    x = np.zeros((n, DOMAIN.width), np.int64)
    x[:, 0] = rng.integers(0, 3, n)
    for parent, child in TREE:
        k = DOMAIN.sizes[child]
        copy = rng.random(n) < 0.7
        x[:, child] = np.where(copy, x[:, parent] % k, rng.integers(0, k, n))
    return x


def test_pilot_is_by_key_and_uniform() -> None:
    # alpha = 0.001: the pilot's size among 20,000 keys at fraction 0.25 is binomial (4,000 sd 61); |z| < 3.29.
    keys = [i.to_bytes(8, "big") for i in range(20_000)]
    pilot = pilot_devices(SALT, keys, 0.25)
    assert abs(pilot.sum() - 5_000) / np.sqrt(20_000 * 0.25 * 0.75) < 3.29
    assert np.array_equal(pilot, pilot_devices(SALT, keys, 0.25))           # a function of the key alone
    assert not np.array_equal(pilot, pilot_devices(b"another-salt-000001", keys, 0.25))
    # independent of the view assignment under the same salt: pilot share per view (4 views) within 3.29 sd
    views = assign_views(SALT, keys, 4)
    for v in range(4):
        inside = pilot[views == v]
        assert abs(inside.mean() - 0.25) / np.sqrt(0.25 * 0.75 / len(inside)) < 3.29
    with pytest.raises(ValidationError):
        pilot_devices(SALT, keys, 1.0)


def test_chow_liu_is_a_maximum_spanning_forest() -> None:
    scores = {(0, 1): 5.0, (1, 2): 4.0, (0, 2): 4.5, (2, 3): -1.0, (1, 3): 0.0}
    assert chow_liu(4, scores) == [(0, 1), (0, 2)]          # (1, 2) closes a cycle; 3 has no positive pair


def test_prior_scores_recover_the_planted_tree() -> None:
    rows = _planted(np.random.default_rng(3), 20_000)
    assert sorted(chow_liu(DOMAIN.width, prior_scores(DOMAIN, rows))) == sorted(TREE)


def test_a_pilot_at_high_epsilon_recovers_the_planted_tree() -> None:
    rng = np.random.default_rng(4)
    rows = _planted(rng, 40_000)
    views = pairs(DOMAIN)
    keys = [i.to_bytes(8, "big") for i in range(len(rows))]
    pilot = pilot_devices(SALT, keys, 0.5)
    measured = simulate(DOMAIN, views, rows[pilot], assign_views(SALT, [k for k, p in zip(keys, pilot) if p],
                                                                 len(views)), 4.0, rng)
    scores = {m.view.attributes: pair_score(m, len(rows)) for m in measured}
    assert sorted(chow_liu(DOMAIN.width, scores)) == sorted(TREE)
    # the gain at the main phase's devices per view keeps the planted pairs and less than the score otherwise
    gains = {m.view.attributes: pair_gain(m, len(rows), 20_000 / 11) for m in measured}
    assert sorted(chow_liu(DOMAIN.width, gains)) == sorted(TREE)
    assert all(gains[p] < scores[p] for p in scores)


def test_scores_of_independent_pairs_are_near_zero() -> None:
    # The debiasing: with independent attributes and noisy views (eps = 1) the scores straddle 0 rather
    # than growing with the pairs' cells. alpha ~ 0.001: the scores' spread is about 0.035 each, so their
    # mean over 15 pairs is within 0.03 of 0 (3.3 sd) when unbiased.
    rng = np.random.default_rng(5)
    rows = np.stack([rng.integers(0, k, 30_000) for k in DOMAIN.sizes], axis=1)
    views = pairs(DOMAIN)
    measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 1.0, rng)
    scores = np.array([pair_score(m, len(rows)) for m in measured])
    assert abs(scores.mean()) < 0.03
    assert (scores < 0).sum() >= 3 and (scores > 0).sum() >= 3
    # with as many devices as the pilot's view had, the gain is the score less the noise: below each score,
    # negative on average (the noise's mean, about as large as the scores' spread, is subtracted)
    gains = np.array([pair_gain(m, len(rows), m.n) for m in measured])
    assert np.all(gains < scores) and gains.mean() < -0.02


def test_tree_views_fit_fast_and_recover_the_pairs() -> None:
    pytest.importorskip("mbi")
    import time

    from ldpsynth.shared.wide.model import fit, total_variation

    rng = np.random.default_rng(6)
    rows = _planted(rng, 60_000)
    views = tree_views(DOMAIN, TREE)
    assert len(views) == DOMAIN.width + len(TREE)
    measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 4.0, rng)
    start = time.perf_counter()
    model = fit(DOMAIN, measured, len(rows), iterations=300)
    assert time.perf_counter() - start < 30
    for edge in [*TREE, (2, 4)]:                        # (2, 4): not measured, implied by the tree
        truth = DOMAIN.view(edge).histogram(rows) / len(rows)
        assert total_variation(model.marginal(edge), truth) < 0.03
